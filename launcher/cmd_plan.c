/* cmd_plan.c - `hetpipe plan`: plan virtual workers, stages, Nm and parameter placement for a
 * cluster, print the plan and write the plan file (planjob.h, planfile.h). */
#include "commands.h"
#include "log.h"
#include "planfile.h"
#include "planjob.h"

#include <stdio.h>

static const char synopsis[] =
    "usage: hetpipe plan --cluster FILE|NAME [options]\n"
    "Plan virtual workers, their stages and Nm, and the parameter placement of a model on a\n"
    "cluster; print the plan and the predicted throughput.\n";

int hp_cmd_plan(int argc, char **argv)
{
    struct hp_options o;
    struct hp_job job;
    int rc = hp_cmd_options(HP_CMD_PLAN, synopsis, argc, argv, &o, 0, NULL);

    if (rc >= 0)
        return rc;
    if (!o.cluster) {
        hp_error("plan: option '--cluster FILE' is required (see etc/clusters/)");
        return 2;
    }
    rc = hp_job_plan(&o, NULL, &job);
    if (!rc && !o.quiet) {
        if (o.profile)
            printf("profile %s: measured times for %d of %d units\n", o.profile, job.profiled,
                   job.model->nunits);
        hp_job_print(&job, stdout);
    }
    if (!rc && o.out) {
        rc = hp_planfile_save(o.out, &job.plan, &job.cl, &job.db, job.token);
        if (!rc && !o.quiet)
            printf("plan written to %s\n", o.out);
    }
    hp_job_release(&job);
    return rc ? 1 : 0;
}
