/* access_log: one line per session, for operators and log pipelines:
 *   2026-12-03T08:30:00.123Z route=web client=192.0.2.7:51514 backend=10.0.0.1:80
 *   up=1043 down=88211 duration_ms=35 reason=done
 * (one line; key=value, values without spaces). Lines go through a bounded
 * queue to a writer thread of their own (log.h: struct log_sink), so a disk,
 * pipe, FIFO or syslog that stalls drops lines (counted in
 * splicer_log_lines_dropped_total{log="access"}) and never stalls a worker.
 * The descriptor is O_APPEND, so a line is never split; SIGUSR1 reopens the
 * file in place (dup2 over the same descriptor number), so logrotate can
 * move it without a lost or split line.
 *
 * Escaping: every value is written with each byte outside printable ASCII
 * (0x20-0x7e), and each space, backslash and double quote, as \xHH (two
 * lowercase hex digits). Client addresses come from the network (a PROXY v2
 * AF_UNIX source path may hold any byte, newlines included): escaped, a
 * forged "\n route=x" stays inside its own field of its own line. */
#ifndef SPLICER_ACCESS_LOG_H
#define SPLICER_ACCESS_LOG_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Starts logging to where ("FILE", "-" for stdout, "syslog"; "off" or ""
 * logs nothing). A FIFO without a reader is an error, not a wait: the open
 * never blocks. Returns 0, or -1 with the reason in err. */
int access_log_open(const char *where, char *err, size_t errlen);

/* For `user =`, before root is dropped: hands the file to uid:gid, so the
 * user can reopen it after a rotation that recreates it with the same
 * owner. Returns 0; 1 with a warning in err when the file's directory is
 * not writable for that user (SIGUSR1 then cannot create a new file);
 * -1 with the reason in err. */
int access_log_chown(uid_t uid, gid_t gid, char *err, size_t errlen);

/* Reopens the file (SIGUSR1). Returns 1 when a file was reopened, 0 when
 * there is nothing to reopen (stdout, syslog, off), or -1 with the reason
 * in err (the old file stays in use). */
int access_log_reopen(char *err, size_t errlen);

/* 1 when a line would go somewhere. */
int access_log_enabled(void);

void access_log_session(const char *route, const char *client, const char *backend, uint64_t up,
			uint64_t down, uint64_t duration_ms, const char *reason);

/* Lines dropped because the sink could not keep up. */
uint64_t access_log_dropped(void);

/* Writes what is queued (waiting at most timeout_ms) and closes. */
void access_log_close(void);

#endif
