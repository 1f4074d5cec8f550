/* layout.h - how hetpipe launch lays a plan's ranks out as the tasks of one Slurm step.
 *
 * Tasks are numbered node by node in the allocation's order (hetjob component by component);
 * on a node, its GPU stages (in rank order), then its PS shard. A job that is not a hetjob
 * gets one step with `-m arbitrary` and SLURM_HOSTFILE (task i on line i's node), which allows
 * any number of tasks per node. A hetjob gets one step component per job component
 * (`srun A : B`), each with -w its nodes and --ntasks-per-node, block layout, so every node of
 * a component must carry the same number of tasks (Slurm cannot place tasks unevenly inside a
 * het step component). Either way the binding file (binding.h) says which role each task runs;
 * hetpipe-rank and the SPANK plugin check it against what the task really got.
 */
#ifndef HP_LAYOUT_H
#define HP_LAYOUT_H

#include "binding.h"
#include "gpudb.h"
#include "plan.h"
#include "slurm.h"

struct hp_layout {
    struct hp_binding *b; /* [ntasks], task order */
    int ntasks;
    int *node_tasks; /* [a->nnodes]: tasks on each allocation node */
};

/* Every GPU and PS shard of plan p (from plan_path, for messages) must be where allocation a
 * has it: the node in the job, the device among the node's allocated GPUs, the same type. 0, or
 * -HP_ECONFIG with a message naming both sides. */
int hp_layout_check(const char *plan_path, const struct hp_plan *p, const struct hp_cluster *cl,
                    const struct hp_gpudb *db, const struct hp_alloc *a);

/* Number the tasks (above); *L caller-owned (hp_layout_release). 0 or a negative code (logged). */
int hp_layout_make(const struct hp_plan *p, const struct hp_cluster *cl, const struct hp_alloc *a,
                   struct hp_layout *L);
void hp_layout_release(struct hp_layout *L);

/* The host file of SLURM_HOSTFILE: task t's node on line t. 0, or -1 (logged). */
int hp_layout_write_hostfile(const char *path, const struct hp_layout *L);

/* srun's component options for a hetjob, appended to av: per job component -w its task
 * nodes, -N, -n, --ntasks-per-node, components separated by ':'. 0, or -1 (logged) when a
 * component's nodes carry unequal task counts or none. */
int hp_layout_het_args(const struct hp_alloc *a, const struct hp_layout *L, const char **av,
                       int *ac);

/* A printf-formatted string that lives until the process execs or exits (srun's argv). */
const char *hp_keep(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
