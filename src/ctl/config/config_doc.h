/* SPDX-License-Identifier: MIT */
/* config_doc: the configuration reference, printed from the settings table
 * (config.c), the engine registry and the keys config_file.c reads itself
 * (sections, listen, backend), so the documentation cannot drift from the
 * parser. `make doc` puts its output between the marker lines of
 * doc/configuration.md and doc/splicer.conf.5; tests/integration/test_docs.c
 * fails when what is there differs from what the binary prints. */
#ifndef SPLICER_CONFIG_DOC_H
#define SPLICER_CONFIG_DOC_H
#include <stdio.h>

/* Writes the reference as markdown (doc/configuration.md's generated part)
 * or as roff (splicer.conf(5)'s OPTIONS). Returns 0, or -1 after naming on
 * stderr a table row whose example value its own parser refuses. */
int config_doc_markdown(FILE *f);
int config_doc_man(FILE *f);

/* For --help: the keys only a config file has (listen, backend, sni, alpn,
 * allow, deny), "KEY = PLACEHOLDER ..." one a line from column indent,
 * wrapped before column width. */
void config_doc_help_route_keys(FILE *f, int indent, int width);

/* splicer config-reference [--man]: the above on stdout (hidden: for
 * `make doc` and the test). Exit 0, 1 on a bad example, 2 on bad usage. */
int cmd_config_reference(int argc, char **argv);

#endif
