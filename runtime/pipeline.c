/* pipeline.c - a worker rank's pipeline stage: schedule, messages, stashing, emulation. */
#include "pipeline.h"
#include "clock.h"

#include "allreduce.h"
#include "backend.h"
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

#define TRAILER_DOUBLES 2     /* gradient messages: loss sum, correct count */
#define FASHION_TRAIN_N 60000 /* samples, as data.c checks */
#define FASHION_TEST_N 10000

struct stage {
    const struct hp_plan *plan;
    const struct hp_cluster *cl;
    const struct hp_model *model;
    const struct hp_options *o;
    int timeout_ms; /* --timeout */
    struct hp_comm *comm;
    int rank, v, s, k, nvws, batch, w, dp;
    int prev, next, first, last; /* ranks (-1 when none) */
    const struct hp_stage_plan *st;
    int type; /* GPU type index */

    struct hp_backend *be;
    struct hp_net *net;
    const char *type_name;        /* the stage's GPU type */
    double fwd_cost, bwd_cost;    /* emulated seconds per pass (S x the plan's), 0: off */
    double xfer_next, xfer_prev;  /* emulated seconds per send forward / back */
    size_t in_floats, out_floats; /* per minibatch */
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
    long wver; /* version of the current weights: bumped by every update and every rebase */

    /* WSP (ps.h); ps is NULL without PS shards */
    struct hp_ps_client *ps;
    FILE *trace;
    int nm, D;         /* the VW's wave (minibatches), the staleness threshold */
    long pbase;        /* the VW's index of this epoch's first minibatch (epoch x my_mb) */
    long unpushed;     /* updates since the last push */
    int64_t *thr;      /* [nvws] pull thresholds */
    long *final_waves; /* [nvws] waves each VW pushes in all */
    float *hsave;      /* host: the local weights while evaluating on the global ones */
    int nevals;

    /* dp: ar is NULL unless the plan is dp */
    struct hp_allreduce *ar;
    float *hgrad;
    double ar_cost; /* emulated seconds per allreduce */

    /* stage 0 */
    struct hp_dataset train, test;
    int *perm, *idx;
    float *himg;
    int32_t *hlab;

    FILE *step_log, *weight_log, *metrics;
    float *hparams; /* host copy for hashing */

    double compute_s, pad_s, comm_s;
};

/* Pad since t0 to t0 + target (emulation), counted as padding. */
static void pad(struct stage *g, double t0, double target)
{
    if (target > 0.0) {
        const double t1 = hp_now_s();
        hp_sleep_until(t0 + target);
        g->pad_s += hp_now_s() - t1;
    }
}

/* The planned images/s of this rank's VW (a dp replica: its share of the job's rate, which
 * the slowest replica and the allreduce set), at emulation scale 1. */
static double planned_rate(const struct stage *g)
{
    return g->dp ? g->plan->rate / g->nvws : g->plan->vws[g->v].rate;
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
    int rc = hp_comm_recv_buf(g->comm, peer, type, b, g->timeout_ms);
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
    int rc = hp_comm_send_wait(g->comm, b, g->timeout_ms);

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
    g->stash_version[free_buf] = g->wver;
    for (long q = first; q < end; q++)
        if (g->ver[q % g->w] == -1)
            g->ver[q % g->w] = free_buf;
    return rc;
}

/* WSP's gate (DESIGN.md section 6), before the forward pass of the VW's minibatch p when p
 * starts wave C = p / Nm, with the stage's minibatches [first, end) between forward and
 * backward.
 *
 * The rule: having pushed wave c = C - 2, a stage admits wave C once the global clock of its
 * units (the fewest waves any VW has pushed of them) is >= c + 1 - D = C - 1 - D, then pulls
 * them and rebases (local = pulled + own updates not yet pushed). Its own push of wave C - 2
 * has been sent already: the forward of C Nm follows the backward of C Nm - w >= (C - 1) Nm
 * - 1 (w <= Nm), and a shard sees one worker's messages in order. So the pipeline does not
 * drain here: wave C - 1 is in flight.
 *
 * The staleness bound that follows, for minibatch p = C Nm + i (0 <= i < Nm) of wave C:
 * - its own VW: the weights hold all the stage's own updates up to p - w (backward passes
 *   complete in order), so at most w - 1 <= Nm - 1 are missing: those in flight;
 * - another VW x: the pulled weights hold at least x's waves 0 .. C - 2 - D (x's clock >=
 *   C - 1 - D), and they are the weights of all of wave C (the next pull is at wave C + 1).
 *   Of x's minibatches before p in the sequential order (0 .. p - 1, equal Nm), at most those
 *   from (C - 1 - D) Nm to p - 1 are missing: (D + 1) Nm + i <= (D + 1) Nm + Nm - 1;
 * - clocks: admitting wave C' needs the global clock >= C' - 1 - D and pushing it makes the
 *   VW's clock C' + 1, so no VW's clock exceeds the global clock by more than D + 2.
 * Every VW trains the same number of minibatches, so every VW pushes F waves in all and the
 * last pull (wave F - 1) waits for F - 2 - D: no pull waits for a wave that never comes.
 * D = 0 is wave-level lock-step (clock - global <= 2); with one VW the pulled weights are the
 * VW's own (the rebase changes nothing) and WSP is plain pipelining. tests/wsp_check.py checks
 * the traces against these rules and bounds.
 */
/* The waves of every VW that wave C (>= 2) waits for. */
static long wave_threshold(const struct stage *g, long C)
{
    return C - 1 - g->D > 0 ? C - 1 - g->D : 0;
}

static int wave_gate(struct stage *g, long q, long first, long end)
{
    const long C = q / g->nm;
    int rc;

    if (!g->ps || q % g->nm != 0 || C < 2)
        return 0;
    for (int x = 0; x < g->nvws; x++)
        g->thr[x] = wave_threshold(g, C);
    rc = stash_current(g, first, end);
    const double t0 = hp_now_s();
    if (!rc && g->nparams)
        rc = g->be->ops->download(g->be, g->hparams, hp_net_params(g->net),
                                  g->nparams * sizeof(float));
    if (!rc)
        rc = hp_ps_pull(g->ps, g->thr, C);
    g->comm_s += hp_now_s() - t0;
    if (rc)
        return rc;
    hp_ps_rebase(g->ps, g->hparams);
    if (g->nparams)
        rc = g->be->ops->upload(g->be, hp_net_params(g->net), g->hparams,
                                g->nparams * sizeof(float));
    g->wver++;
    return rc;
}

/* The stage's updates since the last push, as wave `wave`. */
static int push_wave(struct stage *g, long wave)
{
    const double t0 = hp_now_s();
    int rc = 0;

    if (g->nparams)
        rc = g->be->ops->download(g->be, g->hparams, hp_net_params(g->net),
                                  g->nparams * sizeof(float));
    if (!rc)
        rc = hp_ps_push(g->ps, g->hparams, wave);
    g->comm_s += hp_now_s() - t0;
    g->unpushed = 0;
    return rc;
}

static int forward(struct stage *g, long j, long nb, long m_global, long step)
{
    const int slot = (int)(j % g->w);
    int32_t *lab = g->labels + (size_t)slot * g->batch;
    const size_t in_bytes = g->in_floats * sizeof(float);
    const long q = g->pbase + j; /* the VW's minibatch index since the start */
    int rc = wave_gate(g, q, nb, j);

    if (rc)
        return rc;
    if (g->trace) {
        const long C = q / g->nm;
        const double t = hp_now_s();
        fprintf(g->trace, "mb,%d,%d,%d,%ld,%ld,%ld,%ld,%" PRId64 ",%ld,%.6f,%.6f,", g->rank, g->v,
                g->s, C, q, C >= 2 ? wave_threshold(g, C) : -1L, hp_ps_pushed(g->ps),
                hp_ps_global_clock(g->ps), g->nupd, t, t);
        hp_ps_trace_incl(g->ps, g->trace);
    }
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
    g->fwd_version[slot] = g->wver;
    if (g->weight_log)
        g->fwd_hash[slot] = hash_weights(g, hp_net_params(g->net));

    const double t0 = hp_now_s();
    rc = hp_net_forward(g->net, slot, 1,
                        hp_rng_derive(g->plan->opts.seed, 0x2000000 + (uint64_t)step));
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

/* dp: the gradients summed over the replicas by the ring allreduce, then divided by their
 * number (the mean over R x B samples, as one step of hetpipe train at minibatch R x B). */
static int dp_allreduce(struct stage *g, long step)
{
    const double t0 = hp_now_s();
    const float inv = 1.0f / (float)g->nvws;
    const size_t bytes = g->nparams * sizeof(float);
    int rc = g->be->ops->download(g->be, g->hgrad, hp_net_grads(g->net), bytes);

    if (!rc)
        rc = hp_allreduce_sum(g->ar, g->hgrad, g->nparams, step, g->timeout_ms);
    if (rc) {
        hp_error("replica %d: the allreduce of step %ld failed: %s", g->v, step, hp_strerror(rc));
        return rc;
    }
    for (size_t i = 0; i < g->nparams; i++)
        g->hgrad[i] *= inv;
    rc = g->be->ops->upload(g->be, hp_net_grads(g->net), g->hgrad, bytes);
    g->comm_s += hp_now_s() - t0;
    pad(g, t0, g->ar_cost);
    return rc;
}

static int backward(struct stage *g, long j, long nf, long step, long total, double *loss,
                    int *correct)
{
    const int slot = (int)(j % g->w);
    const size_t out_bytes = g->out_floats * sizeof(float);
    const float *weights = NULL;
    long bwd_version = g->wver;
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
                j, g->fwd_version[slot], bwd_version, g->wver, g->fwd_hash[slot],
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
    if (!rc && g->ar)
        rc = dp_allreduce(g, step);
    if (!rc) {
        const double t1 = hp_now_s();
        rc = hp_net_sgd(g->net, lr_at(g, step, total), g->o->momentum, g->o->weight_decay);
        if (!rc)
            rc = sync_compute(g, t1);
    }
    g->nupd++;
    g->wver++;
    g->unpushed++;
    if (!rc && g->ps && (g->pbase + j + 1) % g->nm == 0)
        rc = push_wave(g, (g->pbase + j) / g->nm);
    return rc;
}

/* The test set forward through the pipeline (VW 0); stage 0 gets the totals. Not emulated:
 * evaluation is not training time (the metrics leave it out, and nothing trains meanwhile:
 * eval_verdict), so padding it would only lengthen the run. */
static int evaluate_test_set(struct stage *g, int tag, double *loss, double *acc)
{
    const int batch = g->batch;
    const int n =
        g->s == 0
            ? (g->o->test_limit > 0 && g->o->test_limit < g->test.n ? g->o->test_limit : g->test.n)
            : 0;
    int nb;
    double lsum = 0.0, csum = 0.0, count = 0.0;
    int rc = 0;
    const size_t in_bytes = g->in_floats * sizeof(float), out_bytes = g->out_floats * sizeof(float);
    const size_t lab_bytes = (size_t)batch * sizeof(int32_t);

    /* every stage knows the number of test batches from the same options */
    {
        const int nt = g->o->test_limit > 0 && g->o->test_limit < FASHION_TEST_N ? g->o->test_limit
                                                                                 : FASHION_TEST_N;
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
                              0.0);
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
            rc = send_msg(g, g->first, HP_MSG_EVAL, mb, tag, sizeof(tot), 0.0);
        }
    } else if (g->k > 1 && g->s == 0) {
        rc = recv_checked(g, g->last, HP_MSG_EVAL, g->grad_in, tag, 3 * sizeof(double),
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

/* Evaluate (VW 0, every stage) on the global weights: each stage pulls its units (the final
 * evaluation waits for every VW's last wave, the others take what the shards hold), runs the
 * test set on them and goes back to its local weights. With one VW the global weights are the
 * VW's own minus the wave in progress, so it evaluates its local weights, as plain pipelining
 * does. Batch norm's running statistics are not synchronised: VW 0's own are used. */
static int evaluate(struct stage *g, int final, double *loss, double *acc)
{
    const size_t bytes = g->nparams * sizeof(float);
    const int global = g->ps && g->nvws > 1;
    int rc = 0;

    if (global) {
        for (int x = 0; x < g->nvws; x++)
            g->thr[x] = final ? g->final_waves[x] : 0;
        rc = hp_ps_pull(g->ps, g->thr, -1);
        if (!rc && g->nparams)
            rc = g->be->ops->download(g->be, g->hsave, hp_net_params(g->net), bytes);
        if (!rc && g->nparams)
            rc = g->be->ops->upload(g->be, hp_net_params(g->net), hp_ps_global(g->ps), bytes);
        if (rc)
            return rc;
    }
    rc = evaluate_test_set(g, g->nevals++, loss, acc);
    if (global && g->nparams) {
        int rc2 = g->be->ops->upload(g->be, hp_net_params(g->net), g->hsave, bytes);
        rc = rc ? rc : rc2;
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
    g->dp = p->grouping == HP_POLICY_DP;
    g->nm = vw->nm > 0 ? vw->nm : 1;
    g->D = p->opts.staleness;
    g->w = g->st->in_flight;
    g->batch = p->opts.batch;
    g->type = g->cl->gpus[g->st->gpu].type;
    g->prev = g->s > 0 ? hp_plan_stage_rank(p, g->v, g->s - 1) : -1;
    g->next = g->s + 1 < g->k ? hp_plan_stage_rank(p, g->v, g->s + 1) : -1;
    g->first = hp_plan_stage_rank(p, g->v, 0);
    g->last = hp_plan_stage_rank(p, g->v, g->k - 1);
    if (g->w < 1 || (g->s + 1 < g->k && vw->stages[g->s + 1].in_flight > g->w)) {
        hp_error("plan: vw %d stage %d keeps %d minibatches but the next stage %d; in-flight "
                 "counts must not grow along the pipeline",
                 g->v, g->s, g->w, vw->stages[g->s + 1].in_flight);
        return -HP_ECONFIG;
    }

    rc = hp_backend_create(hp_opt_word(HP_OPT_DEVICE, g->o->device), &g->be);
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

/* Emulation (S > 0): each pass and send padded to S x the plan's seconds for this stage. */
static void emulation_setup(struct stage *g)
{
    const double S = g->o->emulate;

    if (S <= 0.0)
        return;
    g->fwd_cost = S * g->st->fwd_s;
    g->bwd_cost = S * g->st->bwd_s;
    g->xfer_next = S * g->st->send_s;
    g->xfer_prev = S * g->st->send_back_s;
}

/* The synchronisation across VWs: the PS client (WSP) or, for dp, the allreduce group of the
 * replicas. my_mb: each VW's minibatches per epoch. */
static int sync_setup(struct stage *g, long my_mb)
{
    const struct hp_plan *p = g->plan;
    const size_t n = g->nparams ? g->nparams : 1;
    int rc = 0;

    g->thr = calloc((size_t)g->nvws, sizeof(int64_t));
    g->final_waves = calloc((size_t)g->nvws, sizeof(long));
    g->hsave = malloc(n * sizeof(float));
    if (!g->thr || !g->final_waves || !g->hsave)
        return -HP_ENOMEM;
    if (g->dp) {
        int *ranks = malloc((size_t)g->nvws * sizeof(int));
        if (!ranks || !(g->hgrad = malloc(n * sizeof(float)))) {
            free(ranks);
            return -HP_ENOMEM;
        }
        for (int x = 0; x < g->nvws; x++)
            ranks[x] = hp_plan_stage_rank(p, x, 0);
        rc = hp_allreduce_create(g->comm, ranks, g->nvws, g->rank, g->nparams, &g->ar);
        free(ranks);
        g->ar_cost = g->o->emulate > 0 ? g->o->emulate * p->allreduce_s : 0.0;
        return rc;
    }
    if (!p->nshards)
        return 0;
    for (int x = 0; x < g->nvws; x++) {
        const long nm = p->vws[x].nm > 0 ? p->vws[x].nm : 1;
        g->final_waves[x] = (g->o->epochs * my_mb + nm - 1) / nm;
    }
    if (g->o->trace && !(g->trace = hp_ps_trace_open(g->o->trace, g->rank)))
        return -HP_EIO;
    if (g->nparams)
        rc = g->be->ops->download(g->be, g->hparams, hp_net_params(g->net),
                                  g->nparams * sizeof(float));
    if (!rc)
        rc = hp_ps_client_create(p, g->model, g->v, g->s, g->cl->gpus[g->st->gpu].node, g->rank,
                                 g->comm, g->hparams, g->timeout_ms, g->trace, &g->ps);
    return rc;
}

static void teardown(struct stage *g)
{
    hp_ps_client_destroy(g->comm, g->ps);
    if (g->trace)
        fclose(g->trace);
    hp_allreduce_destroy(g->comm, g->ar);
    free(g->thr);
    free(g->final_waves);
    free(g->hsave);
    free(g->hgrad);
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
    const struct hp_options *o = g->o;
    const int reporter = g->v == 0 && g->s == 0;

    if (o->weight_log) {
        /* every rank writes its own: PATH.<rank> */
        char path[4096];
        snprintf(path, sizeof(path), "%s.%d", o->weight_log, g->rank);
        if (!(g->weight_log = open_out(path, "weight log")))
            return -HP_EIO;
        fprintf(g->weight_log,
                "vw,stage,minibatch,fwd_version,bwd_version,version_at_bwd,fwd_hash,bwd_hash\n");
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

/* This stage's real compute per minibatch over its VW's planned time per minibatch at the
 * emulation scale (1 when off): below 1 the emulated pace, not this CPU, sets the VW's rate;
 * at scale 1 it is the smallest scale at which that holds. */
static double cpu_share(const struct stage *g, const struct hp_worker_result *r)
{
    const double S = g->o->emulate > 0.0 ? g->o->emulate : 1.0;
    const double period = S * g->batch / planned_rate(g);

    return r->minibatches > 0 && period > 0.0 ? r->compute_s / r->minibatches / period : 0.0;
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
            "%.3f\nmem_peak = %zu\nmem_predicted = %.0f\ntest_acc = %.6f\ncpu_share = %.6f\n",
            g->rank, g->v, g->s, g->k, g->type_name,
            g->st->u0, g->st->u1 - 1, g->w, g->o->emulate, r->minibatches, r->train_s, r->compute_s,
            r->pad_s, r->comm_s, r->other_s, r->images_per_s, planned_rate(g), r->mem_peak,
            r->mem_predicted, r->test_acc, cpu_share(g, r));
    if (g->ps) {
        struct hp_ps_stats ps;
        hp_ps_client_stats(g->ps, &ps);
        /* per wave: a push every wave, a pull every wave from the third on */
        fprintf(f,
                "waves_pushed = %ld\npulls = %ld\npull_wait_s = %.6f\nremote_push_bytes = %" PRIu64
                "\nremote_pull_bytes = %" PRIu64 "\nremote_bytes_per_wave = %.1f\n",
                ps.pushes, ps.pulls, ps.pull_wait_s, ps.remote_push_bytes, ps.remote_pull_bytes,
                (ps.pushes ? (double)ps.remote_push_bytes / ps.pushes : 0.0) +
                    (ps.pulls ? (double)ps.remote_pull_bytes / ps.pulls : 0.0));
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        hp_error("cannot write stats file '%s': %s", path, strerror(errno));
        return -HP_EIO;
    }
    return 0;
}

/* Evaluate (VW 0) and report on stage 0: within an epoch (after nb of its my_mb minibatches)
 * or at its end (nb < 0); step: the job's, train_s: training seconds so far. */
static int eval_report(struct stage *g, struct hp_worker_result *res, int epoch, long nb,
                       long my_mb, long step, double train_s, int final, double *tl, double *ta)
{
    const double c0 = g->compute_s, p0 = g->pad_s, m0 = g->comm_s;
    int rc = evaluate(g, final, tl, ta);

    /* evaluation is outside the training phase's accounting */
    g->compute_s = c0;
    g->pad_s = p0;
    g->comm_s = m0;
    if (rc || g->s != 0)
        return rc;
    if (nb >= 0)
        printf("epoch %d/%ld step %ld/%ld test loss %.4f accuracy %.2f%%\n", epoch + 1, g->o->epochs,
               nb, my_mb, *tl, 100.0 * *ta);
    else
        printf("epoch %d/%ld test loss %.4f accuracy %.2f%%\n", epoch + 1, g->o->epochs, *tl,
               100.0 * *ta);
    if (g->metrics) { /* flushed: whoever follows the run sees each evaluation as it comes */
        fprintf(g->metrics, "test,%d,%ld,%.3f,%.6f,%.6f,\n", epoch + 1, step, train_s, *tl, *ta);
        fflush(g->metrics);
    }
    fflush(stdout);
    res->test_loss = *tl;
    res->test_acc = *ta;
    return 0;
}

/* Whether this rank's evaluation (VW 0's stage 0 has the accuracy) reached --stop-at. */
static int reached(const struct stage *g, double acc)
{
    return g->v == 0 && g->s == 0 && g->o->stop_at > 0.0 && 100.0 * acc >= g->o->stop_at;
}

/* After evaluation point n: VW 0 evaluated (all its stages), every other worker rank stopped
 * at the same point of its data (every VW and replica has the same share), drained; stage 0
 * of VW 0 now tells each of them whether to go on or to stop (*stop: its verdict in, everyone's
 * out; --stop-at). So nothing trains while VW 0 evaluates, and the seconds the metrics report
 * exclude evaluation for the whole job (under WSP the other VWs would otherwise train on
 * during it, up to the staleness bound, for free), and a job that reached --stop-at stops
 * everywhere at the same point. No deadlock under WSP: at a point P every VW has pushed
 * waves 0 .. P / Nm - 1, and reaching P needs at most waves (P - 1) / Nm - 1 - D of the others
 * (wave_gate); dp's replicas are in step anyway. */
static int eval_verdict(struct stage *g, long n, int *stop)
{
    const int from = hp_plan_stage_rank(g->plan, 0, 0);
    const int workers = g->plan->nranks - g->plan->nshards;
    struct hp_msg_header h = {
        .type = HP_MSG_CONTROL, .vw = g->v, .stage = g->s, .minibatch = n, .clock = *stop};
    int rc = 0;

    if (g->rank == from) {
        for (int r = 0; r < workers && !rc; r++)
            if (r != from)
                rc = hp_comm_send(g->comm, r, &h, NULL, g->timeout_ms);
    } else {
        /* VW 0's evaluation may take long: no timeout, but a dead peer ends the wait */
        rc = hp_comm_recv(g->comm, from, HP_MSG_CONTROL, &h, NULL, 0, -1);
        if (!rc && (h.minibatch != n || h.clock < 0 || h.clock > 1)) {
            hp_error("vw %d stage %d: protocol error: expected the verdict of evaluation %ld from "
                     "rank %d, got %" PRId64 " (%" PRId64 ")",
                     g->v, g->s, n, from, h.minibatch, h.clock);
            rc = -HP_EPROTOCOL;
        }
        if (!rc)
            *stop = (int)h.clock;
    }
    if (rc)
        hp_error("vw %d stage %d: after evaluation %ld: %s", g->v, g->s, n, hp_strerror(rc));
    return rc;
}

/* The progress line's WSP part: every VW's clock as of this stage's last pull, the global
 * clock, and the job's rate from those clocks. */
static void print_clocks(const struct stage *g, double elapsed)
{
    double images = 0.0;

    if (!g->ps || g->nvws < 2 || hp_ps_global_clock(g->ps) < 0)
        return;
    printf(" | clocks");
    for (int x = 0; x < g->nvws; x++) {
        int64_t lo, hi;
        hp_ps_included(g->ps, x, &lo, &hi);
        if (x == g->v)
            hi = hp_ps_pushed(g->ps);
        printf("%c%" PRId64, x ? ',' : ' ', hi);
        images += (double)hi * g->plan->vws[x].nm * g->batch;
    }
    printf(" global %" PRId64 " | job %.0f img/s", hp_ps_global_clock(g->ps),
           elapsed > 0 ? images / elapsed : 0.0);
}

int hp_worker_run(const struct hp_plan *plan, const struct hp_cluster *cl,
                  const struct hp_gpudb *db, const struct hp_model *model, int rank,
                  struct hp_comm *comm, const struct hp_options *o,
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
    g.timeout_ms = (int)(o->timeout * 1000.0);
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
    if (!rc) {
        g.type_name = db->types[g.type].name;
        emulation_setup(&g);
        rc = open_files(&g);
    }
    if (rc)
        goto out;

    /* the minibatch count must be the same on every stage: from the options, checked on
     * stage 0 against the data */
    ntrain =
        o->train_limit > 0 && o->train_limit < FASHION_TRAIN_N ? o->train_limit : FASHION_TRAIN_N;
    if (g.s == 0) {
        rc = hp_dataset_load_fashion_mnist(o->data, 1, &g.train);
        if (!rc && g.v == 0)
            rc = hp_dataset_load_fashion_mnist(o->data, 0, &g.test);
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
    /* every VW (replica) the same share: dp's replicas the steps of hetpipe train at R x B,
     * WSP's VWs the same evaluation points (eval_verdict); the last total_mb % nvws minibatches
     * of an epoch's permutation are left out */
    const long my_mb = total_mb / g.nvws;
    if (my_mb == 0) {
        hp_error("minibatch %d x %d virtual workers is more than the %d training samples", g.batch,
                 g.nvws, ntrain);
        rc = -HP_EINVAL;
        goto out;
    }
    rc = sync_setup(&g, my_mb);
    if (rc)
        goto out;
    const long total_steps = g.dp ? my_mb * o->epochs : total_mb * o->epochs;
    const int reporter = g.v == 0 && g.s == 0;
    /* --eval-every N samples: VW 0 evaluates after every ek of its minibatches */
    const long ek = o->eval_every > 0
                        ? (o->eval_every + (long)g.nvws * g.batch - 1) / ((long)g.nvws * g.batch)
                        : 0;
    if (reporter) {
        if (g.dp)
            printf("hetpipe: model %s, dp over %d replicas (ring allreduce every minibatch), "
                   "batch %d per replica, %ld epochs of %ld steps, lr %g, seed %llu%s\n",
                   model->name, g.nvws, g.batch, o->epochs, my_mb, o->lr,
                   (unsigned long long)plan->opts.seed,
                   o->emulate > 0 ? ", emulated GPU types" : "");
        else
            printf("hetpipe: model %s, %d virtual worker%s, this one of %d stage%s, Nm %d, batch "
                   "%d, %ld epochs of %ld minibatches, lr %g%s, seed %llu%s%s\n",
                   model->name, g.nvws, g.nvws == 1 ? "" : "s", g.k, g.k == 1 ? "" : "s", g.nm,
                   g.batch, o->epochs, my_mb, o->lr, g.nvws > 1 ? " (/ VWs in each)" : "",
                   (unsigned long long)plan->opts.seed,
                   g.nvws > 1 ? (plan->nshards ? ", WSP" : "") : "",
                   o->emulate > 0 ? ", emulated GPU types" : "");
    }
    fflush(stdout);

    const double t_start = hp_now_s();
    double eval_s = 0.0; /* evaluations (VW 0's, the others' waits for them): not training */
    long nevals = 0;
    int stop = 0; /* --stop-at reached */
    for (int epoch = 0; epoch < o->epochs && !rc && !stop; epoch++) {
        /* VW 0 evaluates every ek minibatches, every other worker waits for its verdict */
        long nf = 0, nb = 0, nint = 0, next_eval = ek ? ek : my_mb;
        double lsum = 0.0, csum = 0.0;
        double t_int = hp_now_s();

        if (g.s == 0)
            hp_permute(g.perm, g.train.n < ntrain ? g.train.n : ntrain,
                       hp_rng_derive(plan->opts.seed, 0x1000 + (uint64_t)epoch));
        step_base = (long)epoch * total_mb;
        g.pbase = (long)epoch * my_mb;
        while (nb < my_mb && !rc) {
            const long lim = next_eval < my_mb ? next_eval : my_mb;
            if (nb == lim) { /* drained for an evaluation within the epoch */
                double tl = 0.0, ta = 0.0;
                const double te = hp_now_s();
                if (g.v == 0)
                    rc = eval_report(&g, res, epoch, nb, my_mb, step_base + nb * g.nvws,
                                     te - t_start - eval_s, 0, &tl, &ta);
                stop = reached(&g, ta);
                if (!rc)
                    rc = eval_verdict(&g, nevals++, &stop);
                eval_s += hp_now_s() - te;
                t_int += hp_now_s() - te;
                next_eval += ek;
                if (stop)
                    break;
                continue;
            }
            /* dp: the step of hetpipe train at R x B; else the job's minibatch index */
            if (nf < lim && nf - nb < g.w) {
                const long m = nf * g.nvws + g.v;
                rc = forward(&g, nf, nb, m, g.dp ? g.pbase + nf : step_base + m);
                nf++;
            } else {
                const long m = nb * g.nvws + g.v, step = g.dp ? g.pbase + nb : step_base + m;
                double l = 0.0;
                int c = 0;
                rc = backward(&g, nb, nf, step, total_steps, &l, &c);
                nb++;
                res->minibatches++;
                if (rc || g.s != 0)
                    continue;
                if (!isfinite(l)) {
                    hp_error("loss is %g at step %ld: training diverged (lower --lr)", l, step);
                    rc = -HP_ERANGE;
                    break;
                }
                lsum += l;
                csum += c;
                nint++;
                if (g.step_log)
                    fprintf(g.step_log, "%ld,%.9e\n", step, l / g.batch);
                if (reporter && ((o->log_every > 0 && nb % o->log_every == 0) || nb == my_mb)) {
                    const double now = hp_now_s(), ips = (double)nint * g.batch / (now - t_int);
                    if (o->log_every > 0) {
                        printf("epoch %d/%ld step %ld/%ld loss %.4f acc %.2f%% %.0f img/s",
                               epoch + 1, o->epochs, nb, my_mb, lsum / ((double)nint * g.batch),
                               100.0 * csum / ((double)nint * g.batch), ips);
                        print_clocks(&g, now - t_start);
                        putchar('\n');
                    }
                    if (g.metrics)
                        fprintf(g.metrics, "train,%d,%ld,%.3f,%.6f,%.6f,%.1f\n", epoch + 1,
                                step_base + nb * g.nvws, now - t_start - eval_s,
                                lsum / ((double)nint * g.batch), csum / ((double)nint * g.batch),
                                ips);
                    fflush(stdout);
                    lsum = csum = 0.0;
                    nint = 0;
                    t_int = now;
                }
            }
        }
        if (rc || stop)
            break;
        const int last = epoch + 1 == o->epochs;
        if (last && g.ps && g.unpushed > 0) /* the partial last wave */
            rc = push_wave(&g, hp_ps_pushed(g.ps));
        {
            double tl = 0.0, ta = 0.0;
            const double te = hp_now_s();
            if (!rc && g.v == 0)
                rc = eval_report(&g, res, epoch, -1, my_mb, (long)(epoch + 1) * total_mb,
                                 te - t_start - eval_s, last, &tl, &ta);
            stop = reached(&g, ta);
            if (!rc && !last)
                rc = eval_verdict(&g, nevals++, &stop);
            eval_s += hp_now_s() - te;
        }
    }
    const double t_train = hp_now_s() - t_start - eval_s;
    if (!rc && g.ps)
        rc = hp_ps_flush(g.ps);
    if (!rc)
        rc = param_hash(&g, &res->param_hash);
    if (!rc && o->save_params) {
        char path[4096];
        snprintf(path, sizeof(path), "%s.%d", o->save_params, rank);
        rc = g.be->ops->download(g.be, g.hparams, hp_net_params(g.net), g.nparams * sizeof(float));
        if (!rc)
            rc = hp_save_floats(path, g.hparams, g.nparams);
    }
    /* the last sends must be delivered before the endpoints close */
    for (int i = 0; i < 2 && !rc; i++) {
        rc = hp_comm_send_wait(comm, g.act_out[i], g.timeout_ms);
        if (!rc)
            rc = hp_comm_send_wait(comm, g.grad_out[i], g.timeout_ms);
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
    if (reporter && stop)
        printf("hetpipe: stopped: test accuracy %.2f%% >= %g%% (--stop-at) after %ld samples\n",
               100.0 * res->test_acc, o->stop_at, res->minibatches * g.batch * g.nvws);
    if (reporter) {
        const double pred = planned_rate(&g) / (o->emulate > 0 ? o->emulate : 1.0);
        printf("hetpipe: trained %ld minibatches in %.1f s: %.0f img/s on this %s",
               res->minibatches, t_train, res->images_per_s, g.dp ? "replica" : "virtual worker");
        if (o->emulate > 0)
            printf(" (predicted %.0f for the emulated GPUs at scale %g: ratio %.2f)", pred,
                   o->emulate, res->images_per_s / pred);
        if (g.nvws > 1) /* every VW's (replica's) minibatches over this one's time */
            printf("; the job %.0f img/s",
                   t_train > 0
                       ? (double)res->minibatches * g.nvws * g.batch / t_train
                       : 0.0);
        printf("\nhetpipe: parameters hash %016" PRIx64 "\n", res->param_hash);
        fflush(stdout);
    }
    rc = write_stats(&g, res);
    if (!rc)
        rc = hp_ps_worker_done(plan, comm, rank, g.v, g.s, g.timeout_ms);
out:
    teardown(&g);
    return rc;
}
