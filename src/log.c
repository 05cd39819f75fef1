/* log: see log.h. Format: "2026-12-02T18:30:00.123Z splicer[PID] LEVEL: message". */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int log_level = LOG_INFO;

static const char *const level_names[] = { "error", "warning", "info", "verbose", "debug" };

static void vlog(enum log_level lvl, const char *fmt, va_list ap)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = (int)strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += snprintf(line + n, sizeof(line) - (size_t)n, ".%03ldZ splicer[%d] %s: ",
		      ts.tv_nsec / 1000000, (int)getpid(), level_names[lvl]);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
}

void log_line(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(lvl, fmt, ap);
	va_end(ap);
}

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_ERR, fmt, ap);
	va_end(ap);
	abort();
}
