# SPDX-License-Identifier: MIT
# One stream (4 GiB, or SM_TOTAL bytes) client -> splicer -> sink on loopback;
# prints the bytes that arrived, wall time, throughput, the proxy process's CPU
# seconds per GB (utime+stime from /proc/PID/stat) and the whole machine's busy
# CPU seconds per GB (/proc/stat: it counts the kernel's softirq and kworker
# work, where the sockmap engine's bytes are moved). Usage:
#   python3 bench/one-stream-cpu.py build/splicer sockmap|splice|copy|auto PORT
import socket, threading, sys, time, os, subprocess
BIN, ENGINE, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])
TOTAL = int(os.environ.get("SM_TOTAL", 4 << 30))
sink = socket.socket(); sink.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sink.bind(('127.0.0.1', 0)); sink.listen(4); sport = sink.getsockname()[1]
px = subprocess.Popen([BIN, '-l', '127.0.0.1:%d' % PORT, '-b', '127.0.0.1:%d' % sport,
                       '--engine', ENGINE, '--workers', '1'], stderr=open('/tmp/sm4g-%s.log' % ENGINE, 'w'))
time.sleep(0.5)
got = [0]
def rx():
    c, _ = sink.accept(); buf = bytearray(1 << 20); mv = memoryview(buf)
    while True:
        n = c.recv_into(mv)
        if not n: break
        got[0] += n
    c.close()
t = threading.Thread(target=rx); t.start()
def cpu():
    f = open('/proc/%d/stat' % px.pid).read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
def mach():
    v = [int(x) for x in open('/proc/stat').readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf('SC_CLK_TCK')
m0 = mach(); c0 = cpu(); cl = socket.create_connection(('127.0.0.1', PORT)); data = b'\x5a' * (1 << 20)
t0 = time.time(); sent = 0
while sent < TOTAL:
    cl.sendall(data); sent += len(data)
cl.shutdown(socket.SHUT_WR); t.join(); dt = time.time() - t0; c1 = cpu(); m1 = mach()
cl.close(); px.terminate(); px.wait()
gb = TOTAL / 1e9
print("%-8s bytes %d/%d  %.2f s  %.2f Gbit/s  proxy process CPU %.3f CPU-s/GB  machine busy %.3f CPU-s/GB" % (ENGINE, got[0], TOTAL, dt, TOTAL * 8 / dt / 1e9, (c1 - c0) / gb, (m1 - m0) / gb))
