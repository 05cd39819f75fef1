/* main: command dispatch and the proxy's process life: parse options, probe
 * the engines, bind listeners, start workers, then wait for signals.
 *   splicer -l 127.0.0.1:8080 -b 10.0.0.1:80 -b 10.0.0.2:80 --engine auto
 *   splicer demo                                                           */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "config.h"
#include "engine.h"
#include "listener.h"
#include "log.h"
#include "units.h"
#include "worker.h"

static void log_startup(const struct config *c, unsigned pipe_actual)
{
	char backends[1024] = "", listens[512] = "", psz[16], bsz[16], lw[16];
	size_t n = 0;

	for (unsigned i = 0; i < c->nbackend && n < sizeof(backends); i++)
		n += (size_t)snprintf(backends + n, sizeof(backends) - n, "%s%s", i ? "," : "",
				      c->backend[i].text);
	n = 0;
	for (unsigned i = 0; i < c->nlisten && n < sizeof(listens); i++)
		n += (size_t)snprintf(listens + n, sizeof(listens) - n, "%s%s", i ? ", " : "",
				      c->listen[i].text);
	format_size(c->buffer_size, bsz, sizeof(bsz));
	format_size(pipe_actual ? pipe_actual : c->pipe_size, psz, sizeof(psz));
	format_size(c->lowat, lw, sizeof(lw));
	log_info("splicer %s: route default: %s -> %s (roundrobin); engine %s; workers %llu; "
		 "buffer %s; pipe %s; lowat %s; busy-poll %llu us; max-conns %llu; max-pipes %llu",
		 SPLICER_VERSION, listens, backends, engine_names[c->engine],
		 (unsigned long long)c->workers, bsz, psz, c->lowat ? lw : "off",
		 (unsigned long long)c->busy_poll_us, (unsigned long long)c->max_conns,
		 (unsigned long long)c->max_pipes);
	log_info("ready: listening on %s", listens);
}

static void log_totals(struct worker *ws, unsigned n)
{
	struct counters t = { 0 };

	for (unsigned i = 0; i < n; i++) {
		uint64_t *dst = (uint64_t *)&t;
		const uint64_t *src = (const uint64_t *)&ws[i].ctr;
		for (size_t k = 0; k < sizeof(t) / sizeof(uint64_t); k++)
			dst[k] += __atomic_load_n(&src[k], __ATOMIC_RELAXED);
	}
	log_info("stopped: sessions %llu (no-backend %llu, idle-timeout %llu); bytes up %llu down %llu "
		 "(copied %llu, spliced %llu); auto switches %llu; splice fallbacks %llu; "
		 "connect errors %llu, retries %llu; resets sent %llu; accept pauses fd %llu max-conns %llu",
		 (unsigned long long)t.accepted, (unsigned long long)t.no_backend,
		 (unsigned long long)t.idle_timeouts, (unsigned long long)t.bytes_up,
		 (unsigned long long)t.bytes_down, (unsigned long long)t.bytes_copied,
		 (unsigned long long)t.bytes_spliced, (unsigned long long)t.auto_switches,
		 (unsigned long long)t.splice_fallbacks, (unsigned long long)t.connect_errors,
		 (unsigned long long)t.connect_retries, (unsigned long long)t.resets_sent,
		 (unsigned long long)t.accept_fd_pauses, (unsigned long long)t.max_conns_pauses);
}

/* What F_SETPIPE_SZ grants for the configured size: the kernel may refuse
 * it (fs.pipe-max-size for unprivileged users, fs.pipe-user-pages-soft),
 * and the operator should hear so once, at startup. */
static unsigned granted_pipe_size(const struct config *cfg)
{
	int p[2], got;

	if (pipe2(p, O_CLOEXEC))
		return 0;
	if (cfg->pipe_size && fcntl(p[1], F_SETPIPE_SZ, (int)cfg->pipe_size) < 0)
		log_warn("pipe size %llu refused (%s; see /proc/sys/fs/pipe-max-size and "
			 "fs.pipe-user-pages-soft): pipes keep the kernel's size",
			 (unsigned long long)cfg->pipe_size, strerror(errno));
	got = fcntl(p[1], F_GETPIPE_SZ);
	close(p[0]);
	close(p[1]);
	return got > 0 ? (unsigned)got : 0;
}

/* Runs the proxy until SIGTERM/SIGINT and the drain that follows. */
static int run_proxy(struct config *cfg)
{
	struct shared sh = { .cfg = cfg };
	struct worker *ws;
	int (*fds)[MAX_LISTENS];
	char *joined; /* a thread may be joined once only */
	char err[256];
	sigset_t sigs;
	unsigned started = 0;
	int rc = 0;

	if (cfg->engine != ENGINE_COPY && engine_splice.probe(err, sizeof(err))) {
		log_warn("splice engine unavailable (%s): using copy", err);
		cfg->engine = ENGINE_COPY;
	}
	/* Signals go to this thread only, through sigtimedwait(). splice()
	 * into a socket the peer closed raises SIGPIPE: ignore it, the EPIPE
	 * return is handled. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	ws = calloc(cfg->workers, sizeof(*ws));
	fds = calloc(cfg->workers, sizeof(*fds));
	joined = calloc(cfg->workers, 1);
	if (!ws || !fds || !joined) {
		fprintf(stderr, "splicer: out of memory\n");
		return 1;
	}
	for (unsigned l = 0; l < cfg->nlisten; l++) {
		int tmp[256];
		if (listener_open_n(&cfg->listen[l], (unsigned)cfg->workers, tmp, err, sizeof(err))) {
			log_err("%s", err);
			return 1;
		}
		for (unsigned i = 0; i < cfg->workers; i++)
			fds[i][l] = tmp[i];
	}
	for (unsigned i = 0; i < cfg->workers; i++) {
		int r = worker_init(&ws[i], i, &sh, fds[i]);
		if (r) {
			log_err("worker %u: %s", i, strerror(-r));
			return 1;
		}
	}
	for (; started < cfg->workers; started++)
		if ((errno = pthread_create(&ws[started].thread, NULL, worker_main, &ws[started]))) {
			log_err("pthread_create: %s", strerror(errno));
			rc = 1;
			break;
		}
	log_startup(cfg, cfg->engine == ENGINE_COPY ? 0 : granted_pipe_size(cfg));

	for (int stopping = 0; started;) {
		struct timespec tick = { 0, 100 * 1000 * 1000 };
		int sig = sigtimedwait(&sigs, NULL, &tick);
		unsigned alive = 0;

		if (sig == SIGTERM || sig == SIGINT) {
			uint64_t now = now_monotonic_ms();
			if (!stopping) {
				log_info("%s: stopping: no new connections; draining sessions for up to %llu ms",
					 sig == SIGTERM ? "SIGTERM" : "SIGINT",
					 (unsigned long long)cfg->drain_timeout_ms);
				__atomic_store_n(&sh.drain_deadline_ms, now + cfg->drain_timeout_ms,
						 __ATOMIC_RELAXED);
			} else {
				log_info("second signal: closing every session now");
				__atomic_store_n(&sh.drain_deadline_ms, now, __ATOMIC_RELAXED);
			}
			stopping = 1;
			__atomic_store_n(&sh.stopping, 1, __ATOMIC_RELEASE);
			for (unsigned i = 0; i < started; i++)
				worker_wake(&ws[i]);
		} else if (sig == SIGHUP) {
			log_warn("SIGHUP: reload needs a config file (-c), which this build lacks; ignored");
		}
		if (!stopping)
			continue;
		for (unsigned i = 0; i < started; i++) {
			if (!joined[i] && pthread_tryjoin_np(ws[i].thread, NULL) == 0)
				joined[i] = 1;
			alive += !joined[i];
		}
		if (!alive)
			break;
	}
	log_totals(ws, (unsigned)cfg->workers);
	for (unsigned i = 0; i < cfg->workers; i++)
		worker_destroy(&ws[i]);
	for (unsigned l = 0; l < cfg->nlisten; l++)
		listener_unlink(&cfg->listen[l]);
	free(ws);
	free(fds);
	free(joined);
	return rc;
}

int main(int argc, char **argv)
{
	struct config cfg;
	int r;

	if (argc > 1 && !strcmp(argv[1], "demo"))
		return cmd_demo(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "bench"))
		return cmd_bench(argc, argv);

	config_defaults(&cfg);
	r = config_parse_args(&cfg, argc, argv, 1);
	if (r)
		return r > 0 ? 0 : 2;
	if (config_finalize(&cfg))
		return 2;
	log_level = LOG_INFO + (int)cfg.verbose > LOG_DEBUG ? LOG_DEBUG : LOG_INFO + (int)cfg.verbose;
	return run_proxy(&cfg);
}
