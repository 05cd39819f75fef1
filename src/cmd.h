/* cmd: subcommands other than the proxy itself. */
#ifndef SPLICER_CMD_H
#define SPLICER_CMD_H

/* splicer demo: the main job on an embedded default (see cmd_demo.c). */
int cmd_demo(int argc, char **argv);

#endif
