/* planjob.h - the one in-process planning call, used by hetpipe plan, hetpipe run --local and
 * hetpipe launch: from the options (common/options.h) and a cluster (a file, or what Slurm
 * allocated) to a plan with a fresh job token; the plan table that all three print.
 */
#ifndef HP_PLANJOB_H
#define HP_PLANJOB_H

#include "cluster.h"
#include "cost.h"
#include "gpudb.h"
#include "model.h"
#include "options.h"
#include "plan.h"
#include "slurm.h"

#include <stdio.h>

/* A planned (or loaded) job; caller-owned, released by hp_job_release (also after a failed
 * call). */
struct hp_job {
    struct hp_gpudb db;
    struct hp_cluster cl;
    struct hp_model *model;
    struct hp_cost cost; /* the model's costs as planned (profile applied); after hp_job_plan */
    struct hp_plan plan;
    char token[33];      /* 32 hex digits, random, per job */
    char config[4096];   /* the site config's absolute path, for the ranks */
    char ckpt_dir[4096]; /* --checkpoint-dir made absolute (hp_job_resume) */
    int profiled;        /* units with measured times (o->profile) */
    /* the checkpoint resumed from and its samples, -1: none (hp_job_resume) */
    long resumed_seq, resumed_samples;
};

/* Plan a job: the site config (o->config, else the default path), the cluster (from `alloc`
 * when not NULL, else the file or name o->cluster), the model o->model, its costs (with
 * o->profile's measurements for their GPU type), and hp_plan_compute with o's planning
 * options; a model given as a file is recorded by its absolute path (the ranks may run
 * elsewhere); a new random token. 0 or a negative code (logged). */
int hp_job_plan(const struct hp_options *o, const struct hp_alloc *alloc, struct hp_job *job);

/* Load the plan file at path instead (hetpipe launch --plan): the site config, the plan and
 * its cluster, the model. 0 or a negative code (logged). */
int hp_job_load(const struct hp_options *o, const char *path, struct hp_job *job);

/* The plan as hetpipe plan prints it: every VW's stages with node, GPU, type, units, times
 * and memory; the PS shards and bytes per wave, or dp's allreduce; the predicted rate. */
void hp_job_print(const struct hp_job *job, FILE *f);

/* Checkpoint options that only work together: --checkpoint-every and --resume auto need
 * --checkpoint-dir (where to write them, where to look). hetpipe run and launch check this
 * before they start a rank (launch after giving --checkpoint-dir its default). 0, or
 * -HP_EINVAL logged naming both options. `cmd` names the command in messages. */
int hp_job_check_checkpoints(const struct hp_options *o, const char *cmd);

/* hp_job_check_checkpoints, then: --checkpoint-dir is made absolute (the ranks may start
 * elsewhere). --resume: auto resolves to the newest valid checkpoint in --checkpoint-dir
 * (none: o->resume is unset, a fresh start, said on stdout), a DIR is checked whole (every
 * file's CRC); its model, seed and batch must be the job's. The path goes to buf and
 * o->resume.path (o->resume.automatic cleared: the ranks get the directory). `cmd` names the
 * command in messages. 0 or a negative code (logged). */
int hp_job_resume(struct hp_options *o, struct hp_job *job, const char *cmd, char *buf, size_t n);

/* What one machine holds of a job of run --local, where every rank is a process on its cores:
 * at most max(HP_LOCAL_RANKS_MIN, HP_LOCAL_RANKS_PER_CORE x cores) ranks (beyond that the
 * emulation's padding no longer sets the pace; a cluster file of thousands of nodes would fork
 * thousands of processes), and their memory within mem_available bytes (0: unknown, not
 * checked): each rank's own (libraries, UCX, buffers: 15-50 MB measured with the CNN), the
 * data set that stage 0 of every VW holds (Fashion-MNIST as floats, 220 MB), each stage's
 * planned memory, the shards' global weights. 0, or -HP_EINVAL (ranks) / -HP_ENOMEM (memory)
 * with why (the limit and what it is made of). */
#define HP_LOCAL_RANKS_MIN 64
#define HP_LOCAL_RANKS_PER_CORE 8
#define HP_LOCAL_RANK_BYTES (32.0 * 1048576.0)
#define HP_LOCAL_DATA_BYTES (256.0 * 1048576.0)
int hp_job_local_fits(const struct hp_job *job, long cores, double mem_available, char *why,
                      size_t n);

/* --emulate's scale S for the ranks: `emulate` itself when >= 0 (off is 0, a number is S);
 * auto (< 0) is S = 2 x max(1, ranks / cores) x this CPU's whole-model step over the planned
 * GPUs' summed compute, so that the padding to S x the plan's times dominates the CPU's own
 * (printed; 0 when it cannot be measured). hetpipe run --local and hetpipe launch --emulate. */
double hp_job_emulation(const struct hp_job *job, double emulate);

void hp_job_release(struct hp_job *job);

#endif
