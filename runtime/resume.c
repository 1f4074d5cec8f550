/* resume.c - a worker stage's checkpoints (ckpt.h): when they are due, writing its part at a
 * job point, the reporter's manifest, and resuming from one, under the same plan (every rank
 * its own part, exactly) or another (each unit from where the checkpoint's plan had it). */
#include "stage.h"

#include "clock.h"
#include "error.h"
#include "log.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define POLLS_PER_EPOCH 10 /* job points per epoch when checkpoints are on: signals act there */

int hp_ckpt_setup(struct stage *g)
{
    const struct hp_options *o = g->o;
    struct stage_ckpt *ck = &g->ck;
    const long per = (long)g->nvws * g->batch, my_mb = g->run.my_mb;

    ck->every_samples = o->checkpoint_every.samples;
    ck->every_s = o->checkpoint_every.seconds;
    if ((ck->every_samples || ck->every_s > 0) && !o->checkpoint_dir) {
        hp_error("option '--checkpoint-every' needs '--checkpoint-dir DIR': where to write them");
        return -HP_EINVAL;
    }
    if (!o->checkpoint_dir)
        return 0;
    ck->ck = my_mb / POLLS_PER_EPOCH > 1 ? my_mb / POLLS_PER_EPOCH : 1;
    if (ck->every_samples) {
        long every = (ck->every_samples + per - 1) / per;
        if (every < ck->ck)
            ck->ck = every;
        else /* a multiple of the job points' interval */
            every = (every + ck->ck - 1) / ck->ck * ck->ck;
        ck->every_samples = every; /* from now on: in the VW's minibatches */
    }
    return 0;
}

/* Periodic checkpoints: every N samples of an epoch and at its end, or every T seconds. */
int hp_ckpt_due(struct stage *g, long nb)
{
    const struct stage_ckpt *ck = &g->ck;

    if (ck->every_samples && (nb % ck->every_samples == 0 || nb == g->run.my_mb))
        return 1;
    return ck->every_s > 0 && hp_now_s() - ck->last_t >= ck->every_s;
}

/* ---- resuming ---- */

/* The checkpoint --resume names, checked against this job: model, seed, batch. */
static int source_open(struct stage *g, struct hp_ckpt_source *src)
{
    const char *dir = g->o->resume.path;
    int rc = hp_ckpt_source_open(dir, g->db, g->model->nunits, src);

    if (rc)
        return rc;
    if (src->ci.model_sig != hp_ckpt_model_sig(g->model) || src->ci.nunits != g->model->nunits) {
        hp_error("option '--resume': %s is of model '%s' (%d units), not of this job's '%s' (%d "
                 "units)",
                 dir, src->ci.model, src->ci.nunits, g->model->name, g->model->nunits);
        return -HP_EDATA;
    }
    if (src->ci.seed != (uint64_t)g->plan->opts.seed || src->ci.batch != g->batch) {
        hp_error("option '--resume': %s was taken with --seed %" PRIu64 " --batch %ld; this job "
                 "has --seed %" PRIu64 " --batch %d (they decide the data order: give the same)",
                 dir, src->ci.seed, src->ci.batch, (uint64_t)g->plan->opts.seed, g->batch);
        return -HP_EDATA;
    }
    return 0;
}

/* Where this run starts: the checkpoint's position, converted to this plan's VW count. */
static int position(struct stage *g, const struct hp_ckpt_source *src)
{
    struct stage_ckpt *ck = &g->ck;
    const long my_mb = g->run.my_mb;

    ck->epoch0 = src->ci.epoch;
    ck->nb0 = ck->exact ? src->ci.minibatch : src->ci.minibatch * src->ci.nvws / g->nvws;
    if (ck->nb0 >= my_mb) {
        ck->epoch0++;
        ck->nb0 = 0;
    }
    if (ck->epoch0 >= g->o->epochs) {
        hp_error("option '--resume': checkpoint %ld is at epoch %ld of the job: --epochs %ld "
                 "leaves nothing to train",
                 src->ci.seq, src->ci.epoch + 1, g->o->epochs);
        return -HP_EINVAL;
    }
    ck->q0 = ck->exact ? 0 : ck->epoch0 * my_mb + ck->nb0;
    ck->seq = src->ci.seq;
    return 0;
}

/* Unit u's records into the host buffers: under the same plan from this rank's own part; else
 * the weights from the checkpoint's consensus (its shards' global weights, or VW 0's where it
 * had none), momentum and statistics from its VW v mod V. */
static int load_unit(struct stage *g, struct hp_ckpt_source *src, int u, float *p, float *mom,
                     float *st)
{
    const struct hp_unit *un = &g->model->units[u];
    const size_t pb = un->nparams * sizeof(float), sb = un->nstate * sizeof(float);
    int w = g->rank, shard = -1, w0 = g->rank;
    struct hp_ckpt_reader *r;
    int rc = 0;

    if (!g->ck.exact) {
        hp_ckpt_unit_source(&src->plan, g->v, u, &w, &shard);
        hp_ckpt_unit_source(&src->plan, 0, u, &w0, &shard);
    }
    if (pb) {
        const int from = !g->ck.exact && shard >= 0 ? shard : w0;
        const int kind = !g->ck.exact && shard >= 0 ? HP_CK_GLOBAL : HP_CK_PARAMS;
        rc = (r = hp_ckpt_source_part(src, from)) ? hp_ckpt_part_read(r, kind, u, p, pb) : -HP_EIO;
        if (!rc)
            rc = (r = hp_ckpt_source_part(src, w))
                     ? hp_ckpt_part_read(r, HP_CK_MOMENTUM, u, mom, pb)
                     : -HP_EIO;
    }
    if (!rc && sb)
        rc = (r = hp_ckpt_source_part(src, w)) ? hp_ckpt_part_read(r, HP_CK_STATE, u, st, sb)
                                               : -HP_EIO;
    return rc;
}

static int load_units(struct stage *g, struct hp_ckpt_source *src)
{
    const size_t ns = hp_net_nstate(g->net);
    float *mom = malloc((g->nparams ? g->nparams : 1) * sizeof(float));
    float *st = malloc((ns ? ns : 1) * sizeof(float));
    size_t po = 0, so = 0;
    int rc = mom && st ? 0 : -HP_ENOMEM;

    for (int u = g->st->u0; u < g->st->u1 && !rc; u++) {
        rc = load_unit(g, src, u, g->hparams + po, mom + po, st + so);
        po += g->model->units[u].nparams;
        so += g->model->units[u].nstate;
    }
    if (!rc && g->nparams)
        rc = g->be->ops->upload(g->be, hp_net_params(g->net), g->hparams,
                                g->nparams * sizeof(float));
    if (!rc && g->nparams)
        rc = g->be->ops->upload(g->be, hp_net_momentum(g->net), mom, g->nparams * sizeof(float));
    if (!rc && ns)
        rc = g->be->ops->upload(g->be, hp_net_state(g->net), st, ns * sizeof(float));
    free(mom);
    free(st);
    return rc;
}

int hp_stage_restore(struct stage *g)
{
    const double t0 = hp_now_s();
    struct hp_ckpt_source src;
    int rc;

    if (!g->o->resume.path)
        return 0;
    rc = source_open(g, &src);
    if (!rc) {
        g->ck.exact = hp_ckpt_same_layout(&src.plan, g->plan);
        rc = position(g, &src);
    }
    if (!rc)
        rc = load_units(g, &src);
    if (!rc && g->run.reporter)
        printf("resumed from checkpoint %ld (%s) in %.2f s: epoch %ld, minibatch %ld of each "
               "VW's %ld, %s\n",
               src.ci.seq, src.ci.dir, hp_now_s() - t0, g->ck.epoch0 + 1, g->ck.nb0, g->run.my_mb,
               g->ck.exact ? "the same plan: every rank restored exactly"
                           : "another plan: each unit loaded where this plan puts it");
    hp_ckpt_source_release(&src);
    if (rc)
        hp_error("vw %d stage %d: resuming from %s failed", g->v, g->s, g->o->resume.path);
    return rc;
}

/* Under the same plan, a WSP worker's client: waves pushed, its copy of the global weights. */
int hp_stage_restore_client(struct stage *g)
{
    struct hp_ckpt_reader *r = NULL;
    int64_t unpushed = 0;
    void *blob;
    int rc;

    if (!g->o->resume.path || !g->ck.exact || !g->wsp.ps)
        return 0;
    const size_t n = hp_ps_client_blob_bytes(g->wsp.ps);
    if (!(blob = malloc(n)))
        return -HP_ENOMEM;
    rc = hp_ckpt_part_open(g->o->resume.path, g->rank, &r);
    if (!rc)
        rc = hp_ckpt_part_read(r, HP_CK_CLIENT, -1, blob, n);
    if (!rc)
        rc = hp_ckpt_part_read(r, HP_CK_CLIENT, -2, &unpushed, sizeof(unpushed));
    if (!rc)
        rc = hp_ps_client_restore(g->wsp.ps, blob, n);
    g->wsp.unpushed = (long)unpushed;
    hp_ckpt_part_close_reader(r);
    free(blob);
    return rc;
}

/* ---- taking a checkpoint ---- */

/* This stage's part: per unit its parameters, momentum and statistics; a WSP client's state. */
static int write_part(struct stage *g, const char *dir, uint64_t *bytes, uint32_t *crc)
{
    const size_t ns = hp_net_nstate(g->net);
    float *mom = malloc((g->nparams ? g->nparams : 1) * sizeof(float));
    float *st = malloc((ns ? ns : 1) * sizeof(float));
    struct hp_ckpt_writer *w = NULL;
    size_t po = 0, so = 0;
    int rc = mom && st ? 0 : -HP_ENOMEM;

    if (!rc && g->nparams)
        rc = g->be->ops->download(g->be, g->hparams, hp_net_params(g->net),
                                  g->nparams * sizeof(float));
    if (!rc && g->nparams)
        rc = g->be->ops->download(g->be, mom, hp_net_momentum(g->net), g->nparams * sizeof(float));
    if (!rc && ns)
        rc = g->be->ops->download(g->be, st, hp_net_state(g->net), ns * sizeof(float));
    if (!rc)
        rc = hp_ckpt_part_create(dir, g->rank, &w);
    for (int u = g->st->u0; u < g->st->u1 && !rc; u++) {
        const struct hp_unit *un = &g->model->units[u];
        if (un->nparams)
            rc = hp_ckpt_part_add(w, HP_CK_PARAMS, u, g->v, g->hparams + po,
                                  un->nparams * sizeof(float));
        if (!rc && un->nparams)
            rc =
                hp_ckpt_part_add(w, HP_CK_MOMENTUM, u, g->v, mom + po, un->nparams * sizeof(float));
        if (!rc && un->nstate)
            rc = hp_ckpt_part_add(w, HP_CK_STATE, u, g->v, st + so, un->nstate * sizeof(float));
        po += un->nparams;
        so += un->nstate;
    }
    if (!rc && g->wsp.ps) {
        const size_t n = hp_ps_client_blob_bytes(g->wsp.ps);
        const int64_t unpushed = g->wsp.unpushed;
        void *blob = malloc(n);
        rc = blob ? 0 : -HP_ENOMEM;
        if (blob)
            hp_ps_client_save(g->wsp.ps, blob);
        if (!rc)
            rc = hp_ckpt_part_add(w, HP_CK_CLIENT, -1, g->v, blob, n);
        if (!rc)
            rc = hp_ckpt_part_add(w, HP_CK_CLIENT, -2, g->v, &unpushed, sizeof(unpushed));
        free(blob);
    }
    free(mom);
    free(st);
    if (rc) {
        hp_ckpt_part_abort(w);
        return rc;
    }
    return hp_ckpt_part_close(w, bytes, crc);
}

/* The reporter: every other rank's part, the plan, the manifest, pruning. */
static int collect(struct stage *g, long seq, const char *dir, long epoch, long nb,
                   const struct hp_ckpt_note *mine, double t0, int *ok)
{
    const struct hp_plan *p = g->plan;
    struct hp_ckpt_info ci = {.seq = seq,
                              .nunits = g->model->nunits,
                              .model_sig = hp_ckpt_model_sig(g->model),
                              .seed = p->opts.seed,
                              .batch = g->batch,
                              .ntrain = g->run.ntrain,
                              .epochs = g->o->epochs,
                              .epoch = epoch,
                              .minibatch = nb,
                              .nvws = g->nvws,
                              .nranks = p->nranks,
                              .samples = (epoch * g->run.my_mb + nb) * g->nvws * g->batch};
    int rc = 0, bad = -1;

    snprintf(ci.dir, sizeof(ci.dir), "%s", dir);
    snprintf(ci.model, sizeof(ci.model), "%s", g->model->name);
    snprintf(ci.reason, sizeof(ci.reason), "%s", hp_ckpt_requested ? "request" : "interval");
    snprintf(ci.schedule, sizeof(ci.schedule), "%s", hp_opt_word(HP_OPT_SCHEDULE, g->o->schedule));
    ci.lr = g->o->lr;
    ci.momentum = g->o->momentum;
    ci.weight_decay = g->o->weight_decay;
    ci.names = calloc((size_t)p->nranks + 1, sizeof(*ci.names));
    ci.bytes = calloc((size_t)p->nranks + 1, sizeof(*ci.bytes));
    ci.crc = calloc((size_t)p->nranks + 1, sizeof(*ci.crc));
    if (!ci.names || !ci.bytes || !ci.crc) {
        hp_ckpt_info_release(&ci);
        return -HP_ENOMEM;
    }
    for (int r = 0; r < p->nranks && !rc; r++) {
        struct hp_ckpt_note pn = *mine;
        struct hp_msg_header h;
        if (r != g->rank) {
            rc = hp_comm_recv(g->comm, r, HP_MSG_CHECKPOINT, &h, &pn, sizeof(pn), g->long_wait_ms);
            if (!rc && (h.minibatch != seq || h.payload_bytes != sizeof(pn))) {
                hp_error("checkpoint %ld: protocol error: rank %d answered for %" PRId64, seq, r,
                         h.minibatch);
                rc = -HP_EPROTOCOL;
            }
        }
        if (!rc && pn.status && bad < 0)
            bad = r;
        snprintf(ci.names[r], sizeof(ci.names[r]), "rank-%d.part", r);
        ci.bytes[r] = pn.bytes;
        ci.crc[r] = pn.crc;
    }
    ci.nfiles = p->nranks;
    if (!rc && bad < 0) {
        snprintf(ci.names[ci.nfiles], sizeof(ci.names[0]), "plan.ini");
        if (hp_ckpt_copy_file(g->o->plan, dir, "plan.ini", &ci.bytes[ci.nfiles],
                              &ci.crc[ci.nfiles]) ||
            (ci.nfiles++, hp_ckpt_manifest_write(&ci)))
            bad = g->rank;
    }
    if (!rc && bad < 0) {
        uint64_t total = 0;
        hp_stage_progress_clear(g);
        for (int i = 0; i < ci.nfiles; i++)
            total += ci.bytes[i];
        printf("checkpoint %ld: epoch %ld, minibatch %ld of %ld, %ld samples: %d files, %.1f MB "
               "in %s, written in %.2f s\n",
               seq, epoch + 1, nb, g->run.my_mb, ci.samples, ci.nfiles, total / 1e6, dir,
               hp_now_s() - t0);
        fflush(stdout);
        hp_ckpt_prune(g->o->checkpoint_dir, (int)g->o->checkpoint_keep);
        *ok = 1;
    } else if (!rc) {
        hp_warn("checkpoint %ld failed (rank %d could not write its part): removed; training goes "
                "on",
                seq, bad);
        hp_ckpt_remove(dir);
    }
    hp_ckpt_info_release(&ci);
    return rc;
}

int hp_stage_checkpoint(struct stage *g, long seq, const char *dir, long epoch, long nb, int *ok)
{
    const int rep = hp_plan_stage_rank(g->plan, 0, 0);
    const int workers = hp_plan_first_shard(g->plan);
    struct hp_ckpt_note pn = {0};
    struct hp_msg_header h = {
        .type = HP_MSG_CHECKPOINT, .vw = g->v, .stage = g->s, .minibatch = seq, .clock = -1};
    const double t0 = hp_now_s();
    int rc = 0;

    *ok = 0;
    if (g->wsp.ps)
        rc = hp_ps_checkpoint_mark(g->plan, g->comm, g->v, g->s, seq, g->timeout_ms);
    if (rc)
        return rc;
    pn.status = write_part(g, dir, &pn.bytes, &pn.crc) ? 1 : 0;
    if (g->rank == rep) {
        rc = collect(g, seq, dir, epoch, nb, &pn, t0, ok);
        h.clock = *ok;
        for (int r = 0; r < workers && !rc; r++)
            if (r != rep)
                rc = hp_comm_send(g->comm, r, &h, NULL, g->timeout_ms);
        if (!rc)
            g->ck.seq = seq;
        g->ck.last_t = hp_now_s();
    } else {
        h.payload_bytes = sizeof(pn);
        rc = hp_comm_send(g->comm, rep, &h, &pn, g->timeout_ms);
        if (!rc)
            rc = hp_comm_recv(g->comm, rep, HP_MSG_CHECKPOINT, &h, NULL, 0, g->long_wait_ms);
        if (!rc && (h.minibatch != seq || h.clock < 0 || h.clock > 1)) {
            hp_error("vw %d stage %d: protocol error: expected the outcome of checkpoint %ld", g->v,
                     g->s, seq);
            rc = -HP_EPROTOCOL;
        }
        if (!rc) {
            *ok = (int)h.clock;
            g->ck.seq = seq;
        }
    }
    if (rc)
        hp_error("vw %d stage %d: checkpoint %ld: %s", g->v, g->s, seq, hp_strerror(rc));
    return rc;
}
