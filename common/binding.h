/* binding.h - the binding file: which task of a Slurm step runs which role of the plan, on
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
 * '-' for a task without GPU, ROLE vwV.stageS or psP (plan.h maps it to a rank).
 *
 * libc only: the plugin links this module inside slurmstepd, so nothing here logs; a failure
 * is described in the caller's buffer (err, errlen: always terminated) and -1 is returned.
 */
#ifndef HP_BINDING_H
#define HP_BINDING_H

#include <stddef.h>

#define HP_BINDING_NODE_MAX 64
#define HP_BINDING_ROLE_MAX 32
#define HP_BINDING_LINE_MAX 512
#define HP_BINDING_TASKS_MAX (1 << 20)

struct hp_binding {
    int task;
    int device; /* -1: none */
    int line;   /* of the file it was read from (messages) */
    char node[HP_BINDING_NODE_MAX];
    char role[HP_BINDING_ROLE_MAX];
};

/* "vwV.stageS": *vw = V, *stage = S; "psP": *vw = P, *stage = -1. 0, or -1 for anything else
 * (signs, blanks, trailing characters, numbers beyond 2^20). */
int hp_binding_role_parse(const char *role, int *vw, int *stage);

/* Write n entries (task order) to path atomically (temporary file in the same directory,
 * fsync, rename), mode 0644: slurmstepd reads it as root, the ranks as the user. A node name
 * that does not read back as one word (empty, blank or control characters, a leading '#')
 * is refused up front. */
int hp_binding_write(const char *path, const struct hp_binding *b, int n, char *err, size_t errlen);

/* Read the whole file: a regular file (opened without blocking: a FIFO or device at the path
 * is refused, not waited on), every line `TASK NODE DEVICE ROLE` or a comment, well-formed
 * roles, tasks 0 .. n-1 each exactly once. *out (caller-owned, free()) is indexed by task and
 * *n is the task count. */
int hp_binding_read(const char *path, struct hp_binding **out, int *n, char *err, size_t errlen);

/* The CUDA_VISIBLE_DEVICES value that makes GPU `device` (Slurm's index) the task's only GPU,
 * given the step's GPUs (SLURM_STEP_GPUS: Slurm indices) and what Slurm set in
 * CUDA_VISIBLE_DEVICES for them (the entry at the same position; with device cgroups the
 * visible devices are renumbered from 0). Written into out (size n). 0, or -1 when the step
 * does not have that GPU (err says what it has). */
int hp_binding_visible_device(const char *step_gpus, const char *cvd, int device, char *out,
                              size_t n, char *err, size_t errlen);

#endif
