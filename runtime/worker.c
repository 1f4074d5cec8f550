/* worker.c - a worker rank: stage s of virtual worker v (worker.h). train_span is the loop of
 * HetPipe's algorithm; train_epoch and job_point around it; the rest sets the stage up, moves
 * its tensors and ends it. */
#include "worker.h"

#include "ckpt.h"
#include "clock.h"
#include "dp.h"
#include "emulate.h"
#include "error.h"
#include "evaluate.h"
#include "feed.h"
#include "jobpoint.h"
#include "link.h"
#include "log.h"
#include "lrsched.h"
#include "net.h"
#include "pause.h"
#include "report.h"
#include "rng.h"
#include "schedule.h"
#include "stash.h"
#include "timeline.h"
#include "vwsync.h"
#include "weights.h"
#include "wsp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRAILER_DOUBLES 2 /* gradient messages: loss sum, correct count */

struct worker {
    /* what the rank runs */
    const struct hp_plan *plan;
    const struct hp_cluster *cl;
    const struct hp_gpudb *db;
    const struct hp_model *model;
    const struct hp_options *o;
    struct hp_comm *comm;
    int rank, v, s, k, nvws, batch, nm, dp, reporter;
    int inflight; /* minibatches kept between forward and backward (the plan's) */
    const struct hp_stage_plan *st;
    int timeout_ms, wait_ms; /* a peer's silence; waits for other VWs and job points */
    /* the stage */
    struct hp_backend *be;
    size_t mem_base; /* memory in use before the net (be->ops->memory_used) */
    struct hp_net *net;
    struct hp_weights wt;
    size_t in_floats, out_floats; /* per minibatch */
    int positions;                /* labels a sample (hp_model_positions) */
    size_t lab_n;                 /* labels a minibatch: batch x positions */
    int32_t *labels;              /* [inflight][lab_n] */
    uint64_t *fwd_hash;           /* [inflight]: --weight-log */
    /* the modules it calls */
    struct hp_feed_counts n;
    struct hp_feed *feed; /* stage 0 */
    struct hp_link_state *link;
    const struct hp_link *peers;
    struct hp_stash *stash;
    struct hp_wsp *wsp;
    struct hp_dp *dp_sync;
    struct hp_vwsync *vsync; /* tied gradients and the clipping norm (NULL: neither) */
    struct {
        int on; /* a backward pass whose update waits for hp_vwsync_settle */
        struct hp_pass p;
        long q, step, epoch;
    } pend;
    struct hp_emu emu;
    struct hp_timeline *tl;
    struct hp_report *rep;
    struct hp_jobpoint jp;
    struct hp_pause pause;
    struct hp_ckpt_cadence cadence;
    struct hp_ckpt_job ck;
    struct hp_ckpt_pending *pending; /* a checkpoint being written in the background */
    struct hp_ckpt_info pending_at;  /* where it was taken (the reporter's report) */
    struct hp_ckpt_resume from;      /* where this run starts */
    /* the run */
    long ek;          /* VW 0 evaluates every ek of its minibatches (0: at epochs' ends) */
    long total_steps; /* of the learning-rate schedule */
    long q_base;      /* WSP's q of the epoch's first minibatch */
    long npoints, eval_tag, seq;
    int stop, stopped;
    double compute_s, comm_s, eval_s, last_ckpt_t, job_s;
    struct hp_job_clock clock;
    struct hp_worker_result *res;
};

/* ---- the stage's tensors ---- */

/* After compute started at t0: wait for the device, count the time. */
static int compute_done(struct worker *w, double t0)
{
    int rc = w->be->ops->sync(w->be);

    w->compute_s += hp_now_s() - t0;
    return rc;
}

/* FNV-1a of a device vector of the stage's parameters (--weight-log). */
static uint64_t weights_hash(struct worker *w, const float *dev)
{
    if (!w->wt.n)
        return HP_FNV_OFFSET;
    if (w->be->ops->download(w->be, w->wt.host, dev, w->wt.n * sizeof(float)))
        return 0;
    return hp_fnv1a(HP_FNV_OFFSET, w->wt.host, w->wt.n * sizeof(float));
}

/* Learning rate of global step `step` of `total`, as hetpipe train (lrsched.h: --warmup, then
 * --schedule). With V > 1 virtual workers each applies lr / V: the PS adds up every VW's
 * updates, so V minibatches (one per VW) move the global weights as one step of hetpipe train
 * at minibatch V x B would, as dp's averaged gradient does. (Summing V full-lr updates is V
 * times the step size; measured on local4 under ed, 4 epochs: 88.1% at 0.025 per VW, 90.0% at
 * 0.0125.) */
static float lr_at(const struct worker *w, long step)
{
    const struct hp_options *o = w->o;
    const float lr0 = (float)o->lr;
    const struct hp_lrsched sched = {.lr = !w->dp && w->nvws > 1 ? lr0 / w->nvws : lr0,
                                     .warmup = o->lr_warmup,
                                     .total = w->total_steps,
                                     .cosine = o->schedule == HP_SCHEDULE_COSINE};

    return (float)hp_lrsched_at(&sched, step);
}

/* Minibatch j's message of `type` from `peer` (`bytes`, at *payload), its wait on the
 * timeline as `kind` (the VW's minibatch q). */
static int receive_tensor(struct worker *w, int peer, int type, long j, long q, size_t bytes,
                          enum hp_tl_kind kind, const char *what, const void **payload)
{
    const double t0 = hp_now_s();
    int rc = hp_link_recv(w->link, peer, type, j, bytes, what, payload);

    if (!rc)
        hp_tl_add(w->tl, kind, t0, hp_now_s(), q, peer, (int64_t)bytes, -1);
    return rc;
}

/* A tensor of the stage (dev, `bytes`) and `extra` host bytes after it, as minibatch j's
 * message of `type` to `peer` from the `dir` buffers; the send padded to `emulated` seconds
 * and on the timeline as `kind`. */
static int send_tensor(struct worker *w, enum hp_link_dir dir, int peer, int type, long j, long q,
                       const float *dev, size_t bytes, const void *extra, size_t extra_bytes,
                       double emulated, enum hp_tl_kind kind)
{
    void *b;
    int rc = hp_link_take(w->link, dir, &b);

    if (!rc)
        rc = w->be->ops->download(w->be, b, dev, bytes);
    if (rc)
        return rc;
    memcpy((char *)b + bytes, extra, extra_bytes);
    const double t0 = hp_now_s();
    rc = hp_link_send(w->link, peer, type, j, bytes + extra_bytes);
    if (rc)
        return rc;
    hp_emu_pad(&w->emu, t0, emulated);
    hp_tl_add(w->tl, kind, t0, hp_now_s(), q, peer, (int64_t)(bytes + extra_bytes), -1);
    return 0;
}

/* Minibatch p->j's input into its slot: stage 0 takes the job's minibatch m of the epoch's
 * order from the feed; a later stage receives the previous stage's activation. The labels
 * travel with it. HP_LINK_END: in its place came the span's end (a pause). */
static int take_input(struct worker *w, const struct hp_pass *p, long q)
{
    int32_t *lab = w->labels + (size_t)p->slot * w->lab_n;
    const size_t in_bytes = w->in_floats * sizeof(float), lab_bytes = w->lab_n * sizeof(int32_t);
    const void *x;

    if (w->s == 0) {
        const double t0 = hp_now_s();
        double waited;
        int rc = hp_feed_train(w->feed, p->j, (const float **)&x, lab, &waited);
        if (rc)
            return rc;
        hp_tl_add(w->tl, HP_TL_DATA, t0, t0 + waited, q, -1, 0, -1);
    } else {
        int rc = receive_tensor(w, w->peers->prev, HP_MSG_ACTIVATION, p->j, q, in_bytes + lab_bytes,
                                HP_TL_RECV_ACT, "activation", &x);
        if (rc) /* also HP_LINK_END: the span ends here (a pause) */
            return rc;
        memcpy(lab, (const char *)x + in_bytes, lab_bytes);
    }
    return w->be->ops->upload(w->be, hp_net_input(w->net, p->slot), x, in_bytes);
}

/* The forward pass of p->j on the current weights, padded to the emulated GPU's time. */
static int forward(struct worker *w, const struct hp_pass *p, long q, long step)
{
    const double t0 = hp_now_s();
    int rc;

    hp_stash_forward(w->stash, p->slot);
    if (hp_report_weights_on(w->rep))
        w->fwd_hash[p->slot] = weights_hash(w, w->wt.dev);
    rc = hp_net_forward(w->net, p->slot, 1,
                        hp_rng_derive((uint64_t)w->plan->opts.seed, 0x2000000 + (uint64_t)step));
    if (!rc)
        rc = compute_done(w, t0);
    if (rc)
        return rc;
    hp_emu_pad(&w->emu, t0, w->emu.fwd);
    hp_tl_add(w->tl, HP_TL_FWD, t0, hp_now_s(), q, -1, 0, q / w->nm);
    return 0;
}

/* The stage's output of p->j and its labels to the next stage. */
static int send_activation(struct worker *w, const struct hp_pass *p, long q)
{
    if (w->peers->next < 0)
        return 0;
    return send_tensor(w, HP_LINK_DOWN, w->peers->next, HP_MSG_ACTIVATION, p->j, q,
                       hp_net_output(w->net, p->slot), w->out_floats * sizeof(float),
                       w->labels + (size_t)p->slot * w->lab_n, w->lab_n * sizeof(int32_t),
                       w->emu.send_next, HP_TL_SEND_ACT);
}

/* The gradient of p->j's output: the loss on the last stage, else the next stage's message
 * (with the minibatch's loss and correct answers for stage 0's progress line). */
static int take_gradient(struct worker *w, const struct hp_pass *p, long q, double *loss,
                         int *correct)
{
    const size_t out_bytes = w->out_floats * sizeof(float);
    double tr[TRAILER_DOUBLES];
    const void *g;
    int rc;

    if (w->peers->next < 0) {
        const double t0 = hp_now_s();
        rc = hp_net_loss(w->net, p->slot, w->labels + (size_t)p->slot * w->lab_n, w->batch, 1, loss,
                         correct);
        return rc ? rc : compute_done(w, t0);
    }
    rc = receive_tensor(w, w->peers->next, HP_MSG_GRADIENT, p->j, q, out_bytes + sizeof(tr),
                        HP_TL_RECV_GRAD, "gradient", &g);
    if (rc)
        return rc;
    memcpy(tr, (const char *)g + out_bytes, sizeof(tr));
    *loss = tr[0];
    *correct = (int)tr[1];
    return w->be->ops->upload(w->be, hp_net_output_grad(w->net), g, out_bytes);
}

/* The backward pass of p->j on the weights its forward pass used (stash.h). */
static int backward(struct worker *w, const struct hp_pass *p, long q)
{
    long version;
    const float *weights = hp_stash_weights(w->stash, p->slot, &version);
    int rc;

    if (hp_report_weights_on(w->rep))
        hp_report_weights(w->rep, p->j, hp_stash_forward_version(w->stash, p->slot), version,
                          hp_stash_version(w->stash), w->fwd_hash[p->slot],
                          weights_hash(w, weights ? weights : w->wt.dev));
    const double t0 = hp_now_s();
    rc = hp_net_backward_weights(w->net, p->slot, weights);
    if (!rc)
        rc = compute_done(w, t0);
    if (rc)
        return rc;
    hp_emu_pad(&w->emu, t0, w->emu.bwd);
    hp_tl_add(w->tl, HP_TL_BWD, t0, hp_now_s(), q, -1, 0, q / w->nm);
    return 0;
}

/* The gradient of p->j's input, with the loss trailer, to the previous stage. */
static int send_gradient(struct worker *w, const struct hp_pass *p, long q, double loss,
                         int correct)
{
    const double tr[TRAILER_DOUBLES] = {loss, (double)correct};

    if (w->peers->prev < 0)
        return 0;
    return send_tensor(w, HP_LINK_UP, w->peers->prev, HP_MSG_GRADIENT, p->j, q,
                       hp_net_input_grad(w->net), w->in_floats * sizeof(float), tr, sizeof(tr),
                       w->emu.send_prev, HP_TL_SEND_GRAD);
}

/* dp: after a backward pass the gradients averaged over the replicas (the ring allreduce). */
static int average(struct worker *w, long step)
{
    const double t0 = hp_now_s();
    int rc;

    if (!w->dp_sync)
        return 0;
    rc = hp_dp_average(w->dp_sync, w->be, hp_net_grads(w->net), step, w->timeout_ms);
    if (rc)
        return rc;
    w->comm_s += hp_now_s() - t0;
    hp_emu_pad(&w->emu, t0, w->emu.allreduce);
    hp_tl_add(w->tl, HP_TL_ALLREDUCE, t0, hp_now_s(), step, -1, (int64_t)hp_dp_bytes(w->dp_sync),
              -1);
    return 0;
}

/* The update of p->j (its gradients settled: averaged, tied, clipped): the minibatches still
 * in flight keep the weights they ran on (stash.h); the SGD or AdamW step of global step
 * `step` (AdamW's count: the VW's updates so far, epoch x my_mb + j + 1, hetpipe train's step
 * + 1 with one VW); then WSP's account of it. */
static int update(struct worker *w, const struct hp_pass *p, long q, long step, int epoch)
{
    const struct hp_options *o = w->o;
    int rc = hp_stash_change(w->stash, w->wt.dev, p->out0, p->out1);

    if (rc)
        return rc;
    const double t0 = hp_now_s();
    const float lr = lr_at(w, step);
    if (w->plan->opts.optimizer == HP_OPTIMIZER_ADAMW) {
        const struct hp_adamw_desc d = {.lr = lr,
                                        .wd = (float)o->weight_decay,
                                        .beta1 = (float)o->beta1,
                                        .beta2 = (float)o->beta2,
                                        .eps = (float)o->eps,
                                        .step = (long)epoch * w->n.my_mb + p->j + 1};
        rc = hp_net_adamw(w->net, &d);
    } else {
        rc = hp_net_sgd(w->net, lr, (float)o->momentum, (float)o->weight_decay);
    }
    if (!rc)
        rc = compute_done(w, t0);
    hp_tl_add(w->tl, HP_TL_UPDATE, t0, hp_now_s(), q, -1, 0, -1);
    return rc ? rc : hp_wsp_updated(w->wsp, q, &w->wt);
}

/* A later stage's update that waited for its VW's tied gradient or norm (vwsync.h). */
static int settle(struct worker *w)
{
    int rc;

    if (!w->pend.on)
        return 0;
    w->pend.on = 0;
    rc = hp_vwsync_settle(w->vsync, w->pend.p.j, w->pend.q);
    return rc ? rc : update(w, &w->pend.p, w->pend.q, w->pend.step, (int)w->pend.epoch);
}

/* After p->j's backward pass: its gradients averaged (dp), settled with the VW's other
 * stages (vwsync.h), and its update now or, on a later stage that waits for the first, before
 * its next pass. */
static int after_backward(struct worker *w, const struct hp_pass *p, long q, long step, int epoch)
{
    int later = 0;
    int rc = average(w, step);

    if (!rc)
        rc = hp_vwsync_backward(w->vsync, p->j, q, &later);
    if (rc || !later)
        return rc ? rc : update(w, p, q, step, epoch);
    w->pend.on = 1;
    w->pend.p = *p;
    w->pend.q = q;
    w->pend.step = step;
    w->pend.epoch = epoch;
    return 0;
}

/* ---- the loop ---- */

static int ckpt_finish(struct worker *w, int wait, int tell, unsigned flags);

/* Stage 0 with checkpoints on, before the forward pass of the VW's minibatch q: whether the
 * span ends at q (a pause, pause.h: a request, or a checkpoint due in time). */
static int pause_here(struct worker *w, long q, int *end)
{
    const int due =
        w->reporter && w->cadence.every_s > 0 && hp_now_s() - w->last_ckpt_t >= w->cadence.every_s;

    *end = 0;
    if (w->s != 0 || !w->cadence.on)
        return 0;
    return hp_pause_check(&w->pause, q, hp_ckpt_requested != 0, due, hp_wsp_pushed(w->wsp), end);
}

/* The span ends at p->j (a pause): no forward pass from it on; the next stage learns of it
 * where p->j's activation would be. */
static int end_span(struct worker *w, struct hp_sched *sched, const struct hp_pass *p)
{
    hp_sched_end(sched, p->j);
    return w->peers->next >= 0 ? hp_link_send_end(w->link, w->peers->next, p->j) : 0;
}

/* The VW's minibatches [from, to) of `epoch` through this stage in the one-forward-one-
 * backward order (schedule.h), with Wave Synchronous Parallel at the edges of its waves
 * (wsp.h): before the first minibatch of a wave the gate (wait for the VWs behind, pull,
 * rebase), after the last the push. A pause may end it sooner; *end: where it ended. Ends
 * drained. */
static int train_span(struct worker *w, int epoch, long from, long to, long *end)
{
    const long epoch_base = (long)epoch * w->n.my_mb, step_base = (long)epoch * w->n.total_mb;
    struct hp_sched sched;
    struct hp_pass p;
    int rc = 0, here = 0;

    hp_sched_init(&sched, from, to, w->inflight);
    while (!rc && hp_sched_next(&sched, &p)) {
        const long q = w->q_base + p.j;      /* the VW's minibatch, as WSP counts them */
        const long m = p.j * w->nvws + w->v; /* the job's minibatch of the epoch's order */
        const long step = w->dp ? epoch_base + p.j : step_base + m; /* dp: train's at R x B */
        rc = settle(w); /* the last backward pass's update, if it waited */
        if (rc)
            break;
        if (p.kind == HP_PASS_FORWARD) {
            rc = ckpt_finish(w, 0, 0, 0); /* one written in the background: done yet? */
            if (!rc)
                rc = pause_here(w, q, &here);
            if (!rc && here) {
                rc = end_span(w, &sched, &p);
                continue;
            }
            if (!rc)
                rc = take_input(w, &p, q);
            if (rc == HP_LINK_END) {
                rc = end_span(w, &sched, &p);
                continue;
            }
            if (!rc && hp_wsp_gate_due(w->wsp, q)) /* the rebase changes the weights: stash */
                rc = hp_stash_change(w->stash, w->wt.dev, p.out0, p.out1);
            if (!rc)
                rc = hp_wsp_gate(w->wsp, q, &w->wt);
            if (!rc)
                hp_wsp_trace_minibatch(w->wsp, q);
            if (!rc)
                rc = forward(w, &p, q, step);
            if (!rc)
                rc = send_activation(w, &p, q);
        } else {
            double loss = 0.0;
            int correct = 0;
            rc = take_gradient(w, &p, q, &loss, &correct);
            if (!rc)
                rc = backward(w, &p, q);
            if (!rc)
                rc = send_gradient(w, &p, q, loss, correct);
            if (!rc)
                rc = after_backward(w, &p, q, step, epoch);
            w->res->minibatches++;
            if (!rc && w->s == 0)
                rc = hp_report_minibatch(w->rep, epoch, p.j + 1, step, step_base, loss, correct);
        }
    }
    if (!rc)
        rc = settle(w); /* the span ends drained: every update done */
    *end = sched.to;
    return rc;
}

/* Evaluate (VW 0: every stage runs the test set through the pipeline, on the global weights)
 * and report on stage 0: within an epoch after nb minibatches, or at its end (nb < 0). Not
 * training time: the stage's accounting is left as it was. */
static int evaluate(struct worker *w, int epoch, long nb, long step, double train_s, int final,
                    double *loss, double *acc)
{
    const double c0 = w->compute_s, m0 = w->comm_s, p0 = w->emu.pad_s;
    const struct hp_eval_parts parts = {.net = w->net,
                                        .be = w->be,
                                        .link = w->link,
                                        .feed = w->feed,
                                        .s = w->s,
                                        .k = w->k,
                                        .batch = w->batch,
                                        .test_batches = w->n.test_batches,
                                        .positions = w->positions,
                                        .in_floats = w->in_floats,
                                        .out_floats = w->out_floats,
                                        .lab = w->labels};
    int rc = hp_wsp_eval_begin(w->wsp, final, &w->wt);

    if (!rc) {
        rc = hp_eval_test_set(&parts, (int)w->eval_tag++, loss, acc);
        const int rc2 = hp_wsp_eval_end(w->wsp, &w->wt);
        rc = rc ? rc : rc2;
    }
    w->compute_s = c0;
    w->comm_s = m0;
    w->emu.pad_s = p0;
    if (rc || w->s != 0)
        return rc;
    hp_report_test(w->rep, epoch, nb, step, train_s, *loss, *acc);
    w->res->test_loss = *loss;
    w->res->test_acc = *acc;
    return 0;
}

/* The stage's units for a checkpoint, in host buffers allocated here: parameters (in
 * wt.host for a resume), momentum and statistics (free them, also after a failure). */
static int units_alloc(struct worker *w, struct hp_ckpt_units *u, int own_params)
{
    const size_t ns = hp_net_nstate(w->net), np = w->wt.n ? w->wt.n : 1;

    *u = (struct hp_ckpt_units){.model = w->model,
                                .u0 = w->st->u0,
                                .u1 = w->st->u1,
                                .vw = w->v,
                                .params = own_params ? malloc(np * sizeof(float)) : w->wt.host,
                                .momentum = malloc(np * sizeof(float)),
                                .moment2 =
                                    hp_net_moment2(w->net) ? malloc(np * sizeof(float)) : NULL,
                                .state = malloc((ns ? ns : 1) * sizeof(float))};
    return u->params && u->momentum && u->state && (u->moment2 || !hp_net_moment2(w->net))
               ? 0
               : -HP_ENOMEM;
}

/* The stage's state copied to host memory for a checkpoint: parameters, momentum, statistics
 * and the WSP client's state, in buffers of its own (hp_ckpt_units_free). */
static int units_download(struct worker *w, struct hp_ckpt_units *u)
{
    const size_t ns = hp_net_nstate(w->net);
    int rc = units_alloc(w, u, 1);

    if (!rc)
        rc = hp_weights_download(&w->wt);
    if (!rc && w->wt.n)
        memcpy(u->params, w->wt.host, w->wt.n * sizeof(float));
    if (!rc && w->wt.n)
        rc = w->be->ops->download(w->be, u->momentum, hp_net_momentum(w->net),
                                  w->wt.n * sizeof(float));
    if (!rc && w->wt.n && u->moment2)
        rc = w->be->ops->download(w->be, u->moment2, hp_net_moment2(w->net),
                                  w->wt.n * sizeof(float));
    if (!rc && ns)
        rc = w->be->ops->download(w->be, u->state, hp_net_state(w->net), ns * sizeof(float));
    if (!rc)
        rc = hp_ckpt_units_client(u, w->wsp);
    return rc;
}

/* The units' host buffers into the stage (a resume). */
static int units_upload(struct worker *w, const struct hp_ckpt_units *u)
{
    const size_t ns = hp_net_nstate(w->net);
    int rc = hp_weights_upload(&w->wt);

    if (!rc && w->wt.n)
        rc = w->be->ops->upload(w->be, hp_net_momentum(w->net), u->momentum,
                                w->wt.n * sizeof(float));
    if (!rc && w->wt.n && u->moment2)
        rc = w->be->ops->upload(w->be, hp_net_moment2(w->net), u->moment2, w->wt.n * sizeof(float));
    if (!rc && ns)
        rc = w->be->ops->upload(w->be, hp_net_state(w->net), u->state, ns * sizeof(float));
    return rc;
}

/* Finish the checkpoint under way, if any (hp_ckpt_finish: wait, or only look; tell: every
 * worker learns the outcome). Done: the reporter reports it; a requested one (flags) that
 * failed stops the job with an error, and one that worked stops it (w->stopped). */
static int ckpt_finish(struct worker *w, int wait, int tell, unsigned flags)
{
    struct hp_ckpt_written out = {0};
    const struct hp_ckpt_info *at = &w->pending_at;
    int done = 0, ok = 0, rc;

    if (!w->pending)
        return 0;
    rc = hp_ckpt_finish(&w->ck, w->pending, wait, tell, &done, &ok, &out);
    if (!done)
        return rc;
    w->pending = NULL;
    if (ok == 1 && w->reporter)
        hp_report_checkpoint(w->rep, at->seq, at->dir, at->epoch, at->minibatch, at->samples,
                             out.nfiles, out.bytes / 1e6, out.seconds);
    w->stopped = ok == 1 && (flags & HP_VERDICT_REQUEST);
    if (!rc && ok != 1 && (flags & HP_VERDICT_REQUEST)) {
        hp_error("stopping on request, but checkpoint %ld could not be written", at->seq);
        rc = -HP_EIO;
    }
    return rc;
}

/* Checkpoint `seq` at the job point after nb of epoch's minibatches (nb < 0: its end): every
 * rank copies its state to host memory and writes its part in the background
 * (--checkpoint-write background: training goes on; the one before it is finished first), or
 * waits for the whole checkpoint (wait, and always when it stops the job: flags). The
 * reporter writes the manifest once every part is in (ckpt.h). */
static int checkpoint(struct worker *w, long seq, unsigned flags, int epoch, long nb)
{
    const long ep = nb < 0 ? epoch + 1 : epoch, mb = nb < 0 ? 0 : nb;
    const int wait = (flags & HP_VERDICT_REQUEST) || w->o->checkpoint_write == HP_CKPT_WRITE_WAIT;
    struct hp_ckpt_info *where = &w->pending_at;
    struct hp_ckpt_units u = {0};
    const double t0 = hp_now_s();
    int rc = ckpt_finish(w, 1, 0, 0);

    *where = (struct hp_ckpt_info){.nunits = w->model->nunits,
                                   .model_sig = hp_ckpt_model_sig(w->model),
                                   .seed = (uint64_t)w->plan->opts.seed,
                                   .batch = w->batch,
                                   .ntrain = w->n.ntrain,
                                   .epochs = w->o->epochs,
                                   .epoch = ep,
                                   .minibatch = mb,
                                   .nvws = w->nvws,
                                   .nranks = w->plan->nranks,
                                   .samples = (ep * w->n.my_mb + mb) * w->nvws * w->batch,
                                   .lr = w->o->lr,
                                   .momentum = w->o->momentum,
                                   .weight_decay = w->o->weight_decay,
                                   .seq = seq};
    hp_ckpt_dir(w->o->checkpoint_dir, seq, where->dir, sizeof(where->dir));
    snprintf(where->model, sizeof(where->model), "%s", w->model->name);
    snprintf(where->reason, sizeof(where->reason), "%s",
             hp_ckpt_requested ? "request" : "interval");
    snprintf(where->schedule, sizeof(where->schedule), "%s",
             hp_opt_word(HP_OPT_SCHEDULE, w->o->schedule));
    snprintf(where->optimizer, sizeof(where->optimizer), "%s",
             hp_opt_word(HP_OPT_OPTIMIZER, w->plan->opts.optimizer));
    if (!rc)
        rc = units_download(w, &u);
    if (!rc)
        rc = hp_ckpt_start(&w->ck, seq, &u, w->wsp, where, &w->pending);
    hp_ckpt_units_free(&u);
    if (!rc)
        w->seq = seq;
    if (w->reporter)
        w->last_ckpt_t = hp_now_s();
    if (!rc && wait)
        rc = ckpt_finish(w, 1, 1, flags);
    hp_tl_add(w->tl, HP_TL_CKPT, t0, hp_now_s(), -1, -1, 0, seq);
    return rc;
}

/* The reporter's verdict at a job point after nb of the epoch's minibatches: stop
 * (--stop-at, or a request after its checkpoint), checkpoint (due or requested) into a new
 * directory (*seq). */
static unsigned decide(struct worker *w, long nb, int req, int last, long *seq)
{
    const int due = hp_ckpt_due(&w->cadence, nb, w->n.my_mb, hp_now_s() - w->last_ckpt_t);
    unsigned flags = hp_jp_decide(w->stop, last, w->cadence.on, req, due);
    char dir[4200];

    if ((flags & HP_VERDICT_CKPT) && hp_ckpt_begin(&w->ck, w->seq, seq, dir, sizeof(dir))) {
        flags &= ~HP_VERDICT_CKPT;
        w->last_ckpt_t = hp_now_s(); /* an interval in time: the next try one interval on */
    }
    return flags;
}

/* A job point (jobpoint.h) after nb of the epoch's minibatches (nb < 0: the epoch's end;
 * last: the job's end; evaluate: VW 0 runs the test set): every worker arrives, VW 0
 * evaluates, every worker learns the verdict (not at the end): go on, checkpoint, stop. Every
 * worker is paused from the last arrival to the verdict and the checkpoint: not the job's
 * training time. A stage's own time here, drained and waiting, is not its training time
 * either. */
static int job_point(struct worker *w, int epoch, long nb, int last, int evaluate_here)
{
    const double te = hp_now_s();
    const long step =
        nb < 0 ? (long)(epoch + 1) * w->n.total_mb : (long)epoch * w->n.total_mb + nb * w->nvws;
    double t_all = te, loss = 0.0, acc = 0.0;
    int req = hp_ckpt_requested != 0;
    unsigned flags = 0;
    long seq = 0;
    int rc = ckpt_finish(w, 1, 0, 0); /* the last checkpoint complete before the next point */

    if (!rc)
        rc = hp_jp_arrive(&w->jp, w->npoints, &t_all, &req);
    const double job_s = t_all - w->clock.t_start - w->clock.paused_s;

    hp_pause_passed(&w->pause, w->q_base + (nb < 0 ? w->n.my_mb : nb));

    if (!rc && w->v == 0 && evaluate_here)
        rc = evaluate(w, epoch, nb, step, job_s, last && nb < 0, &loss, &acc);
    if (evaluate_here) {
        hp_tl_add(w->tl, HP_TL_EVAL, te, hp_now_s(), -1, -1, 0, epoch);
        w->stop = w->reporter && w->o->stop_at > 0.0 && 100.0 * acc >= w->o->stop_at;
    }
    if (!rc && w->reporter)
        flags = decide(w, nb < 0 ? w->n.my_mb : nb, req, last, &seq);
    if (!rc && !last)
        rc = hp_jp_verdict(&w->jp, w->npoints, &flags, &seq);
    w->npoints++;
    w->stop = (flags & HP_VERDICT_STOP) != 0;
    if (!rc && (flags & HP_VERDICT_CKPT)) {
        rc = checkpoint(w, seq, flags, epoch, nb);
    } else if (!rc && (flags & HP_VERDICT_REQUEST)) {
        hp_error("stopping on request without a checkpoint (it could not be started)");
        rc = -HP_EIO;
    }
    const double now = hp_now_s();
    w->eval_s += now - te;
    if (last || w->stop)
        w->job_s = job_s;
    else
        w->clock.paused_s += now - t_all;
    return rc;
}

/* The next job point after nb: a multiple of the evaluation interval or of the checkpoints'
 * in samples (my_mb: none before the epoch's end). A pause may come sooner (pause.h). */
static long next_point(const struct worker *w, long nb)
{
    const long every[2] = {w->ek, w->cadence.every_mb};
    long p = w->n.my_mb;

    for (int i = 0; i < 2; i++)
        if (every[i] && (nb / every[i] + 1) * every[i] < p)
            p = (nb / every[i] + 1) * every[i];
    return p;
}

/* One epoch from the VW's minibatch nb0: spans between job points, drained at each. */
static int train_epoch(struct worker *w, int epoch, long nb0)
{
    const long my_mb = w->n.my_mb;
    int rc = 0;

    if (w->feed && w->s == 0)
        rc = hp_feed_epoch(w->feed, epoch, nb0);
    if (rc)
        return rc;
    w->q_base = (long)epoch * my_mb - w->from.q0;
    hp_report_interval(w->rep);
    for (long nb = nb0; nb < my_mb && !rc && !w->stop;) {
        rc = train_span(w, epoch, nb, next_point(w, nb), &nb);
        if (!rc && nb < my_mb) {
            const double e0 = w->eval_s;
            rc = job_point(w, epoch, nb, 0, w->ek && nb % w->ek == 0);
            hp_report_paused(w->rep, w->eval_s - e0);
        }
    }
    if (rc || w->stop)
        return rc;
    const int last = epoch + 1 == w->o->epochs;
    if (last)
        rc = hp_wsp_push_rest(w->wsp, &w->wt);
    if (!rc)
        rc = job_point(w, epoch, -1, last, 1);
    return rc;
}

/* ---- set-up and end ---- */

/* The stage's role, backend, net and buffers. */
static int stage_setup(struct worker *w)
{
    const struct hp_plan *p = w->plan;
    const struct hp_vw_plan *vw;
    int rc;

    if (hp_plan_rank_stage(p, w->rank, &w->v, &w->s)) {
        hp_error("rank %d is not a worker of the plan (%d workers)", w->rank,
                 hp_plan_first_shard(p));
        w->v = -1;
        return -HP_EINVAL;
    }
    vw = &p->vws[w->v];
    w->k = vw->nstages;
    w->st = &vw->stages[w->s];
    w->nvws = p->nvws;
    w->dp = p->grouping == HP_POLICY_DP;
    w->nm = vw->nm > 0 ? vw->nm : 1;
    w->inflight = w->st->in_flight;
    w->batch = (int)p->opts.batch;
    w->reporter = w->v == 0 && w->s == 0;
    if (w->inflight < 1 || (w->s + 1 < w->k && vw->stages[w->s + 1].in_flight > w->inflight)) {
        hp_error("plan: vw %d stage %d keeps %d minibatches but the next stage %d; in-flight "
                 "counts must not grow along the pipeline",
                 w->v, w->s, w->inflight, vw->stages[w->s + 1].in_flight);
        return -HP_ECONFIG;
    }
    rc = hp_backend_create(hp_opt_word(HP_OPT_DEVICE, w->o->device), &w->be);
    if (!rc)
        rc = hp_backend_track_memory(w->be);
    if (!rc) /* the baseline of the stage's real memory: before its net and stashes */
        rc = w->be->ops->memory_used(w->be, &w->mem_base, &(size_t){0});
    if (rc)
        return rc;
    const struct hp_net_config cfg = {.batch = w->batch,
                                      .nslots = w->inflight,
                                      .need_input_grad = w->s > 0,
                                      .recompute = w->st->recompute,
                                      .optimizer = (int)p->opts.optimizer};
    rc = hp_net_create(w->be, w->model, w->st->u0, w->st->u1, &cfg, &w->net);
    if (!rc)
        rc = hp_net_init_params(w->net, (uint64_t)p->opts.seed);
    if (rc)
        return rc;
    w->wt =
        (struct hp_weights){.be = w->be, .dev = hp_net_params(w->net), .n = hp_net_nparams(w->net)};
    w->in_floats = (size_t)w->batch * hp_shape_size(w->model->units[w->st->u0].in);
    w->out_floats = (size_t)w->batch * hp_shape_size(w->model->units[w->st->u1 - 1].out);
    w->wt.host = malloc((w->wt.n ? w->wt.n : 1) * sizeof(float));
    w->positions = hp_model_positions(w->model);
    w->lab_n = (size_t)w->batch * w->positions;
    w->labels = calloc((size_t)w->inflight * w->lab_n, sizeof(int32_t));
    w->fwd_hash = calloc((size_t)w->inflight, sizeof(uint64_t));
    if (!w->wt.host || !w->labels || !w->fwd_hash)
        return -HP_ENOMEM;
    return hp_stash_create(w->be, w->wt.n, w->inflight, (int)w->o->no_stash, &w->stash);
}

/* Stage 0's feed (VW 0's with the test set); the counts every stage knows; the messages. */
static int data_setup(struct worker *w)
{
    const struct hp_options *o = w->o;
    const size_t lab = w->lab_n * sizeof(int32_t) + sizeof(int32_t);
    const struct hp_feed_config fc = {.dir = o->data,
                                      .model = w->model,
                                      .mode = (w->s == 0 ? HP_FEED_INPUT : HP_FEED_COUNTS) |
                                              (w->v == 0 ? HP_FEED_TEST : 0),
                                      .batch = w->batch,
                                      .nvws = w->nvws,
                                      .v = w->v,
                                      .train_limit = o->train_limit,
                                      .test_limit = o->test_limit,
                                      .seed = (uint64_t)w->plan->opts.seed,
                                      .threads = (int)o->data_threads,
                                      .queue = (int)o->data_queue,
                                      .augment = o->data_augment,
                                      .skip_errors = o->data_on_error == 1,
                                      .error_limit = o->data_error_limit,
                                      .timeout_ms = w->timeout_ms,
                                      .epochs = (int)o->epochs};
    int rc = hp_feed_open(&fc, &w->feed);

    if (!rc)
        w->n = *hp_feed_n(w->feed);
    /* the largest of training, evaluation and control payloads */
    if (!rc)
        rc = hp_link_create(w->comm, w->plan, w->v, w->s, w->out_floats * sizeof(float) + lab + 64,
                            w->in_floats * sizeof(float) + lab + 64, w->wait_ms, &w->comm_s,
                            &w->link);
    if (rc)
        return rc;
    w->peers = hp_link_peers(w->link);
    w->total_steps = w->dp ? w->n.my_mb * o->epochs : w->n.total_mb * o->epochs;
    /* --eval-every N samples: VW 0 evaluates after every ek of its minibatches */
    w->ek = o->eval_every > 0
                ? (o->eval_every + (long)w->nvws * w->batch - 1) / ((long)w->nvws * w->batch)
                : 0;
    return 0;
}

/* --resume: where this run starts, the stage's units and (same plan) its WSP state; then WSP
 * and dp. Without --resume just the latter. */
static int sync_setup(struct worker *w)
{
    struct hp_ckpt_source src;
    const double t0 = hp_now_s();
    const char *dir = w->o->resume.path;
    int rc = 0;

    if (dir) {
        struct hp_ckpt_units u = {0};
        rc = hp_ckpt_resume_open(dir, w->db, w->model, w->plan, w->n.my_mb, w->o->epochs, &src,
                                 &w->from);
        if (!rc)
            rc = units_alloc(w, &u, 0);
        if (!rc)
            rc = hp_ckpt_load_units(&src, &w->from, w->rank, &u);
        if (!rc)
            rc = units_upload(w, &u);
        free(u.momentum);
        free(u.moment2);
        free(u.state);
        w->seq = w->from.seq;
    }
    const struct hp_wsp_config c = {.plan = w->plan,
                                    .rank = w->rank,
                                    .v = w->v,
                                    .s = w->s,
                                    .nparams = w->wt.n,
                                    .run_mb = w->o->epochs * w->n.my_mb - w->from.q0,
                                    .trace = w->o->trace,
                                    .tl = w->tl,
                                    .comm_s = &w->comm_s};
    if (!rc)
        rc = hp_wsp_create(&c, w->model, w->cl->gpus[w->st->gpu].node, w->comm, &w->wt,
                           w->timeout_ms, w->wait_ms, &w->wsp);
    hp_report_clocks(w->rep, w->wsp);
    if (!rc && dir)
        rc = hp_ckpt_load_wsp(&src, &w->from, w->rank, w->wsp);
    if (!rc && dir)
        hp_report_resumed(w->rep, w->from.seq, src.ci.dir, hp_now_s() - t0, w->from.exact,
                          w->from.epoch0, w->from.nb0);
    if (dir)
        hp_ckpt_source_release(&src);
    if (rc && dir)
        hp_error("vw %d stage %d: resuming from %s failed", w->v, w->s, dir);
    if (!rc)
        rc = hp_dp_create(w->comm, w->plan, w->rank, w->wt.n, &w->dp_sync);
    return rc;
}

/* --timeline: this rank's recorder, sized for the run. */
static int timeline_open(struct worker *w)
{
    const struct hp_gpu *gpu = &w->cl->gpus[w->st->gpu];
    const long waves = w->n.my_mb / w->nm + 2;
    struct hp_tl_meta m = {.rank = w->rank,
                           .vw = w->v,
                           .stage = w->s,
                           .stages = w->k,
                           .nm = w->nm,
                           .device = gpu->index,
                           .clock_offset_s = hp_tl_clock_offset_s};

    if (!w->o->timeline)
        return 0;
    snprintf(m.role, sizeof(m.role), "%s", w->dp ? "replica" : "worker");
    snprintf(m.node, sizeof(m.node), "%s", w->cl->nodes[gpu->node].name);
    snprintf(m.gpu, sizeof(m.gpu), "%s", w->db->types[w->cl->gpus[w->st->gpu].type].name);
    /* per minibatch: forward, backward, update, a send and a receive each way, an allreduce;
     * per wave a push and a pull; evaluations and checkpoints */
    w->tl = hp_tl_create((w->n.my_mb * 8 + waves * 2 + 1024) * w->o->epochs, &m);
    return w->tl ? 0 : -HP_ENOMEM;
}

/* The reports, job points and checkpoints of the run. */
static int run_setup(struct worker *w)
{
    const struct hp_options *o = w->o;
    const struct hp_report_job rj = {
        .counts = &w->n,
        .o = o,
        .plan = w->plan,
        .model = w->model,
        .rank = w->rank,
        .v = w->v,
        .s = w->s,
        .k = w->k,
        .nm = w->nm,
        .batch = w->batch,
        .nvws = w->nvws,
        .dp = w->dp,
        .in_flight = w->inflight,
        .my_mb = w->n.my_mb,
        .type_name = w->db->types[w->cl->gpus[w->st->gpu].type].name,
        .timeout_ms = w->timeout_ms,
        .wait_ms = w->wait_ms,
        .clock = &w->clock,
    };
    int rc = hp_report_open(&rj, &w->rep);

    w->jp = (struct hp_jobpoint){.comm = w->comm,
                                 .plan = w->plan,
                                 .rank = w->rank,
                                 .v = w->v,
                                 .s = w->s,
                                 .timeout_ms = w->timeout_ms,
                                 .wait_ms = w->wait_ms};
    hp_pause_init(&w->pause, w->comm, w->plan, w->rank, w->v, w->s, w->dp, w->timeout_ms);
    w->ck = (struct hp_ckpt_job){.comm = w->comm,
                                 .plan = w->plan,
                                 .model = w->model,
                                 .rank = w->rank,
                                 .v = w->v,
                                 .s = w->s,
                                 .timeout_ms = w->timeout_ms,
                                 .wait_ms = w->wait_ms,
                                 .parent = o->checkpoint_dir,
                                 .plan_path = o->plan,
                                 .keep = (int)o->checkpoint_keep};
    if (!rc)
        rc = hp_ckpt_cadence_init(&w->cadence, o->checkpoint_dir, o->checkpoint_every.samples,
                                  o->checkpoint_every.seconds, (long)w->nvws * w->batch);
    if (!rc)
        rc = timeline_open(w);
    const struct hp_vwsync_config vc = {.comm = w->comm,
                                        .plan = w->plan,
                                        .v = w->v,
                                        .s = w->s,
                                        .net = w->net,
                                        .be = w->be,
                                        .clip = o->clip,
                                        .wait_ms = w->timeout_ms,
                                        .tl = w->tl};
    if (!rc)
        rc = hp_vwsync_create(&vc, &w->vsync);
    return rc;
}

/* FNV-1a over the VW's parameters in model order, chained stage to stage; the last stage
 * sends the total to stage 0. */
static int param_hash(struct worker *w, uint64_t *out)
{
    uint64_t h = HP_FNV_OFFSET;
    const void *in;
    void *b;
    int rc = 0;

    if (w->s > 0) {
        rc = hp_link_recv(w->link, w->peers->prev, HP_MSG_CONTROL, 0, sizeof(h), "parameter hash",
                          &in);
        if (rc)
            return rc;
        memcpy(&h, in, sizeof(h));
    }
    if (w->wt.n) {
        if ((rc = hp_weights_download(&w->wt)))
            return rc;
        h = hp_fnv1a(h, w->wt.host, w->wt.n * sizeof(float));
    }
    *out = h;
    if (w->k > 1) { /* to the next stage, or from the last to the first */
        const int to = w->peers->next >= 0 ? w->peers->next : w->peers->first;
        rc = hp_link_take(w->link, HP_LINK_DOWN, &b);
        if (!rc) {
            memcpy(b, &h, sizeof(h));
            rc = hp_link_send(w->link, to, HP_MSG_CONTROL, w->peers->next >= 0 ? 0 : 1, sizeof(h));
        }
    }
    if (!rc && w->s == 0 && w->k > 1) {
        rc = hp_link_recv(w->link, w->peers->last, HP_MSG_CONTROL, 1, sizeof(h), "parameter hash",
                          &in);
        if (!rc)
            memcpy(out, in, sizeof(h));
    }
    return rc;
}

/* After the last epoch: the shards have every push, the parameter hash, --save-params, and
 * every send delivered before the endpoints close. */
static int finish(struct worker *w)
{
    int rc = hp_wsp_flush(w->wsp);

    if (!rc)
        rc = param_hash(w, &w->res->param_hash);
    if (!rc && w->o->save_params) {
        char path[4096];
        snprintf(path, sizeof(path), "%s.%d", w->o->save_params, w->rank);
        rc = hp_weights_download(&w->wt);
        if (!rc)
            rc = hp_save_floats(path, w->wt.host, w->wt.n);
    }
    if (!rc)
        rc = hp_link_flush(w->link, w->timeout_ms);
    return rc;
}

/* What the stage measured, from the job's start to its end (less its time at job points). */
static int results(struct worker *w, double t_train)
{
    struct hp_worker_result *res = w->res;

    res->train_s = t_train;
    res->job_s = w->reporter ? w->job_s : 0.0;
    res->compute_s = w->compute_s;
    res->pad_s = w->emu.pad_s;
    res->comm_s = w->comm_s;
    res->other_s = t_train - res->compute_s - res->pad_s - res->comm_s;
    res->images_per_s = t_train > 0 ? (double)res->minibatches * w->batch / t_train : 0.0;
    /* every VW (replica) trains the same minibatches: all of them over the job's time */
    res->job_images_per_s =
        res->job_s > 0 ? (double)res->minibatches * w->nvws * w->batch / res->job_s : 0.0;
    res->mem_peak = w->be->mem_peak;
    res->mem_predicted = w->st->memory;
    res->mem_real_base = w->mem_base;
    return w->be->ops->memory_used(w->be, &(size_t){0}, &res->mem_real_peak);
}

static void teardown(struct worker *w)
{
    hp_ckpt_abandon(w->pending);
    hp_tl_destroy(w->tl);
    hp_wsp_destroy(w->comm, w->wsp);
    hp_dp_destroy(w->comm, w->dp_sync);
    hp_vwsync_destroy(w->vsync);
    hp_link_destroy(w->link);
    hp_stash_destroy(w->stash);
    hp_net_destroy(w->net);
    hp_backend_destroy(w->be);
    hp_feed_close(w->feed);
    hp_report_close(w->rep); /* what was logged is kept, a failed run's too */
    free(w->labels);
    free(w->fwd_hash);
    free(w->wt.host);
}

/* The job's start: every worker ready (data loaded, connected), then all begin together; the
 * job's clock runs on the reporter from the last arrival. */
static int start_point(struct worker *w)
{
    double t_all = 0.0;
    unsigned flags = 0;
    long seq = 0;
    int req = 0;
    int rc = hp_jp_arrive(&w->jp, -1, &t_all, &req);

    if (!rc)
        rc = hp_jp_verdict(&w->jp, -1, &flags, &seq);
    w->clock.t_start = w->last_ckpt_t = hp_now_s();
    return rc;
}

int hp_worker_run(const struct hp_plan *plan, const struct hp_cluster *cl,
                  const struct hp_gpudb *db, const struct hp_model *model, int rank,
                  struct hp_comm *comm, const struct hp_options *o, struct hp_worker_result *res)
{
    struct worker w = {.plan = plan,
                       .cl = cl,
                       .db = db,
                       .model = model,
                       .o = o,
                       .comm = comm,
                       .rank = rank,
                       .res = res,
                       .timeout_ms = (int)(o->timeout * 1000.0),
                       .wait_ms = hp_plan_wait_ms(plan, o, model->nparams + model->nstate)};
    int rc;

    memset(res, 0, sizeof(*res));
    rc = stage_setup(&w);
    if (w.v < 0)
        return rc;
    hp_emu_init(&w.emu, plan, w.st, o->emulate);
    if (!rc)
        rc = data_setup(&w);
    if (!rc)
        rc = run_setup(&w);
    if (!rc)
        rc = sync_setup(&w);
    if (!rc) {
        hp_report_start(w.rep);
        rc = start_point(&w);
    }
    for (long epoch = w.from.epoch0; epoch < o->epochs && !rc && !w.stop; epoch++)
        rc = train_epoch(&w, (int)epoch, epoch == w.from.epoch0 ? w.from.nb0 : 0);
    /* the last job point's time is in eval_s: this stage's end is where it began */
    const double t_train = hp_now_s() - w.clock.t_start - w.eval_s;
    if (!rc)
        rc = finish(&w);
    if (!rc)
        rc = results(&w, t_train);
    if (!rc) {
        struct hp_ps_stats ps;
        struct hp_feed_stats ds;
        hp_wsp_stats(w.wsp, &ps);
        hp_feed_get_stats(w.feed, &ds);
        if (ds.skipped)
            hp_warn("data: %ld samples of %s could not be decoded and were skipped", ds.skipped,
                    hp_feed_describe(w.feed));
        hp_report_end(w.rep, res, w.stopped, w.seq, w.stop);
        rc = hp_report_stats(w.rep, res, w.eval_s, w.wsp ? &ps : NULL, w.s == 0 ? &ds : NULL);
    }
    if (!rc)
        rc = hp_ps_worker_done(plan, comm, rank, w.v, w.s, w.stopped, w.timeout_ms);
    res->stopped = w.stopped;
    /* what was recorded, also of a failed run */
    if (w.tl && o->timeline) {
        char path[4096];
        int trc = -HP_EINVAL;
        if ((size_t)snprintf(path, sizeof(path), "%s.%d", o->timeline, rank) >= sizeof(path))
            hp_error("--timeline: the path '%s.%d' is too long", o->timeline, rank);
        else
            trc = hp_tl_write(w.tl, path);
        if (w.tl->dropped)
            hp_warn("timeline: %ld events not recorded (the buffer of %ld was full)", w.tl->dropped,
                    w.tl->cap);
        rc = rc ? rc : trc;
    }
    teardown(&w);
    return rc;
}
