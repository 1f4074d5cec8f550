/* pipeline.c - a worker rank's pipeline stage: schedule, messages, stashing, emulation. */
#include "pipeline.h"
#include "clock.h"

#include "backend.h"
#include "cost.h"
#include "data.h"
#include "error.h"
#include "log.h"
#include "net.h"
#include "ps.h"
#include "rng.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRAILER_DOUBLES 2 /* gradient messages: loss sum, correct count */
#define FASHION_TRAIN_N 60000 /* samples, as data.c checks */
#define FASHION_TEST_N 10000

void hp_worker_opts_init(struct hp_worker_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->device = "cpu";
    o->epochs = 5;
    o->lr = 0.05f;
    o->momentum = 0.9f;
    o->weight_decay = 5e-4f;
    o->cosine = 1;
    o->log_every = 100;
    o->timeout_ms = 60000;
}

struct stage {
    const struct hp_plan *plan;
    const struct hp_cluster *cl;
    const struct hp_model *model;
    const struct hp_worker_opts *o;
    struct hp_comm *comm;
    int rank, v, s, k, nvws, batch, w;
    int prev, next, first, last; /* ranks (-1 when none) */
    const struct hp_stage_plan *st;
    int type; /* GPU type index */

    struct hp_backend *be;
    struct hp_net *net;
    struct hp_cost cost;
    double fwd_cost, bwd_cost;       /* emulated seconds per pass (S x the model), 0: off */
    double xfer_next, xfer_prev;     /* emulated seconds per send forward / back */
    size_t in_floats, out_floats;    /* per minibatch */
    size_t nparams;

    struct hp_msg_buf *act_out[2], *grad_out[2], *act_in, *grad_in;
    int act_i, grad_i;
    int32_t *labels; /* [w][batch] */
    int *ver;        /* [w]: stash buffer the slot's forward used, -1: the current weights */
    long *fwd_version;
    uint64_t *fwd_hash;
    float **stash; /* [w - 1] device vectors */
    long *stash_version;
    long nupd; /* updates applied */

    /* stage 0 */
    struct hp_dataset train, test;
    int *perm, *idx;
    float *himg;
    int32_t *hlab;

    FILE *step_log, *weight_log, *metrics;
    float *hparams; /* host copy for hashing */

    double compute_s, pad_s, comm_s;
};

static int rank_of(const struct hp_plan *p, int v, int s)
{
    int r = 0;

    for (int i = 0; i < v; i++)
        r += p->vws[i].nstages;
    return r + s;
}

/* Pad since t0 to t0 + target (emulation), counted as padding. */
static void pad(struct stage *g, double t0, double target)
{
    if (target > 0.0) {
        const double t1 = hp_now_s();
        hp_sleep_until(t0 + target);
        g->pad_s += hp_now_s() - t1;
    }
}

static double link_time(const struct stage *g, int other_gpu, double bytes)
{
    const int same = g->cl->gpus[g->st->gpu].node == g->cl->gpus[other_gpu].node;

    return hp_cost_transfer(bytes, same ? g->cl->intra_node_gbs : g->cl->inter_node_gbs,
                            same ? g->cl->intra_latency_us : g->cl->inter_latency_us);
}

static int sync_compute(struct stage *g, double t0)
{
    int rc = g->be->ops->sync(g->be);
    g->compute_s += hp_now_s() - t0;
    return rc;
}

static uint64_t hash_weights(struct stage *g, const float *dev)
{
    if (!g->nparams)
        return HP_FNV_OFFSET;
    if (g->be->ops->download(g->be, g->hparams, dev, g->nparams * sizeof(float)))
        return 0;
    return hp_fnv1a(HP_FNV_OFFSET, g->hparams, g->nparams * sizeof(float));
}

static int recv_checked(struct stage *g, int peer, int type, struct hp_msg_buf *b, long mb,
                        size_t bytes, const char *what)
{
    const double t0 = hp_now_s();
    int rc = hp_comm_recv_buf(g->comm, peer, type, b, g->o->timeout_ms);
    const struct hp_msg_header *h = hp_msg_buf_header(b);

    g->comm_s += hp_now_s() - t0;
    if (rc) {
        hp_error("vw %d stage %d: waiting for %s %ld from rank %d failed: %s", g->v, g->s, what, mb,
                 peer, hp_strerror(rc));
        return rc;
    }
    if (h->vw != g->v || h->minibatch != mb || h->payload_bytes != bytes) {
        hp_error("vw %d stage %d: protocol error: expected %s %ld of vw %d (%zu bytes) from rank "
                 "%d, got minibatch %" PRId64 " of vw %d (%" PRIu64 " bytes)",
                 g->v, g->s, what, mb, g->v, bytes, peer, h->minibatch, h->vw, h->payload_bytes);
        return -HP_EPROTOCOL;
    }
    return 0;
}

/* Take the next free one of a pair of send buffers (waiting for its previous send). */
static int send_buf(struct stage *g, struct hp_msg_buf **pair, int *i, struct hp_msg_buf **out)
{
    const double t0 = hp_now_s();
    struct hp_msg_buf *b = pair[*i];
    int rc = hp_comm_send_wait(g->comm, b, g->o->timeout_ms);

    g->comm_s += hp_now_s() - t0;
    *i ^= 1;
    *out = b;
    return rc;
}

static int send_msg(struct stage *g, int peer, int type, struct hp_msg_buf *b, long mb,
                    size_t bytes, double emulated)
{
    const struct hp_msg_header h = {.type = (uint16_t)type,
                                    .vw = g->v,
                                    .stage = g->s,
                                    .minibatch = mb,
                                    .clock = -1,
                                    .payload_bytes = bytes};
    const double t0 = hp_now_s();
    int rc = hp_comm_send_start(g->comm, peer, &h, b);

    if (rc)
        hp_error("vw %d stage %d: sending minibatch %ld to rank %d failed: %s", g->v, g->s, mb,
                 peer, hp_strerror(rc));
    else
        pad(g, t0, emulated);
    return rc;
}

/* Learning rate of global step `step` of `total`, as hetpipe train. */
static float lr_at(const struct stage *g, long step, long total)
{
    const struct hp_worker_opts *o = g->o;

    return o->cosine ? (float)(0.5 * o->lr * (1.0 + cos(M_PI * (double)step / (double)total)))
                     : o->lr;
}

static int forward(struct stage *g, long j, long m_global, long step)
{
    const int slot = (int)(j % g->w);
    int32_t *lab = g->labels + (size_t)slot * g->batch;
    const size_t in_bytes = g->in_floats * sizeof(float);
    int rc;

    if (g->s == 0) {
        hp_dataset_gather(&g->train, g->perm + (size_t)m_global * g->batch, g->batch, g->himg, lab);
        rc = g->be->ops->upload(g->be, hp_net_input(g->net, slot), g->himg, in_bytes);
    } else {
        rc = recv_checked(g, g->prev, HP_MSG_ACTIVATION, g->act_in, j,
                          in_bytes + (size_t)g->batch * sizeof(int32_t), "activation");
        if (!rc) {
            const char *p = hp_msg_buf_payload(g->act_in);
            memcpy(lab, p + in_bytes, (size_t)g->batch * sizeof(int32_t));
            rc = g->be->ops->upload(g->be, hp_net_input(g->net, slot), p, in_bytes);
        }
    }
    if (rc)
        return rc;
    g->ver[slot] = -1;
    g->fwd_version[slot] = g->nupd;
    if (g->weight_log)
        g->fwd_hash[slot] = hash_weights(g, hp_net_params(g->net));

    const double t0 = hp_now_s();
    rc = hp_net_forward(g->net, slot, 1, hp_rng_derive(g->plan->opts.seed, 0x2000000 + (uint64_t)step));
    if (!rc)
        rc = sync_compute(g, t0);
    if (rc)
        return rc;
    pad(g, t0, g->fwd_cost);

    if (g->next >= 0) {
        struct hp_msg_buf *b;
        const size_t out_bytes = g->out_floats * sizeof(float);
        rc = send_buf(g, g->act_out, &g->act_i, &b);
        if (!rc) {
            char *p = hp_msg_buf_payload(b);
            rc = g->be->ops->download(g->be, p, hp_net_output(g->net, slot), out_bytes);
            memcpy(p + out_bytes, lab, (size_t)g->batch * sizeof(int32_t));
        }
        if (!rc)
            rc = send_msg(g, g->next, HP_MSG_ACTIVATION, b, j,
                          out_bytes + (size_t)g->batch * sizeof(int32_t), g->xfer_next);
    }
    return rc;
}

/* Before an update: every outstanding minibatch still on the current weights gets them
 * stashed (one copy shared by all of them). */
static int stash_current(struct stage *g, long first, long end)
{
    int free_buf = -1, need = 0;

    for (long q = first; q < end; q++)
        need |= g->ver[q % g->w] == -1;
    if (!need || g->o->no_stash)
        return 0;
    for (int b = 0; b < g->w - 1 && free_buf < 0; b++) {
        int used = 0;
        for (long q = first; q < end; q++)
            used |= g->ver[q % g->w] == b;
        if (!used)
            free_buf = b;
    }
    if (free_buf < 0) {
        hp_error("vw %d stage %d: no free weight stash (internal error)", g->v, g->s);
        return -HP_EINVAL;
    }
    int rc = g->be->ops->copy(g->be, g->stash[free_buf], hp_net_params(g->net),
                              g->nparams * sizeof(float));
    g->stash_version[free_buf] = g->nupd;
    for (long q = first; q < end; q++)
        if (g->ver[q % g->w] == -1)
            g->ver[q % g->w] = free_buf;
    return rc;
}

static int backward(struct stage *g, long j, long nf, long step, long total, double *loss,
                    int *correct)
{
    const int slot = (int)(j % g->w);
    const size_t out_bytes = g->out_floats * sizeof(float);
    const float *weights = NULL;
    long bwd_version = g->nupd;
    int rc;

    if (g->next < 0) {
        const double t0 = hp_now_s();
        rc = hp_net_loss(g->net, slot, g->labels + (size_t)slot * g->batch, g->batch, 1, loss,
                         correct);
        if (!rc)
            rc = sync_compute(g, t0);
    } else {
        rc = recv_checked(g, g->next, HP_MSG_GRADIENT, g->grad_in, j,
                          out_bytes + TRAILER_DOUBLES * sizeof(double), "gradient");
        if (!rc) {
            const char *p = hp_msg_buf_payload(g->grad_in);
            double tr[TRAILER_DOUBLES];
            memcpy(tr, p + out_bytes, sizeof(tr));
            *loss = tr[0];
            *correct = (int)tr[1];
            rc = g->be->ops->upload(g->be, hp_net_output_grad(g->net), p, out_bytes);
        }
    }
    if (rc)
        return rc;
    if (g->ver[slot] >= 0) {
        weights = g->stash[g->ver[slot]];
        bwd_version = g->stash_version[g->ver[slot]];
    }
    if (g->weight_log)
        fprintf(g->weight_log, "%d,%d,%ld,%ld,%ld,%ld,%016" PRIx64 ",%016" PRIx64 "\n", g->v, g->s,
                j, g->fwd_version[slot], bwd_version, g->nupd, g->fwd_hash[slot],
                hash_weights(g, weights ? weights : hp_net_params(g->net)));

    const double t0 = hp_now_s();
    rc = hp_net_backward_weights(g->net, slot, weights);
    if (!rc)
        rc = sync_compute(g, t0);
    if (rc)
        return rc;
    pad(g, t0, g->bwd_cost);

    if (g->prev >= 0) {
        struct hp_msg_buf *b;
        const size_t in_bytes = g->in_floats * sizeof(float);
        rc = send_buf(g, g->grad_out, &g->grad_i, &b);
        if (!rc) {
            char *p = hp_msg_buf_payload(b);
            const double tr[TRAILER_DOUBLES] = {*loss, (double)*correct};
            rc = g->be->ops->download(g->be, p, hp_net_input_grad(g->net), in_bytes);
            memcpy(p + in_bytes, tr, sizeof(tr));
        }
        if (!rc)
            rc = send_msg(g, g->prev, HP_MSG_GRADIENT, b, j,
                          in_bytes + TRAILER_DOUBLES * sizeof(double), g->xfer_prev);
    }
    if (!rc)
        rc = stash_current(g, j + 1, nf);
    if (!rc) {
        const double t1 = hp_now_s();
        rc = hp_net_sgd(g->net, lr_at(g, step, total), g->o->momentum, g->o->weight_decay);
        if (!rc)
            rc = sync_compute(g, t1);
    }
    g->nupd++;
    return rc;
}

/* The test set forward through the pipeline (VW 0); stage 0 gets the totals. */
static int evaluate(struct stage *g, int epoch, double *loss, double *acc)
{
    const int batch = g->batch;
    const int n = g->s == 0 ? (g->o->test_limit > 0 && g->o->test_limit < g->test.n
                                   ? g->o->test_limit
                                   : g->test.n)
                            : 0;
    int nb;
    double lsum = 0.0, csum = 0.0, count = 0.0;
    int rc = 0;
    const size_t in_bytes = g->in_floats * sizeof(float), out_bytes = g->out_floats * sizeof(float);
    const size_t lab_bytes = (size_t)batch * sizeof(int32_t);

    /* every stage knows the number of test batches from the same options */
    {
        const int nt = g->o->test_limit > 0 && g->o->test_limit < FASHION_TEST_N ? g->o->test_limit : FASHION_TEST_N;
        nb = (nt + batch - 1) / batch;
        if (g->s == 0 && n != nt) {
            hp_error("test set has %d samples, expected %d", g->test.n, nt);
            return -HP_EDATA;
        }
    }
    for (int b = 0; b < nb && !rc; b++) {
        int32_t m = 0;
        if (g->s == 0) {
            m = n - b * batch < batch ? n - b * batch : batch;
            for (int i = 0; i < batch; i++)
                g->idx[i] = b * batch + (i < m ? i : 0);
            hp_dataset_gather(&g->test, g->idx, batch, g->himg, g->hlab);
            rc = g->be->ops->upload(g->be, hp_net_input(g->net, 0), g->himg, in_bytes);
        } else {
            rc = recv_checked(g, g->prev, HP_MSG_EVAL, g->act_in, b,
                              in_bytes + lab_bytes + sizeof(int32_t), "test batch");
            if (!rc) {
                const char *p = hp_msg_buf_payload(g->act_in);
                memcpy(g->labels, p + in_bytes, lab_bytes);
                memcpy(&m, p + in_bytes + lab_bytes, sizeof(m));
                rc = g->be->ops->upload(g->be, hp_net_input(g->net, 0), p, in_bytes);
            }
        }
        const int32_t *lab = g->s == 0 ? g->hlab : g->labels;
        const double t0 = hp_now_s();
        if (!rc)
            rc = hp_net_forward(g->net, 0, 0, 0);
        if (!rc)
            rc = sync_compute(g, t0);
        if (rc)
            break;
        pad(g, t0, g->fwd_cost);
        if (g->next >= 0) {
            struct hp_msg_buf *mb;
            rc = send_buf(g, g->act_out, &g->act_i, &mb);
            if (!rc) {
                char *p = hp_msg_buf_payload(mb);
                rc = g->be->ops->download(g->be, p, hp_net_output(g->net, 0), out_bytes);
                memcpy(p + out_bytes, lab, lab_bytes);
                memcpy(p + out_bytes + lab_bytes, &m, sizeof(m));
            }
            if (!rc)
                rc = send_msg(g, g->next, HP_MSG_EVAL, mb, b, out_bytes + lab_bytes + sizeof(m),
                              g->xfer_next);
        } else {
            double l;
            int c;
            rc = hp_net_loss(g->net, 0, lab, m, 0, &l, &c);
            lsum += l;
            csum += c;
            count += m;
        }
    }
    if (rc)
        return rc;
    if (g->k > 1 && g->next < 0) { /* last stage: the totals to stage 0 */
        struct hp_msg_buf *mb;
        rc = send_buf(g, g->grad_out, &g->grad_i, &mb);
        if (!rc) {
            const double tot[3] = {lsum, csum, count};
            memcpy(hp_msg_buf_payload(mb), tot, sizeof(tot));
            rc = send_msg(g, g->first, HP_MSG_EVAL, mb, epoch, sizeof(tot), 0.0);
        }
    } else if (g->k > 1 && g->s == 0) {
        rc = recv_checked(g, g->last, HP_MSG_EVAL, g->grad_in, epoch, 3 * sizeof(double),
                          "test result");
        if (!rc) {
            double tot[3];
            memcpy(tot, hp_msg_buf_payload(g->grad_in), sizeof(tot));
            lsum = tot[0];
            csum = tot[1];
            count = tot[2];
        }
    }
    if (!rc && g->s == 0) {
        *loss = count > 0 ? lsum / count : 0.0;
        *acc = count > 0 ? csum / count : 0.0;
    }
    return rc;
}

/* FNV-1a over the VW's parameters in model order, chained stage to stage; the last stage
 * sends the total to stage 0. */
static int param_hash(struct stage *g, uint64_t *out)
{
    uint64_t h = HP_FNV_OFFSET;
    struct hp_msg_buf *b;
    int rc = 0;

    if (g->s > 0) {
        rc = recv_checked(g, g->prev, HP_MSG_CONTROL, g->act_in, 0, sizeof(h), "parameter hash");
        if (rc)
            return rc;
        memcpy(&h, hp_msg_buf_payload(g->act_in), sizeof(h));
    }
    if (g->nparams) {
        rc = g->be->ops->download(g->be, g->hparams, hp_net_params(g->net),
                                  g->nparams * sizeof(float));
        if (rc)
            return rc;
        h = hp_fnv1a(h, g->hparams, g->nparams * sizeof(float));
    }
    *out = h;
    if (g->next >= 0 || (g->k > 1 && g->next < 0)) {
        const int to = g->next >= 0 ? g->next : g->first;
        rc = send_buf(g, g->act_out, &g->act_i, &b);
        if (!rc) {
            memcpy(hp_msg_buf_payload(b), &h, sizeof(h));
            rc = send_msg(g, to, HP_MSG_CONTROL, b, g->next >= 0 ? 0 : 1, sizeof(h), 0.0);
        }
    }
    if (!rc && g->s == 0 && g->k > 1) {
        rc = recv_checked(g, g->last, HP_MSG_CONTROL, g->grad_in, 1, sizeof(h), "parameter hash");
        if (!rc)
            memcpy(out, hp_msg_buf_payload(g->grad_in), sizeof(h));
    }
    return rc;
}

static FILE *open_out(const char *path, const char *what)
{
    FILE *f = fopen(path, "w");

    if (!f)
        hp_error("cannot write %s file '%s': %s", what, path, strerror(errno));
    return f;
}

static int setup(struct stage *g)
{
    const struct hp_plan *p = g->plan;
    const struct hp_model *m = g->model;
    const struct hp_vw_plan *vw = &p->vws[g->v];
    int rc;

    g->k = vw->nstages;
    g->st = &vw->stages[g->s];
    g->w = g->st->in_flight;
    g->batch = p->opts.batch;
    g->type = g->cl->gpus[g->st->gpu].type;
    g->prev = g->s > 0 ? rank_of(p, g->v, g->s - 1) : -1;
    g->next = g->s + 1 < g->k ? rank_of(p, g->v, g->s + 1) : -1;
    g->first = rank_of(p, g->v, 0);
    g->last = rank_of(p, g->v, g->k - 1);
    if (g->w < 1 || (g->s + 1 < g->k && vw->stages[g->s + 1].in_flight > g->w)) {
        hp_error("plan: vw %d stage %d keeps %d minibatches but the next stage %d; in-flight "
                 "counts must not grow along the pipeline",
                 g->v, g->s, g->w, vw->stages[g->s + 1].in_flight);
        return -HP_ECONFIG;
    }

    rc = hp_backend_create(g->o->device, &g->be);
    if (!rc)
        rc = hp_backend_track_memory(g->be);
    if (rc)
        return rc;
    const struct hp_net_config cfg = {
        .batch = g->batch, .nslots = g->w, .need_input_grad = g->s > 0};
    rc = hp_net_create(g->be, m, g->st->u0, g->st->u1, &cfg, &g->net);
    if (!rc)
        rc = hp_net_init_params(g->net, p->opts.seed);
    if (rc)
        return rc;
    g->nparams = hp_net_nparams(g->net);
    g->in_floats = (size_t)g->batch * hp_shape_size(m->units[g->st->u0].in);
    g->out_floats = (size_t)g->batch * hp_shape_size(m->units[g->st->u1 - 1].out);

    if (g->w > 1) {
        g->stash = calloc((size_t)g->w - 1, sizeof(*g->stash));
        g->stash_version = calloc((size_t)g->w - 1, sizeof(long));
        if (!g->stash || !g->stash_version)
            return -HP_ENOMEM;
        for (int b = 0; b < g->w - 1; b++) {
            rc = g->be->ops->alloc(g->be, (g->nparams ? g->nparams : 1) * sizeof(float),
                                   (void **)&g->stash[b]);
            if (rc)
                return rc;
        }
    }
    g->labels = calloc((size_t)g->w * g->batch, sizeof(int32_t));
    g->ver = calloc((size_t)g->w, sizeof(int));
    g->fwd_version = calloc((size_t)g->w, sizeof(long));
    g->fwd_hash = calloc((size_t)g->w, sizeof(uint64_t));
    g->hparams = malloc((g->nparams ? g->nparams : 1) * sizeof(float));
    if (!g->labels || !g->ver || !g->fwd_version || !g->fwd_hash || !g->hparams)
        return -HP_ENOMEM;

    /* message buffers: the largest of training, evaluation and control payloads */
    const size_t lab = (size_t)g->batch * sizeof(int32_t) + sizeof(int32_t);
    const size_t out_cap = g->out_floats * sizeof(float) + lab + 64;
    const size_t in_cap = g->in_floats * sizeof(float) + lab + 64;
    for (int i = 0; i < 2 && !rc; i++) {
        rc = hp_msg_buf_create(out_cap, &g->act_out[i]);
        if (!rc)
            rc = hp_msg_buf_create(in_cap, &g->grad_out[i]);
    }
    if (!rc)
        rc = hp_msg_buf_create(in_cap, &g->act_in);
    if (!rc)
        rc = hp_msg_buf_create(out_cap, &g->grad_in);
    if (rc)
        return rc;

    return 0;
}

static int emulation_setup(struct stage *g, const struct hp_gpudb *db)
{
    const double S = g->o->emulate;
    const struct hp_vw_plan *vw = &g->plan->vws[g->v];
    int rc;

    if (S <= 0.0)
        return 0;
    rc = hp_cost_init(&g->cost, g->model, db, g->batch);
    if (rc)
        return rc;
    for (int u = g->st->u0; u < g->st->u1; u++) {
        g->fwd_cost += S * g->cost.fwd_s[(size_t)g->type * g->cost.nunits + u];
        g->bwd_cost += S * g->cost.bwd_s[(size_t)g->type * g->cost.nunits + u];
    }
    if (g->next >= 0)
        g->xfer_next = S * link_time(g, vw->stages[g->s + 1].gpu,
                                     hp_cost_boundary_bytes(&g->cost, g->st->u1 - 1));
    if (g->prev >= 0)
        g->xfer_prev = S * link_time(g, vw->stages[g->s - 1].gpu,
                                     hp_cost_boundary_bytes(&g->cost, g->st->u0 - 1));
    return 0;
}

static void teardown(struct stage *g)
{
    for (int i = 0; i < 2; i++) {
        hp_msg_buf_destroy(g->comm, g->act_out[i]);
        hp_msg_buf_destroy(g->comm, g->grad_out[i]);
    }
    hp_msg_buf_destroy(g->comm, g->act_in);
    hp_msg_buf_destroy(g->comm, g->grad_in);
    if (g->stash)
        for (int b = 0; b < g->w - 1; b++)
            if (g->stash[b])
                g->be->ops->free(g->be, g->stash[b]);
    free(g->stash);
    free(g->stash_version);
    hp_net_destroy(g->net);
    hp_backend_destroy(g->be);
    if (g->cost.model)
        hp_cost_release(&g->cost);
    hp_dataset_release(&g->train);
    hp_dataset_release(&g->test);
    free(g->perm);
    free(g->idx);
    free(g->himg);
    free(g->hlab);
    free(g->labels);
    free(g->ver);
    free(g->fwd_version);
    free(g->fwd_hash);
    free(g->hparams);
    if (g->step_log)
        fclose(g->step_log);
    if (g->weight_log)
        fclose(g->weight_log);
    if (g->metrics)
        fclose(g->metrics);
}

static int open_files(struct stage *g)
{
    const struct hp_worker_opts *o = g->o;
    const int reporter = g->v == 0 && g->s == 0;

    if (o->weight_log) {
        /* every rank writes its own: PATH.<rank> */
        char path[4096];
        snprintf(path, sizeof(path), "%s.%d", o->weight_log, g->rank);
        if (!(g->weight_log = open_out(path, "weight log")))
            return -HP_EIO;
        fprintf(g->weight_log,
                "vw,stage,minibatch,fwd_version,bwd_version,updates_at_bwd,fwd_hash,bwd_hash\n");
    }
    if (reporter && o->step_log) {
        if (!(g->step_log = open_out(o->step_log, "step log")))
            return -HP_EIO;
        fprintf(g->step_log, "step,loss\n");
    }
    if (reporter && o->metrics) {
        if (!(g->metrics = open_out(o->metrics, "metrics")))
            return -HP_EIO;
        fprintf(g->metrics, "split,epoch,step,seconds,loss,accuracy,images_per_s\n");
    }
    return 0;
}

static int write_stats(const struct stage *g, const struct hp_worker_result *r)
{
    char path[4096], tmp[4200];
    FILE *f;

    if (!g->o->stats)
        return 0;
    snprintf(path, sizeof(path), "%s.%d", g->o->stats, g->rank);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (!(f = open_out(tmp, "stats")))
        return -HP_EIO;
    fprintf(f,
            "rank = %d\nvw = %d\nstage = %d\nstages = %d\ntype = %s\nunits = %d-%d\nin_flight = "
            "%d\nemulate = %.9g\nminibatches = %ld\ntrain_s = %.6f\ncompute_s = %.6f\npad_s = "
            "%.6f\ncomm_s = %.6f\nother_s = %.6f\nimages_per_s = %.3f\npredicted_images_per_s = "
            "%.3f\nmem_peak = %zu\nmem_predicted = %.0f\ntest_acc = %.6f\n",
            g->rank, g->v, g->s, g->k, g->cost.db ? g->cost.db->types[g->type].name : "-",
            g->st->u0, g->st->u1 - 1, g->w, g->o->emulate, r->minibatches, r->train_s,
            r->compute_s, r->pad_s, r->comm_s, r->other_s, r->images_per_s,
            g->plan->vws[g->v].rate, r->mem_peak, r->mem_predicted, r->test_acc);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        hp_error("cannot write stats file '%s': %s", path, strerror(errno));
        return -HP_EIO;
    }
    return 0;
}

int hp_worker_run(const struct hp_plan *plan, const struct hp_cluster *cl,
                  const struct hp_gpudb *db, const struct hp_model *model, int rank,
                  struct hp_comm *comm, const struct hp_worker_opts *o,
                  struct hp_worker_result *res)
{
    struct stage g = {0};
    int rc = 0, ntrain = 0;
    long total_mb = 0, step_base = 0;

    memset(res, 0, sizeof(*res));
    g.plan = plan;
    g.cl = cl;
    g.model = model;
    g.o = o;
    g.comm = comm;
    g.rank = rank;
    g.nvws = plan->nvws;
    g.v = -1;
    for (int v = 0, r = 0; v < plan->nvws && g.v < 0; v++)
        for (int s = 0; s < plan->vws[v].nstages; s++, r++)
            if (r == rank) {
                g.v = v;
                g.s = s;
            }
    if (g.v < 0) {
        hp_error("rank %d is not a worker of the plan (%d workers)", rank,
                 plan->nranks - plan->nshards);
        return -HP_EINVAL;
    }
    rc = setup(&g);
    if (!rc)
        rc = emulation_setup(&g, db);
    if (!rc && !g.cost.model) /* the cost model also names the type in the stats */
        rc = hp_cost_init(&g.cost, model, db, g.batch);
    if (!rc)
        rc = open_files(&g);
    if (rc)
        goto out;

    /* the minibatch count must be the same on every stage: from the options, checked on
     * stage 0 against the data */
    ntrain = o->train_limit > 0 && o->train_limit < FASHION_TRAIN_N ? o->train_limit : FASHION_TRAIN_N;
    if (g.s == 0) {
        rc = hp_dataset_load_fashion_mnist(o->data_dir, 1, &g.train);
        if (!rc && g.v == 0)
            rc = hp_dataset_load_fashion_mnist(o->data_dir, 0, &g.test);
        if (rc)
            goto out;
        if (g.train.n < ntrain) {
            hp_error("the training set has %d samples, fewer than %d", g.train.n, ntrain);
            rc = -HP_EDATA;
            goto out;
        }
        g.perm = malloc((size_t)g.train.n * sizeof(int));
        g.idx = malloc((size_t)g.batch * sizeof(int));
        g.himg = malloc(g.in_floats * sizeof(float));
        g.hlab = malloc((size_t)g.batch * sizeof(int32_t));
        if (!g.perm || !g.idx || !g.himg || !g.hlab) {
            rc = -HP_ENOMEM;
            goto out;
        }
    }
    total_mb = ntrain / g.batch;
    const long my_mb = total_mb / g.nvws + (g.v < total_mb % g.nvws ? 1 : 0);
    if (my_mb == 0) {
        hp_error("minibatch %d x %d virtual workers is more than the %d training samples",
                 g.batch, g.nvws, ntrain);
        rc = -HP_EINVAL;
        goto out;
    }
    const long total_steps = total_mb * o->epochs;
    const int reporter = g.v == 0 && g.s == 0;
    if (reporter)
        printf("hetpipe: model %s, %d virtual worker%s, this one of %d stage%s, Nm %d, batch %d, "
               "%d epochs of %ld minibatches, lr %g, seed %llu%s\n",
               model->name, g.nvws, g.nvws == 1 ? "" : "s", g.k, g.k == 1 ? "" : "s",
               plan->vws[g.v].nm, g.batch, o->epochs, my_mb, o->lr,
               (unsigned long long)plan->opts.seed, o->emulate > 0 ? ", emulated GPU types" : "");
    fflush(stdout);

    double t_train = 0.0;
    for (int epoch = 0; epoch < o->epochs && !rc; epoch++) {
        long nf = 0, nb = 0, nint = 0;
        double lsum = 0.0, csum = 0.0;
        const double t_epoch = hp_now_s();
        double t_int = t_epoch;

        if (g.s == 0)
            hp_permute(g.perm, g.train.n < ntrain ? g.train.n : ntrain,
                       hp_rng_derive(plan->opts.seed, 0x1000 + (uint64_t)epoch));
        step_base = (long)epoch * total_mb;
        while (nb < my_mb && !rc) {
            if (nf < my_mb && nf - nb < g.w) {
                const long m = nf * g.nvws + g.v;
                rc = forward(&g, nf, m, step_base + m);
                nf++;
            } else {
                const long m = nb * g.nvws + g.v;
                double l = 0.0;
                int c = 0;
                rc = backward(&g, nb, nf, step_base + m, total_steps, &l, &c);
                nb++;
                res->minibatches++;
                if (rc || g.s != 0)
                    continue;
                if (!isfinite(l)) {
                    hp_error("loss is %g at step %ld: training diverged (lower --lr)", l,
                             step_base + m);
                    rc = -HP_ERANGE;
                    break;
                }
                lsum += l;
                csum += c;
                nint++;
                if (g.step_log)
                    fprintf(g.step_log, "%ld,%.9e\n", step_base + m, l / g.batch);
                if (reporter && ((o->log_every > 0 && nb % o->log_every == 0) || nb == my_mb)) {
                    const double now = hp_now_s(), ips = (double)nint * g.batch / (now - t_int);
                    if (o->log_every > 0)
                        printf("epoch %d/%d step %ld/%ld loss %.4f acc %.2f%% %.0f img/s\n",
                               epoch + 1, o->epochs, nb, my_mb, lsum / ((double)nint * g.batch),
                               100.0 * csum / ((double)nint * g.batch), ips);
                    if (g.metrics)
                        fprintf(g.metrics, "train,%d,%ld,%.3f,%.6f,%.6f,%.1f\n", epoch + 1,
                                step_base + nb, t_train + now - t_epoch,
                                lsum / ((double)nint * g.batch), csum / ((double)nint * g.batch),
                                ips);
                    fflush(stdout);
                    lsum = csum = 0.0;
                    nint = 0;
                    t_int = now;
                }
            }
        }
        t_train += hp_now_s() - t_epoch;
        if (rc)
            break;
        if (g.v == 0) {
            double tl = 0.0, ta = 0.0;
            const double c0 = g.compute_s, p0 = g.pad_s, m0 = g.comm_s;
            rc = evaluate(&g, epoch, &tl, &ta);
            /* evaluation is outside the training phase's accounting */
            g.compute_s = c0;
            g.pad_s = p0;
            g.comm_s = m0;
            if (!rc && reporter) {
                printf("epoch %d/%d test loss %.4f accuracy %.2f%%\n", epoch + 1, o->epochs, tl,
                       100.0 * ta);
                if (g.metrics)
                    fprintf(g.metrics, "test,%d,%ld,%.3f,%.6f,%.6f,\n", epoch + 1,
                            (long)(epoch + 1) * total_mb, t_train, tl, ta);
                fflush(stdout);
                res->test_loss = tl;
                res->test_acc = ta;
            }
        }
    }
    if (!rc)
        rc = param_hash(&g, &res->param_hash);
    /* the last sends must be delivered before the endpoints close */
    for (int i = 0; i < 2 && !rc; i++) {
        rc = hp_comm_send_wait(comm, g.act_out[i], o->timeout_ms);
        if (!rc)
            rc = hp_comm_send_wait(comm, g.grad_out[i], o->timeout_ms);
    }
    if (rc)
        goto out;

    res->train_s = t_train;
    res->compute_s = g.compute_s;
    res->pad_s = g.pad_s;
    res->comm_s = g.comm_s;
    res->other_s = t_train - g.compute_s - g.pad_s - g.comm_s;
    res->images_per_s = t_train > 0 ? (double)res->minibatches * g.batch / t_train : 0.0;
    res->mem_peak = g.be->mem_peak;
    res->mem_predicted = g.st->memory;
    if (reporter) {
        const double pred = plan->vws[g.v].rate / (o->emulate > 0 ? o->emulate : 1.0);
        printf("hetpipe: trained %ld minibatches in %.1f s: %.0f img/s on this virtual worker",
               res->minibatches, t_train, res->images_per_s);
        if (o->emulate > 0)
            printf(" (predicted %.0f for the emulated GPUs at scale %g: ratio %.2f)", pred,
                   o->emulate, res->images_per_s / pred);
        printf("\nhetpipe: parameters hash %016" PRIx64 "\n", res->param_hash);
        fflush(stdout);
    }
    rc = write_stats(&g, res);
    if (!rc)
        rc = hp_ps_worker_done(plan, comm, rank, g.v, g.s, o->timeout_ms);
out:
    teardown(&g);
    return rc;
}
