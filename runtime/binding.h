/* binding.h - the binding file: which task of a Slurm step runs which rank of the plan, on
 * which node and GPU. Written by `hetpipe launch` next to the plan; read by the SPANK plugin
 * in slurmstepd (to bind each task to its GPU) and by hetpipe-rank (to find its rank and to
 * check the plan against what the step really has).
 *
 *   # hetpipe binding: TASK NODE DEVICE ROLE
 *   0 node1 0 vw0.stage0
 *   4 node1 - ps0
 *
 * TASK is the task's global id in the step (SLURM_PROCID, the PMIx rank), NODE the Slurm node
 * name, DEVICE the GPU index as Slurm numbers it (gres_detail_str's IDX, SLURM_STEP_GPUS) or
 * '-' for a task without GPU, ROLE vwV.stageS or psP (the plan's rank follows from it).
 */
#ifndef HP_BINDING_H
#define HP_BINDING_H

#include "plan.h"

struct hp_binding {
    int task;
    int rank;   /* the plan's rank of ROLE */
    int device; /* -1: none */
    char node[HP_NODE_NAME_MAX];
    char role[32];
};

/* Rank of a role ("vw1.stage0", "ps2") in plan p, or -1. */
int hp_binding_role_rank(const struct hp_plan *p, const char *role);

/* Write n entries (task order) to path atomically (temp file, rename), mode 0644: slurmstepd
 * reads it as root, the ranks as the user. 0 or -errno (logged). */
int hp_binding_save(const char *path, const struct hp_binding *b, int n);

/* Read path for plan p: exactly p->nranks entries, tasks 0..n-1 each once, every role a rank
 * of p, each rank once. *out is caller-owned (free), indexed by task. 0 or -HP_ECONFIG with
 * the file, line and problem logged. */
int hp_binding_load(const char *path, const struct hp_plan *p, struct hp_binding **out);

#endif
