/* cli.h - command lines from the options table (options.h): the getopt_long option list of a
 * command, its usage text, the HETPIPE_* variables of its options, and the arguments with
 * which hetpipe run and hetpipe launch hand their options on to every rank. Shared by the
 * hetpipe command and hetpipe-rank; errors are logged (log.h).
 */
#ifndef HP_CLI_H
#define HP_CLI_H

#include "options.h"

#include <stddef.h>
#include <stdio.h>

/* "train", "plan", ..., "hetpipe-rank": how messages name command cmd. */
const char *hp_cli_name(enum hp_cmd cmd);

/* Parse argv (argv[0]: the command's name) for command cmd into o, which holds cmd's defaults
 * (hp_options_init). Every option of the table that cmd takes is accepted, as --name value or
 * --name=value (getopt_long), and --help, which prints cmd's usage (synopsis, then the
 * options) to stdout. Returns 0 with *rest the index of the first argument that is not an
 * option, 1 after --help, or -1 after a logged error naming the option and what it allows
 * (exit status 2). */
int hp_cli_parse(enum hp_cmd cmd, const char *synopsis, int argc, char **argv, struct hp_options *o,
                 int *rest);

/* The usage text: synopsis (its own lines), then one entry per option of cmd with its value,
 * help, allowed values, cmd's default and the variable cmd reads for it, then the variables
 * cmd reads that stand for no option ("environment:"), all from the table. */
void hp_cli_usage(FILE *f, enum hp_cmd cmd, const char *synopsis);

/* For every option of cmd that o does not have from the command line and whose variable cmd
 * reads (the row's env_cmds: job options in hetpipe launch, where the SPANK plugin sets
 * them; --rank and --boot-dir in hetpipe-rank, ...), the variable through hp_opt_env (unset
 * or empty: the default stays). Variables that stand for no option are read where they are
 * used, through hp_opt_env too. Hard limits (the site's are the plugin's, at submit). 0, or
 * -1 logged naming the variable and what it allows. */
int hp_cli_from_env(struct hp_options *o, enum hp_cmd cmd);

/* Append "--flag value" (a flag alone) for every option of cmd that run and launch hand on to
 * the ranks (HP_OPTF_PASS) and that the user gave or whose default for cmd is not the rank's,
 * formatted from o (so the rank reads the same values). The strings go into store (size n,
 * caller-owned, outliving av); av gets at most max entries in all and a NULL after the last. 0, or
 * -1 logged when they do not fit. */
int hp_cli_rank_args(const struct hp_options *o, enum hp_cmd cmd, const char **av, int *ac, int max,
                     char *store, size_t n);

#endif
