/* access_log: see access_log.h. */
#define _GNU_SOURCE
#include "access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

enum { AL_OFF, AL_FD, AL_SYSLOG };

static int mode = AL_OFF;
static int fd = -1;          /* AL_FD: its number never changes while running */
static int owned;            /* fd is a file we opened (not stdout) */
static char path[256];

static int open_file(char *err, size_t errlen)
{
	int f = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);

	if (f < 0)
		snprintf(err, errlen, "access log %s: %s", path, strerror(errno));
	return f;
}

int access_log_open(const char *where, char *err, size_t errlen)
{
	access_log_close();
	if (!where[0] || !strcmp(where, "off"))
		return 0;
	if (!strcmp(where, "syslog")) {
		openlog("splicer", LOG_PID, LOG_DAEMON);
		mode = AL_SYSLOG;
		return 0;
	}
	if (!strcmp(where, "-")) {
		fd = STDOUT_FILENO;
		owned = 0;
		mode = AL_FD;
		return 0;
	}
	snprintf(path, sizeof(path), "%s", where);
	if ((fd = open_file(err, errlen)) < 0)
		return -1;
	owned = 1;
	mode = AL_FD;
	return 0;
}

int access_log_reopen(char *err, size_t errlen)
{
	int f;

	if (mode != AL_FD || !owned)
		return 0;
	if ((f = open_file(err, errlen)) < 0)
		return -1;
	/* Workers may be writing right now: dup2 swaps the file under the same
	 * number atomically, so a write goes wholly to the old or the new. */
	if (dup2(f, fd) < 0) {
		snprintf(err, errlen, "access log %s: dup2: %s", path, strerror(errno));
		close(f);
		return -1;
	}
	close(f);
	return 0;
}

int access_log_enabled(void)
{
	return mode != AL_OFF;
}

void access_log_session(const char *route, const char *client, const char *backend, uint64_t up,
			uint64_t down, uint64_t duration_ms, const char *reason)
{
	char line[768];
	struct timespec ts;
	struct tm tm;
	int n = 0;

	if (mode == AL_OFF)
		return;
	if (mode == AL_FD) {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = (int)strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
		n += snprintf(line + n, sizeof(line) - (size_t)n, ".%03ldZ ", ts.tv_nsec / 1000000);
	}
	n += snprintf(line + n, sizeof(line) - (size_t)n,
		      "route=%s client=%s backend=%s up=%llu down=%llu duration_ms=%llu reason=%s",
		      route, client, backend, (unsigned long long)up, (unsigned long long)down,
		      (unsigned long long)duration_ms, reason);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	if (mode == AL_SYSLOG) {
		syslog(LOG_INFO, "%s", line);
		return;
	}
	line[n++] = '\n';
	if (write(fd, line, (size_t)n) < 0) {
		/* a full disk must not stop forwarding; the line is lost */
	}
}

void access_log_close(void)
{
	if (mode == AL_FD && owned)
		close(fd);
	if (mode == AL_SYSLOG)
		closelog();
	mode = AL_OFF;
	fd = -1;
	owned = 0;
}
