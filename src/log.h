/* log: leveled lines on stderr, one write() per line so lines from several
 * workers never interleave. The level is checked in the macro, so a disabled
 * debug line costs one compare and no formatting. */
#ifndef SPLICER_LOG_H
#define SPLICER_LOG_H

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_VERBOSE, LOG_DEBUG };

extern int log_level; /* lines above this level are dropped; -v raises it */

void log_line(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_at(lvl, ...)                                                                  \
	do {                                                                              \
		if ((lvl) <= log_level)                                                   \
			log_line((lvl), __VA_ARGS__);                                     \
	} while (0)
#define log_err(...)     log_at(LOG_ERR, __VA_ARGS__)
#define log_warn(...)    log_at(LOG_WARN, __VA_ARGS__)
#define log_info(...)    log_at(LOG_INFO, __VA_ARGS__)
#define log_verbose(...) log_at(LOG_VERBOSE, __VA_ARGS__)
#define log_debug(...)   log_at(LOG_DEBUG, __VA_ARGS__)

/* For states that cannot happen: logs and aborts. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
