/* ps_client.c - the worker's side of WSP: a stage's view of the shards that own its units
 * (ps.h), its pushes, pulls and rebase. */
#include "ps_client.h"

#include "clock.h"
#include "error.h"
#include "log.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Floats of units [u0, u1) before unit u (u0 <= u <= u1). */
static size_t unit_offset(const struct hp_model *m, int u0, int u)
{
    size_t off = 0;

    for (int i = u0; i < u; i++)
        off += m->units[i].nparams;
    return off;
}

int hp_ps_worker_done(const struct hp_plan *plan, struct hp_comm *comm, int rank, int vw, int stage,
                      int stopped, int timeout_ms)
{
    for (int r = hp_plan_first_shard(plan); r < plan->nranks; r++) {
        struct hp_msg_header h = {.type = HP_MSG_CONTROL,
                                  .vw = vw,
                                  .stage = stage,
                                  .minibatch = -1,
                                  .clock = stopped ? 1 : -1,
                                  .payload_bytes = 0};
        int rc = hp_comm_send(comm, r, &h, NULL, timeout_ms);
        if (rc) {
            hp_error("rank %d: telling PS shard rank %d that it is done: %s", rank, r,
                     hp_strerror(rc));
            return rc;
        }
    }
    return 0;
}

struct link {
    int rank;      /* the shard's */
    size_t floats; /* the stage's floats it owns */
    struct hp_msg_buf *push, *req, *reply;
};

struct hp_ps_client {
    const struct hp_plan *plan;
    const struct hp_model *model;
    struct hp_comm *comm;
    int v, s, rank, nvws, timeout_ms, wait_ms;
    int u0, u1;
    size_t n; /* the stage's floats */
    struct link *links;
    int nlinks;
    float *S, *g;  /* [n]: the global view plus own pushes; the last pull */
    int64_t *incl; /* [nvws][2]: what the training weights hold (the last pull for a wave) */
    int64_t *last; /* [nvws][2]: the last pull's, evaluation included */
    long pushed;
    int64_t global; /* the last pull's global clock, -1 */
    FILE *trace;
    int node; /* the stage's GPU's; shard i is on node i */
    struct hp_ps_stats stats;
};

int hp_ps_client_create(const struct hp_plan *plan, const struct hp_model *model, int v, int s,
                        int node, int rank, struct hp_comm *comm, const float *init, int timeout_ms,
                        FILE *trace, struct hp_ps_client **out)
{
    const struct hp_stage_plan *st = &plan->vws[v].stages[s];
    struct hp_ps_client *c = calloc(1, sizeof(*c));
    int rc = 0;

    *out = NULL;
    if (!c)
        return -HP_ENOMEM;
    *c = (struct hp_ps_client){.plan = plan,
                               .model = model,
                               .comm = comm,
                               .v = v,
                               .s = s,
                               .global = -1,
                               .rank = rank,
                               .nvws = plan->nvws,
                               .timeout_ms = timeout_ms,
                               .wait_ms = timeout_ms,
                               .u0 = st->u0,
                               .u1 = st->u1,
                               .trace = trace,
                               .node = node};
    c->n = unit_offset(model, st->u0, st->u1);
    c->links = calloc((size_t)(plan->nshards ? plan->nshards : 1), sizeof(struct link));
    c->S = malloc((c->n ? c->n : 1) * sizeof(float));
    c->g = malloc((c->n ? c->n : 1) * sizeof(float));
    c->incl = calloc((size_t)plan->nvws * 2, sizeof(int64_t));
    c->last = calloc((size_t)plan->nvws * 2, sizeof(int64_t));
    if (!c->links || !c->S || !c->g || !c->incl || !c->last) {
        hp_ps_client_destroy(comm, c);
        return -HP_ENOMEM;
    }
    memcpy(c->S, init, c->n * sizeof(float));
    memcpy(c->g, init, c->n * sizeof(float));
    for (int i = 0; i < plan->nshards && !rc; i++) {
        size_t f = 0;
        for (int u = st->u0; u < st->u1; u++)
            if (plan->unit_shard[u] == i)
                f += model->units[u].nparams;
        if (!f)
            continue;
        struct link *l = &c->links[c->nlinks++];
        l->rank = hp_plan_first_shard(plan) + i;
        l->floats = f;
        rc = hp_msg_buf_create(f * sizeof(float), &l->push);
        if (!rc)
            rc = hp_msg_buf_create((size_t)plan->nvws * sizeof(int64_t), &l->req);
        if (!rc)
            rc = hp_msg_buf_create(f * sizeof(float) + (size_t)plan->nvws * 2 * sizeof(int64_t),
                                   &l->reply);
    }
    if (rc) {
        hp_ps_client_destroy(comm, c);
        return rc;
    }
    *out = c;
    return 0;
}

void hp_ps_client_destroy(struct hp_comm *comm, struct hp_ps_client *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->nlinks; i++) {
        hp_msg_buf_destroy(comm, c->links[i].push);
        hp_msg_buf_destroy(comm, c->links[i].req);
        hp_msg_buf_destroy(comm, c->links[i].reply);
    }
    free(c->links);
    free(c->S);
    free(c->g);
    free(c->incl);
    free(c->last);
    free(c);
}

/* A stage with no parameters on any shard has nothing to include: "-". */
static void client_incl(const struct hp_ps_client *c, FILE *f, const int64_t *mm)
{
    if (c->nlinks)
        hp_ps_trace_clocks(f, mm, c->nvws);
    else
        fputs("-\n", f);
}

/* Shard i's floats of the stage, copied between the stage layout and a packed buffer. */
static void gather(const struct hp_ps_client *c, int shard, const float *stage, float *packed)
{
    for (int u = c->u0, k = 0; u < c->u1; u++) {
        const size_t n = c->model->units[u].nparams;
        if (c->plan->unit_shard[u] == shard) {
            memcpy(packed + k, stage + unit_offset(c->model, c->u0, u), n * sizeof(float));
            k += (int)n;
        }
    }
}

static void scatter(const struct hp_ps_client *c, int shard, const float *packed, float *stage)
{
    for (int u = c->u0, k = 0; u < c->u1; u++) {
        const size_t n = c->model->units[u].nparams;
        if (c->plan->unit_shard[u] == shard) {
            memcpy(stage + unit_offset(c->model, c->u0, u), packed + k, n * sizeof(float));
            k += (int)n;
        }
    }
}

int hp_ps_push(struct hp_ps_client *c, const float *local, long wave)
{
    int rc = 0;

    /* g is free between pulls: the update goes there, then S catches up with the same adds
     * the shard does */
    for (size_t i = 0; i < c->n; i++) {
        c->g[i] = local[i] - c->S[i];
        c->S[i] += c->g[i];
    }
    for (int i = 0; i < c->nlinks && !rc; i++) {
        struct link *l = &c->links[i];
        rc = hp_comm_send_wait(c->comm, l->push, c->timeout_ms);
        if (rc)
            break;
        gather(c, l->rank - hp_plan_first_shard(c->plan), c->g, hp_msg_buf_payload(l->push));
        const struct hp_msg_header h = {.type = HP_MSG_PUSH,
                                        .vw = c->v,
                                        .stage = c->s,
                                        .minibatch = -1,
                                        .clock = wave,
                                        .payload_bytes = l->floats * sizeof(float)};
        rc = hp_comm_send_start(c->comm, l->rank, &h, l->push);
        if (!rc && l->rank - hp_plan_first_shard(c->plan) != c->node)
            c->stats.remote_push_bytes += h.payload_bytes;
        if (rc)
            hp_error("vw %d stage %d: pushing wave %ld to PS shard rank %d failed: %s", c->v, c->s,
                     wave, l->rank, hp_strerror(rc));
    }
    if (rc)
        return rc;
    c->pushed = wave + 1;
    c->stats.pushes++;
    if (c->trace) {
        const double t = hp_now_s();
        fprintf(c->trace, "push,%d,%d,%d,%ld,-1,-1,%ld,-1,-1,%.6f,%.6f,\n", c->rank, c->v, c->s,
                wave, c->pushed, t, t);
    }
    return 0;
}

int hp_ps_pull(struct hp_ps_client *c, const int64_t *thr, long wave)
{
    const double t0 = hp_now_s();
    int64_t tmax = 0, global = INT64_MAX;
    int rc = 0;

    for (int x = 0; x < c->nvws; x++)
        tmax = thr[x] > tmax ? thr[x] : tmax;
    for (int i = 0; i < c->nlinks && !rc; i++) {
        struct link *l = &c->links[i];
        rc = hp_comm_send_wait(c->comm, l->req, c->timeout_ms);
        if (rc)
            break;
        memcpy(hp_msg_buf_payload(l->req), thr, (size_t)c->nvws * sizeof(int64_t));
        const struct hp_msg_header h = {.type = HP_MSG_PULL,
                                        .vw = c->v,
                                        .stage = c->s,
                                        .minibatch = wave,
                                        .clock = tmax,
                                        .payload_bytes = (size_t)c->nvws * sizeof(int64_t)};
        rc = hp_comm_send_start(c->comm, l->rank, &h, l->req);
    }
    for (int x = 0; x < c->nvws; x++) {
        c->last[2 * x] = INT64_MAX;
        c->last[2 * x + 1] = -1;
    }
    /* a pull waits as long as the slowest VW needs (wait_ms); a dead peer ends it at once */
    for (int i = 0; i < c->nlinks && !rc; i++) {
        struct link *l = &c->links[i];
        const size_t bytes = l->floats * sizeof(float) + (size_t)c->nvws * 2 * sizeof(int64_t);
        rc = hp_comm_recv_buf(c->comm, l->rank, HP_MSG_PULL, l->reply, c->wait_ms);
        if (rc == -HP_ETIMEOUT) /* the shard refuses a stale pull first: it is silent itself */
            hp_error("vw %d stage %d: PS shard rank %d did not answer the pull for wave %ld within "
                     "%.0f s",
                     c->v, c->s, l->rank, wave, c->wait_ms / 1000.0);
        const struct hp_msg_header *h = hp_msg_buf_header(l->reply);
        if (!rc && h->payload_bytes == 0 && h->clock >= 0 && h->clock < c->nvws) {
            /* the shard gave up the pull: VW h->clock did not push the waves it needs */
            const int late = (int)h->clock;
            hp_error("vw %d stage %d: PS shard rank %d gave up the pull for wave %ld after %.0f s: "
                     "vw %d stopped pushing",
                     c->v, c->s, l->rank, wave, hp_now_s() - t0, late);
            hp_comm_set_silent(c->comm, hp_plan_stage_rank(c->plan, late, 0));
            rc = -HP_ETIMEOUT;
        }
        if (!rc && (h->vw != c->v || h->stage != c->s || h->minibatch != wave ||
                    h->payload_bytes != bytes)) {
            hp_error("vw %d stage %d: protocol error: PS shard rank %d answered for vw %d stage "
                     "%d wave %" PRId64 " (%" PRIu64 " bytes), expected wave %ld (%zu bytes)",
                     c->v, c->s, l->rank, h->vw, h->stage, h->minibatch, h->payload_bytes, wave,
                     bytes);
            rc = -HP_EPROTOCOL;
        }
        if (rc)
            break;
        const char *p = hp_msg_buf_payload(l->reply);
        scatter(c, l->rank - hp_plan_first_shard(c->plan), (const float *)(const void *)p, c->g);
        int64_t mm[2];
        for (int x = 0; x < c->nvws; x++) {
            memcpy(mm, p + l->floats * sizeof(float) + (size_t)x * 2 * sizeof(int64_t), sizeof(mm));
            c->last[2 * x] = mm[0] < c->last[2 * x] ? mm[0] : c->last[2 * x];
            c->last[2 * x + 1] = mm[1] > c->last[2 * x + 1] ? mm[1] : c->last[2 * x + 1];
        }
        global = h->clock < global ? h->clock : global;
        if (l->rank - hp_plan_first_shard(c->plan) != c->node)
            c->stats.remote_pull_bytes += l->floats * sizeof(float);
    }
    if (rc) {
        hp_error("vw %d stage %d: pulling for wave %ld failed: %s", c->v, c->s, wave,
                 hp_strerror(rc));
        return rc;
    }
    if (!c->nlinks)
        for (int x = 0; x < c->nvws; x++)
            c->last[2 * x] = c->last[2 * x + 1] = 0;
    c->global = c->nlinks ? global : -1;
    if (wave >= 0) {
        c->stats.pulls++;
        c->stats.pull_wait_s += hp_now_s() - t0;
    } else {
        c->stats.eval_pulls++;
    }
    if (c->trace) {
        fprintf(c->trace, "%s,%d,%d,%d,%ld,-1,%" PRId64 ",%ld,%" PRId64 ",-1,%.6f,%.6f,",
                wave < 0 ? "evalpull" : "pull", c->rank, c->v, c->s, wave, tmax, c->pushed,
                c->nlinks ? global : -1, t0, hp_now_s());
        client_incl(c, c->trace, c->last);
    }
    if (wave >= 0)
        memcpy(c->incl, c->last, (size_t)c->nvws * 2 * sizeof(int64_t));
    return 0;
}

const float *hp_ps_global(const struct hp_ps_client *c)
{
    return c->g;
}

void hp_ps_included(const struct hp_ps_client *c, int x, int64_t *min, int64_t *max)
{
    *min = c->incl[2 * x];
    *max = c->incl[2 * x + 1];
}

void hp_ps_rebase(struct hp_ps_client *c, float *local)
{
    for (size_t i = 0; i < c->n; i++) {
        const float d = c->g[i] - c->S[i];
        if (d != 0.0f) /* adding +0 would turn -0 into +0: one VW must stay bit for bit */
            local[i] += d;
        c->S[i] = c->g[i];
    }
}

int64_t hp_ps_global_clock(const struct hp_ps_client *c)
{
    return c->global;
}

int hp_ps_flush(struct hp_ps_client *c)
{
    int rc = 0;

    for (int i = 0; i < c->nlinks && !rc; i++) {
        rc = hp_comm_send_wait(c->comm, c->links[i].push, c->timeout_ms);
        if (!rc)
            rc = hp_comm_send_wait(c->comm, c->links[i].req, c->timeout_ms);
    }
    if (rc)
        hp_error("vw %d stage %d: the last push to the PS shards failed: %s", c->v, c->s,
                 hp_strerror(rc));
    return rc;
}

void hp_ps_client_stats(const struct hp_ps_client *c, struct hp_ps_stats *out)
{
    *out = c->stats;
}

long hp_ps_pushed(const struct hp_ps_client *c)
{
    return c->pushed;
}

void hp_ps_trace_incl(const struct hp_ps_client *c, FILE *f)
{
    client_incl(c, f, c->incl);
}

size_t hp_ps_client_blob_bytes(const struct hp_ps_client *c)
{
    return (2 + 4 * (size_t)c->nvws) * sizeof(int64_t) + c->n * sizeof(float);
}

void hp_ps_client_save(const struct hp_ps_client *c, void *blob)
{
    int64_t *h = blob;

    h[0] = c->pushed;
    h[1] = c->global;
    memcpy(h + 2, c->incl, 2 * (size_t)c->nvws * sizeof(int64_t));
    memcpy(h + 2 + 2 * c->nvws, c->last, 2 * (size_t)c->nvws * sizeof(int64_t));
    memcpy(h + 2 + 4 * c->nvws, c->S, c->n * sizeof(float));
}

int hp_ps_client_restore(struct hp_ps_client *c, const void *blob, size_t bytes)
{
    const int64_t *h = blob;

    if (bytes != hp_ps_client_blob_bytes(c) || h[0] < 0)
        return -HP_EDATA;
    c->pushed = (long)h[0];
    c->global = h[1];
    memcpy(c->incl, h + 2, 2 * (size_t)c->nvws * sizeof(int64_t));
    memcpy(c->last, h + 2 + 2 * c->nvws, 2 * (size_t)c->nvws * sizeof(int64_t));
    memcpy(c->S, h + 2 + 4 * c->nvws, c->n * sizeof(float));
    memcpy(c->g, c->S, c->n * sizeof(float));
    return 0;
}

int hp_ps_checkpoint_mark(const struct hp_plan *plan, struct hp_comm *comm, int vw, int stage,
                          long seq, int timeout_ms)
{
    for (int r = hp_plan_first_shard(plan); r < plan->nranks; r++) {
        const struct hp_msg_header h = {
            .type = HP_MSG_CHECKPOINT, .vw = vw, .stage = stage, .minibatch = seq, .clock = -1};
        int rc = hp_comm_send(comm, r, &h, NULL, timeout_ms);
        if (rc) {
            hp_error("vw %d stage %d: telling PS shard rank %d of checkpoint %ld: %s", vw, stage, r,
                     seq, hp_strerror(rc));
            return rc;
        }
    }
    return 0;
}

void hp_ps_client_set_wait(struct hp_ps_client *c, int wait_ms)
{
    c->wait_ms = wait_ms;
}

/* ---- the client behind struct hp_ps_ops (wsp.h) ---- */

static int op_push(void *c, const float *local, long wave)
{
    return hp_ps_push(c, local, wave);
}

static int op_pull(void *c, const int64_t *thr, long wave)
{
    return hp_ps_pull(c, thr, wave);
}

static void op_rebase(void *c, float *local)
{
    hp_ps_rebase(c, local);
}

static const float *op_global(void *c)
{
    return hp_ps_global(c);
}

static long op_pushed(void *c)
{
    return hp_ps_pushed(c);
}

static int64_t op_global_clock(void *c)
{
    return hp_ps_global_clock(c);
}

static void op_included(void *c, int x, int64_t *min, int64_t *max)
{
    hp_ps_included(c, x, min, max);
}

static void op_trace_incl(void *c, FILE *f)
{
    hp_ps_trace_incl(c, f);
}

const struct hp_ps_ops hp_ps_client_ops = {.push = op_push,
                                           .pull = op_pull,
                                           .rebase = op_rebase,
                                           .global = op_global,
                                           .pushed = op_pushed,
                                           .global_clock = op_global_clock,
                                           .included = op_included,
                                           .trace_incl = op_trace_incl};
