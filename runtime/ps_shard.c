/* ps_shard.c - a parameter-server shard rank: the global weights of its units, every VW's
 * clock of them, pushes added and pulls served once their thresholds are met (ps.h). */
#include "ps_shard.h"

#include "backend.h"
#include "ckpt.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "output.h"
#include "net.h"
#include "timeline.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The initial parameters of unit u, as every worker initialises them (hp_net_init_params
 * seeds each unit by its index, so a net of one unit gives the same floats). */
static int init_unit(const struct hp_model *m, int u, uint64_t seed, float *out)
{
    struct hp_backend *be = NULL;
    struct hp_net *net = NULL;
    const struct hp_net_config cfg = {.batch = 1, .nslots = 1, .need_input_grad = 0};
    int rc = hp_backend_create("cpu", &be);

    if (!rc)
        rc = hp_net_create(be, m, u, u + 1, &cfg, &net);
    if (!rc)
        rc = hp_net_init_params(net, seed);
    if (!rc && m->units[u].nparams)
        rc = be->ops->download(be, out, hp_net_params(net), m->units[u].nparams * sizeof(float));
    hp_net_destroy(net);
    hp_backend_destroy(be);
    return rc;
}

/* One worker stage that has units on this shard. */
struct client {
    int v, s, rank;
    int u0, u1;    /* the stage's units */
    size_t floats; /* of them on this shard */
    struct hp_msg_buf *reply;
    int pending;  /* a pull waits */
    int64_t *thr; /* [nvws] its thresholds */
    long wave;
    double t_req;
};

struct shard {
    const struct hp_plan *plan;
    const struct hp_model *model;
    struct hp_comm *comm;
    int rank, index, nvws;
    size_t *off;    /* [nunits]: unit's floats in W, or SIZE_MAX when not ours */
    float *w;       /* the global weights of our units */
    int64_t *clock; /* [nvws][nunits] */
    struct client *clients;
    int nclients;
    int *client_of; /* [workers]: index into clients, -1 */
    FILE *trace;
    struct hp_timeline *tl; /* --timeline (NULL: none) */
    int timeout_ms, wait_ms;
    int marks; /* workers whose pushes for checkpoint `mark_seq` are all here */
    long mark_seq;
};

static int ours(const struct shard *sh, int u)
{
    return sh->off[u] != SIZE_MAX;
}

/* Global clock over the client's units here, and per VW x the smallest and largest clock. */
static int64_t view(const struct shard *sh, const struct client *c, int64_t *mm)
{
    const int n = sh->plan->nunits;
    int64_t g = INT64_MAX;

    for (int x = 0; x < sh->nvws; x++) {
        int64_t lo = INT64_MAX, hi = -1;
        for (int u = c->u0; u < c->u1; u++)
            if (ours(sh, u)) {
                const int64_t k = sh->clock[(size_t)x * n + u];
                lo = k < lo ? k : lo;
                hi = k > hi ? k : hi;
            }
        if (mm) {
            mm[2 * x] = lo;
            mm[2 * x + 1] = hi;
        }
        g = lo < g ? lo : g;
    }
    return g;
}

static int can_serve(const struct shard *sh, const struct client *c)
{
    int64_t mm[2 * 64];
    int64_t *m = sh->nvws <= 64 ? mm : malloc((size_t)sh->nvws * 2 * sizeof(int64_t));
    int ok = 1;

    if (!m)
        return 0;
    view(sh, c, m);
    for (int x = 0; x < sh->nvws; x++)
        ok &= m[2 * x] >= c->thr[x];
    if (m != mm)
        free(m);
    return ok;
}

static int serve(struct shard *sh, struct client *c)
{
    const size_t wbytes = c->floats * sizeof(float);
    int rc = hp_comm_send_wait(sh->comm, c->reply, sh->timeout_ms);
    char *p;

    if (rc)
        return rc;
    p = hp_msg_buf_payload(c->reply);
    for (int u = c->u0, k = 0; u < c->u1; u++)
        if (ours(sh, u)) {
            const size_t n = sh->model->units[u].nparams;
            memcpy(p + (size_t)k * sizeof(float), sh->w + sh->off[u], n * sizeof(float));
            k += (int)n;
        }
    int64_t *mm = (int64_t *)(void *)(p + wbytes);
    int64_t tmp[2 * 64];
    int64_t *m = sh->nvws <= 64 ? tmp : malloc((size_t)sh->nvws * 2 * sizeof(int64_t));
    if (!m)
        return -HP_ENOMEM;
    const int64_t g = view(sh, c, m);
    memcpy(mm, m, (size_t)sh->nvws * 2 * sizeof(int64_t));
    const struct hp_msg_header h = {.type = HP_MSG_PULL,
                                    .vw = c->v,
                                    .stage = c->s,
                                    .minibatch = c->wave,
                                    .clock = g,
                                    .payload_bytes =
                                        wbytes + (size_t)sh->nvws * 2 * sizeof(int64_t)};
    rc = hp_comm_send_start(sh->comm, c->rank, &h, c->reply);
    if (rc)
        hp_error("PS shard rank %d: answering the pull of vw %d stage %d failed: %s", sh->rank,
                 c->v, c->s, hp_strerror(rc));
    if (!rc && sh->trace) {
        int64_t t = 0;
        for (int x = 0; x < sh->nvws; x++)
            t = c->thr[x] > t ? c->thr[x] : t;
        fprintf(sh->trace,
                "serve,%d,%d,%d,%ld,-1,%" PRId64 ",%" PRId64 ",%" PRId64 ",-1,%.6f,%.6f,", sh->rank,
                c->v, c->s, c->wave, t, m[2 * c->v], g, c->t_req, hp_now_s());
        hp_ps_trace_clocks(sh->trace, m, sh->nvws);
    }
    if (m != tmp)
        free(m);
    if (!rc)
        hp_tl_add(sh->tl, HP_TL_SERVE_PULL, c->t_req, hp_now_s(), -1, c->rank,
                  (int64_t)h.payload_bytes, c->wave);
    c->pending = 0;
    return rc;
}

static int serve_waiting(struct shard *sh)
{
    for (int i = 0; i < sh->nclients; i++)
        if (sh->clients[i].pending && can_serve(sh, &sh->clients[i])) {
            int rc = serve(sh, &sh->clients[i]);
            if (rc)
                return rc;
        }
    return 0;
}

static int on_push(struct shard *sh, struct client *c, const struct hp_msg_header *h,
                   const float *delta)
{
    const int n = sh->plan->nunits;
    const double t0 = hp_now_s();

    if (h->payload_bytes != c->floats * sizeof(float) || h->clock < 0) {
        hp_error("PS shard rank %d: protocol error: a push of vw %d stage %d must carry %zu "
                 "bytes and a wave, got %" PRIu64 " bytes, wave %" PRId64,
                 sh->rank, c->v, c->s, c->floats * sizeof(float), h->payload_bytes, h->clock);
        return -HP_EPROTOCOL;
    }
    for (int u = c->u0; u < c->u1; u++)
        if (ours(sh, u) && sh->clock[(size_t)c->v * n + u] != h->clock) {
            hp_error("PS shard rank %d: protocol error: vw %d stage %d pushed wave %" PRId64
                     " of unit %d, whose next wave is %" PRId64,
                     sh->rank, c->v, c->s, h->clock, u, sh->clock[(size_t)c->v * n + u]);
            return -HP_EPROTOCOL;
        }
    for (int u = c->u0, k = 0; u < c->u1; u++)
        if (ours(sh, u)) {
            float *w = sh->w + sh->off[u];
            const size_t m = sh->model->units[u].nparams;
            for (size_t i = 0; i < m; i++)
                w[i] += delta[k + i];
            k += (int)m;
            sh->clock[(size_t)c->v * n + u] = h->clock + 1;
        }
    if (sh->trace) {
        int64_t tmp[2 * 64], *m = sh->nvws <= 64 ? tmp : malloc((size_t)sh->nvws * 2 * 8);
        if (m) {
            const int64_t g = view(sh, c, m);
            const double t = hp_now_s();
            fprintf(sh->trace,
                    "push,%d,%d,%d,%" PRId64 ",-1,-1,%" PRId64 ",%" PRId64 ",-1,%.6f,%.6f,",
                    sh->rank, c->v, c->s, h->clock, h->clock + 1, g, t, t);
            hp_ps_trace_clocks(sh->trace, m, sh->nvws);
            if (m != tmp)
                free(m);
        }
    }
    hp_tl_add(sh->tl, HP_TL_SERVE_PUSH, t0, hp_now_s(), -1, c->rank, (int64_t)h->payload_bytes,
              (long)h->clock);
    return serve_waiting(sh);
}

static int on_pull(struct shard *sh, struct client *c, const struct hp_msg_header *h,
                   const int64_t *thr)
{
    if (c->pending || h->payload_bytes != (size_t)sh->nvws * sizeof(int64_t)) {
        hp_error("PS shard rank %d: protocol error: vw %d stage %d asked to pull %s", sh->rank,
                 c->v, c->s,
                 c->pending ? "while its previous pull waits" : "with a malformed request");
        return -HP_EPROTOCOL;
    }
    for (int x = 0; x < sh->nvws; x++) {
        if (thr[x] < 0) {
            hp_error("PS shard rank %d: protocol error: vw %d stage %d asked for wave %" PRId64
                     " of vw %d",
                     sh->rank, c->v, c->s, thr[x], x);
            return -HP_EPROTOCOL;
        }
        c->thr[x] = thr[x];
    }
    c->pending = 1;
    c->wave = (long)h->minibatch;
    c->t_req = hp_now_s();
    return can_serve(sh, c) ? serve(sh, c) : 0;
}

static int shard_setup(struct shard *sh)
{
    const struct hp_plan *p = sh->plan;
    const struct hp_model *m = sh->model;
    const int workers = hp_plan_first_shard(p);
    size_t total = 0, cap = 0;
    int rc = 0;

    sh->nvws = p->nvws;
    sh->off = malloc((size_t)p->nunits * sizeof(size_t));
    sh->clock = calloc((size_t)p->nvws * p->nunits, sizeof(int64_t));
    sh->client_of = malloc((size_t)(workers ? workers : 1) * sizeof(int));
    sh->clients = calloc((size_t)(workers ? workers : 1), sizeof(struct client));
    if (!sh->off || !sh->clock || !sh->client_of || !sh->clients)
        return -HP_ENOMEM;
    for (int u = 0; u < p->nunits; u++) {
        /* units without parameters have nothing to synchronise */
        sh->off[u] = p->unit_shard[u] == sh->index && m->units[u].nparams ? total : SIZE_MAX;
        if (ours(sh, u))
            total += m->units[u].nparams;
    }
    sh->w = malloc((total ? total : 1) * sizeof(float));
    if (!sh->w)
        return -HP_ENOMEM;
    for (int u = 0; u < p->nunits && !rc; u++)
        if (ours(sh, u))
            rc = init_unit(m, u, p->opts.seed, sh->w + sh->off[u]);
    for (int i = 0; i < workers; i++)
        sh->client_of[i] = -1;
    for (int v = 0; v < p->nvws && !rc; v++)
        for (int s = 0; s < p->vws[v].nstages && !rc; s++) {
            const struct hp_stage_plan *st = &p->vws[v].stages[s];
            size_t n = 0;
            for (int u = st->u0; u < st->u1; u++)
                if (ours(sh, u))
                    n += m->units[u].nparams;
            if (!n)
                continue;
            struct client *c = &sh->clients[sh->nclients];
            *c = (struct client){.v = v,
                                 .s = s,
                                 .rank = hp_plan_stage_rank(p, v, s),
                                 .u0 = st->u0,
                                 .u1 = st->u1,
                                 .floats = n};
            c->thr = calloc((size_t)p->nvws, sizeof(int64_t));
            if (!c->thr)
                return -HP_ENOMEM;
            rc = hp_msg_buf_create(n * sizeof(float) + (size_t)p->nvws * 2 * sizeof(int64_t),
                                   &c->reply);
            sh->client_of[c->rank] = sh->nclients++;
            cap = n > cap ? n : cap;
        }
    return rc;
}

/* ---- pulls that wait too long ---- */

/* How long the loop may wait for a message: until the oldest waiting pull has waited 0.9 x
 * wait_ms (then it is refused, before its worker's own deadline), else wait_ms. */
static int pending(const struct shard *sh)
{
    for (int i = 0; i < sh->nclients; i++)
        if (sh->clients[i].pending)
            return 1;
    return 0;
}

static int recv_wait(const struct shard *sh)
{
    double first = 0.0;

    for (int i = 0; i < sh->nclients; i++)
        if (sh->clients[i].pending && (first == 0.0 || sh->clients[i].t_req < first))
            first = sh->clients[i].t_req;
    if (first == 0.0)
        return sh->wait_ms;
    const double left = first + 0.9 * sh->wait_ms / 1000.0 - hp_now_s();
    return left > 0.0 ? (int)(left * 1000.0) + 1 : 0;
}

/* Refuse client c's waiting pull: a PULL reply without payload whose clock names the VW `late`
 * that did not push (its worker says so and fails). */
static void refuse_pull(struct shard *sh, struct client *c, int late)
{
    const struct hp_msg_header h = {.type = HP_MSG_PULL,
                                    .vw = c->v,
                                    .stage = c->s,
                                    .minibatch = c->wave,
                                    .clock = late,
                                    .payload_bytes = 0};

    (void)hp_comm_send(sh->comm, c->rank, &h, NULL, sh->timeout_ms);
    c->pending = 0;
}

/* Once a pull has waited 0.9 x wait_ms, refuse it and every other waiting pull: each worker
 * learns which VW did not push (a PULL reply without payload, clock = that VW), and the shard
 * fails naming it (rank, role, node, GPU). 1 if it did. */
static int refuse_stale(struct shard *sh, const struct hp_cluster *cl, const struct hp_gpudb *db)
{
    const double now = hp_now_s();
    int64_t mm[2 * 64];
    int stale = 0;

    for (int i = 0; i < sh->nclients; i++)
        stale |= sh->clients[i].pending && now - sh->clients[i].t_req >= 0.9 * sh->wait_ms / 1000.0;
    if (!stale || sh->nvws > 64)
        return 0;
    for (int i = 0; i < sh->nclients; i++) {
        struct client *c = &sh->clients[i];
        char role[256] = "?";
        if (!c->pending)
            continue;
        view(sh, c, mm);
        int late = 0;
        for (int x = sh->nvws - 1; x >= 0; x--)
            if (mm[2 * x] < c->thr[x])
                late = x;
        hp_plan_describe_rank(sh->plan, cl, db, hp_plan_stage_rank(sh->plan, late, 0), role,
                              sizeof(role));
        hp_error("PS shard rank %d: the pull of vw %d stage %d for wave %ld waited %.0f s for vw "
                 "%d (%" PRId64 " waves of %" PRId64 " needed): vw %d (rank %d: %s) stopped "
                 "pushing",
                 sh->rank, c->v, c->s, c->wave, now - c->t_req, late, mm[2 * late], c->thr[late],
                 late, hp_plan_stage_rank(sh->plan, late, 0), role);
        refuse_pull(sh, c, late);
    }
    return 1;
}

/* ---- checkpoints ---- */

/* Every worker's pushes before checkpoint `seq` are applied: write this shard's part (per
 * unit: the global weights, every VW's clock) and tell the reporter. */
static int checkpoint(struct shard *sh, const struct hp_options *o)
{
    const int n = sh->plan->nunits;
    struct hp_ckpt_note pn = {0};
    struct hp_ckpt_writer *w = NULL;
    int64_t *clk = malloc((size_t)sh->nvws * sizeof(int64_t));
    char dir[4200];
    int rc = clk ? 0 : -HP_ENOMEM;

    snprintf(dir, sizeof(dir), "%s/ckpt-%ld", o->checkpoint_dir ? o->checkpoint_dir : ".",
             sh->mark_seq);
    if (!rc)
        rc = hp_ckpt_part_create(dir, sh->rank, &w);
    for (int u = 0; u < n && !rc; u++) {
        if (!ours(sh, u))
            continue;
        for (int x = 0; x < sh->nvws; x++)
            clk[x] = sh->clock[(size_t)x * n + u];
        rc = hp_ckpt_part_add(w, HP_CK_GLOBAL, u, -1, sh->w + sh->off[u],
                              sh->model->units[u].nparams * sizeof(float));
        if (!rc)
            rc = hp_ckpt_part_add(w, HP_CK_CLOCKS, u, -1, clk, (size_t)sh->nvws * sizeof(int64_t));
    }
    if (rc)
        hp_ckpt_part_abort(w);
    else
        rc = hp_ckpt_part_close(w, &pn.bytes, &pn.crc);
    free(clk);
    pn.status = rc != 0;
    const struct hp_msg_header h = {.type = HP_MSG_CHECKPOINT,
                                    .vw = -1,
                                    .stage = -1,
                                    .minibatch = sh->mark_seq,
                                    .clock = -1,
                                    .payload_bytes = sizeof(pn)};
    sh->marks = 0;
    return hp_comm_send(sh->comm, hp_plan_stage_rank(sh->plan, 0, 0), &h, &pn, sh->timeout_ms);
}

static int on_mark(struct shard *sh, const struct hp_msg_header *h, const struct hp_options *o)
{
    if (h->minibatch < 1 || (sh->marks > 0 && h->minibatch != sh->mark_seq)) {
        hp_error("PS shard rank %d: protocol error: rank %d marked checkpoint %" PRId64
                 " while %d workers marked %ld",
                 sh->rank, h->src, h->minibatch, sh->marks, sh->mark_seq);
        return -HP_EPROTOCOL;
    }
    sh->mark_seq = (long)h->minibatch;
    if (++sh->marks < hp_plan_first_shard(sh->plan))
        return 0;
    return checkpoint(sh, o);
}

/* --resume: under the same plan this shard's own part (weights and clocks); under another,
 * every unit it now owns from the checkpoint's consensus (its shards' global weights, or VW 0's
 * where it had none), clocks from 0. */
static int restore(struct shard *sh, const struct hp_gpudb *db, const char *dir)
{
    const int n = sh->plan->nunits;
    struct hp_ckpt_source src;
    int64_t *clk = malloc((size_t)sh->nvws * sizeof(int64_t));
    int rc = clk ? hp_ckpt_source_open(dir, db, n, &src) : -HP_ENOMEM;
    const int exact = !rc && hp_ckpt_same_layout(&src.plan, sh->plan);

    for (int u = 0; u < n && !rc; u++) {
        struct hp_ckpt_reader *r;
        int w, from;
        if (!ours(sh, u))
            continue;
        hp_ckpt_unit_source(&src.plan, 0, u, &w, &from);
        from = exact ? sh->rank : from >= 0 ? from : w;
        r = hp_ckpt_source_part(&src, from);
        rc = !r ? -HP_EIO
                : hp_ckpt_part_read(
                      r, from >= hp_plan_first_shard(&src.plan) ? HP_CK_GLOBAL : HP_CK_PARAMS, u,
                      sh->w + sh->off[u], sh->model->units[u].nparams * sizeof(float));
        if (!rc && exact)
            rc = hp_ckpt_part_read(r, HP_CK_CLOCKS, u, clk, (size_t)sh->nvws * sizeof(int64_t));
        for (int x = 0; x < sh->nvws && !rc && exact; x++)
            sh->clock[(size_t)x * n + u] = clk[x];
    }
    if (clk)
        hp_ckpt_source_release(&src);
    free(clk);
    return rc;
}

/* --timeline: a recorder for a push and a pull answer per wave of every client. */
static int timeline_open(struct shard *sh, const struct hp_cluster *cl, const struct hp_options *o)
{
    const long samples = o->train_limit > 0 ? o->train_limit : 60000;
    long waves = 0;
    struct hp_tl_meta m = {.rank = sh->rank,
                           .vw = -1,
                           .stage = sh->index,
                           .device = -1,
                           .clock_offset_s = hp_tl_clock_offset_s};

    for (int v = 0; v < sh->plan->nvws; v++)
        waves += samples / sh->plan->opts.batch / sh->plan->nvws /
                     (sh->plan->vws[v].nm > 0 ? sh->plan->vws[v].nm : 1) +
                 2;
    snprintf(m.role, sizeof(m.role), "shard");
    snprintf(m.node, sizeof(m.node), "%s", cl->nodes[sh->index].name);
    snprintf(m.gpu, sizeof(m.gpu), "-");
    sh->tl = hp_tl_create(waves * o->epochs * 2 * (sh->nclients + 1) + 1024, &m);
    return sh->tl ? 0 : -HP_ENOMEM;
}

/* After a receive that timed out: a worker that stopped in the middle of a push (the comm
 * blames the sender of a message that stopped arriving). Every waiting pull is refused naming
 * its VW, and the shard fails naming it too. 1 if so. */
static int stalled_push(struct shard *sh, const struct hp_cluster *cl, const struct hp_gpudb *db)
{
    const int workers = hp_plan_first_shard(sh->plan);
    char why[128], role[256] = "?";
    const int r = hp_comm_blame(sh->comm, why, sizeof(why));
    const int ci = r >= 0 && r < workers ? sh->client_of[r] : -1;

    if (ci < 0)
        return 0;
    const int v = sh->clients[ci].v;
    hp_plan_describe_rank(sh->plan, cl, db, r, role, sizeof(role));
    hp_error("PS shard rank %d: a push stopped arriving midway: vw %d (rank %d: %s) stopped "
             "pushing",
             sh->rank, v, r, role);
    for (int i = 0; i < sh->nclients; i++)
        if (sh->clients[i].pending && sh->clients[i].rank != r)
            refuse_pull(sh, &sh->clients[i], v);
    return 1;
}

int hp_ps_run(const struct hp_plan *plan, const struct hp_cluster *cl, const struct hp_gpudb *db,
              const struct hp_model *model, int rank, struct hp_comm *comm,
              const struct hp_options *o, int wait_ms, int *stopped)
{
    struct shard sh = {.plan = plan,
                       .model = model,
                       .comm = comm,
                       .rank = rank,
                       .index = rank - hp_plan_first_shard(plan),
                       .timeout_ms = (int)(o->timeout * 1000.0),
                       .wait_ms = wait_ms};
    const int workers = hp_plan_first_shard(plan);
    size_t cap = (size_t)plan->nvws * sizeof(int64_t);
    void *in = NULL;
    int rc;

    rc = shard_setup(&sh);
    /* a shard that holds no unit with parameters serves nobody: it hears only checkpoint
     * marks and the workers' goodbyes, so a long silence is no sign of a fault (a dead or
     * stopped worker still ends its wait) */
    if (!rc && sh.nclients == 0)
        sh.wait_ms = -1;
    if (!rc && o->resume.path)
        rc = restore(&sh, db, o->resume.path);
    for (int i = 0; i < sh.nclients; i++)
        if (sh.clients[i].floats * sizeof(float) > cap)
            cap = sh.clients[i].floats * sizeof(float);
    if (!rc && !(in = malloc(cap)))
        rc = -HP_ENOMEM;
    if (!rc && o->trace && !(sh.trace = hp_ps_trace_open(o->trace, rank)))
        rc = -HP_EIO;
    if (!rc && o->timeline)
        rc = timeline_open(&sh, cl, o);
    /* Shards never talk to each other, and one ends as soon as its workers are done: its exit
     * must not fail this one's receives while a worker is still to say goodbye. */
    for (int r = workers; r < plan->nranks && !rc; r++)
        if (r != rank)
            hp_comm_retire(comm, r);
    for (int left = workers; left > 0 && !rc;) {
        struct hp_msg_header h;
        rc = hp_comm_recv(comm, HP_COMM_ANY_PEER, HP_MSG_ANY_TYPE, &h, in, cap, recv_wait(&sh));
        if (rc == -HP_ETIMEOUT && stalled_push(&sh, cl, db))
            break;
        if (rc == -HP_ETIMEOUT && refuse_stale(&sh, cl, db))
            break;
        /* the receive's clock may end a hair before 0.9 x wait_ms on hp_now_s's: a pull is
         * waiting, so this was no silence; wait for the rest */
        if (rc == -HP_ETIMEOUT && pending(&sh))
            continue;
        if (rc) {
            if (rc == -HP_ETIMEOUT)
                hp_error("PS shard rank %d: no worker sent anything for %.0f s", rank,
                         wait_ms / 1000.0);
            hp_error("PS shard rank %d: waiting for %d worker rank%s: %s", rank, left,
                     left == 1 ? "" : "s", hp_strerror(rc));
            break;
        }
        const int ci = h.src < workers ? sh.client_of[h.src] : -1;
        struct client *c = ci >= 0 ? &sh.clients[ci] : NULL;
        if (h.type == HP_MSG_CONTROL) {
            if (c && c->pending) {
                hp_error("PS shard rank %d: protocol error: rank %d left with a pull waiting", rank,
                         h.src);
                rc = -HP_EPROTOCOL;
            }
            hp_comm_retire(comm, h.src);
            *stopped |= h.clock == 1;
            left--;
        } else if (h.type == HP_MSG_CHECKPOINT && h.src < workers) {
            rc = on_mark(&sh, &h, o);
        } else if (c && (h.vw != c->v || h.stage != c->s)) {
            hp_error("PS shard rank %d: protocol error: rank %d is vw %d stage %d, not vw %d "
                     "stage %d",
                     rank, h.src, c->v, c->s, h.vw, h.stage);
            rc = -HP_EPROTOCOL;
        } else if (c && h.type == HP_MSG_PUSH) {
            rc = on_push(&sh, c, &h, in);
        } else if (c && h.type == HP_MSG_PULL) {
            rc = on_pull(&sh, c, &h, in);
        } else {
            hp_error("PS shard rank %d: protocol error: unexpected message of type %u from "
                     "rank %d",
                     rank, (unsigned)h.type, h.src);
            rc = -HP_EPROTOCOL;
        }
    }
    if (!rc && o->save_params) {
        char path[4096];
        size_t total = 0;
        for (int u = 0; u < plan->nunits; u++)
            total += ours(&sh, u) ? model->units[u].nparams : 0;
        snprintf(path, sizeof(path), "%s.%d", o->save_params, rank);
        rc = hp_save_floats(path, sh.w, total);
    }
    for (int i = 0; i < sh.nclients; i++) {
        hp_msg_buf_destroy(comm, sh.clients[i].reply);
        free(sh.clients[i].thr);
    }
    if (hp_out_close(sh.trace, 1) && !rc)
        rc = -HP_EIO;
    if (sh.tl) {
        char path[4096];
        snprintf(path, sizeof(path), "%s.%d", o->timeline, rank);
        if (hp_tl_write(sh.tl, path) && !rc)
            rc = -HP_EIO;
        hp_tl_destroy(sh.tl);
    }
    free(in);
    free(sh.off);
    free(sh.w);
    free(sh.clock);
    free(sh.clients);
    free(sh.client_of);
    return rc;
}
