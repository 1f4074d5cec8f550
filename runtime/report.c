/* report.c - what a stage tells: the progress and summary lines and the metrics of stage 0 of
 * VW 0, the step and weight logs, the stats file. */
#include "stage.h"

#include "clock.h"
#include "error.h"
#include "log.h"
#include "output.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

int hp_stage_open_files(struct stage *g)
{
    const struct hp_options *o = g->o;
    const int reporter = g->v == 0 && g->s == 0;

    if (o->weight_log) {
        /* every rank writes its own: PATH.<rank> */
        char path[4096];
        snprintf(path, sizeof(path), "%s.%d", o->weight_log, g->rank);
        if (!(g->logs.weight_log = hp_out_open(path, "weight log", 0666)))
            return -HP_EIO;
        fprintf(g->logs.weight_log,
                "vw,stage,minibatch,fwd_version,bwd_version,version_at_bwd,fwd_hash,bwd_hash\n");
    }
    if (reporter && o->step_log) {
        if (!(g->logs.step_log = hp_out_open(o->step_log, "step log", 0666)))
            return -HP_EIO;
        fprintf(g->logs.step_log, "step,loss\n");
    }
    if (reporter && o->metrics) {
        if (!(g->logs.metrics = hp_out_open(o->metrics, "metrics", 0666)))
            return -HP_EIO;
        fprintf(g->logs.metrics, "split,epoch,step,seconds,loss,accuracy,images_per_s\n");
    }
    return 0;
}

int hp_stage_timeline_open(struct stage *g)
{
    const struct hp_gpu *gpu = &g->cl->gpus[g->st->gpu];
    const long waves = g->run.my_mb / g->wsp.nm + 2;
    struct hp_tl_meta m = {.rank = g->rank,
                           .vw = g->v,
                           .stage = g->s,
                           .stages = g->k,
                           .nm = g->wsp.nm,
                           .device = gpu->index,
                           .clock_offset_s = hp_tl_clock_offset_s};

    if (!g->o->timeline)
        return 0;
    snprintf(m.role, sizeof(m.role), "%s", g->dp ? "replica" : "worker");
    snprintf(m.node, sizeof(m.node), "%s", g->cl->nodes[gpu->node].name);
    snprintf(m.gpu, sizeof(m.gpu), "%s", g->type_name);
    /* per minibatch: forward, backward, update, a send and a receive each way, an allreduce;
     * per wave a push and a pull; evaluations and checkpoints */
    g->tl = hp_tl_create((g->run.my_mb * 8 + waves * 2 + 1024) * g->o->epochs, &m);
    return g->tl ? 0 : -HP_ENOMEM;
}

int hp_stage_timeline_close(struct stage *g)
{
    char path[4096];
    int rc = 0;

    if (!g->tl)
        return 0;
    if ((size_t)snprintf(path, sizeof(path), "%s.%d", g->o->timeline, g->rank) >= sizeof(path)) {
        hp_error("--timeline: the path '%s.%d' is too long", g->o->timeline, g->rank);
        rc = -HP_EINVAL;
    } else {
        rc = hp_tl_write(g->tl, path);
    }
    if (g->tl->dropped)
        hp_warn("timeline: %ld events not recorded (the buffer of %ld was full)", g->tl->dropped,
                g->tl->cap);
    return rc;
}

/* This stage's real compute per minibatch over its VW's planned time per minibatch at the
 * emulation scale (1 when off): below 1 the emulated pace, not this CPU, sets the VW's rate;
 * at scale 1 it is the smallest scale at which that holds. */
static double cpu_share(const struct stage *g, const struct hp_worker_result *r)
{
    const double S = g->o->emulate > 0.0 ? g->o->emulate : 1.0;
    const double period = S * g->batch / hp_stage_planned_rate(g);

    return r->minibatches > 0 && period > 0.0 ? r->compute_s / r->minibatches / period : 0.0;
}

int hp_stage_write_stats(const struct stage *g, const struct hp_worker_result *r)
{
    char path[4096];
    FILE *f;

    if (!g->o->stats)
        return 0;
    snprintf(path, sizeof(path), "%s.%d", g->o->stats, g->rank);
    if (!(f = hp_out_open(path, "stats", 0666)))
        return -HP_EIO;
    fprintf(f,
            "rank = %d\nvw = %d\nstage = %d\nstages = %d\ntype = %s\nunits = %d-%d\nin_flight = "
            "%d\nemulate = %.9g\nminibatches = %ld\ntrain_s = %.6f\ncompute_s = %.6f\npad_s = "
            "%.6f\ncomm_s = %.6f\nother_s = %.6f\nimages_per_s = %.3f\npredicted_images_per_s = "
            "%.3f\nmem_peak = %zu\nmem_predicted = %.0f\nmem_real_base = %zu\nmem_real_peak = "
            "%zu\ntest_acc = %.6f\ncpu_share = %.6f\n"
            "eval_s = %.6f\n",
            g->rank, g->v, g->s, g->k, g->type_name, g->st->u0, g->st->u1 - 1, g->sched.w,
            g->o->emulate, r->minibatches, r->train_s, r->compute_s, r->pad_s, r->comm_s,
            r->other_s, r->images_per_s, hp_stage_planned_rate(g), r->mem_peak, r->mem_predicted,
            r->mem_real_base, r->mem_real_peak, r->test_acc, cpu_share(g, r), g->run.eval_s);
    if (g->run.reporter)
        fprintf(f, "job_s = %.6f\njob_paused_s = %.6f\njob_images_per_s = %.3f\n", r->job_s,
                g->run.job_paused_s, r->job_images_per_s);
    if (g->wsp.ps) {
        struct hp_ps_stats ps;
        hp_ps_client_stats(g->wsp.ps, &ps);
        /* per wave: a push every wave, a pull every wave from the third on */
        fprintf(f,
                "waves_pushed = %ld\npulls = %ld\npull_wait_s = %.6f\nremote_push_bytes = %" PRIu64
                "\nremote_pull_bytes = %" PRIu64 "\nremote_bytes_per_wave = %.1f\n",
                ps.pushes, ps.pulls, ps.pull_wait_s, ps.remote_push_bytes, ps.remote_pull_bytes,
                (ps.pushes ? (double)ps.remote_push_bytes / ps.pushes : 0.0) +
                    (ps.pulls ? (double)ps.remote_pull_bytes / ps.pulls : 0.0));
    }
    return hp_out_close(f, 1) ? -HP_EIO : 0;
}

void hp_stage_progress_clear(struct stage *g)
{
    if (!g->run.line_open)
        return;
    fputs("\r\033[K", stdout);
    fflush(stdout);
    g->run.line_open = 0;
}

void hp_stage_progress(struct stage *g, int epoch, long nb, double loss, double acc, double ips,
                       int due)
{
    const struct hp_options *o = g->o;
    const double now = hp_now_s(), elapsed = now - g->run.t_start - g->run.job_paused_s;

    if (o->quiet || (!g->run.tty && !due) || (g->run.tty && now - g->run.drawn_t < 0.25))
        return;
    if (g->run.tty) {
        /* this run's share of the job done so far, and the time the rest takes at its pace */
        const double total = (double)o->epochs * g->run.my_mb;
        const double start = (double)g->ck.epoch0 * g->run.my_mb + g->ck.nb0;
        const double done = (double)epoch * g->run.my_mb + nb - start;
        const double eta = done > 0 ? elapsed * (total - start - done) / done : 0.0;
        fputs("\r\033[K", stdout);
        printf("epoch %d/%ld step %ld/%ld loss %.4f acc %.2f%% %.0f img/s", epoch + 1, o->epochs,
               nb, g->run.my_mb, loss, 100.0 * acc, ips);
        hp_wsp_print_clocks(g, elapsed);
        printf(" | ETA %ld:%02ld", (long)eta / 60, (long)eta % 60);
        g->run.line_open = 1;
        g->run.drawn_t = now;
    } else {
        printf("epoch %d/%ld step %ld/%ld loss %.4f acc %.2f%% %.0f img/s", epoch + 1, o->epochs,
               nb, g->run.my_mb, loss, 100.0 * acc, ips);
        hp_wsp_print_clocks(g, elapsed);
        putchar('\n');
    }
    fflush(stdout);
}

/* The first line of stage 0 of VW 0: what this job trains, and how. */
void hp_stage_print_start(const struct stage *g)
{
    const struct hp_options *o = g->o;

    if (!g->run.reporter)
        return;
    if (g->dp)
        printf("hetpipe: model %s, dp over %d replicas (ring allreduce every minibatch), batch %d "
               "per replica, %ld epochs of %ld steps, lr %g, seed %llu%s\n",
               g->model->name, g->nvws, g->batch, o->epochs, g->run.my_mb, o->lr,
               (unsigned long long)g->plan->opts.seed,
               o->emulate > 0 ? ", emulated GPU types" : "");
    else
        printf("hetpipe: model %s, %d virtual worker%s, this one of %d stage%s, Nm %d, batch %d, "
               "%ld epochs of %ld minibatches, lr %g%s, seed %llu%s%s\n",
               g->model->name, g->nvws, g->nvws == 1 ? "" : "s", g->k, g->k == 1 ? "" : "s",
               g->wsp.nm, g->batch, o->epochs, g->run.my_mb, o->lr,
               g->nvws > 1 ? " (/ VWs in each)" : "", (unsigned long long)g->plan->opts.seed,
               g->nvws > 1 ? (g->plan->nshards ? ", WSP" : "") : "",
               o->emulate > 0 ? ", emulated GPU types" : "");
    printf("hetpipe: a silent peer fails the job after %.0f s (--timeout) or, in waits on other "
           "VWs and job points, %.0f s\n",
           g->timeout_ms / 1000.0, g->long_wait_ms / 1000.0);
    fflush(stdout);
}

/* The summary of stage 0 of VW 0: where --stop-at stopped, this VW's images/s against the
 * plan's prediction, the job's, the parameter hash. */
void hp_stage_print_end(struct stage *g, const struct hp_worker_result *res)
{
    const struct hp_options *o = g->o;
    const double pred = hp_stage_planned_rate(g) / (o->emulate > 0 ? o->emulate : 1.0);

    if (!g->run.reporter)
        return;
    hp_stage_progress_clear(g);
    if (g->ck.stopped)
        printf("hetpipe: stopped on request (a signal) after checkpoint %ld; resume with "
               "--resume auto\n",
               g->ck.seq);
    else if (g->run.stop)
        printf("hetpipe: stopped: test accuracy %.2f%% >= %g%% (--stop-at) after %ld samples\n",
               100.0 * res->test_acc, o->stop_at, res->minibatches * g->batch * g->nvws);
    printf("hetpipe: trained %ld minibatches in %.1f s: %.0f img/s on this %s", res->minibatches,
           res->train_s, res->images_per_s, g->dp ? "replica" : "virtual worker");
    if (o->emulate > 0)
        printf(" (predicted %.0f for the emulated GPUs at scale %g: ratio %.2f)", pred, o->emulate,
               res->images_per_s / pred);
    if (g->nvws > 1)
        printf("\nhetpipe: the job trained %ld images in %.1f s: %.0f img/s (wall clock from the "
               "start of every %s to the end of the last, less %.1f s of evaluation pauses)",
               res->minibatches * g->nvws * g->batch, res->job_s, res->job_images_per_s,
               g->dp ? "replica" : "VW", g->run.job_paused_s);
    printf("\nhetpipe: parameters hash %016" PRIx64 "\n", res->param_hash);
    fflush(stdout);
}
