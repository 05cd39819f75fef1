import socket, sys, time
# Accepts one connection, records what the client sends within 1.5 s (its ClientHello), saves it.
out = sys.argv[1]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); c.settimeout(1.5)
data = b""
try:
    while True:
        d = c.recv(65536)
        if not d: break
        data += d
except socket.timeout:
    pass
open(out, "wb").write(data)
c.close(); s.close()
