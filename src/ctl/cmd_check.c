/* cmd_check: `splicer check -c FILE [options]` validates a config the way
 * the proxy would load it (same reader, same checks, options applied on top)
 * without binding anything:
 *   exit 0  "FILE: ok: 2 routes, 3 listen addresses, 5 backends"
 *   exit 1  one "FILE:LINE: message" per problem
 *   exit 2  a bad command line */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "config.h"

int cmd_check(int argc, char **argv)
{
	struct config cfg;
	unsigned listens = 0, backends = 0;
	int r, has_file = 0;

	for (int i = 2; i < argc; i++)
		has_file |= !strcmp(argv[i], "-c") || !strcmp(argv[i], "--config") ||
			    !strncmp(argv[i], "--config=", 9);
	if (!has_file) {
		fprintf(stderr, "usage: %s check -c FILE [options]\n", argv[0]);
		return 2;
	}
	config_defaults(&cfg);
	r = config_parse_args(&cfg, argc, argv, 2);
	if (r > 0) {
		config_free(&cfg);
		return 0;
	}
	if (r < 0 || config_finalize(&cfg)) {
		config_free(&cfg);
		return 1;
	}
	for (unsigned i = 0; i < cfg.nroutes; i++) {
		listens += cfg.route[i]->nlisten;
		backends += cfg.route[i]->nbackend;
	}
	printf("%s: ok: %u route%s, %u listen address%s, %u backend%s\n", cfg.file, cfg.nroutes,
	       cfg.nroutes == 1 ? "" : "s", listens, listens == 1 ? "" : "es", backends,
	       backends == 1 ? "" : "s");
	config_free(&cfg);
	return 0;
}
