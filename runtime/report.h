/* report.h - what a worker stage tells: on stage 0 of VW 0 (the reporter) the job's first
 * lines, the progress line, the test results, the checkpoint and resume lines and the
 * summary, and the metrics (--metrics) and step log (--step-log); on every stage the weight
 * log (--weight-log) and the stats file (--stats). The state (files, the progress line on a
 * terminal, the current interval) is this module's.
 */
#ifndef HP_REPORT_H
#define HP_REPORT_H

#include "feed.h"
#include "model.h"
#include "options.h"
#include "plan.h"
#include "ps_client.h"
#include "worker.h"
#include "wsp.h"

#include <stdint.h>

/* The job's clock on the reporter: the start every worker began from, and the seconds in
 * which every worker was paused at job points (not training time). The worker keeps it. */
struct hp_job_clock {
    double t_start, paused_s;
};

/* What the reports say of the job and the stage (borrowed: must outlive the report). */
struct hp_report_job {
    const struct hp_feed_counts *counts; /* the data set's (feed.h): images or text, NULL: images */
    const struct hp_options *o;
    const struct hp_plan *plan;
    const struct hp_model *model;
    int rank, v, s, k, nm, batch, nvws, dp, in_flight;
    long my_mb;
    const char *type_name;
    int timeout_ms, wait_ms;
    const struct hp_job_clock *clock;
};

struct hp_report;

/* Open the stage's files (weight log; on the reporter step log and metrics). 0, or -HP_EIO
 * (logged) when one cannot be created. */
int hp_report_open(const struct hp_report_job *j, struct hp_report **out);
/* Close them (what was written is kept, also of a failed run). NULL allowed. */
void hp_report_close(struct hp_report *r);

/* The progress line shows the WSP clocks of `wsp` (borrowed; NULL: none). */
void hp_report_clocks(struct hp_report *r, const struct hp_wsp *wsp);

/* The reporter's first lines: what this job trains and how, and its deadlines. */
void hp_report_start(struct hp_report *r);

/* This run resumed from checkpoint seq in dir (in `seconds`; exact: under the same plan) at
 * epoch0, nb0 (the ETA's base from now on): the reporter says so. */
void hp_report_resumed(struct hp_report *r, long seq, const char *dir, double seconds, int exact,
                       long epoch0, long nb0);

/* A new interval of the progress line starts now (an epoch's start); and `seconds` of pause
 * (a job point) are left out of the current one. */
void hp_report_interval(struct hp_report *r);
void hp_report_paused(struct hp_report *r, double seconds);

/* Stage 0, after the backward pass of the epoch's nb-th minibatch (1-based) at `step`: loss
 * and correct answers of the minibatch (sums over its samples). The loss is checked (not
 * finite: -HP_ERANGE, logged), the step log gets a line, and every --log-every minibatches
 * the reporter draws the progress line and writes a metrics row (step_base: the job's step at
 * the epoch's start). */
int hp_report_minibatch(struct hp_report *r, int epoch, long nb, long step, long step_base,
                        double loss, int correct);

/* The reporter: a test result (nb < 0: at the epoch's end; else after nb minibatches), the
 * job's `step` and training seconds, on the terminal and in the metrics. */
void hp_report_test(struct hp_report *r, int epoch, long nb, long step, double train_s, double loss,
                    double acc);

/* The reporter: checkpoint `seq` written. */
void hp_report_checkpoint(struct hp_report *r, long seq, const char *dir, long epoch, long nb,
                          long samples, int nfiles, double mbytes, double seconds);

/* The weight log's line for minibatch j's backward pass (versions and hashes of the weights
 * its forward and backward passes read). Nothing without --weight-log. */
int hp_report_weights_on(const struct hp_report *r);
void hp_report_weights(struct hp_report *r, long j, long fwd_version, long bwd_version,
                       long version_now, uint64_t fwd_hash, uint64_t bwd_hash);

/* The reporter's summary (stopped: checkpointed and stopped on request after checkpoint seq;
 * stop_at: --stop-at reached). */
void hp_report_end(struct hp_report *r, const struct hp_worker_result *res, int stopped, long seq,
                   int stop_at);

/* --stats: the stage's summary in PREFIX.<rank>, with its data input's (a first stage: data
 * not NULL). 0 or -HP_EIO. */
int hp_report_stats(struct hp_report *r, const struct hp_worker_result *res, double eval_s,
                    const struct hp_ps_stats *ps, const struct hp_feed_stats *data);

/* The images/s the plan predicts for this stage's VW (a dp replica: its share of the job's),
 * at emulation scale 1. */
double hp_report_planned_rate(const struct hp_report_job *j);

/* Clear the progress line before other output. */
void hp_report_clear(struct hp_report *r);

#endif
