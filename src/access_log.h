/* access_log: one line per session, for operators and log pipelines:
 *   2026-12-03T08:30:00.123Z route=web client=192.0.2.7:51514 backend=10.0.0.1:80
 *   up=1043 down=88211 duration_ms=35 reason=done
 * (one line; key=value, values without spaces). Written with one write() on
 * an O_APPEND descriptor, so lines from several workers never interleave;
 * SIGUSR1 reopens the file in place (dup2 over the same descriptor number),
 * so logrotate can move it without a lost or split line. */
#ifndef SPLICER_ACCESS_LOG_H
#define SPLICER_ACCESS_LOG_H
#include <stddef.h>
#include <stdint.h>

/* Starts logging to where ("FILE", "-" for stdout, "syslog"; "off" or ""
 * logs nothing). Returns 0, or -1 with the reason in err. */
int access_log_open(const char *where, char *err, size_t errlen);

/* Reopens the file (SIGUSR1). Returns 0, or -1 with the reason in err (the
 * old file stays in use). A no-op for stdout, syslog and off. */
int access_log_reopen(char *err, size_t errlen);

/* 1 when a line would go somewhere. */
int access_log_enabled(void);

void access_log_session(const char *route, const char *client, const char *backend, uint64_t up,
			uint64_t down, uint64_t duration_ms, const char *reason);

void access_log_close(void);

#endif
