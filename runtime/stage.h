/* stage.h - inside a worker rank (pipeline.h): the state of one pipeline stage, grouped by
 * concern, and the functions the stage's files share. Internal to the runtime.
 *
 *   pipeline.c  the worker's run: set-up, epochs, the end (hp_worker_run)
 *   schedule.c  one-forward-one-backward, messages between stages, weight stashing
 *   sync.c      across virtual workers: WSP's gate, pushes and pulls (ps.h); dp's allreduce
 *   evaluate.c  the test set through the pipeline on the global weights; the evaluation wait
 *   emulate.c   padding to the emulated GPU type's time (the plan's figures)
 *   report.c    progress, metrics, step and weight logs, the stats file
 */
#ifndef HP_STAGE_H
#define HP_STAGE_H

#include "allreduce.h"
#include "backend.h"
#include "comm.h"
#include "data.h"
#include "net.h"
#include "pipeline.h"
#include "ckpt.h"
#include "ps_client.h"
#include "timeline.h"

#include <stdint.h>
#include <stdio.h>

#define TRAILER_DOUBLES 2     /* gradient messages: loss sum, correct count */
#define FASHION_TRAIN_N 60000 /* samples, as data.c checks */
#define FASHION_TEST_N 10000

/* Schedule and weight stashing (schedule.c). */
struct stage_sched {
    int w;           /* minibatches kept between forward and backward (the plan's in-flight) */
    int32_t *labels; /* [w][batch] */
    int *ver;        /* [w]: stash buffer the slot's forward used, -1: the current weights */
    long *fwd_version;
    uint64_t *fwd_hash;
    float **stash; /* [w - 1] device vectors */
    long *stash_version;
    long nupd; /* updates applied */
    long wver; /* version of the current weights: bumped by every update and every rebase */
};

/* Messages to and from the neighbouring stages (schedule.c). */
struct stage_link {
    int prev, next, first, last; /* ranks (-1 when none) */
    struct hp_msg_buf *act_out[2], *grad_out[2], *act_in, *grad_in;
    int act_i, grad_i;            /* the next free send buffer of each pair */
    size_t in_floats, out_floats; /* per minibatch */
};

/* Wave Synchronous Parallel (sync.c); ps is NULL without PS shards. */
struct stage_wsp {
    struct hp_ps_client *ps;
    FILE *trace;
    int nm, D;         /* the VW's wave (minibatches), the staleness threshold */
    long pbase;        /* the VW's index of this epoch's first minibatch (epoch x my_mb) */
    long unpushed;     /* updates since the last push */
    int64_t *thr;      /* [nvws] pull thresholds */
    long *final_waves; /* [nvws] waves each VW pushes in all */
    float *hsave;      /* host: the local weights while evaluating on the global ones */
    int nevals;
};

/* The dp baseline (sync.c): ar is NULL unless the plan is dp. */
struct stage_dp {
    struct hp_allreduce *ar;
    float *hgrad;
    double ar_cost; /* emulated seconds per allreduce */
};

/* Stage 0's data. */
struct stage_data {
    struct hp_dataset train, test;
    int *perm, *idx;
    float *himg;
    int32_t *hlab;
};

/* Checkpoints (resume.c, ckpt.h). */
struct stage_ckpt {
    long every_samples; /* --checkpoint-every N samples (0: none) */
    double every_s;     /* --checkpoint-every in time (0: none) */
    long ck;            /* job points every ck of the VW's minibatches (0: only evaluations) */
    double last_t;      /* reporter: when the last checkpoint (or this run) began */
    long seq;           /* the number of the last checkpoint taken or resumed from */
    long epoch0, nb0;   /* where this run starts: epoch, the VW's minibatches into it */
    long q0;            /* WSP: the VW minibatch the waves count from (0, or a re-plan's start) */
    int stopped;        /* this run checkpointed and stopped on request */
    int exact;          /* resumed under the same plan */
};

struct stage_logs {
    FILE *step_log, *weight_log, *metrics;
};

/* Emulated seconds (S x the plan's) per pass and send; 0: off (emulate.c). */
struct stage_emu {
    double fwd_cost, bwd_cost, xfer_next, xfer_prev;
};

/* Where the training phase's time went. */
struct stage_time {
    double compute_s, pad_s, comm_s;
};

/* The training run's counters (pipeline.c). */
struct stage_run {
    int ntrain;          /* training samples used */
    long total_mb;       /* minibatches of the training set per epoch */
    long my_mb;          /* this VW's (replica's) share of them */
    long total_steps;    /* steps of the learning-rate schedule */
    long ek;             /* VW 0 evaluates every ek of its minibatches (0: epoch ends) */
    long nevals;         /* evaluation points passed */
    long npoints;        /* job points passed (every worker counts the same ones) */
    double t_start;      /* training start: every worker begins together (start_point) */
    double eval_s;       /* this stage's seconds at evaluation points: drained, waiting */
    double job_paused_s; /* reporter: seconds in which every worker was paused for them */
    double job_s;        /* reporter, at the end: the job's training seconds */
    int stop;            /* --stop-at reached */
    int reporter;        /* stage 0 of VW 0: progress lines and metrics */
    int tty;             /* reporter: progress as one updating line on a terminal */
    int line_open;       /* that line is on the terminal (cleared before other output) */
    double drawn_t;      /* when it was last drawn */
};

struct stage {
    const struct hp_plan *plan;
    const struct hp_cluster *cl;
    const struct hp_model *model;
    const struct hp_options *o;
    const struct hp_gpudb *db;
    int timeout_ms;   /* --timeout */
    int long_wait_ms; /* waits for other VWs and job points: timeout + the plan's slack */
    struct hp_comm *comm;
    int rank, v, s, k, nvws, batch, dp;
    const struct hp_stage_plan *st;
    int type;              /* GPU type index */
    const char *type_name; /* its name */
    struct hp_backend *be;
    size_t mem_base; /* memory really in use before the net (be->ops->memory_used) */
    struct hp_net *net;
    size_t nparams;
    float *hparams; /* host copy of the weights */

    struct stage_sched sched;
    struct stage_link link;
    struct stage_wsp wsp;
    struct stage_dp dpar;
    struct stage_data data;
    struct stage_logs logs;
    struct stage_emu emu;
    struct stage_time time;
    struct stage_run run;
    struct stage_ckpt ck;
    struct hp_timeline *tl; /* --timeline: this rank's recorder (NULL: none) */
};

/* schedule.c */
int hp_stage_setup(struct stage *g);
void hp_stage_teardown(struct stage *g);
int hp_stage_sync_compute(struct stage *g, double t0);
uint64_t hp_stage_hash_weights(struct stage *g, const float *dev);
int hp_stage_recv(struct stage *g, int peer, int type, struct hp_msg_buf *b, long mb, size_t bytes,
                  const char *what);
int hp_stage_send_buf(struct stage *g, struct hp_msg_buf **pair, int *i, struct hp_msg_buf **out);
int hp_stage_send(struct stage *g, int peer, int type, struct hp_msg_buf *b, long mb, size_t bytes,
                  double emulated);
int hp_stage_stash(struct stage *g, long first, long end);
/* The forward pass of the stage's minibatch j (nb: the first not yet backward), of the job's
 * minibatch m_global, schedule step `step`. */
int hp_stage_forward(struct stage *g, long j, long nb, long m_global, long step);
/* The backward pass of minibatch j (nf: forwards done), then the update; *loss and *correct
 * of the minibatch (from the last stage). */
int hp_stage_backward(struct stage *g, long j, long nf, long step, long total, double *loss,
                      int *correct);

/* sync.c */
int hp_sync_setup(struct stage *g, long my_mb);
long hp_wsp_threshold(const struct stage *g, long C);
int hp_wsp_gate(struct stage *g, long q, long first, long end);
int hp_wsp_push(struct stage *g, long wave);
int hp_dp_allreduce(struct stage *g, long step);
void hp_wsp_print_clocks(const struct stage *g, double elapsed);

/* evaluate.c */
int hp_eval_report(struct stage *g, struct hp_worker_result *res, int epoch, long nb, long my_mb,
                   long step, double train_s, int final, double *tl, double *ta);
int hp_eval_reached(const struct stage *g, double acc);
/* Each worker's arrival carries its stop request (*req in, on the reporter everyone's out). */
int hp_eval_gather(struct stage *g, long n, double *t_all, int *req);
/* The reporter's verdict: flags (HP_VERDICT_*) and the checkpoint's number. */
#define HP_VERDICT_STOP 1u
#define HP_VERDICT_CKPT 2u
#define HP_VERDICT_REQUEST 4u
#define HP_VERDICT_ALL (HP_VERDICT_STOP | HP_VERDICT_CKPT | HP_VERDICT_REQUEST)
int hp_eval_verdict(struct stage *g, long n, unsigned *flags, long *seq);
int hp_stage_param_hash(struct stage *g, uint64_t *out);

/* resume.c */
int hp_ckpt_setup(struct stage *g);
int hp_stage_restore(struct stage *g);
int hp_stage_restore_client(struct stage *g);
/* At a job point whose verdict asked for checkpoint `seq` in `dir`: every rank writes its
 * part, the reporter the manifest; *ok: whether the checkpoint is complete. */
int hp_stage_checkpoint(struct stage *g, long seq, const char *dir, long epoch, long nb, int *ok);
/* The reporter's decision at a job point (epoch, nb): 1 to checkpoint. */
int hp_ckpt_due(struct stage *g, long nb);

/* emulate.c */
void hp_emulate_setup(struct stage *g);
void hp_stage_pad(struct stage *g, double t0, double target);
double hp_stage_planned_rate(const struct stage *g);

/* report.c */
int hp_stage_open_files(struct stage *g);
/* --timeline: the recorder (sized for the run), and its part file PREFIX.<rank> written. */
int hp_stage_timeline_open(struct stage *g);
int hp_stage_timeline_close(struct stage *g);
int hp_stage_write_stats(const struct stage *g, const struct hp_worker_result *r);
void hp_stage_print_start(const struct stage *g);
/* The reporter's progress after minibatch nb of `epoch`: on a terminal one line redrawn at
 * most 4 times a second (epoch, step, loss, accuracy, images/s, the VWs' clocks, an ETA), else
 * a plain line every --log-every steps (`due`); none with --quiet. */
void hp_stage_progress(struct stage *g, int epoch, long nb, double loss, double acc, double ips,
                       int due);
/* Clear the updating line before other output. */
void hp_stage_progress_clear(struct stage *g);
void hp_stage_print_end(struct stage *g, const struct hp_worker_result *res);

#endif
