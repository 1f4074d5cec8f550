/* pipeline.c - a worker rank's run (pipeline.h): set-up, the epochs with their evaluation
 * points, the end. The stage's parts are in schedule.c, sync.c, evaluate.c, emulate.c and
 * report.c (stage.h). */
#include "stage.h"

#include "clock.h"
#include "error.h"
#include "log.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The stage's role, net, buffers, emulation and output files. */
static int worker_init(struct stage *g)
{
    int rc;

    g->timeout_ms = (int)(g->o->timeout * 1000.0);
    g->long_wait_ms = hp_plan_wait_ms(g->plan, g->o, g->model->nparams + g->model->nstate);
    g->nvws = g->plan->nvws;
    if (hp_plan_rank_stage(g->plan, g->rank, &g->v, &g->s)) {
        hp_error("rank %d is not a worker of the plan (%d workers)", g->rank,
                 hp_plan_first_shard(g->plan));
        g->v = -1;
        return -HP_EINVAL;
    }
    rc = hp_stage_setup(g);
    if (rc)
        return rc;
    g->type_name = g->db->types[g->type].name;
    hp_emulate_setup(g);
    return hp_stage_open_files(g);
}

/* Stage 0 reads the data; every stage knows the minibatch counts from the same options. Every
 * VW (replica) trains the same share: dp's replicas the steps of hetpipe train at R x B, WSP's
 * VWs the same evaluation points (hp_eval_verdict); the last total_mb % nvws minibatches of an
 * epoch's permutation are left out. */
static int load_data(struct stage *g)
{
    const struct hp_options *o = g->o;
    struct stage_run *run = &g->run;
    int rc;

    run->ntrain = o->train_limit > 0 && o->train_limit < FASHION_TRAIN_N ? (int)o->train_limit
                                                                         : FASHION_TRAIN_N;
    if (g->s == 0) {
        rc = hp_dataset_load_fashion_mnist(o->data, 1, &g->data.train);
        if (!rc && g->v == 0)
            rc = hp_dataset_load_fashion_mnist(o->data, 0, &g->data.test);
        if (rc)
            return rc;
        if (g->data.train.n < run->ntrain) {
            hp_error("the training set has %d samples, fewer than %d", g->data.train.n,
                     run->ntrain);
            return -HP_EDATA;
        }
        g->data.perm = malloc((size_t)g->data.train.n * sizeof(int));
        g->data.idx = malloc((size_t)g->batch * sizeof(int));
        g->data.himg = malloc(g->link.in_floats * sizeof(float));
        g->data.hlab = malloc((size_t)g->batch * sizeof(int32_t));
        if (!g->data.perm || !g->data.idx || !g->data.himg || !g->data.hlab)
            return -HP_ENOMEM;
    }
    run->total_mb = run->ntrain / g->batch;
    run->my_mb = run->total_mb / g->nvws;
    if (run->my_mb == 0) {
        hp_error("minibatch %d x %d virtual workers is more than the %d training samples", g->batch,
                 g->nvws, run->ntrain);
        return -HP_EINVAL;
    }
    run->total_steps = g->dp ? run->my_mb * o->epochs : run->total_mb * o->epochs;
    run->reporter = g->v == 0 && g->s == 0;
    run->tty = run->reporter && !o->verbose && isatty(STDOUT_FILENO);
    /* --eval-every N samples: VW 0 evaluates after every ek of its minibatches */
    run->ek = o->eval_every > 0
                  ? (o->eval_every + (long)g->nvws * g->batch - 1) / ((long)g->nvws * g->batch)
                  : 0;
    return 0;
}

/* The job's start: every worker ready (data loaded, connected), then all begin together
 * (hp_eval_gather); the job's clock runs on the reporter from the last arrival. */
static int start_point(struct stage *g)
{
    double t_all = 0.0;
    unsigned flags = 0;
    long seq = 0;
    int req = 0;
    int rc = hp_eval_gather(g, -1, &t_all, &req);

    if (!rc)
        rc = hp_eval_verdict(g, -1, &flags, &seq);
    g->run.t_start = g->ck.last_t = hp_now_s();
    return rc;
}

/* The reporter's verdict at a job point: stop (--stop-at, or a request after its checkpoint),
 * checkpoint (due, or requested); a new checkpoint directory for it. */
static unsigned decide(struct stage *g, long nb, int req, int last, long *seq, char *dir, size_t n)
{
    unsigned flags = g->run.stop ? HP_VERDICT_STOP : 0u;

    if (last || g->run.stop || !g->o->checkpoint_dir)
        return flags;
    if (req || hp_ckpt_due(g, nb)) {
        if (hp_ckpt_new_dir(g->o->checkpoint_dir, g->ck.seq, seq, dir, n))
            return req ? flags | HP_VERDICT_STOP | HP_VERDICT_REQUEST : flags;
        flags |= HP_VERDICT_CKPT | (req ? HP_VERDICT_STOP | HP_VERDICT_REQUEST : 0u);
    }
    return flags;
}

/* A job point (nb < 0: the end of an epoch; last: the end of the job; evaluate: VW 0 runs the
 * test set): every worker arrives (hp_eval_gather), VW 0 evaluates, every worker learns the
 * verdict (not at the end): go on, checkpoint, stop. Every worker is paused from the last
 * arrival to the verdict and the checkpoint: not the job's training time. A stage's own time
 * here, drained and waiting, is not its training time either. */
static int job_point(struct stage *g, struct hp_worker_result *res, int epoch, long nb, long step,
                     int last, int evaluate)
{
    struct stage_run *run = &g->run;
    const double te = hp_now_s();
    double t_all = te, tl = 0.0, ta = 0.0;
    int req = hp_ckpt_requested != 0;
    unsigned flags = 0;
    long seq = 0;
    char dir[4200] = "";
    int rc = hp_eval_gather(g, run->npoints, &t_all, &req);
    const double job_s = t_all - run->t_start - run->job_paused_s;

    if (!rc && g->v == 0 && evaluate)
        rc = hp_eval_report(g, res, epoch, nb, run->my_mb, step, job_s, last && nb < 0, &tl, &ta);
    if (evaluate)
        hp_tl_add(g->tl, HP_TL_EVAL, te, hp_now_s(), -1, -1, 0, epoch);
    if (evaluate)
        run->stop = hp_eval_reached(g, ta);
    if (!rc && g->run.reporter)
        flags = decide(g, nb < 0 ? run->my_mb : nb, req, last, &seq, dir, sizeof(dir));
    if (!rc && !last)
        rc = hp_eval_verdict(g, run->npoints, &flags, &seq);
    run->npoints++;
    if (evaluate)
        run->nevals++;
    run->stop = (flags & HP_VERDICT_STOP) != 0;
    if (!rc && (flags & HP_VERDICT_CKPT)) {
        int ok = 0;
        const double tc = hp_now_s();
        if (!g->run.reporter)
            snprintf(dir, sizeof(dir), "%s/ckpt-%ld", g->o->checkpoint_dir, seq);
        rc = hp_stage_checkpoint(g, seq, dir, nb < 0 ? epoch + 1 : epoch, nb < 0 ? 0 : nb, &ok);
        hp_tl_add(g->tl, HP_TL_CKPT, tc, hp_now_s(), -1, -1, 0, seq);
        g->ck.stopped = ok && (flags & HP_VERDICT_REQUEST);
        if (!rc && !ok && (flags & HP_VERDICT_REQUEST)) {
            hp_error("stopping on request, but checkpoint %ld could not be written", seq);
            rc = -HP_EIO;
        }
    } else if (!rc && (flags & HP_VERDICT_REQUEST)) {
        hp_error("stopping on request without a checkpoint (it could not be started)");
        rc = -HP_EIO;
    }
    const double now = hp_now_s();
    run->eval_s += now - te;
    if (last || run->stop)
        run->job_s = job_s;
    else
        run->job_paused_s += now - t_all;
    return rc;
}

/* Stage 0's progress over an interval of minibatches. */
struct interval {
    long n;
    double lsum, csum, t0;
};

/* After the backward pass of minibatch nb (1-based count) at schedule step `step` on stage 0:
 * the loss checked, the step log, and every log_every minibatches a progress line and a
 * metrics row. */
static int progress(struct stage *g, struct interval *iv, int epoch, long nb, long step,
                    long step_base, double l, int c)
{
    const struct hp_options *o = g->o;

    if (!isfinite(l)) {
        hp_error("loss is %g at step %ld: training diverged (lower --lr)", l, step);
        return -HP_ERANGE;
    }
    iv->lsum += l;
    iv->csum += c;
    iv->n++;
    if (g->logs.step_log)
        fprintf(g->logs.step_log, "%ld,%.9e\n", step, l / g->batch);
    if (!g->run.reporter)
        return 0;
    const int due = (o->log_every > 0 && nb % o->log_every == 0) || nb == g->run.my_mb;
    const double now = hp_now_s(), ips = (double)iv->n * g->batch / (now - iv->t0);
    const double loss = iv->lsum / ((double)iv->n * g->batch);
    const double acc = iv->csum / ((double)iv->n * g->batch);
    hp_stage_progress(g, epoch, nb, loss, acc, ips, due && o->log_every > 0);
    if (!due)
        return 0;
    if (g->logs.metrics)
        fprintf(g->logs.metrics, "train,%d,%ld,%.3f,%.6f,%.6f,%.1f\n", epoch + 1,
                step_base + nb * g->nvws, now - g->run.t_start - g->run.job_paused_s, loss, acc,
                ips);
    fflush(stdout);
    *iv = (struct interval){.t0 = now};
    return 0;
}

/* The next job point after nb: a multiple of the evaluation interval ek or of the checkpoint
 * interval ck (my_mb: none before the epoch's end). */
static long next_point(const struct stage *g, long nb)
{
    long p = g->run.my_mb;

    if (g->run.ek && (nb / g->run.ek + 1) * g->run.ek < p)
        p = (nb / g->run.ek + 1) * g->run.ek;
    if (g->ck.ck && (nb / g->ck.ck + 1) * g->ck.ck < p)
        p = (nb / g->ck.ck + 1) * g->ck.ck;
    return p;
}

/* One epoch from the VW's minibatch nb0: forward passes while fewer than w minibatches are
 * outstanding, else the backward of the oldest; drained at every job point (job_point). */
static int train_epoch(struct stage *g, struct hp_worker_result *res, int epoch, long nb0)
{
    struct stage_run *run = &g->run;
    const long my_mb = run->my_mb, step_base = (long)epoch * run->total_mb;
    const long ebase = (long)epoch * my_mb;
    long nf = nb0, nb = nb0, lim = next_point(g, nb0);
    struct interval iv = {.t0 = hp_now_s()};
    int rc = 0;

    if (g->s == 0)
        hp_permute(g->data.perm, g->data.train.n < run->ntrain ? g->data.train.n : run->ntrain,
                   hp_rng_derive(g->plan->opts.seed, 0x1000 + (uint64_t)epoch));
    g->wsp.pbase = ebase - g->ck.q0;
    while (nb < my_mb && !rc) {
        if (nb == lim) { /* drained for a job point within the epoch */
            const double e0 = run->eval_s;
            const int evaluate = run->ek && nb % run->ek == 0;
            rc = job_point(g, res, epoch, nb, step_base + nb * g->nvws, 0, evaluate);
            iv.t0 += run->eval_s - e0;
            lim = next_point(g, nb);
            if (run->stop)
                break;
            continue;
        }
        /* dp: the step of hetpipe train at R x B; else the job's minibatch index */
        if (nf < lim && nf - nb < g->sched.w) {
            const long m = nf * g->nvws + g->v;
            rc = hp_stage_forward(g, nf, nb, m, g->dp ? ebase + nf : step_base + m);
            nf++;
        } else {
            const long m = nb * g->nvws + g->v, step = g->dp ? ebase + nb : step_base + m;
            double l = 0.0;
            int c = 0;
            rc = hp_stage_backward(g, nb, nf, step, run->total_steps, &l, &c);
            nb++;
            res->minibatches++;
            if (!rc && g->s == 0)
                rc = progress(g, &iv, epoch, nb, step, step_base, l, c);
        }
    }
    if (rc || run->stop)
        return rc;
    const int last = epoch + 1 == g->o->epochs;
    if (last && g->wsp.ps && g->wsp.unpushed > 0) /* the partial last wave */
        rc = hp_wsp_push(g, hp_ps_pushed(g->wsp.ps));
    if (!rc)
        rc = job_point(g, res, epoch, -1, (long)(epoch + 1) * run->total_mb, last, 1);
    return rc;
}

/* After the last epoch: the shards have every push, the parameter hash, --save-params, and
 * every send delivered before the endpoints close. */
static int finish(struct stage *g, struct hp_worker_result *res)
{
    int rc = 0;

    if (g->wsp.ps)
        rc = hp_ps_flush(g->wsp.ps);
    if (!rc)
        rc = hp_stage_param_hash(g, &res->param_hash);
    if (!rc && g->o->save_params) {
        char path[4096];
        snprintf(path, sizeof(path), "%s.%d", g->o->save_params, g->rank);
        rc = g->be->ops->download(g->be, g->hparams, hp_net_params(g->net),
                                  g->nparams * sizeof(float));
        if (!rc)
            rc = hp_save_floats(path, g->hparams, g->nparams);
    }
    for (int i = 0; i < 2 && !rc; i++) {
        rc = hp_comm_send_wait(g->comm, g->link.act_out[i], g->timeout_ms);
        if (!rc)
            rc = hp_comm_send_wait(g->comm, g->link.grad_out[i], g->timeout_ms);
    }
    return rc;
}

int hp_worker_run(const struct hp_plan *plan, const struct hp_cluster *cl,
                  const struct hp_gpudb *db, const struct hp_model *model, int rank,
                  struct hp_comm *comm, const struct hp_options *o, struct hp_worker_result *res)
{
    struct stage g = {
        .plan = plan, .cl = cl, .db = db, .model = model, .o = o, .comm = comm, .rank = rank};
    int rc;

    memset(res, 0, sizeof(*res));
    rc = worker_init(&g);
    if (g.v < 0)
        return rc;
    if (!rc)
        rc = load_data(&g);
    if (!rc)
        rc = hp_ckpt_setup(&g);
    if (!rc)
        rc = hp_stage_restore(&g);
    if (!rc)
        rc = hp_sync_setup(&g, g.run.my_mb);
    if (!rc)
        rc = hp_stage_restore_client(&g);
    if (!rc)
        rc = hp_stage_timeline_open(&g);
    if (!rc) {
        hp_stage_print_start(&g);
        rc = start_point(&g);
    }
    for (long epoch = g.ck.epoch0; epoch < o->epochs && !rc && !g.run.stop; epoch++)
        rc = train_epoch(&g, res, (int)epoch, epoch == g.ck.epoch0 ? g.ck.nb0 : 0);
    /* the last evaluation point's time is in eval_s: this stage's end is where it began */
    const double t_train = hp_now_s() - g.run.t_start - g.run.eval_s;
    if (!rc)
        rc = finish(&g, res);
    if (!rc) {
        res->train_s = t_train;
        res->job_s = g.run.reporter ? g.run.job_s : 0.0;
        res->compute_s = g.time.compute_s;
        res->pad_s = g.time.pad_s;
        res->comm_s = g.time.comm_s;
        res->other_s = t_train - g.time.compute_s - g.time.pad_s - g.time.comm_s;
        res->images_per_s = t_train > 0 ? (double)res->minibatches * g.batch / t_train : 0.0;
        /* every VW (replica) trains the same minibatches: all of them over the job's time */
        res->job_images_per_s =
            res->job_s > 0 ? (double)res->minibatches * g.nvws * g.batch / res->job_s : 0.0;
        res->mem_peak = g.be->mem_peak;
        res->mem_predicted = g.st->memory;
        res->mem_real_base = g.mem_base;
        rc = g.be->ops->memory_used(g.be, &(size_t){0}, &res->mem_real_peak);
    }
    if (!rc) {
        hp_stage_print_end(&g, res);
        rc = hp_stage_write_stats(&g, res);
    }
    if (!rc)
        rc = hp_ps_worker_done(plan, comm, rank, g.v, g.s, g.ck.stopped, g.timeout_ms);
    res->stopped = g.ck.stopped;
    /* what was recorded, also of a failed run */
    const int trc = hp_stage_timeline_close(&g);
    if (!rc)
        rc = trc;
    hp_stage_teardown(&g);
    return rc;
}
