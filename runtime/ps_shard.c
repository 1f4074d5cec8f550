/* ps_shard.c - a parameter-server shard rank: its store (ps_store.h) served over the protocol
 * of ps.h: pushes applied, pulls answered once their thresholds are met, pulls that wait too
 * long refused naming the VW that stopped pushing, checkpoints (ckpt.h). */
#include "ps_shard.h"

#include "ckpt.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "output.h"
#include "net.h"
#include "ps_store.h"
#include "timeline.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    struct hp_comm *comm;
    int rank, index, nvws;
    struct hp_ps_store *store;
    int64_t *mm; /* [2 nvws] scratch: a view's clocks */
    struct client *clients;
    int nclients;
    int *client_of; /* [workers]: index into clients, -1 */
    FILE *trace;
    struct hp_timeline *tl; /* --timeline (NULL: none) */
    int timeout_ms, wait_ms;
    int marks; /* workers whose pushes for checkpoint `mark_seq` are all here */
    long mark_seq;
    struct hp_ckpt_job ck;
    struct hp_ckpt_pending *ckpt; /* its part being written in the background */
};

static int serve(struct shard *sh, struct client *c)
{
    const size_t wbytes = c->floats * sizeof(float);
    int rc = hp_comm_send_wait(sh->comm, c->reply, sh->timeout_ms);
    char *p;

    if (rc)
        return rc;
    p = hp_msg_buf_payload(c->reply);
    hp_ps_store_pack(sh->store, c->u0, c->u1, (float *)(void *)p);
    const int64_t g = hp_ps_store_view(sh->store, c->u0, c->u1, sh->mm);
    memcpy(p + wbytes, sh->mm, (size_t)sh->nvws * 2 * sizeof(int64_t));
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
                c->v, c->s, c->wave, t, sh->mm[2 * c->v], g, c->t_req, hp_now_s());
        hp_ps_trace_clocks(sh->trace, sh->mm, sh->nvws);
    }
    if (!rc)
        hp_tl_add(sh->tl, HP_TL_SERVE_PULL, c->t_req, hp_now_s(), -1, c->rank,
                  (int64_t)h.payload_bytes, c->wave);
    c->pending = 0;
    return rc;
}

static int serve_waiting(struct shard *sh)
{
    for (int i = 0; i < sh->nclients; i++) {
        struct client *c = &sh->clients[i];
        if (c->pending && hp_ps_store_ready(sh->store, c->u0, c->u1, c->thr)) {
            int rc = serve(sh, c);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int on_push(struct shard *sh, struct client *c, const struct hp_msg_header *h,
                   const float *delta)
{
    const double t0 = hp_now_s();
    char why[256];

    if (h->payload_bytes != c->floats * sizeof(float) || h->clock < 0) {
        hp_error("PS shard rank %d: protocol error: a push of vw %d stage %d must carry %zu "
                 "bytes and a wave, got %" PRIu64 " bytes, wave %" PRId64,
                 sh->rank, c->v, c->s, c->floats * sizeof(float), h->payload_bytes, h->clock);
        return -HP_EPROTOCOL;
    }
    if (hp_ps_store_apply(sh->store, c->v, c->u0, c->u1, h->clock, delta, why, sizeof(why))) {
        hp_error("PS shard rank %d: protocol error: vw %d stage %d %s", sh->rank, c->v, c->s, why);
        return -HP_EPROTOCOL;
    }
    if (sh->trace) {
        const int64_t g = hp_ps_store_view(sh->store, c->u0, c->u1, sh->mm);
        const double t = hp_now_s();
        fprintf(sh->trace, "push,%d,%d,%d,%" PRId64 ",-1,-1,%" PRId64 ",%" PRId64 ",-1,%.6f,%.6f,",
                sh->rank, c->v, c->s, h->clock, h->clock + 1, g, t, t);
        hp_ps_trace_clocks(sh->trace, sh->mm, sh->nvws);
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
    return hp_ps_store_ready(sh->store, c->u0, c->u1, c->thr) ? serve(sh, c) : 0;
}

/* Every worker stage with units here is a client. */
static int clients_setup(struct shard *sh)
{
    const struct hp_plan *p = sh->plan;
    const int workers = hp_plan_first_shard(p);
    int rc = 0;

    sh->client_of = malloc((size_t)(workers ? workers : 1) * sizeof(int));
    sh->clients = calloc((size_t)(workers ? workers : 1), sizeof(struct client));
    sh->mm = malloc((size_t)p->nvws * 2 * sizeof(int64_t));
    if (!sh->client_of || !sh->clients || !sh->mm)
        return -HP_ENOMEM;
    for (int i = 0; i < workers; i++)
        sh->client_of[i] = -1;
    for (int v = 0; v < p->nvws && !rc; v++)
        for (int s = 0; s < p->vws[v].nstages && !rc; s++) {
            const struct hp_stage_plan *st = &p->vws[v].stages[s];
            const size_t n = hp_ps_store_floats(sh->store, st->u0, st->u1);
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
        }
    return rc;
}

/* ---- pulls that wait too long ---- */

static int pending(const struct shard *sh)
{
    for (int i = 0; i < sh->nclients; i++)
        if (sh->clients[i].pending)
            return 1;
    return 0;
}

/* How long the loop may wait for a message: until the oldest waiting pull has waited 0.9 x
 * wait_ms (then it is refused, before its worker's own deadline), else wait_ms. */
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
    int stale = 0;

    for (int i = 0; i < sh->nclients; i++)
        stale |= sh->clients[i].pending && now - sh->clients[i].t_req >= 0.9 * sh->wait_ms / 1000.0;
    if (!stale)
        return 0;
    for (int i = 0; i < sh->nclients; i++) {
        struct client *c = &sh->clients[i];
        char role[256] = "?";
        if (!c->pending)
            continue;
        hp_ps_store_view(sh->store, c->u0, c->u1, sh->mm);
        int late = 0;
        for (int x = sh->nvws - 1; x >= 0; x--)
            if (sh->mm[2 * x] < c->thr[x])
                late = x;
        hp_plan_describe_rank(sh->plan, cl, db, hp_plan_stage_rank(sh->plan, late, 0), role,
                              sizeof(role));
        hp_error("PS shard rank %d: the pull of vw %d stage %d for wave %ld waited %.0f s for vw "
                 "%d (%" PRId64 " waves of %" PRId64 " needed): vw %d (rank %d: %s) stopped "
                 "pushing",
                 sh->rank, c->v, c->s, c->wave, now - c->t_req, late, sh->mm[2 * late],
                 c->thr[late], late, hp_plan_stage_rank(sh->plan, late, 0), role);
        refuse_pull(sh, c, late);
    }
    return 1;
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

/* ---- checkpoints ---- */

/* The part being written: once written (with wait: wait for it), its note to the reporter. */
static int ckpt_finish(struct shard *sh, int wait)
{
    struct hp_ckpt_written out;
    int done = 0, ok = 0, rc;

    if (!sh->ckpt)
        return 0;
    rc = hp_ckpt_finish(&sh->ck, sh->ckpt, wait, 0, &done, &ok, &out);
    if (done)
        sh->ckpt = NULL;
    return rc;
}

/* While a part is being written: until a message comes, the part is done (its note sent) or
 * the loop's wait is over, looking every millisecond. */
static int ckpt_until_message(struct shard *sh)
{
    const int wait = recv_wait(sh); /* < 0: none (a shard that serves nobody) */
    const double until = wait < 0 ? HUGE_VAL : hp_now_s() + wait / 1000.0;
    const struct timespec ms = {0, 1000000};
    int rc = 0;

    while (!rc && sh->ckpt && !hp_comm_probe(sh->comm, HP_COMM_ANY_PEER, HP_MSG_ANY_TYPE) &&
           hp_now_s() < until) {
        rc = ckpt_finish(sh, 0);
        if (!rc && sh->ckpt)
            nanosleep(&ms, NULL);
    }
    return rc;
}

/* A worker's pushes before checkpoint `seq` are all here; once every worker's are, this
 * shard's units are copied and its part written in the background while it serves on (the
 * one before finished first; ckpt.h). */
static int on_mark(struct shard *sh, const struct hp_msg_header *h)
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
    sh->marks = 0;
    int rc = ckpt_finish(sh, 1);
    return rc ? rc : hp_ckpt_start_shard(&sh->ck, sh->mark_seq, sh->store, &sh->ckpt);
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

/* One message from worker rank h->src. *left: the workers still to say goodbye. */
static int on_message(struct shard *sh, const struct hp_msg_header *h, const void *in, int *left,
                      int *stopped)
{
    const int workers = hp_plan_first_shard(sh->plan);
    const int ci = h->src < workers ? sh->client_of[h->src] : -1;
    struct client *c = ci >= 0 ? &sh->clients[ci] : NULL;

    if (h->type == HP_MSG_CONTROL) {
        hp_comm_retire(sh->comm, h->src);
        *stopped |= h->clock == 1;
        (*left)--;
        if (c && c->pending) {
            hp_error("PS shard rank %d: protocol error: rank %d left with a pull waiting", sh->rank,
                     h->src);
            return -HP_EPROTOCOL;
        }
        return 0;
    }
    if (h->type == HP_MSG_CHECKPOINT && h->src < workers)
        return on_mark(sh, h);
    if (c && (h->vw != c->v || h->stage != c->s)) {
        hp_error("PS shard rank %d: protocol error: rank %d is vw %d stage %d, not vw %d stage %d",
                 sh->rank, h->src, c->v, c->s, h->vw, h->stage);
        return -HP_EPROTOCOL;
    }
    if (c && h->type == HP_MSG_PUSH)
        return on_push(sh, c, h, in);
    if (c && h->type == HP_MSG_PULL)
        return on_pull(sh, c, h, in);
    hp_error("PS shard rank %d: protocol error: unexpected message of type %u from rank %d",
             sh->rank, (unsigned)h->type, h->src);
    return -HP_EPROTOCOL;
}

/* Serve until every worker has said goodbye. */
static int serve_loop(struct shard *sh, const struct hp_cluster *cl, const struct hp_gpudb *db,
                      void *in, size_t cap, int *stopped)
{
    const int workers = hp_plan_first_shard(sh->plan);
    int rc = 0;

    for (int left = workers; left > 0 && !rc;) {
        struct hp_msg_header h;
        rc = ckpt_until_message(sh);
        if (rc)
            break;
        rc = hp_comm_recv(sh->comm, HP_COMM_ANY_PEER, HP_MSG_ANY_TYPE, &h, in, cap, recv_wait(sh));
        if (rc == -HP_ETIMEOUT && stalled_push(sh, cl, db))
            break;
        if (rc == -HP_ETIMEOUT && refuse_stale(sh, cl, db))
            break;
        /* the receive's clock may end a hair before 0.9 x wait_ms on hp_now_s's: a pull is
         * waiting, so this was no silence; wait for the rest */
        if (rc == -HP_ETIMEOUT && pending(sh)) {
            rc = 0;
            continue;
        }
        if (rc) {
            if (rc == -HP_ETIMEOUT)
                hp_error("PS shard rank %d: no worker sent anything for %.0f s", sh->rank,
                         sh->wait_ms / 1000.0);
            hp_error("PS shard rank %d: waiting for %d worker rank%s: %s", sh->rank, left,
                     left == 1 ? "" : "s", hp_strerror(rc));
            break;
        }
        rc = on_message(sh, &h, in, &left, stopped);
    }
    return rc;
}

/* The end: --save-params, the trace and the timeline written, everything freed. */
static int shard_end(struct shard *sh, const struct hp_options *o, int rc)
{
    if (!rc)
        rc = ckpt_finish(sh, 1);
    hp_ckpt_abandon(sh->ckpt);
    if (!rc && o->save_params) {
        char path[4096];
        snprintf(path, sizeof(path), "%s.%d", o->save_params, sh->rank);
        rc = hp_save_floats(path, hp_ps_store_weights(sh->store),
                            hp_ps_store_floats(sh->store, 0, sh->plan->nunits));
    }
    for (int i = 0; i < sh->nclients; i++) {
        hp_msg_buf_destroy(sh->comm, sh->clients[i].reply);
        free(sh->clients[i].thr);
    }
    if (hp_out_close(sh->trace, 1) && !rc)
        rc = -HP_EIO;
    if (sh->tl) {
        char path[4096];
        snprintf(path, sizeof(path), "%s.%d", o->timeline, sh->rank);
        if (hp_tl_write(sh->tl, path) && !rc)
            rc = -HP_EIO;
        hp_tl_destroy(sh->tl);
    }
    hp_ps_store_destroy(sh->store);
    free(sh->mm);
    free(sh->clients);
    free(sh->client_of);
    return rc;
}

int hp_ps_run(const struct hp_plan *plan, const struct hp_cluster *cl, const struct hp_gpudb *db,
              const struct hp_model *model, int rank, struct hp_comm *comm,
              const struct hp_options *o, int wait_ms, int *stopped)
{
    const int timeout_ms = (int)(o->timeout * 1000.0);
    struct shard sh = {.plan = plan,
                       .comm = comm,
                       .rank = rank,
                       .nvws = plan->nvws,
                       .index = rank - hp_plan_first_shard(plan),
                       .timeout_ms = timeout_ms,
                       .wait_ms = wait_ms,
                       .ck = {.comm = comm,
                              .plan = plan,
                              .model = model,
                              .rank = rank,
                              .v = -1,
                              .s = -1,
                              .timeout_ms = timeout_ms,
                              .wait_ms = wait_ms,
                              .parent = o->checkpoint_dir}};
    const int workers = hp_plan_first_shard(plan);
    size_t cap = (size_t)plan->nvws * sizeof(int64_t);
    void *in = NULL;
    int rc;

    rc = hp_ps_store_create(plan, model, sh.index, &sh.store);
    if (!rc)
        rc = clients_setup(&sh);
    /* a shard that holds no unit with parameters serves nobody: it hears only checkpoint
     * marks and the workers' goodbyes, so a long silence is no sign of a fault (a dead or
     * stopped worker still ends its wait) */
    if (!rc && sh.nclients == 0)
        sh.wait_ms = -1;
    if (!rc && o->resume.path)
        rc = hp_ckpt_load_shard(o->resume.path, db, plan, rank, sh.store);
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
    if (!rc)
        rc = serve_loop(&sh, cl, db, in, cap, stopped);
    free(in);
    return shard_end(&sh, o, rc);
}
