/* schedule.c - a stage's one-forward-one-backward schedule, its messages to the neighbouring
 * stages and weight stashing (pipeline.h has the rules); its set-up and tear-down. */
#include "stage.h"

#include "clock.h"
#include "error.h"
#include "log.h"
#include "output.h"
#include "rng.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int hp_stage_sync_compute(struct stage *g, double t0)
{
    int rc = g->be->ops->sync(g->be);
    g->time.compute_s += hp_now_s() - t0;
    return rc;
}

uint64_t hp_stage_hash_weights(struct stage *g, const float *dev)
{
    if (!g->nparams)
        return HP_FNV_OFFSET;
    if (g->be->ops->download(g->be, g->hparams, dev, g->nparams * sizeof(float)))
        return 0;
    return hp_fnv1a(HP_FNV_OFFSET, g->hparams, g->nparams * sizeof(float));
}

int hp_stage_recv(struct stage *g, int peer, int type, struct hp_msg_buf *b, long mb, size_t bytes,
                  const char *what)
{
    const double t0 = hp_now_s();
    int rc = hp_comm_recv_buf(g->comm, peer, type, b, g->long_wait_ms);
    const struct hp_msg_header *h = hp_msg_buf_header(b);

    const double t1 = hp_now_s();
    g->time.comm_s += t1 - t0;
    if (rc) {
        hp_error("vw %d stage %d: waiting for %s %ld from rank %d failed: %s", g->v, g->s, what, mb,
                 peer, hp_strerror(rc));
        return rc;
    }
    if (type == HP_MSG_ACTIVATION || type == HP_MSG_GRADIENT)
        hp_tl_add(g->tl, type == HP_MSG_ACTIVATION ? HP_TL_RECV_ACT : HP_TL_RECV_GRAD, t0, t1,
                  g->wsp.pbase + mb, peer, (int64_t)bytes, -1);
    if (h->vw != g->v || h->minibatch != mb || h->payload_bytes != bytes) {
        hp_error("vw %d stage %d: protocol error: expected %s %ld of vw %d (%zu bytes) from rank "
                 "%d, got minibatch %" PRId64 " of vw %d (%" PRIu64 " bytes)",
                 g->v, g->s, what, mb, g->v, bytes, peer, h->minibatch, h->vw, h->payload_bytes);
        return -HP_EPROTOCOL;
    }
    return 0;
}

/* Take the next free one of a pair of send buffers (waiting for its previous send). */
int hp_stage_send_buf(struct stage *g, struct hp_msg_buf **pair, int *i, struct hp_msg_buf **out)
{
    const double t0 = hp_now_s();
    struct hp_msg_buf *b = pair[*i];
    int rc = hp_comm_send_wait(g->comm, b, g->long_wait_ms);

    g->time.comm_s += hp_now_s() - t0;
    *i ^= 1;
    *out = b;
    return rc;
}

int hp_stage_send(struct stage *g, int peer, int type, struct hp_msg_buf *b, long mb, size_t bytes,
                  double emulated)
{
    const struct hp_msg_header h = {.type = (uint16_t)type,
                                    .vw = g->v,
                                    .stage = g->s,
                                    .minibatch = mb,
                                    .clock = -1,
                                    .payload_bytes = bytes};
    const double t0 = hp_now_s();
    int rc = hp_comm_send_start(g->comm, peer, &h, b);

    if (rc) {
        hp_error("vw %d stage %d: sending minibatch %ld to rank %d failed: %s", g->v, g->s, mb,
                 peer, hp_strerror(rc));
        return rc;
    }
    hp_stage_pad(g, t0, emulated);
    if (type == HP_MSG_ACTIVATION || type == HP_MSG_GRADIENT)
        hp_tl_add(g->tl, type == HP_MSG_ACTIVATION ? HP_TL_SEND_ACT : HP_TL_SEND_GRAD, t0,
                  hp_now_s(), g->wsp.pbase + mb, peer, (int64_t)bytes, -1);
    return 0;
}

/* Learning rate of global step `step` of `total`, as hetpipe train. With V > 1 virtual
 * workers each applies lr / V: the PS adds up every VW's updates, so V minibatches (one per
 * VW) move the global weights as one step of hetpipe train at minibatch V x B would, as dp's
 * averaged gradient does. (Summing V full-lr updates is V times the step size; measured on
 * local4 under ed, 4 epochs: 88.1% at 0.025 per VW, 90.0% at 0.0125.) */
static float lr_at(const struct stage *g, long step, long total)
{
    const struct hp_options *o = g->o;
    const float lr0 = (float)o->lr;
    const double lr = !g->dp && g->nvws > 1 ? lr0 / g->nvws : lr0;

    return o->schedule == HP_SCHEDULE_COSINE
               ? (float)(0.5 * lr * (1.0 + cos(M_PI * (double)step / (double)total)))
               : (float)lr;
}

/* Before an update: every outstanding minibatch still on the current weights gets them
 * stashed (one copy shared by all of them). */
int hp_stage_stash(struct stage *g, long first, long end)
{
    int free_buf = -1, need = 0;

    for (long q = first; q < end; q++)
        need |= g->sched.ver[q % g->sched.w] == -1;
    if (!need || g->o->no_stash)
        return 0;
    for (int b = 0; b < g->sched.w - 1 && free_buf < 0; b++) {
        int used = 0;
        for (long q = first; q < end; q++)
            used |= g->sched.ver[q % g->sched.w] == b;
        if (!used)
            free_buf = b;
    }
    if (free_buf < 0) {
        hp_error("vw %d stage %d: no free weight stash (internal error)", g->v, g->s);
        return -HP_EINVAL;
    }
    int rc = g->be->ops->copy(g->be, g->sched.stash[free_buf], hp_net_params(g->net),
                              g->nparams * sizeof(float));
    g->sched.stash_version[free_buf] = g->sched.wver;
    for (long q = first; q < end; q++)
        if (g->sched.ver[q % g->sched.w] == -1)
            g->sched.ver[q % g->sched.w] = free_buf;
    return rc;
}

int hp_stage_forward(struct stage *g, long j, long nb, long m_global, long step)
{
    const int slot = (int)(j % g->sched.w);
    int32_t *lab = g->sched.labels + (size_t)slot * g->batch;
    const size_t in_bytes = g->link.in_floats * sizeof(float);
    const long q = g->wsp.pbase + j; /* the VW's minibatch index since the start */
    int rc = hp_wsp_gate(g, q, nb, j);

    if (rc)
        return rc;
    if (g->wsp.trace) {
        const long C = q / g->wsp.nm;
        const double t = hp_now_s();
        fprintf(g->wsp.trace, "mb,%d,%d,%d,%ld,%ld,%ld,%ld,%" PRId64 ",%ld,%.6f,%.6f,", g->rank,
                g->v, g->s, C, q, C >= 2 ? hp_wsp_threshold(g, C) : -1L, hp_ps_pushed(g->wsp.ps),
                hp_ps_global_clock(g->wsp.ps), g->sched.nupd, t, t);
        hp_ps_trace_incl(g->wsp.ps, g->wsp.trace);
    }
    if (g->s == 0) {
        hp_dataset_gather(&g->data.train, g->data.perm + (size_t)m_global * g->batch, g->batch,
                          g->data.himg, lab);
        rc = g->be->ops->upload(g->be, hp_net_input(g->net, slot), g->data.himg, in_bytes);
    } else {
        rc = hp_stage_recv(g, g->link.prev, HP_MSG_ACTIVATION, g->link.act_in, j,
                           in_bytes + (size_t)g->batch * sizeof(int32_t), "activation");
        if (!rc) {
            const char *p = hp_msg_buf_payload(g->link.act_in);
            memcpy(lab, p + in_bytes, (size_t)g->batch * sizeof(int32_t));
            rc = g->be->ops->upload(g->be, hp_net_input(g->net, slot), p, in_bytes);
        }
    }
    if (rc)
        return rc;
    g->sched.ver[slot] = -1;
    g->sched.fwd_version[slot] = g->sched.wver;
    if (g->logs.weight_log)
        g->sched.fwd_hash[slot] = hp_stage_hash_weights(g, hp_net_params(g->net));

    const double t0 = hp_now_s();
    rc = hp_net_forward(g->net, slot, 1,
                        hp_rng_derive(g->plan->opts.seed, 0x2000000 + (uint64_t)step));
    if (!rc)
        rc = hp_stage_sync_compute(g, t0);
    if (rc)
        return rc;
    hp_stage_pad(g, t0, g->emu.fwd_cost);
    hp_tl_add(g->tl, HP_TL_FWD, t0, hp_now_s(), q, -1, 0, q / g->wsp.nm);

    if (g->link.next >= 0) {
        struct hp_msg_buf *b;
        const size_t out_bytes = g->link.out_floats * sizeof(float);
        rc = hp_stage_send_buf(g, g->link.act_out, &g->link.act_i, &b);
        if (!rc) {
            char *p = hp_msg_buf_payload(b);
            rc = g->be->ops->download(g->be, p, hp_net_output(g->net, slot), out_bytes);
            memcpy(p + out_bytes, lab, (size_t)g->batch * sizeof(int32_t));
        }
        if (!rc)
            rc = hp_stage_send(g, g->link.next, HP_MSG_ACTIVATION, b, j,
                               out_bytes + (size_t)g->batch * sizeof(int32_t), g->emu.xfer_next);
    }
    return rc;
}

int hp_stage_backward(struct stage *g, long j, long nf, long step, long total, double *loss,
                      int *correct)
{
    const int slot = (int)(j % g->sched.w);
    const size_t out_bytes = g->link.out_floats * sizeof(float);
    const float *weights = NULL;
    long bwd_version = g->sched.wver;
    int rc;

    if (g->link.next < 0) {
        const double t0 = hp_now_s();
        rc = hp_net_loss(g->net, slot, g->sched.labels + (size_t)slot * g->batch, g->batch, 1, loss,
                         correct);
        if (!rc)
            rc = hp_stage_sync_compute(g, t0);
    } else {
        rc = hp_stage_recv(g, g->link.next, HP_MSG_GRADIENT, g->link.grad_in, j,
                           out_bytes + TRAILER_DOUBLES * sizeof(double), "gradient");
        if (!rc) {
            const char *p = hp_msg_buf_payload(g->link.grad_in);
            double tr[TRAILER_DOUBLES];
            memcpy(tr, p + out_bytes, sizeof(tr));
            *loss = tr[0];
            *correct = (int)tr[1];
            rc = g->be->ops->upload(g->be, hp_net_output_grad(g->net), p, out_bytes);
        }
    }
    if (rc)
        return rc;
    if (g->sched.ver[slot] >= 0) {
        weights = g->sched.stash[g->sched.ver[slot]];
        bwd_version = g->sched.stash_version[g->sched.ver[slot]];
    }
    if (g->logs.weight_log)
        fprintf(g->logs.weight_log, "%d,%d,%ld,%ld,%ld,%ld,%016" PRIx64 ",%016" PRIx64 "\n", g->v,
                g->s, j, g->sched.fwd_version[slot], bwd_version, g->sched.wver,
                g->sched.fwd_hash[slot],
                hp_stage_hash_weights(g, weights ? weights : hp_net_params(g->net)));

    const double t0 = hp_now_s();
    rc = hp_net_backward_weights(g->net, slot, weights);
    if (!rc)
        rc = hp_stage_sync_compute(g, t0);
    if (rc)
        return rc;
    hp_stage_pad(g, t0, g->emu.bwd_cost);
    hp_tl_add(g->tl, HP_TL_BWD, t0, hp_now_s(), g->wsp.pbase + j, -1, 0,
              (g->wsp.pbase + j) / g->wsp.nm);

    if (g->link.prev >= 0) {
        struct hp_msg_buf *b;
        const size_t in_bytes = g->link.in_floats * sizeof(float);
        rc = hp_stage_send_buf(g, g->link.grad_out, &g->link.grad_i, &b);
        if (!rc) {
            char *p = hp_msg_buf_payload(b);
            const double tr[TRAILER_DOUBLES] = {*loss, (double)*correct};
            rc = g->be->ops->download(g->be, p, hp_net_input_grad(g->net), in_bytes);
            memcpy(p + in_bytes, tr, sizeof(tr));
        }
        if (!rc)
            rc = hp_stage_send(g, g->link.prev, HP_MSG_GRADIENT, b, j,
                               in_bytes + TRAILER_DOUBLES * sizeof(double), g->emu.xfer_prev);
    }
    if (!rc)
        rc = hp_stage_stash(g, j + 1, nf);
    if (!rc && g->dpar.ar)
        rc = hp_dp_allreduce(g, step);
    if (!rc) {
        const double t1 = hp_now_s();
        rc = hp_net_sgd(g->net, lr_at(g, step, total), g->o->momentum, g->o->weight_decay);
        if (!rc)
            rc = hp_stage_sync_compute(g, t1);
        hp_tl_add(g->tl, HP_TL_UPDATE, t1, hp_now_s(), g->wsp.pbase + j, -1, 0, -1);
    }
    g->sched.nupd++;
    g->sched.wver++;
    g->wsp.unpushed++;
    if (!rc && g->wsp.ps && (g->wsp.pbase + j + 1) % g->wsp.nm == 0)
        rc = hp_wsp_push(g, (g->wsp.pbase + j) / g->wsp.nm);
    return rc;
}

int hp_stage_setup(struct stage *g)
{
    const struct hp_plan *p = g->plan;
    const struct hp_model *m = g->model;
    const struct hp_vw_plan *vw = &p->vws[g->v];
    int rc;

    g->k = vw->nstages;
    g->st = &vw->stages[g->s];
    g->dp = p->grouping == HP_POLICY_DP;
    g->wsp.nm = vw->nm > 0 ? vw->nm : 1;
    g->wsp.D = p->opts.staleness;
    g->sched.w = g->st->in_flight;
    g->batch = p->opts.batch;
    g->type = g->cl->gpus[g->st->gpu].type;
    g->link.prev = g->s > 0 ? hp_plan_stage_rank(p, g->v, g->s - 1) : -1;
    g->link.next = g->s + 1 < g->k ? hp_plan_stage_rank(p, g->v, g->s + 1) : -1;
    g->link.first = hp_plan_stage_rank(p, g->v, 0);
    g->link.last = hp_plan_stage_rank(p, g->v, g->k - 1);
    if (g->sched.w < 1 || (g->s + 1 < g->k && vw->stages[g->s + 1].in_flight > g->sched.w)) {
        hp_error("plan: vw %d stage %d keeps %d minibatches but the next stage %d; in-flight "
                 "counts must not grow along the pipeline",
                 g->v, g->s, g->sched.w, vw->stages[g->s + 1].in_flight);
        return -HP_ECONFIG;
    }

    rc = hp_backend_create(hp_opt_word(HP_OPT_DEVICE, g->o->device), &g->be);
    if (!rc)
        rc = hp_backend_track_memory(g->be);
    if (!rc) /* the baseline of the stage's real memory: before its net and stashes */
        rc = g->be->ops->memory_used(g->be, &g->mem_base, &(size_t){0});
    if (rc)
        return rc;
    const struct hp_net_config cfg = {.batch = g->batch,
                                      .nslots = g->sched.w,
                                      .need_input_grad = g->s > 0,
                                      .recompute = g->st->recompute};
    rc = hp_net_create(g->be, m, g->st->u0, g->st->u1, &cfg, &g->net);
    if (!rc)
        rc = hp_net_init_params(g->net, p->opts.seed);
    if (rc)
        return rc;
    g->nparams = hp_net_nparams(g->net);
    g->link.in_floats = (size_t)g->batch * hp_shape_size(m->units[g->st->u0].in);
    g->link.out_floats = (size_t)g->batch * hp_shape_size(m->units[g->st->u1 - 1].out);

    if (g->sched.w > 1) {
        g->sched.stash = calloc((size_t)g->sched.w - 1, sizeof(*g->sched.stash));
        g->sched.stash_version = calloc((size_t)g->sched.w - 1, sizeof(long));
        if (!g->sched.stash || !g->sched.stash_version)
            return -HP_ENOMEM;
        for (int b = 0; b < g->sched.w - 1; b++) {
            rc = g->be->ops->alloc(g->be, (g->nparams ? g->nparams : 1) * sizeof(float),
                                   (void **)&g->sched.stash[b]);
            if (rc)
                return rc;
        }
    }
    g->sched.labels = calloc((size_t)g->sched.w * g->batch, sizeof(int32_t));
    g->sched.ver = calloc((size_t)g->sched.w, sizeof(int));
    g->sched.fwd_version = calloc((size_t)g->sched.w, sizeof(long));
    g->sched.fwd_hash = calloc((size_t)g->sched.w, sizeof(uint64_t));
    g->hparams = malloc((g->nparams ? g->nparams : 1) * sizeof(float));
    if (!g->sched.labels || !g->sched.ver || !g->sched.fwd_version || !g->sched.fwd_hash ||
        !g->hparams)
        return -HP_ENOMEM;

    /* message buffers: the largest of training, evaluation and control payloads */
    const size_t lab = (size_t)g->batch * sizeof(int32_t) + sizeof(int32_t);
    const size_t out_cap = g->link.out_floats * sizeof(float) + lab + 64;
    const size_t in_cap = g->link.in_floats * sizeof(float) + lab + 64;
    for (int i = 0; i < 2 && !rc; i++) {
        rc = hp_msg_buf_create(out_cap, &g->link.act_out[i]);
        if (!rc)
            rc = hp_msg_buf_create(in_cap, &g->link.grad_out[i]);
    }
    if (!rc)
        rc = hp_msg_buf_create(in_cap, &g->link.act_in);
    if (!rc)
        rc = hp_msg_buf_create(out_cap, &g->link.grad_in);
    if (rc)
        return rc;

    return 0;
}

void hp_stage_teardown(struct stage *g)
{
    hp_tl_destroy(g->tl);
    g->tl = NULL;
    hp_ps_client_destroy(g->comm, g->wsp.ps);
    (void)hp_out_close(g->wsp.trace, 1);
    hp_allreduce_destroy(g->comm, g->dpar.ar);
    free(g->wsp.thr);
    free(g->wsp.final_waves);
    free(g->wsp.hsave);
    free(g->dpar.hgrad);
    for (int i = 0; i < 2; i++) {
        hp_msg_buf_destroy(g->comm, g->link.act_out[i]);
        hp_msg_buf_destroy(g->comm, g->link.grad_out[i]);
    }
    hp_msg_buf_destroy(g->comm, g->link.act_in);
    hp_msg_buf_destroy(g->comm, g->link.grad_in);
    if (g->sched.stash)
        for (int b = 0; b < g->sched.w - 1; b++)
            if (g->sched.stash[b])
                g->be->ops->free(g->be, g->sched.stash[b]);
    free(g->sched.stash);
    free(g->sched.stash_version);
    hp_net_destroy(g->net);
    hp_backend_destroy(g->be);
    hp_dataset_release(&g->data.train);
    hp_dataset_release(&g->data.test);
    free(g->data.perm);
    free(g->data.idx);
    free(g->data.himg);
    free(g->data.hlab);
    free(g->sched.labels);
    free(g->sched.ver);
    free(g->sched.fwd_version);
    free(g->sched.fwd_hash);
    free(g->hparams);
    /* what was logged is kept, a failed run's too */
    (void)hp_out_close(g->logs.step_log, 1);
    (void)hp_out_close(g->logs.weight_log, 1);
    (void)hp_out_close(g->logs.metrics, 1);
}
