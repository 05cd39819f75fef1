/* SPDX-License-Identifier: MIT */
/* cmd: subcommands other than the proxy itself. */
#ifndef SPLICER_CMD_H
#define SPLICER_CMD_H

/* splicer demo: the main job on an embedded default (see cmd_demo.c). */
int cmd_demo(int argc, char **argv);

/* splicer bench: splicer's engines beside HAProxy, nginx and socat (cmd_bench.c). */
int cmd_bench(int argc, char **argv);

/* splicer check -c FILE: validates a config; FILE:LINE: message per problem
 * and exit 1, or a one-line summary and exit 0 (cmd_check.c). */
int cmd_check(int argc, char **argv);

/* splicer recv LISTEN FILE: accepts connections and writes their bytes into
 * FILE with splice, vmsplice or read/write, and reports (cmd_recv.c). */
int cmd_recv(int argc, char **argv);

/* splicer send FILE ADDRESS: sends FILE with sendfile, splice or read/write,
 * and reports (cmd_send.c). */
int cmd_send(int argc, char **argv);

#endif
