/* SPDX-License-Identifier: MIT */
/* Unit tests for src/lib/syslog_out.c on real sockets: the RFC 5424
 * header, a Unix datagram receiver that never reads (sends never wait
 * more than one short wait per stall, and flow again once it reads), a
 * receiver that restarts (reconnected), UDP, and the targets' parser. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "syslog_out.h"

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A Unix datagram socket bound at path (removed first). */
static int unix_receiver(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	unlink(path);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "bind %s: %s", path,
		  strerror(errno));
	return fd;
}

static void tmp_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "/tmp/splicer-unit-syslog.%d.%s", (int)getpid(), name);
}

static void open_unix(struct syslog_out *o, const char *path, unsigned facility)
{
	struct syslog_target t;
	char where[200], err[300];

	snprintf(where, sizeof(where), "syslog:unix:%s", path);
	cr_assert_eq(syslog_target_parse(where, &t, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(syslog_out_open(o, &t, facility, err, sizeof(err)), 0, "%s", err);
}

Test(unit_syslog_out, rfc5424_header)
{
	struct syslog_out o;
	struct timespec ts = { .tv_sec = 1796507523, .tv_nsec = 123456789 }; /* 2026-12-05T21:52:03 */
	char path[128], buf[SYSLOG_HEADER_MAX + 1], want[400], host[256] = "";
	int r;

	tmp_path(path, sizeof(path), "hdr");
	r = unix_receiver(path);
	open_unix(&o, path, 16 /* local0 */);
	gethostname(host, sizeof(host) - 1);
	snprintf(want, sizeof(want), "<134>1 2026-12-05T21:52:03.123Z %s splicer %d access - ",
		 host[0] ? host : "-", (int)getpid());
	cr_expect_eq(syslog_out_header(&o, &ts, buf, sizeof(buf)), strlen(want));
	cr_expect_str_eq(buf, want);
	syslog_out_close(&o);
	close(r);
	unlink(path);
}

Test(unit_syslog_out, facilities)
{
	cr_expect_eq(syslog_facility_code(0), 1);  /* user */
	cr_expect_eq(syslog_facility_code(2), 3);  /* daemon */
	cr_expect_str_eq(syslog_facility_names[11], "local0");
	cr_expect_eq(syslog_facility_code(11), 16);
	cr_expect_str_eq(syslog_facility_names[18], "local7");
	cr_expect_eq(syslog_facility_code(18), 23);
	cr_expect_null(syslog_facility_names[19]);
}

/* The receiver never reads: after its queue filled, each line costs one
 * failed send and no wait (one short wait in all); once it reads, the
 * next line goes through. */
Test(unit_syslog_out, a_receiver_that_never_reads_costs_no_waits, .timeout = 30)
{
	struct syslog_out o;
	char path[128], msg[200], got[256];
	int r, sent = 0, dropped = 0, drained = 0;
	int64_t t0, took;

	tmp_path(path, sizeof(path), "full");
	r = unix_receiver(path);
	open_unix(&o, path, 3);
	memset(msg, 'x', sizeof(msg));
	t0 = mono_ms();
	for (int i = 0; i < 5000; i++) {
		if (syslog_out_send(&o, msg, sizeof(msg)) == 0)
			sent++;
		else
			dropped++;
	}
	took = mono_ms() - t0;
	cr_expect(sent > 0 && dropped > 4000, "sent %d, dropped %d", sent, dropped);
	/* one SYSLOG_STALL_WAIT_MS (20 ms) and 5000 failing sends: a wait per
	 * line would be 100 s */
	cr_expect(took < 1000, "5000 lines took %lld ms", (long long)took);
	cr_expect(o.stalled, "not marked stalled");

	/* it reads again: everything it holds is whole, and lines flow */
	while (recv(r, got, sizeof(got), MSG_DONTWAIT) == (ssize_t)sizeof(msg))
		drained++;
	cr_expect_eq(drained, sent, "received %d of %d sent", drained, sent);
	cr_expect_eq(syslog_out_send(&o, "again", 5), 0);
	cr_expect(!o.stalled);
	cr_expect_eq(recv(r, got, sizeof(got), MSG_DONTWAIT), 5);
	syslog_out_close(&o);
	close(r);
	unlink(path);
}

/* The daemon restarts (a new socket at the same path): reconnected, at
 * most once per SYSLOG_RECONNECT_MS; lines meanwhile dropped at once. */
Test(unit_syslog_out, a_restarted_receiver_is_reconnected, .timeout = 30)
{
	struct syslog_out o;
	char path[128], got[64];
	int r;
	int64_t t0;

	tmp_path(path, sizeof(path), "restart");
	r = unix_receiver(path);
	open_unix(&o, path, 3);
	cr_assert_eq(syslog_out_send(&o, "one", 3), 0);
	cr_expect_eq(recv(r, got, sizeof(got), MSG_DONTWAIT), 3);
	close(r);
	unlink(path);
	/* gone: dropped, quickly */
	t0 = mono_ms();
	for (int i = 0; i < 100; i++)
		cr_expect_eq(syslog_out_send(&o, "lost", 4), -1);
	cr_expect(mono_ms() - t0 < 500, "100 lines to a gone receiver took %lld ms",
		  (long long)(mono_ms() - t0));
	r = unix_receiver(path);
	usleep((SYSLOG_RECONNECT_MS + 100) * 1000);
	cr_expect_eq(syslog_out_send(&o, "two", 3), 0, "not reconnected");
	cr_expect_eq(recv(r, got, sizeof(got), MSG_DONTWAIT), 3);
	cr_expect_eq(memcmp(got, "two", 3), 0);
	syslog_out_close(&o);
	close(r);
	unlink(path);
}

Test(unit_syslog_out, udp)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	struct syslog_target t;
	struct syslog_out o;
	char where[64], err[300], got[64];
	int r = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	cr_assert(r >= 0 && bind(r, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		  getsockname(r, (struct sockaddr *)&a, &len) == 0);
	snprintf(where, sizeof(where), "syslog:udp://127.0.0.1:%d", ntohs(a.sin_port));
	cr_assert_eq(syslog_target_parse(where, &t, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(syslog_out_open(&o, &t, 3, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(syslog_out_send(&o, "hello", 5), 0);
	cr_expect_eq(recv(r, got, sizeof(got), 0), 5);
	/* the receiver goes: ICMP port unreachable; sends never wait */
	close(r);
	for (int i = 0; i < 20; i++)
		syslog_out_send(&o, "x", 1);
	syslog_out_close(&o);
}

Test(unit_syslog_out, targets)
{
	struct syslog_target t;
	char err[300];

	cr_expect(syslog_target_is("syslog:udp://h"));
	cr_expect(!syslog_target_is("syslog"));
	cr_expect(!syslog_target_is("/var/log/syslog"));
	cr_expect_eq(syslog_target_parse("syslog:udp://127.0.0.1", &t, err, sizeof(err)), 0);
	cr_expect(t.udp);
	cr_expect_str_eq(t.addr.text, "127.0.0.1:514");
	cr_expect_eq(syslog_target_parse("syslog:udp://[::1]:5514", &t, err, sizeof(err)), 0);
	cr_expect_str_eq(t.addr.text, "[::1]:5514");
	cr_expect_eq(syslog_target_parse("syslog:udp://[::1]", &t, err, sizeof(err)), 0);
	cr_expect_str_eq(t.addr.text, "[::1]:514");
	cr_expect_eq(syslog_target_parse("syslog:unix:/dev/log", &t, err, sizeof(err)), 0);
	cr_expect(!t.udp);
	cr_expect_str_eq(t.addr.text, "unix:/dev/log");
	cr_expect_eq(syslog_target_parse("syslog:udp://127.0.0.1:99999", &t, err, sizeof(err)), -1);
	cr_expect(strstr(err, "out of range"), "%s", err);
	cr_expect_eq(syslog_target_parse("syslog:udp://:514", &t, err, sizeof(err)), -1);
	cr_expect(strstr(err, "no host"), "%s", err);
	cr_expect_eq(syslog_target_parse("syslog:udp://::1", &t, err, sizeof(err)), -1);
	cr_expect(strstr(err, "brackets"), "%s", err);
	cr_expect_eq(syslog_target_parse("syslog:tcp://127.0.0.1:514", &t, err, sizeof(err)), -1);
	cr_expect(strstr(err, "unknown syslog target"), "%s", err);
	cr_expect_eq(syslog_target_parse("syslog:unix:dev/log", &t, err, sizeof(err)), -1);
	cr_expect(strstr(err, "starts with /"), "%s", err);
}
