/* vwsync.c - a VW's stages settle the tied embeddings' gradient and the clipping norm after
 * each backward pass (vwsync.h). */
#include "vwsync.h"

#include "clock.h"
#include "error.h"
#include "log.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PART_TIE = 1, PART_SUMS = 2, PART_NORM = 3 }; /* in the header's clock */

struct hp_vwsync {
    struct hp_vwsync_config c;
    int k, first, last;    /* the VW's stages; the ranks of its first and last */
    int nunits;            /* the model's */
    int tie_local;         /* both tied parts in this net */
    int tie_across;        /* the embed on the first stage, its tied head on the last */
    size_t tie_n;          /* floats of the tied matrix */
    float *tie_dev;        /* first stage: the head's gradient on the device */
    double *sums;          /* [nunits]: first stage, every unit's; else this stage's */
    struct hp_msg_buf *in; /* a part received */
    struct hp_msg_buf *tie_out, *sums_out;
    struct hp_msg_buf **norm_out; /* first stage: [k], one per later stage */
};

/* The stage of the VW that holds unit u. */
static int stage_of(const struct hp_vw_plan *vw, int u)
{
    for (int s = 0; s < vw->nstages; s++)
        if (u >= vw->stages[s].u0 && u < vw->stages[s].u1)
            return s;
    return -1;
}

static int bufs(struct hp_vwsync *y, const struct hp_model *m)
{
    const size_t tie_b = y->tie_across ? y->tie_n * sizeof(float) : 0;
    const size_t sums_b = (size_t)m->nunits * sizeof(double) + 64;
    int rc = hp_msg_buf_create(tie_b > sums_b ? tie_b : sums_b, &y->in);

    y->sums = calloc((size_t)m->nunits, sizeof(double));
    if (!y->sums)
        return -HP_ENOMEM;
    if (!rc && tie_b && (y->c.s == 0 || y->c.s == y->k - 1))
        rc = hp_msg_buf_create(tie_b, &y->tie_out);
    if (!rc && y->c.s > 0)
        rc = hp_msg_buf_create(sums_b, &y->sums_out);
    if (!rc && y->c.s == 0) {
        y->norm_out = calloc((size_t)y->k, sizeof(*y->norm_out));
        if (!y->norm_out)
            return -HP_ENOMEM;
        for (int s = 1; s < y->k && !rc; s++)
            rc = hp_msg_buf_create(sizeof(double), &y->norm_out[s]);
    }
    if (!rc && tie_b && y->c.s == 0)
        rc = y->c.be->ops->alloc(y->c.be, tie_b, (void **)&y->tie_dev);
    return rc;
}

int hp_vwsync_create(const struct hp_vwsync_config *c, struct hp_vwsync **out)
{
    const struct hp_vw_plan *vw = &c->plan->vws[c->v];
    const struct hp_model *m = NULL;
    struct hp_vwsync *y;
    int embed = -1, head, rc;

    *out = NULL;
    y = calloc(1, sizeof(*y));
    if (!y)
        return -HP_ENOMEM;
    y->c = *c;
    y->k = vw->nstages;
    y->first = hp_plan_stage_rank(c->plan, c->v, 0);
    y->last = hp_plan_stage_rank(c->plan, c->v, y->k - 1);
    m = hp_net_model(c->net);
    y->nunits = m->nunits;
    head = hp_model_tied_head(m, &embed);
    if (head >= 0) {
        const int se = stage_of(vw, embed), sh = stage_of(vw, head);
        y->tie_local = se == sh && se == c->s;
        y->tie_across = se != sh;
        if (y->tie_across && (se != 0 || sh != y->k - 1)) {
            hp_error("plan: vw %d holds the tied embed unit %d on stage %d and its head unit %d on "
                     "stage %d; a tie across stages needs the embed first and the head last",
                     c->v, embed, se, head, sh);
            free(y);
            return -HP_ECONFIG;
        }
        if (y->tie_across)
            y->tie_n = m->ntied; /* the one tied copy's floats: the token matrix */
    }
    if (!(c->clip > 0.0) && !y->tie_local && !y->tie_across) {
        free(y);
        return 0;
    }
    rc = bufs(y, m);
    if (rc) {
        hp_vwsync_destroy(y);
        return rc;
    }
    *out = y;
    return 0;
}

void hp_vwsync_destroy(struct hp_vwsync *y)
{
    if (!y)
        return;
    hp_msg_buf_destroy(y->c.comm, y->in);
    hp_msg_buf_destroy(y->c.comm, y->tie_out);
    hp_msg_buf_destroy(y->c.comm, y->sums_out);
    for (int s = 1; y->norm_out && s < y->k; s++)
        hp_msg_buf_destroy(y->c.comm, y->norm_out[s]);
    if (y->tie_dev)
        y->c.be->ops->free(y->c.be, y->tie_dev);
    free(y->norm_out);
    free(y->sums);
    free(y);
}

/* Part `part` of minibatch j from buffer b (bytes of its payload, already written) to `peer`,
 * once b's previous send is done. */
static int send_part(struct hp_vwsync *y, struct hp_msg_buf *b, int peer, int part, long j,
                     size_t bytes)
{
    const struct hp_msg_header h = {.type = HP_MSG_VWSYNC,
                                    .vw = y->c.v,
                                    .stage = y->c.s,
                                    .minibatch = j,
                                    .clock = part,
                                    .payload_bytes = bytes};
    int rc = hp_comm_send_start(y->c.comm, peer, &h, b);

    if (rc)
        hp_error("vw %d stage %d: sending minibatch %ld's %s to rank %d failed: %s", y->c.v, y->c.s,
                 j, part == PART_TIE ? "tied gradient" : "gradient norm", peer, hp_strerror(rc));
    return rc;
}

/* A buffer free for a new send (its previous one delivered). */
static int take(struct hp_vwsync *y, struct hp_msg_buf *b, void **payload)
{
    int rc = hp_comm_send_wait(y->c.comm, b, y->c.wait_ms);

    *payload = hp_msg_buf_payload(b);
    return rc;
}

/* Part `part` of minibatch j from `peer` (`bytes` exactly) into y->in; the wait on the
 * timeline. */
static int recv_part(struct hp_vwsync *y, int peer, int part, long j, long q, size_t bytes,
                     const void **payload)
{
    const double t0 = hp_now_s();
    int rc = hp_comm_recv_buf(y->c.comm, peer, HP_MSG_VWSYNC, y->in, y->c.wait_ms);
    const struct hp_msg_header *h = hp_msg_buf_header(y->in);

    hp_tl_add(y->c.tl, HP_TL_VWSYNC, t0, hp_now_s(), q, peer, (int64_t)bytes, -1);
    if (rc) {
        hp_error("vw %d stage %d: waiting for minibatch %ld's %s from rank %d failed: %s", y->c.v,
                 y->c.s, j, part == PART_TIE ? "tied gradient" : "gradient norm", peer,
                 hp_strerror(rc));
        return rc;
    }
    if (h->vw != y->c.v || h->minibatch != j || h->clock != part || h->payload_bytes != bytes) {
        hp_error("vw %d stage %d: protocol error: expected part %d of minibatch %ld (%zu bytes) "
                 "from rank %d, got part %" PRId64 " of minibatch %" PRId64 " (%" PRIu64 " bytes)",
                 y->c.v, y->c.s, part, j, bytes, peer, h->clock, h->minibatch, h->payload_bytes);
        return -HP_EPROTOCOL;
    }
    *payload = hp_msg_buf_payload(y->in);
    return 0;
}

/* The first stage's tie: the head's gradient in, the sum into the embed's, the sum out. */
static int first_tie(struct hp_vwsync *y, long j, long q)
{
    struct hp_backend *be = y->c.be;
    const size_t bytes = y->tie_n * sizeof(float);
    const void *g;
    void *out;
    int rc = recv_part(y, y->last, PART_TIE, j, q, bytes, &g);

    if (!rc)
        rc = be->ops->upload(be, y->tie_dev, g, bytes);
    if (!rc)
        rc = hp_net_tie_sum(y->c.net, y->tie_dev);
    if (!rc)
        rc = take(y, y->tie_out, &out);
    size_t n;
    if (!rc)
        rc = be->ops->download(be, out, hp_net_tie_grad(y->c.net, &n), bytes);
    return rc ? rc : send_part(y, y->tie_out, y->last, PART_TIE, j, bytes);
}

/* The first stage's norm: its own per-unit sums and every later stage's, added in unit
 * order; its gradients clipped; the norm to every later stage. */
static int first_norm(struct hp_vwsync *y, long j, long q)
{
    const struct hp_vw_plan *vw = &y->c.plan->vws[y->c.v];
    double total = 0.0, *out;
    int rc = hp_net_grad_sumsq_units(y->c.net, y->sums);

    for (int s = 1; s < y->k && !rc; s++) {
        const struct hp_stage_plan *st = &vw->stages[s];
        const size_t bytes = (size_t)(st->u1 - st->u0) * sizeof(double);
        const void *p;
        rc = recv_part(y, hp_plan_stage_rank(y->c.plan, y->c.v, s), PART_SUMS, j, q, bytes, &p);
        if (!rc)
            memcpy(y->sums + st->u0, p, bytes);
    }
    for (int u = 0; u < y->nunits && !rc; u++)
        total += y->sums[u];
    const double norm = sqrt(total);
    for (int s = 1; s < y->k && !rc; s++) {
        rc = take(y, y->norm_out[s], (void **)&out);
        if (!rc) {
            *out = norm;
            rc = send_part(y, y->norm_out[s], hp_plan_stage_rank(y->c.plan, y->c.v, s), PART_NORM,
                           j, sizeof(double));
        }
    }
    return rc ? rc : hp_net_clip_grads(y->c.net, norm, y->c.clip);
}

/* A later stage's parts: the tied copy's gradient (the last stage), its per-unit sums. */
static int later_send(struct hp_vwsync *y, long j)
{
    void *out;
    int rc = 0;

    if (y->tie_across && y->c.s == y->k - 1) {
        size_t n;
        const float *g = hp_net_tie_grad(y->c.net, &n);
        rc = take(y, y->tie_out, &out);
        if (!rc)
            rc = y->c.be->ops->download(y->c.be, out, g, n * sizeof(float));
        if (!rc)
            rc = send_part(y, y->tie_out, y->first, PART_TIE, j, n * sizeof(float));
    }
    if (!rc && y->c.clip > 0.0) {
        const struct hp_stage_plan *st = &y->c.plan->vws[y->c.v].stages[y->c.s];
        const size_t bytes = (size_t)(st->u1 - st->u0) * sizeof(double);
        rc = take(y, y->sums_out, &out);
        if (!rc)
            rc = hp_net_grad_sumsq_units(y->c.net, out);
        if (!rc)
            rc = send_part(y, y->sums_out, y->first, PART_SUMS, j, bytes);
    }
    return rc;
}

int hp_vwsync_backward(struct hp_vwsync *y, long j, long q, int *later)
{
    int rc = 0;

    *later = 0;
    if (!y)
        return 0;
    if (y->k == 1) { /* everything in this net: hetpipe train's order */
        double sumsq;
        rc = y->tie_local ? hp_net_tie_sum(y->c.net, NULL) : 0;
        if (!rc && y->c.clip > 0.0)
            rc = hp_net_grad_sumsq(y->c.net, &sumsq);
        return rc || !(y->c.clip > 0.0) ? rc : hp_net_clip_grads(y->c.net, sqrt(sumsq), y->c.clip);
    }
    if (y->c.s == 0) {
        if (y->tie_across)
            rc = first_tie(y, j, q);
        return rc || !(y->c.clip > 0.0) ? rc : first_norm(y, j, q);
    }
    rc = later_send(y, j);
    *later = y->c.clip > 0.0 || (y->tie_across && y->c.s == y->k - 1);
    return rc;
}

int hp_vwsync_settle(struct hp_vwsync *y, long j, long q)
{
    const void *p;
    int rc = 0;

    if (!y || y->c.s == 0)
        return 0;
    if (y->tie_across && y->c.s == y->k - 1) {
        size_t n;
        float *g = hp_net_tie_grad(y->c.net, &n);
        rc = recv_part(y, y->first, PART_TIE, j, q, n * sizeof(float), &p);
        if (!rc)
            rc = y->c.be->ops->upload(y->c.be, g, p, n * sizeof(float));
    }
    if (!rc && y->c.clip > 0.0) {
        rc = recv_part(y, y->first, PART_NORM, j, q, sizeof(double), &p);
        double norm;
        if (!rc) {
            memcpy(&norm, p, sizeof(norm));
            rc = hp_net_clip_grads(y->c.net, norm, y->c.clip);
        }
    }
    return rc;
}
