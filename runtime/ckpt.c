/* ckpt.c - checkpoints in a running job (ckpt.h): the request signals, the cadence, each
 * rank's part written and loaded by unit, and the reporter's manifest. */
#include "ckpt.h"

#include "clock.h"
#include "error.h"
#include "log.h"
#include "ps_client.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

volatile sig_atomic_t hp_ckpt_requested;

static void on_request(int sig)
{
    (void)sig;
    hp_ckpt_requested = 1;
}

void hp_ckpt_signals(const char *dir)
{
    struct sigaction sa = {0};

    sigemptyset(&sa.sa_mask);
    sa.sa_handler = dir ? on_request : SIG_IGN;
    sigaction(SIGUSR1, &sa, NULL);
    if (dir) {
        sa.sa_flags = SA_RESETHAND;
        sigaction(SIGTERM, &sa, NULL);
    }
}

/* ---- when ---- */

int hp_ckpt_cadence_init(struct hp_ckpt_cadence *c, const char *dir, long every_samples,
                         double every_s, long per_mb)
{
    *c = (struct hp_ckpt_cadence){.on = dir != NULL, .every_s = every_s};
    if ((every_samples || every_s > 0) && !dir) {
        hp_error("option '--checkpoint-every' needs '--checkpoint-dir DIR': where to write them");
        return -HP_EINVAL;
    }
    if (!dir)
        return 0;
    if (every_samples) /* the first job point at or after each N samples of the epoch */
        c->every_mb = (every_samples + per_mb - 1) / per_mb;
    return 0;
}

int hp_ckpt_due(const struct hp_ckpt_cadence *c, long nb, long my_mb, double since)
{
    if (c->every_mb && (nb % c->every_mb == 0 || nb == my_mb))
        return 1;
    return c->every_s > 0 && since >= c->every_s;
}

/* ---- writing ---- */

int hp_ckpt_begin(const struct hp_ckpt_job *c, long last, long *seq, char *dir, size_t n)
{
    return hp_ckpt_new_dir(c->parent, last, seq, dir, n);
}

int hp_ckpt_units_client(struct hp_ckpt_units *u, const struct hp_wsp *wsp)
{
    u->client_bytes = wsp ? hp_wsp_state_bytes(wsp) : 0;
    u->client = NULL;
    u->has_client = wsp != NULL;
    if (!wsp)
        return 0;
    u->client = malloc(u->client_bytes ? u->client_bytes : 1);
    if (!u->client) {
        hp_error("vw %d: cannot copy the WSP state for a checkpoint: out of memory", u->vw);
        return -HP_ENOMEM;
    }
    hp_wsp_save(wsp, u->client, &u->unpushed);
    return 0;
}

int hp_ckpt_write_units(const char *dir, int rank, const struct hp_ckpt_units *u,
                        struct hp_ckpt_note *note)
{
    struct hp_ckpt_writer *w = NULL;
    size_t po = 0, so = 0;
    int rc = hp_ckpt_part_create(dir, rank, &w);

    for (int k = u->u0; k < u->u1 && !rc; k++) {
        const struct hp_unit *un = &u->model->units[k];
        const size_t pb = un->nparams * sizeof(float);
        if (un->nparams)
            rc = hp_ckpt_part_add(w, HP_CK_PARAMS, k, u->vw, u->params + po, pb);
        if (!rc && un->nparams)
            rc = hp_ckpt_part_add(w, HP_CK_MOMENTUM, k, u->vw, u->momentum + po, pb);
        if (!rc && un->nparams && u->moment2)
            rc = hp_ckpt_part_add(w, HP_CK_MOMENT2, k, u->vw, u->moment2 + po, pb);
        if (!rc && un->nstate)
            rc = hp_ckpt_part_add(w, HP_CK_STATE, k, u->vw, u->state + so,
                                  un->nstate * sizeof(float));
        po += un->nparams;
        so += un->nstate;
    }
    if (!rc && u->has_client)
        rc = hp_ckpt_part_add(w, HP_CK_CLIENT, -1, u->vw, u->client, u->client_bytes);
    if (!rc && u->has_client)
        rc = hp_ckpt_part_add(w, HP_CK_CLIENT, -2, u->vw, &u->unpushed, sizeof(u->unpushed));
    if (rc) {
        hp_ckpt_part_abort(w);
        return rc;
    }
    return hp_ckpt_part_close(w, &note->bytes, &note->crc);
}

void hp_ckpt_units_free(struct hp_ckpt_units *u)
{
    free(u->params);
    free(u->momentum);
    free(u->moment2);
    free(u->state);
    free(u->client);
    u->params = u->momentum = u->state = u->moment2 = NULL;
    u->client = NULL;
}

/* A PS shard's units copied: the units it holds (units[n]), and for each its global weights
 * (one after another in gw) and every VW's clock of it (nvws each in clk). */
struct shard_copy {
    int n, *units;
    float *gw;
    int64_t *clk;
};

static void shard_copy_free(struct shard_copy *sc)
{
    free(sc->units);
    free(sc->gw);
    free(sc->clk);
    *sc = (struct shard_copy){0};
}

static int shard_copy(const struct hp_plan *p, const struct hp_model *model, struct hp_ps_store *st,
                      struct shard_copy *sc)
{
    size_t floats = 0, f = 0;

    *sc = (struct shard_copy){0};
    for (int u = 0; u < p->nunits; u++)
        if (hp_ps_store_holds(st, u)) {
            sc->n++;
            floats += model->units[u].nparams;
        }
    sc->units = malloc(((size_t)sc->n + 1) * sizeof(int));
    sc->gw = malloc((floats + 1) * sizeof(float));
    sc->clk = malloc(((size_t)sc->n * (size_t)p->nvws + 1) * sizeof(int64_t));
    if (!sc->units || !sc->gw || !sc->clk) {
        shard_copy_free(sc);
        hp_error("cannot copy a PS shard's weights for a checkpoint: out of memory");
        return -HP_ENOMEM;
    }
    for (int u = 0, i = 0; u < p->nunits; u++) {
        if (!hp_ps_store_holds(st, u))
            continue;
        sc->units[i] = u;
        memcpy(sc->gw + f, hp_ps_store_unit(st, u), model->units[u].nparams * sizeof(float));
        f += model->units[u].nparams;
        for (int x = 0; x < p->nvws; x++)
            sc->clk[(size_t)i * (size_t)p->nvws + (size_t)x] = *hp_ps_store_clock(st, x, u);
        i++;
    }
    return 0;
}

static int write_shard_copy(const char *dir, int rank, const struct hp_plan *p,
                            const struct hp_model *model, const struct shard_copy *sc,
                            struct hp_ckpt_note *note)
{
    struct hp_ckpt_writer *w = NULL;
    size_t f = 0;
    int rc = hp_ckpt_part_create(dir, rank, &w);

    for (int i = 0; i < sc->n && !rc; i++) {
        const int u = sc->units[i];
        rc = hp_ckpt_part_add(w, HP_CK_GLOBAL, u, -1, sc->gw + f,
                              model->units[u].nparams * sizeof(float));
        f += model->units[u].nparams;
        if (!rc)
            rc = hp_ckpt_part_add(w, HP_CK_CLOCKS, u, -1, sc->clk + (size_t)i * (size_t)p->nvws,
                                  (size_t)p->nvws * sizeof(int64_t));
    }
    if (rc) {
        hp_ckpt_part_abort(w);
        return rc;
    }
    return hp_ckpt_part_close(w, &note->bytes, &note->crc);
}

/* A checkpoint of this rank under way: its part written by a thread of its own. */
struct hp_ckpt_pending {
    long seq;
    int rank;
    char dir[4096];
    struct hp_ckpt_units u; /* owned host copies: a worker's */
    struct shard_copy sc;   /* a PS shard's */
    const struct hp_ckpt_job *job;
    struct hp_ckpt_note note;
    pthread_t thread;
    int started;
    atomic_int written; /* the thread has finished (note set) */
    int note_sent;
    double t0;
    /* the reporter: the manifest's contents and the notes so far */
    struct hp_ckpt_info ci;
    int *got, ngot, bad;
};

static void *write_part(void *arg)
{
    struct hp_ckpt_pending *pd = arg;
    const struct hp_ckpt_job *c = pd->job;

    if (c->s < 0)
        pd->note.status =
            write_shard_copy(pd->dir, pd->rank, c->plan, c->model, &pd->sc, &pd->note) ? 1 : 0;
    else
        pd->note.status = hp_ckpt_write_units(pd->dir, pd->rank, &pd->u, &pd->note) ? 1 : 0;
    atomic_store(&pd->written, 1);
    return NULL;
}

/* The writer thread, with every signal blocked: the rank's handlers run on its main thread,
 * and the writes are not interrupted (EINTR). 0 or -1. */
static int start_writer(struct hp_ckpt_pending *pd)
{
    sigset_t all, old;
    int rc;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&pd->thread, NULL, write_part, pd);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc == 0 ? 0 : -1;
}

/* The part's writer for checkpoint pd->seq under parent: a directory path that cannot be made
 * is a failed part (written at once, failed); else the thread. 0, or -1 when the thread could
 * not be started. */
static int launch_writer(struct hp_ckpt_pending *pd, const char *parent)
{
    if (hp_ckpt_dir(parent, pd->seq, pd->dir, sizeof(pd->dir))) {
        pd->note.status = 1;
        atomic_store(&pd->written, 1);
        return 0;
    }
    if (start_writer(pd))
        return -1;
    pd->started = 1;
    return 0;
}

static void pending_free(struct hp_ckpt_pending *pd)
{
    if (!pd)
        return;
    if (pd->started)
        pthread_join(pd->thread, NULL);
    hp_ckpt_units_free(&pd->u);
    shard_copy_free(&pd->sc);
    hp_ckpt_info_release(&pd->ci);
    free(pd->got);
    free(pd);
}

void hp_ckpt_abandon(struct hp_ckpt_pending *pd)
{
    pending_free(pd);
}

int hp_ckpt_start(const struct hp_ckpt_job *c, long seq, struct hp_ckpt_units *u,
                  const struct hp_wsp *wsp, const struct hp_ckpt_info *where,
                  struct hp_ckpt_pending **out)
{
    const struct hp_plan *p = c->plan;
    struct hp_ckpt_pending *pd = calloc(1, sizeof(*pd));
    int rc = pd ? 0 : -HP_ENOMEM;

    *out = NULL;
    if (pd) {
        pd->u = *u;
        *u = (struct hp_ckpt_units){0};
        pd->seq = seq;
        pd->rank = c->rank;
        pd->job = c;
        pd->t0 = hp_now_s();
        pd->ci = *where; /* its file arrays are this checkpoint's own, made here */
        pd->ci.seq = seq;
        pd->ci.nranks = p->nranks;
        pd->bad = -1;
        pd->got = calloc((size_t)p->nranks, sizeof(int));
        pd->ci.names = calloc((size_t)p->nranks + 1, sizeof(*pd->ci.names));
        pd->ci.bytes = calloc((size_t)p->nranks + 1, sizeof(*pd->ci.bytes));
        pd->ci.crc = calloc((size_t)p->nranks + 1, sizeof(*pd->ci.crc));
        if (!pd->got || !pd->ci.names || !pd->ci.bytes || !pd->ci.crc)
            rc = -HP_ENOMEM;
    } else {
        hp_ckpt_units_free(u);
    }
    if (!rc && wsp) /* every push before this point is on the shards: they write theirs */
        rc = hp_ps_checkpoint_mark(p, c->comm, c->v, c->s, seq, c->timeout_ms);
    if (!rc && launch_writer(pd, c->parent)) {
        hp_error("checkpoint %ld: cannot start the thread that writes the part", seq);
        rc = -HP_EIO;
    }
    if (rc) {
        if (rc == -HP_ENOMEM)
            hp_error("checkpoint %ld: out of memory", seq);
        pending_free(pd);
        return rc;
    }
    *out = pd;
    return 0;
}

/* The reporter: the notes that have come (all of them with wait). */
static int collect(const struct hp_ckpt_job *c, struct hp_ckpt_pending *pd, int wait)
{
    const struct hp_plan *p = c->plan;
    int rc = 0;

    for (int r = 0; r < p->nranks && !rc; r++) {
        struct hp_ckpt_note pn = pd->note;
        struct hp_msg_header h;
        if (pd->got[r])
            continue;
        if (r == c->rank) {
            if (!atomic_load(&pd->written))
                continue;
        } else {
            if (!wait && !hp_comm_probe(c->comm, r, HP_MSG_CHECKPOINT))
                continue;
            rc = hp_comm_recv(c->comm, r, HP_MSG_CHECKPOINT, &h, &pn, sizeof(pn), c->wait_ms);
            if (!rc && (h.minibatch != pd->seq || h.payload_bytes != sizeof(pn))) {
                hp_error("checkpoint %ld: protocol error: rank %d answered for %" PRId64, pd->seq,
                         r, h.minibatch);
                rc = -HP_EPROTOCOL;
            }
            if (rc)
                break;
        }
        if (pn.status && pd->bad < 0)
            pd->bad = r;
        snprintf(pd->ci.names[r], sizeof(pd->ci.names[r]), "rank-%d.part", r);
        pd->ci.bytes[r] = pn.bytes;
        pd->ci.crc[r] = pn.crc;
        pd->got[r] = 1;
        pd->ngot++;
    }
    return rc;
}

/* The reporter, every note in: the plan, the manifest, pruning; or the checkpoint removed. */
static void complete(const struct hp_ckpt_job *c, struct hp_ckpt_pending *pd, int *ok,
                     struct hp_ckpt_written *out)
{
    struct hp_ckpt_info *ci = &pd->ci;

    ci->nranks = c->plan->nranks;
    ci->nfiles = c->plan->nranks;
    snprintf(ci->dir, sizeof(ci->dir), "%s", pd->dir);
    if (pd->bad < 0) {
        snprintf(ci->names[ci->nfiles], sizeof(ci->names[0]), "plan.ini");
        if (hp_ckpt_copy_file(c->plan_path, ci->dir, "plan.ini", &ci->bytes[ci->nfiles],
                              &ci->crc[ci->nfiles]) ||
            (ci->nfiles++, hp_ckpt_manifest_write(ci)))
            pd->bad = c->rank;
    }
    *ok = pd->bad < 0;
    if (*ok) {
        out->nfiles = ci->nfiles;
        out->bytes = 0;
        for (int i = 0; i < ci->nfiles; i++)
            out->bytes += ci->bytes[i];
        hp_ckpt_prune(c->parent, c->keep);
    } else {
        hp_warn("checkpoint %ld failed (rank %d could not write rank-%d.part%s): %s removed, "
                "the checkpoints before it kept; training goes on",
                pd->seq, pd->bad, pd->bad, pd->bad == c->rank ? " or the manifest" : "", pd->dir);
        hp_ckpt_remove(pd->dir);
    }
    out->seconds = hp_now_s() - pd->t0;
}

/* The reporter tells every worker the outcome; a worker waits for it. */
static int outcome(const struct hp_ckpt_job *c, long seq, int *ok)
{
    const int rep = hp_plan_stage_rank(c->plan, 0, 0);
    struct hp_msg_header h = {
        .type = HP_MSG_CHECKPOINT, .vw = c->v, .stage = c->s, .minibatch = seq, .clock = *ok};
    int rc = 0;

    if (c->rank == rep) {
        for (int r = 0; r < hp_plan_first_shard(c->plan) && !rc; r++)
            if (r != rep)
                rc = hp_comm_send(c->comm, r, &h, NULL, c->timeout_ms);
        return rc;
    }
    rc = hp_comm_recv(c->comm, rep, HP_MSG_CHECKPOINT, &h, NULL, 0, c->wait_ms);
    if (!rc && (h.minibatch != seq || h.clock < 0 || h.clock > 1)) {
        hp_error("vw %d stage %d: protocol error: expected the outcome of checkpoint %ld", c->v,
                 c->s, seq);
        rc = -HP_EPROTOCOL;
    }
    if (!rc)
        *ok = (int)h.clock;
    return rc;
}

int hp_ckpt_finish(const struct hp_ckpt_job *c, struct hp_ckpt_pending *pd, int wait, int tell,
                   int *done, int *ok, struct hp_ckpt_written *out)
{
    const int rep = hp_plan_stage_rank(c->plan, 0, 0);
    const long seq = pd->seq;
    int rc = 0;

    *done = 0;
    *ok = -1;
    if (!wait && !atomic_load(&pd->written) && c->rank != rep)
        return 0;
    if (wait || atomic_load(&pd->written)) {
        if (pd->started)
            pthread_join(pd->thread, NULL);
        pd->started = 0;
    }
    if (c->rank == rep) {
        rc = collect(c, pd, wait);
        if (rc || pd->ngot < c->plan->nranks)
            goto out;
        complete(c, pd, ok, out);
    } else if (!pd->note_sent) {
        const struct hp_msg_header h = {.type = HP_MSG_CHECKPOINT,
                                        .vw = c->v,
                                        .stage = c->s,
                                        .minibatch = seq,
                                        .clock = -1,
                                        .payload_bytes = sizeof(pd->note)};
        rc = hp_comm_send(c->comm, rep, &h, &pd->note, c->timeout_ms);
        pd->note_sent = 1;
    }
    if (!rc && tell)
        rc = outcome(c, seq, ok);
    if (!rc) {
        *done = 1;
        pending_free(pd);
    }
out:
    if (rc)
        hp_error("vw %d stage %d: checkpoint %ld: %s", c->v, c->s, seq, hp_strerror(rc));
    return rc;
}

int hp_ckpt_take(const struct hp_ckpt_job *c, long seq, struct hp_ckpt_units *u,
                 const struct hp_wsp *wsp, const struct hp_ckpt_info *where, int *ok,
                 struct hp_ckpt_written *out)
{
    struct hp_ckpt_pending *pd;
    int done = 0;
    int rc = hp_ckpt_start(c, seq, u, wsp, where, &pd);

    *ok = 0;
    if (!rc)
        rc = hp_ckpt_finish(c, pd, 1, 1, &done, ok, out);
    if (rc && pd && !done)
        pending_free(pd);
    return rc;
}

int hp_ckpt_write_shard(const char *dir, int rank, const struct hp_plan *p,
                        const struct hp_model *model, struct hp_ps_store *st,
                        struct hp_ckpt_note *note)
{
    struct shard_copy sc;
    int rc = shard_copy(p, model, st, &sc);

    if (!rc)
        rc = write_shard_copy(dir, rank, p, model, &sc, note);
    shard_copy_free(&sc);
    return rc;
}

int hp_ckpt_start_shard(const struct hp_ckpt_job *c, long seq, struct hp_ps_store *st,
                        struct hp_ckpt_pending **out)
{
    struct hp_ckpt_pending *pd = calloc(1, sizeof(*pd));
    int rc = pd ? shard_copy(c->plan, c->model, st, &pd->sc) : -HP_ENOMEM;

    *out = NULL;
    if (rc) {
        free(pd);
        return rc;
    }
    pd->seq = seq;
    pd->rank = c->rank;
    pd->job = c;
    pd->t0 = hp_now_s();
    if (launch_writer(pd, c->parent ? c->parent : ".")) {
        pd->note.status = 1; /* a failed part: the checkpoint fails, the job goes on */
        atomic_store(&pd->written, 1);
        hp_warn("PS shard rank %d: checkpoint %ld: cannot start the thread that writes its part",
                c->rank, seq);
    }
    *out = pd;
    return 0;
}

/* ---- loading ---- */

int hp_ckpt_resume_open(const char *dir, const struct hp_gpudb *db, const struct hp_model *model,
                        const struct hp_plan *now, long my_mb, long epochs,
                        struct hp_ckpt_source *src, struct hp_ckpt_resume *where)
{
    char why[512];
    int rc = hp_ckpt_source_open(dir, db, model->nunits, src);

    if (rc)
        return rc;
    if (hp_ckpt_compatible(&src->ci, model, (uint64_t)now->opts.seed, now->opts.batch, why,
                           sizeof(why))) {
        hp_error("option '--resume': %s: %s", dir, why);
        return -HP_EDATA;
    }
    const char *opt = hp_opt_word(HP_OPT_OPTIMIZER, now->opts.optimizer);
    if (strcmp(src->ci.optimizer[0] ? src->ci.optimizer : "sgd", opt) != 0) {
        hp_error("option '--resume': %s: it was taken with --optimizer %s; this job has "
                 "--optimizer %s (the optimizer's moments are in the checkpoint: resume with the "
                 "same one)",
                 dir, src->ci.optimizer[0] ? src->ci.optimizer : "sgd", opt);
        return -HP_EDATA;
    }
    *where = (struct hp_ckpt_resume){
        .seq = src->ci.seq, .epoch0 = src->ci.epoch, .exact = hp_ckpt_same_layout(&src->plan, now)};
    where->nb0 = where->exact ? src->ci.minibatch : src->ci.minibatch * src->ci.nvws / now->nvws;
    if (where->nb0 >= my_mb) {
        where->epoch0++;
        where->nb0 = 0;
    }
    if (where->epoch0 >= epochs) {
        hp_error("option '--resume': checkpoint %ld is at epoch %ld of the job: --epochs %ld "
                 "leaves nothing to train",
                 src->ci.seq, src->ci.epoch + 1, epochs);
        return -HP_EINVAL;
    }
    where->q0 = where->exact ? 0 : where->epoch0 * my_mb + where->nb0;
    return 0;
}

/* Unit k's records into the host buffers: under the same plan from this rank's own part; else
 * the weights from the checkpoint's consensus (its shards' global weights, or VW 0's where it
 * had none), momentum and statistics from VW v mod V. */
static int load_unit(struct hp_ckpt_source *src, int exact, int rank, int v,
                     const struct hp_unit *un, int k, float *p, float *mom, float *mom2, float *st)
{
    const size_t pb = un->nparams * sizeof(float), sb = un->nstate * sizeof(float);
    int w = rank, shard = -1, w0 = rank;
    struct hp_ckpt_reader *r;
    int rc = 0;

    if (!exact) {
        hp_ckpt_unit_source(&src->plan, v, k, &w, &shard);
        hp_ckpt_unit_source(&src->plan, 0, k, &w0, &shard);
    }
    if (pb) {
        const int from = !exact && shard >= 0 ? shard : w0;
        const int kind = !exact && shard >= 0 ? HP_CK_GLOBAL : HP_CK_PARAMS;
        rc = (r = hp_ckpt_source_part(src, from)) ? hp_ckpt_part_read(r, kind, k, p, pb) : -HP_EIO;
        if (!rc)
            rc = (r = hp_ckpt_source_part(src, w))
                     ? hp_ckpt_part_read(r, HP_CK_MOMENTUM, k, mom, pb)
                     : -HP_EIO;
        if (!rc && mom2)
            rc = (r = hp_ckpt_source_part(src, w))
                     ? hp_ckpt_part_read(r, HP_CK_MOMENT2, k, mom2, pb)
                     : -HP_EIO;
    }
    if (!rc && sb)
        rc = (r = hp_ckpt_source_part(src, w)) ? hp_ckpt_part_read(r, HP_CK_STATE, k, st, sb)
                                               : -HP_EIO;
    return rc;
}

int hp_ckpt_load_units(struct hp_ckpt_source *src, const struct hp_ckpt_resume *where, int rank,
                       const struct hp_ckpt_units *u)
{
    size_t po = 0, so = 0;
    int rc = 0;

    for (int k = u->u0; k < u->u1 && !rc; k++) {
        const struct hp_unit *un = &u->model->units[k];
        rc = load_unit(src, where->exact, rank, u->vw, un, k, u->params + po, u->momentum + po,
                       u->moment2 ? u->moment2 + po : NULL, u->state + so);
        po += un->nparams;
        so += un->nstate;
    }
    return rc;
}

int hp_ckpt_load_wsp(struct hp_ckpt_source *src, const struct hp_ckpt_resume *where, int rank,
                     struct hp_wsp *wsp)
{
    struct hp_ckpt_reader *r;
    int64_t unpushed = 0;
    void *blob;
    int rc;

    if (!wsp || !where->exact)
        return 0;
    const size_t n = hp_wsp_state_bytes(wsp);
    if (!(r = hp_ckpt_source_part(src, rank)))
        return -HP_EIO;
    if (!(blob = malloc(n ? n : 1)))
        return -HP_ENOMEM;
    rc = hp_ckpt_part_read(r, HP_CK_CLIENT, -1, blob, n);
    if (!rc)
        rc = hp_ckpt_part_read(r, HP_CK_CLIENT, -2, &unpushed, sizeof(unpushed));
    if (!rc)
        rc = hp_wsp_restore(wsp, blob, n, unpushed);
    free(blob);
    return rc;
}

int hp_ckpt_load_shard(const char *dir, const struct hp_gpudb *db, const struct hp_plan *now,
                       int rank, struct hp_ps_store *st)
{
    const int n = now->nunits;
    struct hp_ckpt_source src;
    int64_t *clk = malloc((size_t)now->nvws * sizeof(int64_t));
    int rc = clk ? hp_ckpt_source_open(dir, db, n, &src) : -HP_ENOMEM;
    const int exact = !rc && hp_ckpt_same_layout(&src.plan, now);

    for (int u = 0; u < n && !rc; u++) {
        struct hp_ckpt_reader *r;
        int w, from;
        if (!hp_ps_store_holds(st, u))
            continue;
        hp_ckpt_unit_source(&src.plan, 0, u, &w, &from);
        from = exact ? rank : from >= 0 ? from : w;
        r = hp_ckpt_source_part(&src, from);
        rc = !r ? -HP_EIO
                : hp_ckpt_part_read(
                      r, from >= hp_plan_first_shard(&src.plan) ? HP_CK_GLOBAL : HP_CK_PARAMS, u,
                      hp_ps_store_unit(st, u), hp_ps_store_floats(st, u, u + 1) * sizeof(float));
        if (!rc && exact)
            rc = hp_ckpt_part_read(r, HP_CK_CLOCKS, u, clk, (size_t)now->nvws * sizeof(int64_t));
        for (int x = 0; x < now->nvws && !rc && exact; x++)
            *hp_ps_store_clock(st, x, u) = clk[x];
    }
    if (clk)
        hp_ckpt_source_release(&src);
    free(clk);
    return rc;
}
