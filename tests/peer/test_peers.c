/* SPDX-License-Identifier: MIT */
/* The differential suite: TCP edge cases through direct, HAProxy (mode tcp,
 * defaults), nginx stream (defaults, and with proxy_half_close on: by
 * default nginx ends a session at either side's FIN) and splicer with each
 * engine; and TLS passthrough routed by SNI (section 8) through HAProxy's
 * req.ssl_sni, nginx's ssl_preread and splicer's sni routes, the same
 * ClientHellos through each. Each test is one scenario, repeated; it prints
 * its row of the table (delivered/reps per column, and per column how the
 * reps went) and fails when a splicer engine delivers fewer reps than the
 * best of HAProxy and nginx (in an SNI scenario: misses a rep that direct
 * delivered), or any wrong byte. See peers.h for the machinery.
 *
 * Where the scenario's bytes must have reached the receiving kernel before
 * a reset (so that "everything" is well defined), the sender waits until
 * SIOCOUTQ is 0: the receiving kernel (the client's or the backend's when
 * direct, the proxy's otherwise) acknowledged every byte. */
#define _GNU_SOURCE
#include "peers.h"
#include "tls_hello_gen.h"

#include <criterion/hooks.h>
#include <stdlib.h>

#include <errno.h>
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define REPS 10
#define UPLOAD (4 * H_MIB)
/* A receiver that starts reading this late leaves data waiting in the proxy. */
#define LATE_READ_MS 30

#define SEED_UP   0x5EED0001ull /* client -> backend */
#define SEED_DOWN 0x5EED0002ull /* backend -> client */
#define SEED_INB  0x5EED0003ull /* urgent scenarios: the in-band bytes */
#define SEED_RESP 0x5EED0004ull /* urgent scenarios: the answer */

static int64_t deadline_of(const struct pr_col *c)
{
	return h_now_ms() + c->sc->deadline_ms;
}

/* Fills out from a finished pr_io that had to read exactly `expect` bytes
 * and then see the connection end (FIN or RST: the label says which). */
static void verdict_read(struct pr_rep *out, const struct pr_io *io, uint64_t expect)
{
	out->bad = io->bad;
	out->stalled = io->recv_end == ETIMEDOUT;
	out->ok = io->got == expect && !io->bad && !out->stalled;
	if (io->got == expect || io->bad)
		pr_how(out->how, "%s", pr_end_label(io->recv_end));
	else
		pr_how(out->how, "%lluk-%s", (unsigned long long)(io->got >> 10),
			 pr_end_label(io->recv_end));
}

/* ---- 1: an early answer, then the backend's RST ------------------------------- */

#define HEAD  1024 /* the request head the backend reads before it answers */
#define THINK 20   /* ms the backend takes to decide (an auth check, a size limit) */

/* The backend waits for the upload to start, reads its head and thinks
 * (or, with think_ms 0, reads nothing and answers at once), answers, waits
 * until its answer is acknowledged and closes: with the rest of the upload
 * unread, its kernel sends an RST. With the think time the upload has
 * stalled on the backend's full window when the answer and the RST come;
 * without it they come while the proxy is still writing the upload. */
static void early_backend(struct pr_col *c, int fd, struct pr_side *out, uint64_t len,
			  int think_ms)
{
	int64_t deadline = deadline_of(c);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, c->sc->deadline_ms) != 1) {
		pr_how(out->how, "no-upload");
		return;
	}
	if (think_ms) {
		char head[HEAD];
		if (h_recv_exact(fd, head, sizeof head, deadline) < 0) {
			pr_how(out->how, "no-head");
			return;
		}
		h_sleep_ms(think_ms);
	}
	struct pr_io io = { .send_len = len, .send_seed = SEED_DOWN, .no_recv = 1 };
	pr_duplex(fd, &io, deadline);
	pr_wait_acked(fd, deadline);
	int unread = 0;
	ioctl(fd, SIOCINQ, &unread);
	pr_how(out->how, "%s", unread ? "rst" : "fin");
}

static void early60_backend(struct pr_col *c, int fd, struct pr_side *out)
{
	early_backend(c, fd, out, 60, THINK);
}

static void early1m_backend(struct pr_col *c, int fd, struct pr_side *out)
{
	early_backend(c, fd, out, H_MIB, THINK);
}

static void early60_now_backend(struct pr_col *c, int fd, struct pr_side *out)
{
	early_backend(c, fd, out, 60, 0);
}

/* The client uploads 4 MiB and reads at the same time, as HTTP clients do. */
static void early_client(struct pr_col *c, struct pr_rep *out, uint64_t len)
{
	int fd = pr_connect(c);
	if (fd < 0) {
		pr_how(out->how, "connect");
		return;
	}
	struct pr_io io = { .send_len = UPLOAD, .send_seed = SEED_UP, .stop_on_recv_end = 1,
			    .recv_expect = len, .recv_seed = SEED_DOWN };
	pr_duplex(fd, &io, deadline_of(c));
	close(fd);
	verdict_read(out, &io, len);
}

static void early60_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	early_client(c, out, 60);
}

static void early1m_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	early_client(c, out, H_MIB);
}

Test(peer, early_answer_60b, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const struct pr_scenario sc = {
		.name = "early_answer_60b", .reps = REPS, .deadline_ms = 3000,
		.delivered = "the client, uploading 4 MiB, got the 60-byte answer the backend sent "
			     "20 ms after the upload's first 1 KiB, before its RST, and then an "
			     "end (label: FIN or RST)",
		.backend = early60_backend, .client = early60_client,
	};
	pr_run(&sc);
}

/* The same without the think time: the answer and the RST arrive while the
 * proxy is still writing the upload to the backend. HAProxy and nginx lose
 * the answer in some reps (their write error ends the session before they
 * read it); direct never does. */
Test(peer, early_answer_60b_at_once, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const struct pr_scenario sc = {
		.name = "early_answer_60b_at_once", .reps = REPS, .deadline_ms = 3000,
		.delivered = "as early_answer_60b, but the backend answers as soon as the upload "
			     "starts, reading nothing",
		.backend = early60_now_backend, .client = early60_client,
	};
	pr_run(&sc);
}

Test(peer, early_answer_1mib, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const struct pr_scenario sc = {
		.name = "early_answer_1mib", .reps = REPS, .deadline_ms = 3000,
		.delivered = "as early_answer_60b, with a 1 MiB answer",
		.backend = early1m_backend, .client = early1m_client,
	};
	pr_run(&sc);
}

/* ---- 2: urgent data ------------------------------------------------------------ */

/* The sender sends 100 bytes, 1 byte with MSG_OOB, 100 bytes; the in-band
 * bytes are 200 bytes of SEED_INB, and the urgent byte differs from the one
 * after it, so a receiver tells an urgent byte delivered in-band from the
 * stream. */
static void urgent_bytes(unsigned char inb[200], unsigned char *u)
{
	h_gen(SEED_INB, 0, inb, 200);
	*u = inb[100] ^ 0x5a;
}

static int urgent_send(int fd, int64_t deadline)
{
	unsigned char inb[200], u;
	urgent_bytes(inb, &u);
	h_set_nodelay(fd);
	if (h_send_all(fd, inb, 100, deadline) < 0 || send(fd, &u, 1, MSG_OOB | MSG_NOSIGNAL) != 1)
		return -1;
	return h_send_all(fd, inb + 100, 100, deadline) < 0 ? -1 : 0;
}

/* Reads the 200 in-band bytes and the urgent byte, if it comes as one.
 * Linux drops an urgent byte that was not fetched before in-band reading
 * passed its mark (a blocking recv() waiting when the byte arrives skips
 * it), so the receiver polls for POLLPRI and fetches urgent data first, as
 * telnet does. Returns the fate of the urgent byte: 'O' (arrived urgent:
 * recv(MSG_OOB) returned it), 'I' (arrived in-band, at its place), 'L'
 * (lost); 'X' wrong bytes; or 0 when the stream ended or stalled first
 * (*end says how). */
static int urgent_recv(int fd, int64_t deadline, int *end)
{
	unsigned char inb[200], u, buf[512];
	int n = 0, inl = 0, oob = 0;
	urgent_bytes(inb, &u);
	*end = -1;
	while (n < 200) {
		struct pollfd p = { .fd = fd, .events = POLLIN | POLLPRI };
		int64_t left = deadline - h_now_ms();
		if (left <= 0) {
			*end = ETIMEDOUT;
			return 0;
		}
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		if (p.revents & POLLPRI) {
			unsigned char got;
			if (recv(fd, &got, 1, MSG_OOB | MSG_DONTWAIT) == 1) {
				if (got != u || oob || inl)
					return 'X';
				oob = 1;
			}
		}
		ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			*end = r == 0 ? 0 : errno;
			return 0;
		}
		for (ssize_t k = 0; k < r; k++) {
			if (n == 100 && !inl && !oob && buf[k] == u)
				inl = 1;
			else if (n < 200 && buf[k] == inb[n])
				n++;
			else
				return 'X';
		}
	}
	return oob ? 'O' : inl ? 'I' : 'L';
}

static const char *fate_label(int fate)
{
	return fate == 'O' ? "oob" : fate == 'I' ? "inline" : fate == 'L' ? "lost" : "bad";
}

/* client -> backend: the backend answers 100 bytes: the fate letter, then
 * 99 bytes of SEED_RESP, and closes. */
static void urgent_c2b_backend(struct pr_col *c, int fd, struct pr_side *out)
{
	int end;
	int64_t deadline = deadline_of(c) + 1000; /* a stall shows at the client as one */
	int fate = urgent_recv(fd, deadline, &end);
	if (!fate)
		return;
	unsigned char resp[100];
	resp[0] = (unsigned char)fate;
	h_gen(SEED_RESP, 1, resp + 1, 99);
	h_send_all(fd, resp, sizeof resp, deadline);
}

static void urgent_c2b_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	int64_t deadline = deadline_of(c);
	int fd = pr_connect(c);
	if (fd < 0) {
		pr_how(out->how, "connect");
		return;
	}
	if (urgent_send(fd, deadline) < 0) {
		pr_how(out->how, "send");
		close(fd);
		return;
	}
	unsigned char resp[100];
	int rc = h_recv_exact(fd, resp, sizeof resp, deadline);
	int end = rc == 0 ? h_expect_eof(fd, deadline) : rc;
	close(fd);
	if (rc < 0) {
		out->stalled = rc == -ETIMEDOUT;
		pr_how(out->how, "%s", out->stalled ? "stall" :
			 rc == -ENODATA ? "fin" : pr_end_label(-rc));
		return;
	}
	out->bad = resp[0] == 'X' || h_gen_check(SEED_RESP, 1, resp + 1, 99) != 99 || end == -EPROTO;
	out->stalled = end == -ETIMEDOUT;
	out->ok = !out->bad && !out->stalled && strchr("OIL", resp[0]);
	pr_how(out->how, "%s", fate_label(resp[0]));
}

/* backend -> client: the client reads the 200 in-band bytes and answers
 * 100 bytes of SEED_RESP; the backend confirms with "K" (or "X") and
 * closes. */
static void urgent_b2c_backend(struct pr_col *c, int fd, struct pr_side *out)
{
	int64_t deadline = deadline_of(c);
	if (urgent_send(fd, deadline) < 0)
		return;
	unsigned char ans[100];
	if (h_recv_exact(fd, ans, sizeof ans, deadline) < 0)
		return;
	char k = h_gen_check(SEED_RESP, 0, ans, sizeof ans) == sizeof ans ? 'K' : 'X';
	h_send_all(fd, &k, 1, deadline);
}

static void urgent_b2c_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	int64_t deadline = deadline_of(c);
	int fd = pr_connect(c), end;
	if (fd < 0) {
		pr_how(out->how, "connect");
		return;
	}
	int fate = urgent_recv(fd, deadline, &end);
	if (!fate || fate == 'X') {
		close(fd);
		out->bad = fate == 'X';
		out->stalled = end == ETIMEDOUT;
		pr_how(out->how, "%s", fate ? "bad" : pr_end_label(end));
		return;
	}
	unsigned char ans[100];
	char k = 0;
	h_gen(SEED_RESP, 0, ans, sizeof ans);
	int rc = h_send_all(fd, ans, sizeof ans, deadline);
	if (rc == 0)
		rc = h_recv_exact(fd, &k, 1, deadline);
	if (rc == 0)
		rc = h_expect_eof(fd, deadline);
	close(fd);
	out->stalled = rc == -ETIMEDOUT;
	out->bad = k == 'X' || rc == -EPROTO;
	out->ok = rc == 0 && k == 'K';
	if (out->ok)
		pr_how(out->how, "%s", fate_label(fate));
	else
		pr_how(out->how, "%s-%s", fate_label(fate),
			 rc == -ENODATA ? "fin" : pr_end_label(-rc));
}

Test(peer, urgent_client_to_backend, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const struct pr_scenario sc = {
		.name = "urgent_client_to_backend", .reps = REPS, .parallel = 1, .deadline_ms = 3000,
		.delivered = "client sends 100 B, 1 B MSG_OOB, 100 B; the backend got the 200 in-band "
			     "bytes in order and its answer reached the client (label: what became "
			     "of the urgent byte: oob = still urgent, inline = in the stream, lost)",
		.backend = urgent_c2b_backend, .client = urgent_c2b_client,
	};
	pr_run(&sc);
}

Test(peer, urgent_backend_to_client, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const struct pr_scenario sc = {
		.name = "urgent_backend_to_client", .reps = REPS, .parallel = 1, .deadline_ms = 3000,
		.delivered = "backend sends 100 B, 1 B MSG_OOB, 100 B; the client got the 200 in-band "
			     "bytes in order, answered, and the backend's confirmation came back "
			     "(label: the urgent byte's fate)",
		.backend = urgent_b2c_backend, .client = urgent_b2c_client,
	};
	pr_run(&sc);
}

/* ---- 3: a server-first greeting, then close ------------------------------------ */

#define GREETING 40

static void greeting_backend(struct pr_col *c, int fd, struct pr_side *out)
{
	struct pr_io io = { .send_len = GREETING, .send_seed = SEED_DOWN, .no_recv = 1 };
	pr_duplex(fd, &io, deadline_of(c));
}

static void greeting_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	int fd = pr_connect(c);
	if (fd < 0) {
		pr_how(out->how, "connect");
		return;
	}
	struct pr_io io = { .recv_expect = GREETING, .recv_seed = SEED_DOWN };
	pr_duplex(fd, &io, deadline_of(c));
	close(fd);
	verdict_read(out, &io, GREETING);
	out->ok = out->ok && io.recv_end == 0;
}

Test(peer, greeting_then_close, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const struct pr_scenario sc = {
		.name = "greeting_then_close", .reps = REPS, .deadline_ms = 2000,
		.delivered = "the backend's 40-byte greeting, then EOF (not a reset)",
		.backend = greeting_backend, .client = greeting_client,
	};
	pr_run(&sc);
}

/* ---- 4: client data, then the client's RST -------------------------------------- */

#define C_RST_LEN (256 * H_KIB)

/* The backend starts reading 30 ms late, so that part of the data is still
 * in the proxy when the client's RST arrives there. */
static void client_rst_backend(struct pr_col *c, int fd, struct pr_side *out)
{
	h_sleep_ms(LATE_READ_MS);
	struct pr_io io = { .recv_expect = C_RST_LEN, .recv_seed = SEED_UP };
	pr_duplex(fd, &io, deadline_of(c));
	out->got = io.got;
	out->end = io.recv_end;
	out->bad = io.bad;
}

static void client_rst_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	int fd = pr_connect(c);
	if (fd < 0) {
		pr_how(out->how, "connect");
		return;
	}
	int64_t deadline = deadline_of(c);
	struct pr_io io = { .send_len = C_RST_LEN, .send_seed = SEED_UP, .no_recv = 1 };
	pr_duplex(fd, &io, deadline);
	int acked = pr_wait_acked(fd, deadline) == 0;
	pr_linger0(fd);
	close(fd);
	const struct pr_side *bk = pr_backend_wait(c, rep, (int)(deadline - h_now_ms()) + 1000);
	if (!bk) {
		pr_how(out->how, "no-conn");
		return;
	}
	struct pr_io seen = { .got = bk->got, .recv_end = bk->end, .bad = bk->bad };
	verdict_read(out, &seen, C_RST_LEN);
	if (!acked || io.sent != C_RST_LEN)
		pr_how(out->how, "unsent"); /* the client's part failed: not delivered */
	out->ok = out->ok && acked && io.sent == C_RST_LEN;
}

Test(peer, client_data_then_rst, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const struct pr_scenario sc = {
		.name = "client_data_then_rst", .reps = REPS, .deadline_ms = 3000,
		.delivered = "the client sends 256 KiB, waits until they are acknowledged and resets "
			     "(SO_LINGER 0); the backend, reading 30 ms late, got all 256 KiB "
			     "(label: how its read ended, or KiB received)",
		.backend = client_rst_backend, .client = client_rst_client,
	};
	pr_run(&sc);
}

/* ---- 5: half-close in each order, 4 MiB each way --------------------------------- */

/* Client first: the client sends 4 MiB + FIN; the backend answers 4 MiB +
 * FIN once it has read the client's EOF. */
static void hc_client_first_backend(struct pr_col *c, int fd, struct pr_side *out)
{
	int64_t deadline = deadline_of(c);
	struct pr_io in = { .recv_expect = UPLOAD, .recv_seed = SEED_UP };
	pr_duplex(fd, &in, deadline);
	out->got = in.got;
	out->end = in.recv_end;
	out->bad = in.bad;
	if (in.recv_end != 0)
		return;
	struct pr_io ans = { .send_len = UPLOAD, .send_seed = SEED_DOWN, .shut_wr = 1, .no_recv = 1 };
	pr_duplex(fd, &ans, deadline);
}

/* The side that went first must have its bytes and EOF; *label says what went wrong. */
static int hc_backend_ok(const struct pr_side *bk, char *label)
{
	if (!bk) {
		pr_how(label, "no-conn");
		return 0;
	}
	if (bk->got != UPLOAD || bk->end != 0 || bk->bad) {
		pr_how(label, "b:%lluk-%s", (unsigned long long)(bk->got >> 10),
			 pr_end_label(bk->end));
		return 0;
	}
	return 1;
}

static void hc_client_first_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	int fd = pr_connect(c);
	if (fd < 0) {
		pr_how(out->how, "connect");
		return;
	}
	int64_t deadline = deadline_of(c);
	struct pr_io io = { .send_len = UPLOAD, .send_seed = SEED_UP, .shut_wr = 1,
			    .recv_expect = UPLOAD, .recv_seed = SEED_DOWN };
	pr_duplex(fd, &io, deadline);
	close(fd);
	verdict_read(out, &io, UPLOAD);
	out->ok = out->ok && io.recv_end == 0 && io.sent == UPLOAD && !io.send_err;
	const struct pr_side *bk = pr_backend_wait(c, rep, 2000);
	if (!hc_backend_ok(bk, out->how))
		out->ok = 0;
	out->bad |= bk && bk->bad;
}

/* Backend first: the backend sends 4 MiB + FIN at once; the client reads
 * them to EOF, then sends 4 MiB + FIN, which the backend reads to EOF. */
static void hc_backend_first_backend(struct pr_col *c, int fd, struct pr_side *out)
{
	struct pr_io io = { .send_len = UPLOAD, .send_seed = SEED_DOWN, .shut_wr = 1,
			    .recv_expect = UPLOAD, .recv_seed = SEED_UP };
	pr_duplex(fd, &io, deadline_of(c));
	out->got = io.got;
	out->end = io.send_err ? io.send_err : io.recv_end;
	out->bad = io.bad;
}

static void hc_backend_first_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	int fd = pr_connect(c);
	if (fd < 0) {
		pr_how(out->how, "connect");
		return;
	}
	int64_t deadline = deadline_of(c);
	struct pr_io in = { .recv_expect = UPLOAD, .recv_seed = SEED_DOWN };
	pr_duplex(fd, &in, deadline);
	verdict_read(out, &in, UPLOAD);
	out->ok = out->ok && in.recv_end == 0;
	if (out->ok) {
		struct pr_io up = { .send_len = UPLOAD, .send_seed = SEED_UP, .shut_wr = 1,
				    .no_recv = 1 };
		pr_duplex(fd, &up, deadline);
		if (up.sent != UPLOAD || up.send_err) {
			out->ok = 0;
			out->stalled = up.send_err == ETIMEDOUT;
			pr_how(out->how, "c:%lluk-%s", (unsigned long long)(up.sent >> 10),
				 pr_end_label(up.send_err));
		}
	}
	const struct pr_side *bk = pr_backend_wait(c, rep, (int)(deadline - h_now_ms()) + 1000);
	close(fd);
	if (out->ok && !hc_backend_ok(bk, out->how))
		out->ok = 0;
	out->bad |= bk && bk->bad;
}

Test(peer, half_close_client_first_4mib, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const struct pr_scenario sc = {
		.name = "half_close_client_first_4mib", .reps = REPS, .deadline_ms = 8000,
		.delivered = "the client's 4 MiB + EOF reached the backend, whose 4 MiB answer + EOF "
			     "(sent after the client's EOF) reached the client",
		.backend = hc_client_first_backend, .client = hc_client_first_client,
	};
	pr_run(&sc);
}

Test(peer, half_close_backend_first_4mib, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const struct pr_scenario sc = {
		.name = "half_close_backend_first_4mib", .reps = REPS, .deadline_ms = 8000,
		.delivered = "the backend's 4 MiB + EOF reached the client, whose 4 MiB + EOF (sent "
			     "after the backend's EOF) reached the backend",
		.backend = hc_backend_first_backend, .client = hc_backend_first_client,
	};
	pr_run(&sc);
}

/* ---- 6: the backend's RST right after a full answer ---------------------------------- */

#define B_RST_LEN (256 * H_KIB)

/* The backend sends 256 KiB, waits until its kernel has them acknowledged
 * (by the client's kernel direct, by the proxy's otherwise) and resets. */
static void backend_rst_backend(struct pr_col *c, int fd, struct pr_side *out)
{
	int64_t deadline = deadline_of(c);
	struct pr_io io = { .send_len = B_RST_LEN, .send_seed = SEED_DOWN, .no_recv = 1 };
	pr_duplex(fd, &io, deadline);
	pr_how(out->how, "%s", pr_wait_acked(fd, deadline) == 0 ? "acked" : "unacked");
	pr_linger0(fd);
}

/* The client starts reading 30 ms late: the answer waits in the proxy. */
static void backend_rst_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	int fd = pr_connect(c);
	if (fd < 0) {
		pr_how(out->how, "connect");
		return;
	}
	h_sleep_ms(LATE_READ_MS);
	struct pr_io io = { .recv_expect = B_RST_LEN, .recv_seed = SEED_DOWN };
	pr_duplex(fd, &io, deadline_of(c));
	close(fd);
	verdict_read(out, &io, B_RST_LEN);
	const struct pr_side *bk = pr_backend_wait(c, rep, 1000);
	if (bk && strcmp(bk->how, "acked")) {
		out->ok = 0; /* the backend's part failed: the rep says nothing */
		pr_how(out->how, "b:%s", bk->how);
	}
}

Test(peer, backend_rst_after_full_answer, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const struct pr_scenario sc = {
		.name = "backend_rst_after_full_answer", .reps = REPS, .deadline_ms = 3000,
		.delivered = "the backend sends 256 KiB, waits until they are acknowledged and "
			     "resets; the client, reading 30 ms late, got all 256 KiB",
		.backend = backend_rst_backend, .client = backend_rst_client,
	};
	pr_run(&sc);
}

/* ---- 7: a half-closed client waiting for a late answer --------------------------- */

#define LATE_MS 1500

static void late_backend(struct pr_col *c, int fd, struct pr_side *out)
{
	int64_t deadline = deadline_of(c);
	struct pr_io in = { .recv_expect = 100, .recv_seed = SEED_UP };
	pr_duplex(fd, &in, deadline);
	if (in.recv_end != 0 || in.got != 100 || in.bad)
		return;
	h_sleep_ms(LATE_MS);
	struct pr_io ans = { .send_len = 100, .send_seed = SEED_DOWN, .no_recv = 1 };
	pr_duplex(fd, &ans, deadline);
}

static void late_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	int fd = pr_connect(c);
	if (fd < 0) {
		pr_how(out->how, "connect");
		return;
	}
	struct pr_io io = { .send_len = 100, .send_seed = SEED_UP, .shut_wr = 1,
			    .recv_expect = 100, .recv_seed = SEED_DOWN };
	pr_duplex(fd, &io, deadline_of(c));
	close(fd);
	verdict_read(out, &io, 100);
	out->ok = out->ok && io.recv_end == 0 && io.sent == 100;
}

Test(peer, late_answer_to_half_closed_client, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const struct pr_scenario sc = {
		.name = "late_answer_to_half_closed_client", .reps = REPS, .parallel = 1,
		.deadline_ms = 4000,
		.delivered = "the client sends 100 B + FIN; the backend answers 100 B + FIN 1.5 s "
			     "after the client's EOF; the client got the answer and EOF",
		.backend = late_backend, .client = late_client,
	};
	pr_run(&sc);
}

/* ---- 8: TLS passthrough routed by SNI ------------------------------------------- */

/* One message per scenario, made before the reps start (the generators
 * assert, so only on the main thread): its bytes, how it is cut, and the
 * route (the backend's tag) that must take it. */
static struct {
	uint8_t buf[20000];
	size_t n;
	size_t piece;   /* send in pieces of this many bytes (0: at once) */
	int pause_ms;   /* between pieces */
	char want;      /* 'a', 'b', 'd'; 0: none (the silent client) */
} sni;

#define SNI_REPS 10

static void sni_hello(const char *name, const char *alpn, int nprotos, char want)
{
	sni.n = tls_make_hello(name, alpn, nprotos, sni.buf, sizeof sni.buf);
	sni.piece = 0;
	sni.pause_ms = 0;
	sni.want = want;
}

/* Sends the message as the scenario cuts it, then reads the backend's tag
 * and the echo of every byte sent. Delivered: the expected route's tag,
 * then exactly the bytes sent. Label: "->X" where it went, or how the
 * connection ended before a tag came. */
static void sni_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	int64_t deadline = deadline_of(c);
	uint8_t *back = malloc(sni.n);
	char tag = 0;
	int fd = pr_connect_route(c, sni.want), rc = 0;

	if (fd < 0 || !back) {
		pr_how(out->how, "connect");
		goto out;
	}
	h_set_nodelay(fd);
	for (size_t off = 0; off < sni.n && rc == 0;) {
		size_t k = sni.piece && sni.n - off > sni.piece ? sni.piece : sni.n - off;
		rc = h_send_all(fd, sni.buf + off, k, deadline);
		off += k;
		if (off < sni.n && sni.pause_ms)
			h_sleep_ms(sni.pause_ms);
	}
	if (rc == 0)
		rc = h_recv_exact(fd, &tag, 1, deadline);
	if (rc < 0) {
		out->stalled = rc == -ETIMEDOUT;
		pr_how(out->how, "%s", rc == -ENODATA ? "fin" : pr_end_label(-rc));
		goto out;
	}
	pr_how(out->how, "->%c", tag);
	rc = h_recv_exact(fd, back, sni.n, deadline);
	if (rc < 0) {
		out->stalled = rc == -ETIMEDOUT;
		pr_how(out->how, "->%c-%s", tag, rc == -ENODATA ? "fin" : pr_end_label(-rc));
		goto out;
	}
	out->bad = memcmp(back, sni.buf, sni.n) != 0;
	out->ok = tag == sni.want && !out->bad;
out:
	if (fd >= 0)
		close(fd);
	free(back);
}

#define SNI_SCENARIO(nm, what)                                                        \
	static const struct pr_scenario sc = {                                       \
		.name = nm, .reps = SNI_REPS, .parallel = 1, .sni = 1,               \
		.deadline_ms = 3000 + PR_HELLO_WAIT_S * 1000,                        \
		.delivered = what, .client = sni_client,                             \
	}

/* Every peer routes a plain hello by its exact name. */
Test(peer, sni_exact_name, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	SNI_SCENARIO("sni_exact_name", "a hello for a.example.com reached route a with every "
		     "byte (label: ->route the backend's tag named)");
	sni_hello("a.example.com", NULL, 0, 'a');
	pr_run(&sc);
}

/* Two labels under *.a.example.com: splicer's '*.' takes one label or more;
 * HAProxy's `req.ssl_sni -m end .a.example.com` and nginx's hostnames map
 * key ".a.example.com" match any depth too. */
Test(peer, sni_wildcard, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	SNI_SCENARIO("sni_wildcard", "a hello for x.y.a.example.com reached route a "
		     "(*.a.example.com) with every byte");
	sni_hello("x.y.a.example.com", NULL, 0, 'a');
	pr_run(&sc);
}

/* Names are case-insensitive (RFC 6066 host names): splicer folds case;
 * HAProxy's string match is case-sensitive unless -i, which its config
 * here gives; nginx's map lowercases keys and lookups. */
Test(peer, sni_upper_case, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	SNI_SCENARIO("sni_upper_case", "a hello for A.Example.COM reached route a with every byte");
	sni_hello("A.Example.COM", NULL, 0, 'a');
	pr_run(&sc);
}

/* ALPN as curl offers it (h2 first): route b needs h2 among the protocols. */
Test(peer, sni_alpn_h2, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	SNI_SCENARIO("sni_alpn_h2", "a hello for b.example.com offering h2,http/1.1 reached "
		     "route b (alpn = h2) with every byte");
	sni_hello("b.example.com", "h2,http/1.1", 0, 'b');
	pr_run(&sc);
}

/* The same name without h2: route b's ALPN condition fails, the default
 * takes it. */
Test(peer, sni_alpn_missing, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	SNI_SCENARIO("sni_alpn_missing", "a hello for b.example.com offering only http/1.1 "
		     "reached the default route with every byte");
	sni_hello("b.example.com", "http/1.1", 0, 'd');
	pr_run(&sc);
}

Test(peer, sni_none_to_default, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	SNI_SCENARIO("sni_none_to_default", "a hello without SNI (ALPN h2) reached the default "
		     "route with every byte");
	sni_hello(NULL, "h2", 0, 'd');
	pr_run(&sc);
}

/* Not TLS at all: each peer sees at the first byte that this is no
 * handshake record and passes it on at once. */
Test(peer, sni_plain_tcp_to_default, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: a.example.com\r\n\r\n";
	SNI_SCENARIO("sni_plain_tcp_to_default", "a plain HTTP request reached the default route "
		     "with every byte");
	memcpy(sni.buf, req, sizeof req - 1);
	sni.n = sizeof req - 1;
	sni.want = 'd';
	pr_run(&sc);
}

Test(peer, sni_hello_1_byte_per_segment, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	SNI_SCENARIO("sni_hello_1_byte_per_segment", "a hello for a.example.com sent one byte per "
		     "segment (1 ms apart) reached route a with every byte");
	sni_hello("a.example.com", NULL, 0, 'a');
	sni.piece = 1;
	sni.pause_ms = 1;
	pr_run(&sc);
}

/* A post-quantum-sized hello (over 2,000 bytes, one record) in three
 * segments 30 ms apart: the peer must wait for the whole record, not
 * decide on the first segment (the field's failure with X25519MLKEM768
 * hellos). HAProxy 2.6 passes: req.ssl_hello_type and req.ssl_sni answer
 * "may change" until the record's declared length is buffered. */
Test(peer, sni_big_hello_3_pieces, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	SNI_SCENARIO("sni_big_hello_3_pieces", "a 2,000+-byte hello for x.a.example.com in three "
		     "segments 30 ms apart reached route a with every byte");
	sni_hello("x.a.example.com", NULL, 20, 'a');
	H_CHECK(sni.n > 2000, "the big hello is only %zu bytes", sni.n);
	sni.piece = sni.n / 3 + 1;
	sni.pause_ms = 30;
	pr_run(&sc);
}

/* A hello for b.example.com (h2) in two records, cut `at` bytes into the
 * handshake message (0: in its middle). */
static void sni_two_records(size_t at)
{
	uint8_t one[4096];
	size_t n = tls_make_hello("b.example.com", "h2", 0, one, sizeof one);

	sni.n = tls_two_records(one, n, at ? at : (n - 5) / 2, sni.buf);
	sni.want = 'b';
}

/* One handshake message in two TLS records (RFC 8446 5.1 allows any cut),
 * the first holding two bytes: the handshake header itself is split.
 * HAProxy (2.6) parses the first record only: it finds no whole hello
 * there, so req.ssl_sni is empty and the default takes it (0/10). nginx's
 * ssl_preread and splicer reassemble the message across records. */
Test(peer, sni_two_records_cut_in_header, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	SNI_SCENARIO("sni_two_records_cut_in_header", "a hello for b.example.com (h2) in two "
		     "records, cut 2 bytes into the handshake header, reached route b");
	sni_two_records(2);
	pr_run(&sc);
}

/* The same cut in the middle of the message: the extensions, SNI among
 * them, are in the second record. HAProxy: as above, the default (0/10);
 * nginx and splicer: route b. */
Test(peer, sni_two_records_cut_in_middle, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	SNI_SCENARIO("sni_two_records_cut_in_middle", "a hello for b.example.com (h2) in two "
		     "records cut in the middle of the message reached route b");
	sni_two_records(0);
	pr_run(&sc);
}

/* 16 KiB that are not TLS (the first byte is no record type), a proxy's
 * whole inspection buffer: the default route gets them byte for byte. */
Test(peer, sni_garbage_16k_to_default, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	SNI_SCENARIO("sni_garbage_16k_to_default", "16 KiB of garbage reached the default route "
		     "byte for byte");
	h_gen(SEED_UP, 0, sni.buf, 16384);
	sni.buf[0] = 'G';
	sni.n = 16384;
	sni.want = 'd';
	pr_run(&sc);
}

/* A client that connects and says nothing. Delivered: the proxy ends the
 * connection (FIN or RST) with no backend's byte reaching the client, after
 * its hello wait of PR_HELLO_WAIT_S (label: how, and after how long).
 * Where they differ: HAProxy, once inspect-delay expires, runs its rules on
 * the empty buffer and connects the client to the default backend (->d
 * 2.0s: a server-first protocol could share the port that way, but a
 * silent client holds a backend connection); nginx (preread_timeout) and
 * splicer (tls_hello_timeout, counted in splicer_tls_hello_timeouts_total)
 * close it (fin 2.0s). */
static void sni_silent_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	int64_t t0 = h_now_ms(), deadline = deadline_of(c);
	int fd = pr_connect(c);
	char tag;

	if (fd < 0) {
		pr_how(out->how, "connect");
		return;
	}
	int rc = h_recv_exact(fd, &tag, 1, deadline);
	double s = (double)(h_now_ms() - t0) / 1000;
	close(fd);
	if (rc == 0) {
		pr_how(out->how, "->%c %.1fs", tag, s);
		return;
	}
	out->stalled = rc == -ETIMEDOUT;
	out->ok = rc == -ENODATA || rc == -ECONNRESET;
	pr_how(out->how, "%s %.1fs", rc == -ENODATA ? "fin" : pr_end_label(-rc), s);
}

Test(peer, sni_silent_client, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const struct pr_scenario sc = {
		.name = "sni_silent_client", .reps = SNI_REPS, .parallel = 1, .sni = 1,
		.deadline_ms = 3000 + PR_HELLO_WAIT_S * 1000,
		.direct_na = "no proxy: nothing waits for a hello",
		.delivered = "a client that sends nothing was closed by the proxy after its hello "
			     "wait (2 s), no backend reached (label: how, when; ->d: sent to the "
			     "default route)",
		.client = sni_silent_client,
	};
	pr_run(&sc);
}

/* After every test, before the runner's Synthesis line: the differential
 * table of this run (the rows each scenario appended to SPLICER_PEER_TABLE),
 * so `make test` shows it and still ends with the runner's summary. */
ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	const char *path = getenv("SPLICER_PEER_TABLE");
	char line[512];
	FILE *f;

	(void)stats;
	if (!path || !(f = fopen(path, "re")))
		return;
	fprintf(stderr, "Differential table (delivered/reps; ! = wrong bytes, n/a = engine not "
			"runnable here):\n");
	while (fgets(line, sizeof line, f))
		fputs(line, stderr);
	fclose(f);
}

/* ---- source addresses (issue 24) ---------------------------------------------- */

/* The backend answers with the address it sees, then closes. */
static void whois_backend(struct pr_col *c, int fd, struct pr_side *out)
{
	struct sockaddr_storage a;
	socklen_t l = sizeof a;
	struct h_addr h;
	char line[200];

	(void)c;
	if (getpeername(fd, (struct sockaddr *)&a, &l))
		return;
	h_addr_from(&h, (struct sockaddr *)&a, l);
	*strrchr(h.text, ':') = '\0';
	snprintf(line, sizeof line, "%s\n", h.text);
	h_send_all(fd, line, strlen(line), h_now_ms() + 2000);
	pr_how(out->how, "%.15s", h.text);
}

/* Connects to the column's front from `src` (a client of that address)
 * and reads the address its backend saw. */
static void whois_client(struct pr_col *c, const char *src, const char *want,
			 struct pr_rep *out)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char got[160] = "";
	size_t n = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, src, &sin.sin_addr);
	h_set_timeouts(fd, 2000);
	if (bind(fd, (struct sockaddr *)&sin, sizeof sin) ||
	    connect(fd, (struct sockaddr *)&c->front.ss, c->front.len)) {
		pr_how(out->how, "connect");
		close(fd);
		return;
	}
	while (n + 1 < sizeof got && recv(fd, got + n, 1, 0) == 1 && got[n] != '\n')
		n++;
	got[n] = '\0';
	close(fd);
	out->ok = !strcmp(got, want);
	pr_how(out->how, "%.15s", n ? got : "nothing");
}

/* source = ADDR: the backend sees the proxy's connection come from that
 * address (HAProxy `source`, nginx `proxy_bind`). direct: the client binds
 * it itself. */
static void source_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	(void)rep;
	whois_client(c, c->kind == PR_DIRECT ? "127.0.0.2" : "127.0.0.1", "127.0.0.2", out);
}

Test(peer, source_address, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const char *const args[] = { "--source", "127.0.0.2", NULL };
	static const struct pr_scenario sc = {
		.name = "source_address", .reps = REPS, .deadline_ms = 2000,
		.delivered = "the backend sees the connection come from 127.0.0.2",
		.backend = whois_backend, .client = source_client,
		.haproxy_backend = "    source 127.0.0.2\n",
		.nginx_server = "        proxy_bind 127.0.0.2;\n",
		.splicer_args = args,
	};
	pr_run(&sc);
}

/* Transparent mode: the backend sees the client's own address (HAProxy
 * `source 0.0.0.0 usesrc clientip`, nginx `proxy_bind $remote_addr
 * transparent`, splicer `source = client`). On loopback the client's
 * 127.0.0.7 is this host's, so no policy routing is needed; the
 * namespace case (tests/integration/test_sockets_ns.c) has the real one. */
static void transparent_client(struct pr_col *c, int rep, struct pr_rep *out)
{
	(void)rep;
	whois_client(c, "127.0.0.7", "127.0.0.7", out);
}

Test(peer, transparent_client_address, .init = h_init, .fini = pr_fini, .timeout = 120)
{
	static const char *const args[] = { "--source", "client", NULL };
	static const struct pr_scenario sc = {
		.name = "transparent_client_address", .reps = REPS, .deadline_ms = 2000,
		.delivered = "the backend sees the client's own address, 127.0.0.7",
		.backend = whois_backend, .client = transparent_client,
		.haproxy_backend = "    source 0.0.0.0 usesrc clientip\n",
		.nginx_server = "        proxy_bind $remote_addr transparent;\n",
		.splicer_args = args,
	};
	pr_run(&sc);
}
