/* cmd_timeline.c - `hetpipe timeline RUN_DIR [--out FILE]`: the timeline parts a job's ranks
 * wrote (--timeline) merged into one Chrome trace-event JSON file (tlmerge.h). hetpipe run
 * merges them itself; a hetpipe launch job (whose launcher hands over to srun) is merged after
 * it ends with this command, or by hetpipe report. */
#include "commands.h"
#include "error.h"
#include "ini.h"
#include "log.h"
#include "tlmerge.h"

#include <stdio.h>

static const char synopsis[] =
    "usage: hetpipe timeline RUN_DIR|JOB_DIR [--out FILE]\n"
    "Merge the timeline parts of a job run with --timeline (RUN_DIR/timeline.RANK) into one\n"
    "Chrome trace (default RUN_DIR/timeline.json) that Perfetto or chrome://tracing opens.\n";

int hp_tl_ranks_of(const char *dir, int *nranks)
{
    char path[4200];
    struct hp_ini *ini = NULL;
    long n = 0;
    int rc;

    snprintf(path, sizeof(path), "%s/plan.ini", dir);
    rc = hp_ini_load(path, &ini);
    if (!rc)
        rc = hp_ini_get_long(ini, "plan", "ranks", 1, 0, 1, 1 << 24, &n);
    hp_ini_destroy(ini);
    if (rc) {
        hp_error("timeline: '%s' is not a run or job directory: its plan.ini (with the job's "
                 "ranks) cannot be read",
                 dir);
        return -HP_ECONFIG;
    }
    *nranks = (int)n;
    return 0;
}

int hp_cmd_timeline(int argc, char **argv)
{
    struct hp_options o;
    char prefix[4200], out[4200];
    int first = 0, nranks = 0;
    int rc = hp_cmd_options(HP_CMD_TIMELINE, synopsis, argc, argv, &o, 1, &first);

    if (rc >= 0)
        return rc;
    if (first != argc - 1) {
        hp_error("timeline: give one run or job directory (got %d arguments)", argc - first);
        return 2;
    }
    const char *dir = argv[first];
    if (hp_tl_ranks_of(dir, &nranks))
        return 1;
    snprintf(prefix, sizeof(prefix), "%s/timeline", dir);
    snprintf(out, sizeof(out), "%s/timeline.json", dir);
    return hp_tl_merge(prefix, nranks, o.out ? o.out : out) ? 1 : 0;
}
