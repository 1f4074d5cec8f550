/* commands.h - the hetpipe subcommands, one file each (cmd_NAME.c), dispatched by main.c.
 *
 * Each takes argv with argv[0] its own name and returns the exit status: 0 on success, 1 on
 * a failure (logged where it was first known), 2 for a bad command line. Their options, with
 * limits, defaults and help, come from the table of record (common/options.h).
 */
#ifndef HP_COMMANDS_H
#define HP_COMMANDS_H

#include "options.h"

int hp_cmd_train(int argc, char **argv);
int hp_cmd_model(int argc, char **argv);
int hp_cmd_time(int argc, char **argv);
int hp_cmd_plan(int argc, char **argv);
int hp_cmd_profile(int argc, char **argv);
int hp_cmd_run(int argc, char **argv);
int hp_cmd_launch(int argc, char **argv);
/* hetpipe doctor: one line per check; 0 without a FAIL, 1 with one, 2 for a bad option. */
int hp_cmd_doctor(int argc, char **argv);
/* hetpipe report: the HTML page of a finished job (jobreport.h). */
int hp_cmd_report_html(int argc, char **argv);
int hp_cmd_timeline(int argc, char **argv);
/* hetpipe data check|pack: a data set's contents; an image folder into tar shards. */
int hp_cmd_data(int argc, char **argv);

/* Command cmd's command line into o (set to cmd's defaults first), through the table; no
 * argument may follow the options unless `args` (then *rest is the first); --threads applied.
 * -1 to go on, else the exit status to return: 0 after --help, 2 for a bad command line
 * (logged). */
int hp_cmd_options(enum hp_cmd cmd, const char *synopsis, int argc, char **argv,
                   struct hp_options *o, int args, int *rest);

/* Report a failure code that was returned without a message (out of memory, a failed write),
 * so that no failure goes unexplained; others were logged where they were first known. */
void hp_cmd_report(const char *cmd, int rc);

#endif
