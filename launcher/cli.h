/* cli.h - the hetpipe subcommands implemented outside hetpipe.c, and what they share. */
#ifndef HP_CLI_H
#define HP_CLI_H

#include <stddef.h>

/* hetpipe plan (argv[0] is the command name); its exit status. */
int hp_cmd_plan(int argc, char **argv);

/* hetpipe launch (launch.c); its exit status. */
int hp_cmd_launch(int argc, char **argv);

/* hetpipe doctor (doctor.c): check the installation, one line per check; 0 without a FAIL,
 * 1 with one, 2 for a bad option. */
int hp_cmd_doctor(int argc, char **argv);

/* The hetpipe-rank program next to this hetpipe (or $HETPIPE_RANK_BIN) into buf; 0, or -1
 * with an error naming `cmd` when it is not executable. */
int hp_rank_binary(const char *cmd, char *buf, size_t n);

#endif
