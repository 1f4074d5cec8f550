/* jobdata.h - what a finished job left in its run directory, read for hetpipe report
 * (jobreport.h): the plan (with the site config's GPU database and, when it loads, the model),
 * each worker rank's stats file, rank 0's metrics, the ranks' timeline parts and their logs.
 *
 * Only plan.ini is required. Every other file may be missing or unreadable: that is noted
 * (what is missing, and how a job makes it) for the page, never an error.
 *
 *   RUN_DIR/plan.ini        the plan (common/planfile.h)
 *   RUN_DIR/stats.R         rank R's stats (runtime/report.c: hp_stage_write_stats)
 *   RUN_DIR/metrics.csv     split,epoch,step,seconds,loss,accuracy,images_per_s
 *   RUN_DIR/timeline.R      rank R's timeline part (common/tlpart.h)
 *   RUN_DIR/rank-R.log      rank R's output
 *   RUN_DIR/run.ini         the run's record: restart, start, end, status, checkpoint resumed
 *                           from (rundir.h)
 */
#ifndef HP_JOBDATA_H
#define HP_JOBDATA_H

#include "planjob.h"
#include "rundir.h"
#include "tlpart.h"

/* A worker rank's stats file; `have` 0 when there was none. Unknown keys are skipped. */
struct hp_stats {
    int have, has_job, has_ps;
    double emulate;
    long minibatches;
    double train_s, compute_s, pad_s, comm_s, other_s;
    double images_per_s, predicted_images_per_s;
    double mem_peak, mem_predicted, test_acc, cpu_share, eval_s;
    double job_s, job_paused_s, job_images_per_s;
    double pull_wait_s;
    /* a first stage's data input (runtime/feed.h); has_data 0: none */
    int has_data;
    double data_threads, data_queue, data_decoded, data_skipped, data_decode_s, data_wait_s,
        data_wait_start_s, data_depth_mean;
};

/* One line of metrics.csv. */
struct hp_metric {
    int test; /* split: 1 test, 0 train */
    int epoch;
    long step; /* minibatches of all VWs so far: samples = step x batch */
    double seconds, loss, accuracy, images_per_s; /* a text model's: accuracy NaN, the rate in
                                                     tokens per second */
    double perplexity, bits_per_byte; /* a text model's (bits_per_byte NaN for token files) */
    int part; /* in a whole job's curves: the run it comes from (0, 1, ...) */
};

/* Sums over a rank's whole timeline, in seconds. */
struct hp_tl_sums {
    double compute; /* fwd + bwd */
    double recv;    /* recv_act + recv_grad */
    double wsp;     /* wsp_wait */
};

/* A rank's timeline part: its events on rank 0's clock (clock_offset_s added), kept only up
 * to a little past the window that the pipeline picture shows; the sums are over all. */
struct hp_tl_part {
    int have;
    struct hp_tl_meta meta;
    struct hp_tl_event *ev; /* owned, [n], in the order recorded */
    long n, total;          /* kept, recorded */
    struct hp_tl_sums sums;
};

/* A rank log's first error and warning lines, and how many there were. */
struct hp_log_note {
    int errors, warnings;
    char first_error[256], first_warning[256];
};

#define HP_JD_NOTES 32

struct hp_jobdata {
    char dir[4096];
    char name[256];         /* the directory's base name */
    struct hp_job job;      /* db, cl, plan, token; model NULL when it did not load */
    struct hp_stats *stats; /* [plan.nranks]: workers only */
    int nstats;             /* files read */
    struct hp_metric *metrics;
    int nmetrics, have_metrics;
    int text;                 /* metrics.csv of a text model (loss, perplexity, bits per byte) */
    struct hp_tl_part *tl;    /* [plan.nranks] */
    int ntl;                  /* parts read */
    struct hp_log_note *logs; /* [plan.nranks] */
    int nlogs;
    double scale;         /* emulation scale S of the run, 1 when none (emulate = 0) */
    int emulated;         /* emulate > 0 in the stats */
    struct hp_runrec rec; /* run.ini; have_rec 0: none (a run of an older hetpipe) */
    int have_rec;
    char model_note[512]; /* why the model's unit names are missing, or "" */
    int nnotes;
    char notes[HP_JD_NOTES][512]; /* what is missing or was left out, and how to get it */
};

/* Read run directory `dir` into *d (zeroed first; release it also after a failure). config:
 * the site config's path, or NULL for the default place. -HP_ENOTFOUND when dir is not a
 * directory or holds no plan.ini, -HP_ECONFIG for a plan that does not load, -HP_ENOMEM; every
 * failure logged naming the directory or file and what is wrong. */
int hp_jobdata_load(struct hp_jobdata *d, const char *dir, const char *config);
void hp_jobdata_release(struct hp_jobdata *d);

/* Worker rank r's stats, or NULL when it wrote none. */
const struct hp_stats *hp_jobdata_stats(const struct hp_jobdata *d, int r);

/* The emulation scale of measured rates: measured x scale compares with the plan's. */
double hp_jobdata_scale(const struct hp_jobdata *d);

/* What VW v can reach: with several VWs in step (WSP with shards, or dp's allreduce), every
 * VW runs at the pace of the slowest (the job's predicted rate over the VWs), else at its own
 * planned rate. */
double hp_jobdata_vw_pace(const struct hp_jobdata *d, int v);

#endif
