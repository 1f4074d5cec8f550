/* cmd_report.c - `hetpipe report`: one self-contained HTML page about a finished job, from its
 * run directory (jobreport.h). */
#include "commands.h"
#include "jobreport.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

static const char synopsis[] =
    "usage: hetpipe report RUN_DIR|JOB_DIR [MORE_RUN_DIRS...] [--out FILE] [--config FILE]\n"
    "Write one HTML page about the finished job in RUN_DIR (hetpipe run --run-dir DIR or --keep,\n"
    "or hetpipe launch's job directory): the job, warnings, predicted against measured\n"
    "throughput, pictures of its pipeline, loss and accuracy and plan, from its plan.ini,\n"
    "stats.R, metrics.csv, timeline.R and rank-R.log files. The other run directories are drawn\n"
    "as extra loss and accuracy curves. A job directory with later runs of the job in run-1,\n"
    "run-2, ... (a requeued job) gets one page over every run. The page goes to\n"
    "RUN_DIR/report.html unless --out.\n";

int hp_cmd_report_html(int argc, char **argv)
{
    struct hp_options o;
    int rest, rc = hp_cmd_options(HP_CMD_REPORT, synopsis, argc, argv, &o, 1, &rest);
    char out[4200];

    if (rc >= 0)
        return rc;
    if (rest >= argc) {
        hp_error("report: give the run directory of a job (hetpipe report RUN_DIR; see hetpipe "
                 "report --help)");
        return 2;
    }
    rc = hp_report_write(argv[rest], (const char *const *)argv + rest + 1, argc - rest - 1, o.out,
                         o.config);
    if (rc)
        return 1; /* logged where it was first known */
    if (o.out) {
        snprintf(out, sizeof(out), "%s", o.out);
    } else {
        size_t n = strlen(argv[rest]);
        while (n > 1 && argv[rest][n - 1] == '/')
            n--;
        snprintf(out, sizeof(out), "%.*s/report.html", (int)n, argv[rest]);
    }
    printf("report: wrote %s\n", out);
    return 0;
}
