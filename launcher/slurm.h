/* slurm.h - what Slurm allocated to a running job: its nodes, hetjob components and typed
 * GPUs with their device indices. launcher/slurm.c is the one file that talks to libslurm.
 *
 * The source is slurm_load_job(SHOW_DETAIL): one record per hetjob component (het_job_offset),
 * its node list (expanded with libslurm's hostlist functions) and, per node, gres_detail_str
 * such as "gpu:titanv:2(IDX:0-1)" or "gpu:titanv:1(IDX:0),gpu:p4000:2(IDX:1,3)". The GPUs'
 * types are what the cluster's gres.conf calls them (Type=); the planner looks them up in the
 * GPU database.
 */
#ifndef HP_SLURM_H
#define HP_SLURM_H

#include "cluster.h"

#include <stddef.h>

#define HP_ALLOC_GPUS_MAX 64 /* GPUs of one node */
#define HP_GPU_TYPE_MAX 32

struct hp_alloc_gpu {
    char type[HP_GPU_TYPE_MAX];
    int index; /* the device index Slurm numbers it by (IDX, SLURM_STEP_GPUS) */
};

struct hp_alloc_node {
    char name[HP_NODE_NAME_MAX];
    int component; /* hetjob component (0 in a job that is not a hetjob) */
    int ngpus;
    struct hp_alloc_gpu gpus[HP_ALLOC_GPUS_MAX]; /* in IDX order */
};

struct hp_alloc {
    unsigned long jobid;
    int hetjob;                  /* 1 if the job is a hetjob */
    int ncomponents;             /* 1 unless a hetjob */
    int nnodes;                  /* nodes with at least one GPU, component by component */
    int nskipped;                /* nodes of the job without any GPU (left out) */
    struct hp_alloc_node *nodes; /* owned */
};

/* Parse one node's gres_detail_str into n->gpus (n->name is used in messages): every "gpu"
 * entry must be typed; other GRES (mps, shard, ...) are ignored. An empty or NULL detail
 * gives 0 GPUs. 0, or -1 with err saying what is wrong and what was expected. Pure (no Slurm
 * needed), so unit-tested. */
int hp_gres_detail_parse(const char *detail, struct hp_alloc_node *n, char *err, size_t errlen);

/* The allocation of running job `jobid` (leader's id for a hetjob) from slurmctld. 0, or a
 * negative code with the reason logged (libslurm missing from this build, controller
 * unreachable, job not running, untyped GPUs, a job without GPUs). *a is caller-owned
 * (hp_alloc_release). */
int hp_slurm_discover(unsigned long jobid, struct hp_alloc *a);

/* Send signal `sig` to every task of job `jobid`'s steps (not its batch script): SIGKILL ends a
 * stopped task too. 0, or a negative code (logged). */
int hp_slurm_kill_steps(unsigned long jobid, int sig);

/* Write the planner's cluster description of `a` (one [node] section per node, its GPUs as
 * TYPE:COUNT runs and their devices; lists continued past iniparser's line length) to path
 * (hp_out_open). Node names that a section cannot hold (upper case, spaces, ...) make every
 * section [node.I] with a quoted name key; a name or GPU type no spelling reads back is
 * refused. 0 or a negative code (logged). */
int hp_alloc_write_cluster(const struct hp_alloc *a, const char *name, const char *path);

/* The planner's cluster for `a`, built in memory (GPU types resolved in db; an unknown one is
 * an error naming the job, the node and the type). 0 or a negative code (logged). */
int hp_alloc_cluster(const struct hp_alloc *a, const struct hp_gpudb *db, const char *name,
                     struct hp_cluster *c);

void hp_alloc_release(struct hp_alloc *a);

#endif
