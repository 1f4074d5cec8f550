/* report.c - what a worker stage tells (report.h). */
#include "report.h"

#include "clock.h"
#include "error.h"
#include "log.h"
#include "output.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct hp_report {
    struct hp_report_job j;
    const struct hp_wsp *wsp;
    int reporter;  /* stage 0 of VW 0 */
    int tty;       /* the reporter's progress as one updating line on a terminal */
    int line_open; /* that line is on the terminal (cleared before other output) */
    double drawn_t;
    long epoch0, nb0; /* where this run started: the ETA's base */
    FILE *step_log, *weight_log, *metrics;
    /* the progress line's current interval of minibatches */
    long n;
    double lsum, csum, t0;
    struct hp_feed_counts counts; /* the data set's (text: perplexity, tok/s) */
    double npos;                  /* labels a minibatch: batch x positions */
};

/* PATH.<rank> */
static FILE *open_ranked(const char *prefix, int rank, const char *what)
{
    char path[4096];

    snprintf(path, sizeof(path), "%s.%d", prefix, rank);
    return hp_out_open(path, what, 0666);
}

int hp_report_open(const struct hp_report_job *j, struct hp_report **out)
{
    const struct hp_options *o = j->o;
    struct hp_report *r = calloc(1, sizeof(*r));

    if (!r)
        return -HP_ENOMEM;
    r->j = *j;
    if (j->counts)
        r->counts = *j->counts;
    r->npos = (double)j->batch * hp_model_positions(j->model); /* labels a minibatch */
    r->reporter = j->v == 0 && j->s == 0;
    r->tty = r->reporter && !o->verbose && isatty(STDOUT_FILENO);
    r->t0 = hp_now_s();
    *out = r;
    if (o->weight_log) { /* every rank writes its own: PATH.<rank> */
        if (!(r->weight_log = open_ranked(o->weight_log, j->rank, "weight log")))
            return -HP_EIO;
        fprintf(r->weight_log,
                "vw,stage,minibatch,fwd_version,bwd_version,version_at_bwd,fwd_hash,bwd_hash\n");
    }
    if (r->reporter && o->step_log) {
        if (!(r->step_log = hp_out_open(o->step_log, "step log", 0666)))
            return -HP_EIO;
        fprintf(r->step_log, "step,loss\n");
    }
    if (r->reporter && o->metrics) {
        if (!(r->metrics = hp_out_open(o->metrics, "metrics", 0666)))
            return -HP_EIO;
        fprintf(r->metrics, "%s\n", hp_feed_metrics_header(&r->counts));
    }
    return 0;
}

void hp_report_close(struct hp_report *r)
{
    if (!r)
        return;
    (void)hp_out_close(r->step_log, 1);
    (void)hp_out_close(r->weight_log, 1);
    (void)hp_out_close(r->metrics, 1);
    free(r);
}

void hp_report_clocks(struct hp_report *r, const struct hp_wsp *wsp)
{
    r->wsp = wsp;
}

void hp_report_clear(struct hp_report *r)
{
    if (!r->line_open)
        return;
    fputs("\r\033[K", stdout);
    fflush(stdout);
    r->line_open = 0;
}

double hp_report_planned_rate(const struct hp_report_job *j)
{
    return j->dp ? j->plan->rate / j->nvws : j->plan->vws[j->v].rate;
}

void hp_report_start(struct hp_report *r)
{
    const struct hp_report_job *j = &r->j;
    const struct hp_options *o = j->o;

    if (!r->reporter)
        return;
    if (j->dp)
        printf("hetpipe: model %s, dp over %d replicas (ring allreduce every minibatch), batch %d "
               "per replica, %ld epochs of %ld steps, lr %g, seed %llu%s\n",
               j->model->name, j->nvws, j->batch, o->epochs, j->my_mb, o->lr,
               (unsigned long long)j->plan->opts.seed,
               o->emulate > 0 ? ", emulated GPU types" : "");
    else
        printf("hetpipe: model %s, %d virtual worker%s, this one of %d stage%s, Nm %d, batch %d, "
               "%ld epochs of %ld minibatches, lr %g%s, seed %llu%s%s\n",
               j->model->name, j->nvws, j->nvws == 1 ? "" : "s", j->k, j->k == 1 ? "" : "s", j->nm,
               j->batch, o->epochs, j->my_mb, o->lr, j->nvws > 1 ? " (/ VWs in each)" : "",
               (unsigned long long)j->plan->opts.seed,
               j->nvws > 1 ? (j->plan->nshards ? ", WSP" : "") : "",
               o->emulate > 0 ? ", emulated GPU types" : "");
    printf("hetpipe: a silent peer fails the job after %.0f s (--timeout) or, in waits on other "
           "VWs and job points, %.0f s\n",
           j->timeout_ms / 1000.0, j->wait_ms / 1000.0);
    fflush(stdout);
}

void hp_report_resumed(struct hp_report *r, long seq, const char *dir, double seconds, int exact,
                       long epoch0, long nb0)
{
    r->epoch0 = epoch0;
    r->nb0 = nb0;
    if (!r->reporter)
        return;
    printf("resumed from checkpoint %ld (%s) in %.2f s: epoch %ld, minibatch %ld of each VW's "
           "%ld, %s\n",
           seq, dir, seconds, epoch0 + 1, nb0, r->j.my_mb,
           exact ? "the same plan: every rank restored exactly"
                 : "another plan: each unit loaded where this plan puts it");
}

void hp_report_interval(struct hp_report *r)
{
    r->n = 0;
    r->lsum = r->csum = 0.0;
    r->t0 = hp_now_s();
}

void hp_report_paused(struct hp_report *r, double seconds)
{
    r->t0 += seconds;
}

/* The reporter's progress after minibatch nb of `epoch`: on a terminal one line redrawn at
 * most 4 times a second (epoch, step, loss, accuracy, images/s, the VWs' clocks, an ETA), else
 * a plain line every --log-every steps (`due`); none with --quiet. */
static void draw(struct hp_report *r, int epoch, long nb, double loss, double acc, double ips,
                 int due)
{
    const struct hp_report_job *j = &r->j;
    const struct hp_options *o = j->o;
    const double now = hp_now_s(), elapsed = now - j->clock->t_start - j->clock->paused_s;

    if (o->quiet || (!r->tty && !due) || (r->tty && now - r->drawn_t < 0.25))
        return;
    if (r->tty)
        fputs("\r\033[K", stdout);
    char q[160];
    hp_feed_quality(&r->counts, loss, acc, q, sizeof(q));
    printf("epoch %d/%ld step %ld/%ld %s %.0f %s", epoch + 1, o->epochs, nb, j->my_mb, q, ips,
           hp_feed_rate_unit(&r->counts));
    hp_wsp_print_clocks(r->wsp, stdout, elapsed);
    if (r->tty) {
        /* this run's share of the job done so far, and the time the rest takes at its pace */
        const double total = (double)o->epochs * j->my_mb;
        const double start = (double)r->epoch0 * j->my_mb + r->nb0;
        const double done = (double)epoch * j->my_mb + nb - start;
        const double eta = done > 0 ? elapsed * (total - start - done) / done : 0.0;
        printf(" | ETA %ld:%02ld", (long)eta / 60, (long)eta % 60);
        r->line_open = 1;
        r->drawn_t = now;
    } else {
        putchar('\n');
    }
    fflush(stdout);
}

int hp_report_minibatch(struct hp_report *r, int epoch, long nb, long step, long step_base,
                        double l, int c)
{
    const struct hp_report_job *j = &r->j;
    const struct hp_options *o = j->o;

    if (!isfinite(l)) {
        hp_error("loss is %g at step %ld: training diverged (lower --lr)", l, step);
        return -HP_ERANGE;
    }
    r->lsum += l;
    r->csum += c;
    r->n++;
    if (r->step_log)
        fprintf(r->step_log, "%ld,%.9e\n", step, l / r->npos);
    if (!r->reporter)
        return 0;
    const int due = (o->log_every > 0 && nb % o->log_every == 0) || nb == j->my_mb;
    const double now = hp_now_s(), ips = (double)r->n * r->npos / (now - r->t0);
    const double loss = r->lsum / ((double)r->n * r->npos);
    const double acc = r->csum / ((double)r->n * r->npos);
    draw(r, epoch, nb, loss, acc, ips, due && o->log_every > 0);
    if (!due)
        return 0;
    char q[160];
    hp_feed_quality_csv(&r->counts, loss, acc, q, sizeof(q));
    if (r->metrics)
        fprintf(r->metrics, "train,%d,%ld,%.3f,%s,%.1f\n", epoch + 1, step_base + nb * j->nvws,
                now - j->clock->t_start - j->clock->paused_s, q, ips);
    fflush(stdout);
    r->n = 0;
    r->lsum = r->csum = 0.0;
    r->t0 = now;
    return 0;
}

void hp_report_test(struct hp_report *r, int epoch, long nb, long step, double train_s, double loss,
                    double acc)
{
    const struct hp_options *o = r->j.o;

    if (!r->reporter)
        return;
    hp_report_clear(r);
    char q[160], at[64] = "";
    if (nb >= 0)
        snprintf(at, sizeof(at), " step %ld/%ld", nb, r->j.my_mb);
    if (r->counts.text) {
        hp_feed_quality(&r->counts, loss, acc, q, sizeof(q));
        printf("epoch %d/%ld%s validation %s\n", epoch + 1, o->epochs, at, q);
    } else {
        printf("epoch %d/%ld%s test loss %.4f accuracy %.2f%%\n", epoch + 1, o->epochs, at, loss,
               100.0 * acc);
    }
    hp_feed_quality_csv(&r->counts, loss, acc, q, sizeof(q));
    if (r->metrics) { /* flushed: whoever follows the run sees each evaluation as it comes */
        fprintf(r->metrics, "test,%d,%ld,%.3f,%s,\n", epoch + 1, step, train_s, q);
        fflush(r->metrics);
    }
    fflush(stdout);
}

void hp_report_checkpoint(struct hp_report *r, long seq, const char *dir, long epoch, long nb,
                          long samples, int nfiles, double mbytes, double seconds)
{
    if (!r->reporter)
        return;
    hp_report_clear(r);
    printf("checkpoint %ld: epoch %ld, minibatch %ld of %ld, %ld samples: %d files, %.1f MB in "
           "%s, written in %.2f s\n",
           seq, epoch + 1, nb, r->j.my_mb, samples, nfiles, mbytes, dir, seconds);
    fflush(stdout);
}

int hp_report_weights_on(const struct hp_report *r)
{
    return r->weight_log != NULL;
}

void hp_report_weights(struct hp_report *r, long j, long fwd_version, long bwd_version,
                       long version_now, uint64_t fwd_hash, uint64_t bwd_hash)
{
    if (r->weight_log)
        fprintf(r->weight_log, "%d,%d,%ld,%ld,%ld,%ld,%016" PRIx64 ",%016" PRIx64 "\n", r->j.v,
                r->j.s, j, fwd_version, bwd_version, version_now, fwd_hash, bwd_hash);
}

void hp_report_end(struct hp_report *r, const struct hp_worker_result *res, int stopped, long seq,
                   int stop_at)
{
    const struct hp_report_job *j = &r->j;
    const struct hp_options *o = j->o;
    const double pred = hp_report_planned_rate(j) / (o->emulate > 0 ? o->emulate : 1.0);

    if (!r->reporter)
        return;
    hp_report_clear(r);
    if (stopped)
        printf("hetpipe: stopped on request (a signal) after checkpoint %ld; resume with "
               "--resume auto\n",
               seq);
    else if (stop_at && r->counts.text)
        printf("hetpipe: stopped: validation loss %.4f <= %g (--stop-at) after %ld samples\n",
               res->test_loss, o->stop_at, res->minibatches * j->batch * j->nvws);
    else if (stop_at)
        printf("hetpipe: stopped: test accuracy %.2f%% >= %g%% (--stop-at) after %ld samples\n",
               100.0 * res->test_acc, o->stop_at, res->minibatches * j->batch * j->nvws);
    printf("hetpipe: trained %ld minibatches in %.1f s: %.0f img/s on this %s", res->minibatches,
           res->train_s, res->images_per_s, j->dp ? "replica" : "virtual worker");
    if (o->emulate > 0)
        printf(" (predicted %.0f for the emulated GPUs at scale %g: ratio %.2f)", pred, o->emulate,
               res->images_per_s / pred);
    if (j->nvws > 1)
        printf("\nhetpipe: the job trained %ld images in %.1f s: %.0f img/s (wall clock from the "
               "start of every %s to the end of the last, less %.1f s of evaluation pauses)",
               res->minibatches * j->nvws * j->batch, res->job_s, res->job_images_per_s,
               j->dp ? "replica" : "VW", j->clock->paused_s);
    printf("\nhetpipe: parameters hash %016" PRIx64 "\n", res->param_hash);
    fflush(stdout);
}

/* This stage's real compute per minibatch over its VW's planned time per minibatch at the
 * emulation scale (1 when off): below 1 the emulated pace, not this CPU, sets the VW's rate;
 * at scale 1 it is the smallest scale at which that holds. */
static double cpu_share(const struct hp_report_job *j, const struct hp_worker_result *res)
{
    const double S = j->o->emulate > 0.0 ? j->o->emulate : 1.0;
    const double period = S * j->batch / hp_report_planned_rate(j);

    return res->minibatches > 0 && period > 0.0 ? res->compute_s / res->minibatches / period : 0.0;
}

int hp_report_stats(struct hp_report *r, const struct hp_worker_result *res, double eval_s,
                    const struct hp_ps_stats *ps, const struct hp_feed_stats *data)
{
    const struct hp_report_job *j = &r->j;
    const struct hp_stage_plan *st = &j->plan->vws[j->v].stages[j->s];
    FILE *f;

    if (!j->o->stats)
        return 0;
    if (!(f = open_ranked(j->o->stats, j->rank, "stats")))
        return -HP_EIO;
    fprintf(f,
            "rank = %d\nvw = %d\nstage = %d\nstages = %d\ntype = %s\nunits = %d-%d\nin_flight = "
            "%d\nemulate = %.9g\nminibatches = %ld\ntrain_s = %.6f\ncompute_s = %.6f\npad_s = "
            "%.6f\ncomm_s = %.6f\nother_s = %.6f\nimages_per_s = %.3f\npredicted_images_per_s = "
            "%.3f\nmem_peak = %zu\nmem_predicted = %.0f\nmem_real_base = %zu\nmem_real_peak = "
            "%zu\ntest_acc = %.6f\ncpu_share = %.6f\n"
            "eval_s = %.6f\n",
            j->rank, j->v, j->s, j->k, j->type_name, st->u0, st->u1 - 1, j->in_flight,
            j->o->emulate, res->minibatches, res->train_s, res->compute_s, res->pad_s, res->comm_s,
            res->other_s, res->images_per_s, hp_report_planned_rate(j), res->mem_peak,
            res->mem_predicted, res->mem_real_base, res->mem_real_peak, res->test_acc,
            cpu_share(j, res), eval_s);
    if (r->reporter)
        fprintf(f, "job_s = %.6f\njob_paused_s = %.6f\njob_images_per_s = %.3f\n", res->job_s,
                j->clock->paused_s, res->job_images_per_s);
    if (ps) {
        /* per wave: a push every wave, a pull every wave from the third on */
        fprintf(f,
                "waves_pushed = %ld\npulls = %ld\npull_wait_s = %.6f\nremote_push_bytes = %" PRIu64
                "\nremote_pull_bytes = %" PRIu64 "\nremote_bytes_per_wave = %.1f\n",
                ps->pushes, ps->pulls, ps->pull_wait_s, ps->remote_push_bytes,
                ps->remote_pull_bytes,
                (ps->pushes ? (double)ps->remote_push_bytes / ps->pushes : 0.0) +
                    (ps->pulls ? (double)ps->remote_pull_bytes / ps->pulls : 0.0));
    }
    if (data)
        fprintf(f,
                "data_threads = %d\ndata_queue = %d\ndata_decoded = %ld\ndata_skipped = %ld\n"
                "data_decode_s = %.6f\ndata_wait_s = %.6f\ndata_wait_start_s = %.6f\n"
                "data_depth_mean = %.3f\n",
                data->threads, data->queue, data->decoded, data->skipped, data->decode_s,
                data->wait_s, data->wait_start_s, data->depth_mean);
    return hp_out_close(f, 1) ? -HP_EIO : 0;
}
