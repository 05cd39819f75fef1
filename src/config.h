/* config: the settings of a run and the one table that describes them. The
 * table (name, type, range, default, help) drives command-line parsing and
 * --help, so an option cannot exist in one and be missing from the other. */
#ifndef SPLICER_CONFIG_H
#define SPLICER_CONFIG_H
#include <stddef.h>
#include <stdint.h>

#include "addr.h"

#define MAX_LISTENS  16
#define MAX_BACKENDS 64

/* An "auto" setting before config_finalize() resolves it. */
#define SETTING_AUTO UINT64_MAX

enum engine_kind { ENGINE_AUTO, ENGINE_COPY, ENGINE_SPLICE };
extern const char *const engine_names[]; /* indexed by enum engine_kind */

struct config {
	struct addr listen[MAX_LISTENS];   /* one route: its listeners ... */
	unsigned nlisten;
	struct addr backend[MAX_BACKENDS]; /* ... and its backends, in round-robin order */
	unsigned nbackend;
	uint64_t engine;             /* enum engine_kind */
	uint64_t workers;            /* worker threads; SETTING_AUTO = one per CPU */
	uint64_t buffer_size;        /* copy engine buffer per direction */
	uint64_t pipe_size;          /* splice engine pipe size; 0 = kernel default */
	uint64_t lowat;              /* SO_RCVLOWAT on spliced sources; 0 = off */
	uint64_t busy_poll_us;       /* poll without sleeping this long after an event; 0 = off */
	uint64_t max_pipes;          /* pipes per process; SETTING_AUTO = from the fd limit */
	uint64_t max_conns;          /* concurrent sessions; SETTING_AUTO = from the fd limit */
	uint64_t connect_timeout_ms; /* per backend attempt */
	uint64_t idle_timeout_ms;    /* no byte either way for this long closes a session */
	uint64_t drain_timeout_ms;   /* SIGTERM: how long running sessions may finish */
	uint64_t verbose;            /* -v count */
};

/* Fills *c with every default. */
void config_defaults(struct config *c);

/* Parses argv[first..argc) into *c. Returns 0 to run, 1 when --help or
 * --version was printed (exit 0), -1 after printing a one-line error naming
 * the option and the value (exit 2). */
int config_parse_args(struct config *c, int argc, char **argv, int first);

/* Resolves the derived values (workers, max_conns, max_pipes) against the
 * CPU count and RLIMIT_NOFILE, and checks what the options cannot check one
 * by one. Returns 0 or -1 after printing why. */
int config_finalize(struct config *c);

void config_print_help(const char *prog);

#endif
