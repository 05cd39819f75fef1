/* SPDX-License-Identifier: MIT */
/* Integration cases for the access log's formats and syslog targets (issue
 * 24, item 10), on real sockets: log_format = json through proxied sessions
 * (a TLS route, so authority and alpn are filled from the ClientHello, a
 * plain echo, a refused backend), every line parsed by Python's json module,
 * and kept across a reload that asks for kv; log =
 * syslog:udp:// and syslog:unix: received on sockets this test binds, the
 * RFC 5424 header and the facility checked; and a Unix receiver that never
 * reads: sessions keep their pace, the drops are counted on /metrics, and
 * lines arrive again once it reads. */
#define _GNU_SOURCE
#include "harness.h"
#include "tls_hello_gen.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define PYTHON "/usr/bin/python3"

/* Parses every line of a JSON access log (argv[1]) and prints each as
 * "key=value ..." (null for null, alpn as a JSON string: it holds any
 * byte) for the C side to check;
 * a line that is not one JSON object with the documented keys, in order,
 * and types fails it. Opened as ASCII: the format promises printable
 * ASCII whatever bytes came from the network. */
static const char py_check[] =
	"import json, re, sys\n"
	"KEYS = ['time', 'route', 'client', 'backend', 'up', 'down', 'duration_ms', 'reason',\n"
	"        'listener', 'connect_ms', 'error', 'ended_by', 'event', 'session', 'authority',\n"
	"        'alpn', 'unique_id', 'pp_tlvs', 'engine', 'engine_reason']\n"
	"def text(k, v):\n"
	"    return 'null' if v is None else json.dumps(v) if k == 'alpn' else str(v)\n"
	"bad = 0\n"
	"for i, line in enumerate(open(sys.argv[1], encoding='ascii', newline='\\n'), 1):\n"
	"    why = []\n"
	"    try:\n"
	"        o = json.loads(line)\n"
	"    except ValueError as e:\n"
	"        print('line %d: not JSON (%s): %r' % (i, e, line)); bad = 1; continue\n"
	"    if not line.endswith('}\\n') or any(ord(c) < 32 for c in line[:-1]):\n"
	"        why.append('not one printable line')\n"
	"    if not isinstance(o, dict) or list(o) != KEYS:\n"
	"        why.append('keys %r' % (list(o) if isinstance(o, dict) else o))\n"
	"    else:\n"
	"        for k in ('up', 'down', 'duration_ms'):\n"
	"            if type(o[k]) is not int or o[k] < 0: why.append(k + ' not a count')\n"
	"        c = o['connect_ms']\n"
	"        if c is not None and (type(c) is not int or c < 0 or c > o['duration_ms']):\n"
	"            why.append('connect_ms %r' % c)\n"
	"        for k in ('route', 'client', 'reason', 'listener', 'event', 'session', 'engine',\n"
	"                  'engine_reason'):\n"
	"            if not isinstance(o[k], str) or not o[k]: why.append(k + ' not a string')\n"
	"        for k in ('backend', 'error', 'ended_by', 'authority', 'alpn', 'unique_id', "
	"'pp_tlvs'):\n"
	"            if o[k] is not None and not isinstance(o[k], str): why.append(k)\n"
	"        if not re.fullmatch(r'\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z', o['time']):\n"
	"            why.append('time %r' % o['time'])\n"
	"        if not re.fullmatch(r'[0-9a-f]+', o['session']): why.append('session')\n"
	"    if why:\n"
	"        print('line %d: %s: %s' % (i, '; '.join(why), line.strip())); bad = 1; continue\n"
	"    print(' '.join('%s=%s' % (k, text(k, o[k])) for k in KEYS[1:]))\n"
	"sys.exit(bad)\n";

/* Runs py_check on path; asserts it passed, returns its output (malloc'd). */
static char *json_lines(const char *path)
{
	const char *args[] = { "-c", py_check, path, NULL };
	char *out = NULL, *err = NULL;

	if (access(PYTHON, X_OK))
		cr_skip_test(PYTHON " missing (Debian: python3)");
	int st = h_run_capture(PYTHON, args, 10000, &out, &err);
	H_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"a line of %s is not the documented JSON object:\n%s%s", path, out ? out : "",
		err ? err : "");
	free(err);
	return out;
}

/* The line of `lines` (py_check's output) of the session from client port. */
static const char *line_of(const char *lines, int port, char *buf, size_t len)
{
	char key[64];
	const char *l;

	snprintf(key, sizeof key, " client=127.0.0.1:%d ", port);
	H_CHECK((l = strstr(lines, key)) != NULL, "no line for client port %d in\n%s", port, lines);
	while (l > lines && l[-1] != '\n')
		l--;
	const char *end = strchr(l, '\n');
	snprintf(buf, len, "%.*s", (int)(end ? end - l : (long)strlen(l)), l);
	return buf;
}

/* Each of the NULL-terminated needles is in the line. */
static void line_has(const char *line, const char *what, ...)
{
	va_list ap;

	va_start(ap, what);
	for (const char *n; (n = va_arg(ap, const char *));)
		H_CHECK(strstr(line, n), "%s: \"%s\" not in\n%s", what, n, line);
	va_end(ap);
}

/* A session through a: sends n bytes of buf, then its FIN, and reads what
 * comes back until the proxy's FIN (into back, at most cap). Returns the
 * client's port; *got the bytes that came back. */
static int session(const struct h_addr *a, const void *buf, size_t n, char *back, size_t cap,
		   size_t *got)
{
	struct sockaddr_in me;
	socklen_t len = sizeof me;
	int fd = h_connect(a, 2000);

	H_CHECK(fd >= 0, "connect to the proxy: %s", strerror(errno));
	H_CHECK(getsockname(fd, (struct sockaddr *)&me, &len) == 0, "getsockname");
	H_CHECK(h_send_all(fd, buf, n, h_now_ms() + 2000) == 0, "send %zu bytes", n);
	shutdown(fd, SHUT_WR);
	*got = h_recv_all(fd, back, cap, h_now_ms() + 3000);
	close(fd);
	return ntohs(me.sin_port);
}

static int lines_in(const char *path)
{
	char *t = h_read_file(path, NULL);
	int n = 0;

	for (char *c = t; c && *c; c++)
		n += *c == '\n';
	free(t);
	return n;
}

/* ---- log_format = json ------------------------------------------------ */

static void case_json(const char *bin)
{
	static struct h_server echo, tls;
	static struct h_proxy p;
	struct h_refused dead;
	char log[300], text[1024], line[2048], back[4096], want[256];
	uint8_t hello[4096], plain[300];
	size_t got;
	int lport = h_free_port(), dport = h_free_port();

	snprintf(log, sizeof log, "%s/access.json", h_tmpdir());
	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo backend");
	H_CHECK(h_server_start(&tls, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "TLS backend");
	H_CHECK(h_refused_open(&dead) == 0, "a refused port");
	/* one listener: TLS hellos naming tls.example.com go to route tls, the
	 * rest to route plain; a second listener whose backend refuses */
	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nlog = %s\nlog_format = json\n"
		 "[route tls]\nlisten = 127.0.0.1:%d\nsni = tls.example.com\nbackend = %s\n"
		 "[route plain]\nlisten = 127.0.0.1:%d\nbackend = %s\n"
		 "[route dead]\nlisten = 127.0.0.1:%d\nbackend = %s\nproxy_protocol = v2\n"
		 "proxy_protocol_tlvs = unique_id\n",
		 log, lport, tls.addr.text, lport, echo.addr.text, dport, dead.text);
	const char *args[] = { "-c", h_conf_write("json.conf", text), NULL };
	char err[256];
	H_CHECK(h_proxy_start(&p, bin, args, err, sizeof err) == 0, "proxy: %s", err);
	struct h_addr la, da;
	snprintf(want, sizeof want, "127.0.0.1:%d", lport);
	H_CHECK(h_addr_parse(want, &la) == 0, "addr");
	snprintf(want, sizeof want, "127.0.0.1:%d", dport);
	H_CHECK(h_addr_parse(want, &da) == 0, "addr");

	/* a first ALPN name (the one logged) with a quote, a backslash, UTF-8
	 * and a control byte: bytes from the network the JSON must escape and
	 * keep */
	size_t hn = tls_make_hello("tls.example.com", "q\"\\\xc3\xa9\x01,h2", 0, hello, sizeof hello);
	int p_tls = session(&la, hello, hn, back, sizeof back, &got);
	H_CHECK(got == hn && !memcmp(back, hello, hn), "the hello's echo: %zu of %zu bytes", got, hn);
	h_gen(0x24a, 0, plain, sizeof plain);
	plain[0] = 'P'; /* not a TLS record: the listener's default route */
	int p_plain = session(&la, plain, sizeof plain, back, sizeof back, &got);
	H_CHECK(got == sizeof plain, "the echo came back with %zu of %zu bytes", got, sizeof plain);
	int p_dead = session(&da, "x", 1, back, sizeof back, &got);

	int64_t end = h_now_ms() + 3000;
	while (lines_in(log) < 3 && h_now_ms() < end)
		h_sleep_ms(20);
	H_CHECK(lines_in(log) == 3, "%s has %d lines, expected 3", log, lines_in(log));
	char *lines = json_lines(log);

	snprintf(want, sizeof want, "backend=%s up=%zu down=%zu ", tls.addr.text, hn, hn);
	line_of(lines, p_tls, line, sizeof line);
	line_has(line, "the TLS session", "route=tls ", want, "reason=done ", "error=null ",
		 "ended_by=client ", "event=close ", "authority=tls.example.com ",
		 "alpn=\"q\\\"\\\\\\u00e9\\u0001\" unique_id=null pp_tlvs=null", NULL);
	H_CHECK(!strstr(line, "connect_ms=null"), "the TLS session's backend was up: %s", line);

	snprintf(want, sizeof want, "backend=%s up=%zu down=%zu ", echo.addr.text, sizeof plain,
		 sizeof plain);
	line_of(lines, p_plain, line, sizeof line);
	line_has(line, "the plain session", "route=plain ", want, "reason=done ", "error=null ",
		 "ended_by=client ", "event=close ",
		 "authority=null alpn=null unique_id=null pp_tlvs=null",
		 " engine=copy/copy engine_reason=not-a-stream/not-a-stream", NULL);
	snprintf(want, sizeof want, "listener=127.0.0.1:%d ", lport);
	line_has(line, "the plain session", want, NULL);

	snprintf(want, sizeof want, "backend=%s up=0 down=0 ", dead.text);
	line_of(lines, p_dead, line, sizeof line);
	line_has(line, "the refused session", "route=dead ", want, "reason=no-backend ",
		 "connect_ms=null ", "error=ECONNREFUSED ", "ended_by=backend ",
		 "authority=null alpn=null unique_id=", " pp_tlvs=null", NULL);
	/* the id its PROXY v2 header would have carried: 32 hex digits */
	const char *u = strstr(line, "unique_id=") + 10;
	H_CHECK(strspn(u, "0123456789abcdef") == 32 && u[32] == ' ', "unique_id of route dead: %s",
		line);

	free(lines);
	h_proxy_down(&p);
	h_server_stop(&tls);
	h_server_stop(&echo);
	h_refused_close(&dead);
}

Test(integ, access_log_json_every_line_parses_with_its_fields, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	case_json(h_binary(0));
}

/* The JSON writer escapes bytes from the network: under ASan and UBSan too */
Test(integ, access_log_json_every_line_parses_with_its_fields_asan, .init = h_init,
     .fini = h_fini, .timeout = 60)
{
	case_json(h_binary(1));
}

/* A reload cannot switch the format under a running log (its readers and
 * the open syslog socket stay as they are): SIGHUP with log_format = kv
 * and another facility keeps json, with one warning. */
Test(integ, access_log_format_kept_across_reload_with_a_warning, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	static struct h_server echo;
	static struct h_proxy p;
	char log[300], text[600], back[64], addr[64];
	size_t got;
	int port = h_free_port();
	struct h_addr la;

	snprintf(log, sizeof log, "%s/reload.json", h_tmpdir());
	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo backend");
	const char *fmt = "[global]\nlog = %s\nlog_format = %s\nlog_facility = %s\n"
			  "[route web]\nlisten = 127.0.0.1:%d\nbackend = %s\n";
	snprintf(text, sizeof text, fmt, log, "json", "daemon", port, echo.addr.text);
	const char *conf = h_conf_write("reload.conf", text);
	const char *args[] = { "-c", conf, NULL };
	char err[256];
	H_CHECK(h_proxy_start(&p, h_binary(0), args, err, sizeof err) == 0, "proxy: %s", err);
	snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
	H_CHECK(h_addr_parse(addr, &la) == 0, "addr");
	session(&la, "a", 1, back, sizeof back, &got);

	snprintf(text, sizeof text, fmt, log, "kv", "local0", port, echo.addr.text);
	H_CHECK(!strcmp(h_conf_write("reload.conf", text), conf), "the config moved");
	H_CHECK(kill(p.pid, SIGHUP) == 0, "SIGHUP: %s", strerror(errno));
	int64_t end = h_now_ms() + 5000;
	while (!h_log_lines(&p, "SIGHUP: reloaded", NULL) && h_now_ms() < end)
		h_sleep_ms(20);
	H_CHECK(h_log_lines(&p, "SIGHUP: reloaded", NULL) == 1, "no reload within 5 s");
	H_CHECK(h_log_lines(&p, "log_format or log_facility changed; it needs a restart, keeping "
				"json and daemon", NULL) == 1,
		"no warning that the reload keeps log_format and log_facility");
	session(&la, "b", 1, back, sizeof back, &got);
	end = h_now_ms() + 3000;
	while (lines_in(log) < 2 && h_now_ms() < end)
		h_sleep_ms(20);
	H_CHECK(lines_in(log) == 2, "%s has %d lines, expected 2", log, lines_in(log));
	free(json_lines(log)); /* both lines JSON */
	h_proxy_down(&p);
	h_server_stop(&echo);
}

/* ---- syslog receivers ------------------------------------------------- */

/* A datagram socket bound to 127.0.0.1:0 (udp) or PATH in the temp dir;
 * its target for log = into target. */
static int receiver(int udp, const char *name, char *target, size_t len)
{
	int fd;

	if (udp) {
		struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t sl = sizeof in;
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		H_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&in, sizeof in) == 0 &&
				getsockname(fd, (struct sockaddr *)&in, &sl) == 0,
			"UDP receiver: %s", strerror(errno));
		snprintf(target, len, "syslog:udp://127.0.0.1:%d", ntohs(in.sin_port));
	} else {
		struct sockaddr_un un = { .sun_family = AF_UNIX };
		snprintf(un.sun_path, sizeof un.sun_path, "%s/%s", h_tmpdir(), name);
		fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		H_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&un, sizeof un) == 0,
			"Unix receiver %s: %s", un.sun_path, strerror(errno));
		snprintf(target, len, "syslog:unix:%s", un.sun_path);
	}
	return fd;
}

/* One datagram within ms into buf (NUL-terminated); its length, or -1. */
static ssize_t datagram(int fd, char *buf, size_t cap, int ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };

	if (poll(&pf, 1, ms) != 1)
		return -1;
	ssize_t n = recv(fd, buf, cap - 1, MSG_DONTWAIT);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* Checks an RFC 5424 message from the proxy and returns its MSG part:
 *   <PRI>1 2026-12-05T21:52:03.123Z HOST splicer PID access - MSG */
static const char *rfc5424_msg(const char *m, unsigned pri, pid_t pid)
{
	unsigned got_pri = 0;
	char ts[64] = "", host[300] = "", app[64] = "", msgid[64] = "", myhost[256] = "", sd[8] = "";
	int procid = 0, at = 0;

	gethostname(myhost, sizeof myhost - 1);
	int k = sscanf(m, "<%u>1 %63s %299s %63s %d %63s %7s %n", &got_pri, ts, host, app, &procid,
		       msgid, sd, &at);
	H_CHECK(k == 7 && at > 0, "not an RFC 5424 message (%d fields): %s", k, m);
	H_CHECK(got_pri == pri, "PRI %u, expected %u (facility %u, severity 6): %s", got_pri, pri,
		pri / 8, m);
	H_CHECK(strlen(ts) == 24 && ts[4] == '-' && ts[7] == '-' && ts[10] == 'T' && ts[13] == ':' &&
			ts[16] == ':' && ts[19] == '.' && ts[23] == 'Z',
		"TIMESTAMP %s is not RFC 3339 UTC with milliseconds", ts);
	H_CHECK(!strcmp(host, myhost[0] ? myhost : "-"), "HOSTNAME %s, expected %s", host, myhost);
	H_CHECK(!strcmp(app, "splicer") && procid == (int)pid && !strcmp(msgid, "access") &&
			!strcmp(sd, "-"),
		"APP-NAME PROCID MSGID SD: %s %d %s %s, expected splicer %d access -", app, procid,
		msgid, sd, (int)pid);
	H_CHECK(!strchr(m, '\n'), "a newline in the message: %s", m);
	return m + at;
}

/* A proxy to backend logging to target, with extra [global] lines. */
static void log_proxy_up(struct h_proxy *p, const char *backend, const char *target,
			 const char *global, struct h_addr *listen)
{
	char text[1024], err[256], a[64];
	int port = h_free_port();

	snprintf(text, sizeof text,
		 "[global]\nworkers = 2\nlog = %s\n%s\n[route web]\nlisten = 127.0.0.1:%d\nbackend = %s\n",
		 target, global, port, backend);
	const char *args[] = { "-c", h_conf_write("syslog.conf", text), NULL };
	H_CHECK(h_proxy_start(p, h_binary(0), args, err, sizeof err) == 0, "proxy: %s", err);
	snprintf(a, sizeof a, "127.0.0.1:%d", port);
	H_CHECK(h_addr_parse(a, listen) == 0, "addr");
}

/* UDP with log_facility = local3 and the key=value format, then a Unix
 * socket with the default facility (daemon) and JSON: each session's line
 * arrives as one message with the header, MSG the line as the format
 * writes it (key=value without its own timestamp). */
Test(integ, access_log_syslog_udp_and_unix_rfc5424, .init = h_init, .fini = h_fini, .timeout = 60)
{
	static struct h_server echo;
	static struct h_proxy p;
	struct h_addr la;
	char target[200], m[4096], want[256], back[256], path[300];
	size_t got;

	int ufd = receiver(1, NULL, target, sizeof target);
	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo backend");
	log_proxy_up(&p, echo.addr.text, target, "log_facility = local3", &la);
	int port = session(&la, "hello", 5, back, sizeof back, &got);
	H_CHECK(got == 5, "echo: %zu bytes", got);
	H_CHECK(datagram(ufd, m, sizeof m, 3000) > 0, "no syslog datagram over UDP within 3 s");
	const char *msg = rfc5424_msg(m, 19 * 8 + 6, p.pid);
	snprintf(want, sizeof want, "route=web client=127.0.0.1:%d backend=%s up=5 down=5 ", port,
		 echo.addr.text);
	H_CHECK(!strncmp(msg, want, strlen(want)) && strstr(msg, " event=close "),
		"UDP MSG is not the key=value line (without a time) of the session:\n%s\nexpected "
		"it to start with\n%s", msg, want);
	H_CHECK(datagram(ufd, m, sizeof m, 200) < 0, "a second datagram for one session: %s", m);
	h_proxy_down(&p);
	h_server_stop(&echo);
	close(ufd);

	int xfd = receiver(0, "log.sock", target, sizeof target);
	H_CHECK(h_server_start(&echo, "127.0.0.1:0", 64, h_echo_conn, NULL) == 0, "echo backend");
	log_proxy_up(&p, echo.addr.text, target, "log_format = json", &la);
	int ports[3];
	for (int i = 0; i < 3; i++) {
		ports[i] = session(&la, "abc", 3, back, sizeof back, &got);
		H_CHECK(got == 3, "echo %d: %zu bytes", i, got);
	}
	/* the MSGs, one a line, through the JSON checker */
	snprintf(path, sizeof path, "%s/unix-msgs.json", h_tmpdir());
	FILE *f = fopen(path, "we");
	H_CHECK(f, "%s: %s", path, strerror(errno));
	for (int i = 0; i < 3; i++) {
		H_CHECK(datagram(xfd, m, sizeof m, 3000) > 0, "syslog message %d of 3 did not come over "
			"the Unix socket within 3 s", i + 1);
		fprintf(f, "%s\n", rfc5424_msg(m, 3 * 8 + 6, p.pid));
	}
	fclose(f);
	char *lines = json_lines(path), line[2048];
	for (int i = 0; i < 3; i++) {
		snprintf(want, sizeof want, "backend=%s up=3 down=3 ", echo.addr.text);
		line_has(line_of(lines, ports[i], line, sizeof line), "unix syslog JSON", "route=web ",
			 want, "event=close ", NULL);
	}
	free(lines);
	h_proxy_down(&p);
	h_server_stop(&echo);
	close(xfd);
}

/* A Unix receiver that never reads: its queue fills after a few messages,
 * then every line is dropped with one failing send (syslog_out.h), so 200
 * sessions keep their pace; every line is either received or counted in
 * splicer_log_lines_dropped_total{log="access"}; once the receiver reads,
 * the next sessions' lines arrive. */
Test(integ, access_log_syslog_receiver_that_never_reads, .init = h_init, .fini = h_fini,
     .timeout = 60)
{
	static struct h_tag_server tag; /* h_server serves 64 connections; this, any number */
	static struct h_proxy p;
	struct h_addr la, stats;
	char target[200], m[4096], back[256], want[64];
	const char *dropped = "splicer_log_lines_dropped_total{log=\"access\"}";
	enum { N = 200 };
	size_t got;

	int fd = receiver(0, "stuck.sock", target, sizeof target);
	h_tag_start(&tag, 'k', 0, 0);
	snprintf(want, sizeof want, "127.0.0.1:%d", tag.port);
	log_proxy_up(&p, want, target, "stats = 127.0.0.1:0", &la);
	H_CHECK(h_stats_addr(&p, &stats) == 0, "no stats address in the proxy's log");
	H_CHECK(h_metric(&stats, dropped) == 0, "drops before any session");

	int64_t t0 = h_now_ms(), worst = 0;
	for (int i = 0; i < N; i++) {
		int64_t s = h_now_ms();
		session(&la, "", 0, back, sizeof back, &got);
		H_CHECK(got == 1 && back[0] == 'k', "session %d: %zu bytes from the backend", i, got);
		if (h_now_ms() - s > worst)
			worst = h_now_ms() - s;
	}
	int64_t took = h_now_ms() - t0;
	H_CHECK(took < H_T(5000) && worst < 1000,
		"%d sessions with a stuck syslog receiver took %lld ms (slowest %lld ms)", N,
		(long long)took, (long long)worst);

	/* the last lines may still be on their way: until the count settles */
	long long d = -1, prev;
	int64_t end = h_now_ms() + 3000;
	do {
		prev = d;
		h_sleep_ms(200);
		d = h_metric(&stats, dropped);
	} while ((d != prev || d < N / 2) && h_now_ms() < end);
	H_CHECK(d >= N / 2, "%s is %lld after %d sessions into a full receiver", dropped, d, N);

	/* what the receiver's queue held plus what was dropped: every line */
	int received = 0;
	end = h_now_ms() + 3000;
	while (received + d < N && h_now_ms() < end) {
		if (datagram(fd, m, sizeof m, 100) > 0)
			received++;
		d = h_metric(&stats, dropped);
	}
	H_CHECK(received + d == N, "%d lines received + %lld dropped, expected %d sessions'",
		received, d, N);
	fprintf(stderr, "[integ] stuck syslog receiver: %d sessions in %lld ms (slowest %lld ms), "
		"%d lines queued, %lld dropped\n", N, (long long)took, (long long)worst, received, d);

	/* reading again: the next lines come */
	for (int i = 0; i < 5; i++) {
		int port = session(&la, "", 0, back, sizeof back, &got);
		H_CHECK(datagram(fd, m, sizeof m, 3000) > 0,
			"no line for session %d after the receiver started reading (%lld dropped)", i,
			h_metric(&stats, dropped));
		snprintf(want, sizeof want, " client=127.0.0.1:%d ", port);
		H_CHECK(strstr(rfc5424_msg(m, 3 * 8 + 6, p.pid), want), "%s is not session %d's line",
			m, i);
	}
	H_CHECK(h_metric(&stats, dropped) == d, "lines dropped once the receiver read");
	h_proxy_down(&p);
	h_tag_stop(&tag);
	close(fd);
}
