/* feed.c - a virtual worker's minibatches from the data set (feed.h): the epoch's order, a
 * pool of threads that read and decode samples into a ring of minibatch slots ahead of the
 * pipeline, and the validation batches.
 *
 * The pool's work is a cursor over (minibatch, sample) items of the VW's order: a thread takes
 * the cursor's item when its minibatch's slot is free (the slot of the minibatch `queue`
 * places back was given out and released), so at most `queue` minibatches are prepared ahead.
 * A validation batch asked for goes before. With 0 threads (an IDX set, whose samples are
 * floats already) the asking thread prepares each minibatch itself. */
#include "feed.h"

#include "clock.h"
#include "error.h"
#include "image.h"
#include "log.h"
#include "model.h"
#include "rng.h"
#include "source.h"
#include "data.h"
#include "text.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WARN_SKIPS 10 /* skipped samples named one by one, per feed */

struct slot {
    long j; /* the minibatch in it, counted over epochs (epoch x my_mb + j); -1 free (the test
               batch's: unused) */
    int done, bad;         /* samples prepared; of them, failed */
    int fatal;             /* a failure no skipping can help (an IDX split that cannot load) */
    float *x;              /* [batch][sample] */
    int32_t *lab;          /* [batch] */
    unsigned char *failed; /* [batch] */
    char err[600];         /* the first failure */
};

struct hp_feed {
    struct hp_feed_config c;
    struct hp_source *src;
    struct hp_text *text; /* a text model's corpus (src NULL): sequences made in the asking
                             thread, no pool */
    int positions;        /* labels per sample (hp_model_positions) */
    int32_t *tok;         /* text: [T + 1], a sequence */
    struct hp_feed_counts n;
    struct hp_image_tf tf_train, tf_eval;
    size_t sample_floats;
    char what[4200];
    int shards;     /* the shards' order (contiguous ranges per VW) */
    int epoch;      /* the epoch asked for (hp_feed_epoch) */
    long *ord[2];   /* [my_mb x batch]: the VW's sample ids of epoch ord_ep[e & 1] */
    int ord_ep[2];  /* -1: none */
    int building;   /* a pool thread builds the next epoch's order */
    long *test_ids; /* [batch] */
    /* the pool */
    pthread_mutex_t mu;
    pthread_cond_t work, ready;
    pthread_t *th;
    struct hp_image_scratch **scr; /* [max(nth, 1)] */
    int nth, started, quit;
    struct slot *q, test;
    int nq;
    long cur_j, end_j; /* the cursor: minibatch cur_j's sample cur_i next, up to end_j (both
                          counted over epochs: the next epoch's first ones are prepared while
                          this one ends) */
    int cur_i;
    int test_i; /* the test batch's next sample (batch: none to do) */
    long given; /* the minibatch given out (its slot held until the next ask), -1 */
    int busy;   /* items being prepared */
    /* stats */
    long decoded, skipped, skipped_epoch, depth_sum, asks, warned;
    double decode_s, wait_s, wait_start_s;
    int fresh; /* the next ask is the first of an epoch or after a restart (the queue empty) */
};

int hp_feed_counts(long avail_train, long avail_test, long train_limit, long test_limit, int batch,
                   int nvws, struct hp_feed_counts *out)
{
    struct hp_feed_counts n = {0};

    n.ntrain = (int)(train_limit > 0 && train_limit < avail_train ? train_limit : avail_train);
    n.ntest = (int)(test_limit > 0 && test_limit < avail_test ? test_limit : avail_test);
    n.total_mb = n.ntrain / batch;
    n.my_mb = n.total_mb / nvws;
    n.test_batches = (n.ntest + batch - 1) / batch;
    if (n.my_mb == 0) {
        hp_error("minibatch %d x %d virtual workers is more than the %d training samples", batch,
                 nvws, n.ntrain);
        return -HP_EINVAL;
    }
    *out = n;
    return 0;
}

/* ---- preparing one sample ---- */

static double thread_cpu_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sample `id` of `split` into x and *lab with scratch s; a failure's message into err. */
static int prepare(struct hp_feed *f, struct hp_image_scratch *s, int split, long id,
                   uint64_t epoch_seed, float *x, int32_t *lab, char *err, size_t errlen)
{
    struct hp_sample smp;
    char why[400] = "";
    int rc = f->src->ops->read(f->src, split, id, &smp, why, sizeof(why));

    if (rc) {
        snprintf(err, errlen, "%s", why[0] ? why : hp_strerror(rc));
        return rc;
    }
    if (!f->src->encoded) {
        memcpy(x, smp.data, f->sample_floats * sizeof(float));
    } else {
        const struct hp_image_tf *tf = split == HP_SPLIT_TRAIN ? &f->tf_train : &f->tf_eval;
        rc = hp_image_sample(s, smp.data, smp.size, tf, hp_rng_derive(epoch_seed, (uint64_t)id), x,
                             why, sizeof(why));
        if (rc)
            snprintf(err, errlen, "%s: %s", smp.name, why);
    }
    if (!rc && (smp.label < 0 || smp.label >= f->src->nclasses)) {
        snprintf(err, errlen, "%s: label %d is not a class of the data set (0 to %d)", smp.name,
                 (int)smp.label, f->src->nclasses - 1);
        rc = -HP_EDATA;
    }
    *lab = smp.label;
    f->src->ops->release(f->src, &smp);
    return rc;
}

/* The seed of an epoch's random crops and flips (each sample's: derived with its id). */
static uint64_t epoch_seed(const struct hp_feed *f, int epoch)
{
    return hp_rng_derive(f->c.seed, 0x5000 + (uint64_t)epoch);
}

/* Item i of slot sl (minibatch j, or the test batch) with scratch s; counts it done. The
 * caller holds no lock; the slot is its own until done reaches the batch. */
static void prepare_item(struct hp_feed *f, struct hp_image_scratch *s, struct slot *sl, int i)
{
    const int test = sl == &f->test;
    const long e = test ? 0 : sl->j / f->n.my_mb, j = test ? 0 : sl->j % f->n.my_mb;
    const long id = test ? f->test_ids[i] : f->ord[e & 1][j * f->c.batch + i];
    char err[600];
    const double t0 = thread_cpu_s();
    const int rc = prepare(f, s, test ? HP_SPLIT_VAL : HP_SPLIT_TRAIN, id, epoch_seed(f, (int)e),
                           sl->x + (size_t)i * f->sample_floats, sl->lab + i, err, sizeof(err));
    const double dt = thread_cpu_s() - t0;

    pthread_mutex_lock(&f->mu);
    f->decode_s += dt;
    f->decoded++;
    sl->failed[i] = rc != 0;
    if (rc) {
        if (!sl->bad++)
            snprintf(sl->err, sizeof(sl->err), "%s", err);
        sl->fatal |= !f->src->encoded;
        if (f->c.skip_errors && f->warned++ < WARN_SKIPS)
            hp_warn("data: skipping %s%s", err,
                    f->warned == WARN_SKIPS ? " (further skipped samples are only counted)" : "");
    }
    if (++sl->done == f->c.batch)
        pthread_cond_broadcast(&f->ready);
    pthread_mutex_unlock(&f->mu);
}

/* ---- the pool ---- */

/* Under the lock: the next item to prepare (1), the next epoch's order to build (2: *i is the
 * epoch), or nothing (0). */
static int take_item(struct hp_feed *f, struct slot **sl, int *i)
{
    if (f->test_i < f->c.batch) {
        *sl = &f->test;
        *i = f->test_i++;
        return 1;
    }
    if (f->cur_j >= f->end_j)
        return 0;
    const int e = (int)(f->cur_j / f->n.my_mb);
    if (f->ord_ep[e & 1] != e) {
        if (f->building)
            return 0;
        f->building = 1;
        *i = e;
        return 2;
    }
    struct slot *s = &f->q[f->cur_j % f->nq];
    if (s->j != f->cur_j) {
        if (s->j >= 0)
            return 0; /* not yet given out and released */
        *s = (struct slot){.j = f->cur_j, .x = s->x, .lab = s->lab, .failed = s->failed};
    }
    *sl = s;
    *i = f->cur_i++;
    if (f->cur_i == f->c.batch) {
        f->cur_j++;
        f->cur_i = 0;
    }
    return 1;
}

struct worker_arg {
    struct hp_feed *f;
    int t;
};

static void build_next(struct hp_feed *f, int epoch);

static void *pool_thread(void *p)
{
    struct hp_feed *f = ((struct worker_arg *)p)->f;
    struct hp_image_scratch *s = f->scr[((struct worker_arg *)p)->t];
    struct slot *sl;
    int i;

    free(p);
    pthread_mutex_lock(&f->mu);
    while (!f->quit) {
        const int got = take_item(f, &sl, &i);
        if (!got) {
            const struct timespec until = hp_deadline_in_ms(1000); /* idle: look again */
            pthread_cond_timedwait(&f->work, &f->mu, &until);
            continue;
        }
        f->busy++;
        pthread_mutex_unlock(&f->mu);
        if (got == 2)
            build_next(f, i);
        else
            prepare_item(f, s, sl, i);
        pthread_mutex_lock(&f->mu);
        if (--f->busy == 0)
            pthread_cond_broadcast(&f->ready);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* Under the lock: wait (at most timeout_ms) until cond() holds. 0 or -HP_ETIMEOUT. */
static int wait_until(struct hp_feed *f, int (*cond)(const struct hp_feed *, long), long arg)
{
    const struct timespec until = hp_deadline_in_ms(f->c.timeout_ms);

    while (!cond(f, arg))
        if (pthread_cond_timedwait(&f->ready, &f->mu, &until) != 0 && !cond(f, arg))
            return -HP_ETIMEOUT;
    return 0;
}

static int idle(const struct hp_feed *f, long unused)
{
    (void)unused;
    return f->busy == 0;
}

static int slot_ready(const struct hp_feed *f, long j)
{
    const struct slot *s = &f->q[j % f->nq];
    return s->j == j && s->done == f->c.batch;
}

static int test_ready(const struct hp_feed *f, long unused)
{
    (void)unused;
    return f->test.done == f->c.batch && f->busy == 0;
}

/* ---- the order ---- */

/* The shards' order of `epoch` (feed.h), the VW's range of it into out. */
static int shard_order(const struct hp_feed *f, int epoch, long *all, long *out)
{
    const struct hp_source *s = f->src;
    const int ns = s->nshards[HP_SPLIT_TRAIN];
    int *sp = malloc((size_t)(ns ? ns : 1) * sizeof(int)), *mp = NULL;
    long k = 0, maxn = 1;

    for (int i = 0; i < ns; i++)
        maxn = s->shard_n[HP_SPLIT_TRAIN][i] > maxn ? s->shard_n[HP_SPLIT_TRAIN][i] : maxn;
    mp = malloc((size_t)maxn * sizeof(int));
    if (!sp || !mp) {
        free(sp);
        free(mp);
        return -HP_ENOMEM;
    }
    hp_permute(sp, ns, hp_rng_derive(f->c.seed, 0x3000 + (uint64_t)epoch));
    for (int i = 0; i < ns; i++) {
        const int sh = sp[i];
        const long first = s->shard_first[HP_SPLIT_TRAIN][sh];
        const int cnt = (int)s->shard_n[HP_SPLIT_TRAIN][sh];
        hp_permute(mp, cnt,
                   hp_rng_derive(hp_rng_derive(f->c.seed, 0x4000 + (uint64_t)epoch), (uint64_t)sh));
        for (int m = 0; m < cnt; m++)
            all[k++] = first + mp[m];
    }
    const long per = f->n.my_mb * f->c.batch;
    memcpy(out, all + (size_t)f->c.v * per, (size_t)per * sizeof(long));
    free(sp);
    free(mp);
    return 0;
}

/* The order of `epoch`'s training samples (feed.h) into out [my_mb x batch]. */
static int make_order(const struct hp_feed *f, int epoch, long *out)
{
    const long total = f->src->n[HP_SPLIT_TRAIN];
    const int b = f->c.batch, v = f->c.v, nv = f->c.nvws;
    int rc = 0;

    if (f->shards) {
        long *all = malloc((size_t)total * sizeof(long));
        if (!all)
            return -HP_ENOMEM;
        rc = shard_order(f, epoch, all, out);
        free(all);
        return rc;
    }
    int *perm = malloc((size_t)f->n.ntrain * sizeof(int));
    if (!perm)
        return -HP_ENOMEM;
    hp_permute(perm, f->n.ntrain, hp_rng_derive(f->c.seed, 0x1000 + (uint64_t)epoch));
    for (long j = 0; j < f->n.my_mb; j++)
        for (int i = 0; i < b; i++)
            out[j * b + i] = perm[(j * nv + v) * b + i];
    free(perm);
    return 0;
}

/* A pool thread: the next epoch's order built (no lock held; the buffer, an epoch older than
 * the one asked for, is nobody's), so that its first minibatches are prepared while this
 * epoch ends; the shards are told the order. */
static void build_next(struct hp_feed *f, int epoch)
{
    long *out = f->ord[epoch & 1];
    const int rc = make_order(f, epoch, out);

    pthread_mutex_lock(&f->mu);
    f->building = 0;
    if (rc) { /* no looking ahead: the ask restarts the queue there (and says why) */
        f->end_j = (long)epoch * f->n.my_mb;
    } else {
        f->ord_ep[epoch & 1] = epoch;
        pthread_cond_broadcast(&f->work);
    }
    pthread_mutex_unlock(&f->mu);
    if (!rc && f->src->ops->begin)
        f->src->ops->begin(f->src, HP_SPLIT_TRAIN, out, f->n.my_mb * f->c.batch);
}

/* How far the pool may prepare: to the end of the epoch after the one asked for (not past
 * the job's last epoch). */
static long lookahead_end(const struct hp_feed *f)
{
    const int last = f->c.epochs > 0 && f->epoch + 1 >= f->c.epochs;

    return (long)(f->epoch + (last ? 1 : 2)) * f->n.my_mb;
}

/* Under the lock: the queue restarted at g0 (nothing prepared kept). */
static int restart(struct hp_feed *f, long g0)
{
    f->end_j = 0; /* no new items */
    const int rc = wait_until(f, idle, 0);

    for (int k = 0; k < f->nq; k++)
        f->q[k].j = -1;
    f->given = -1;
    f->cur_j = g0;
    f->cur_i = 0;
    f->end_j = lookahead_end(f);
    f->fresh = 1;
    pthread_cond_broadcast(&f->work);
    return rc;
}

/* Under the lock: minibatch g is in the queue or the next to be assigned. */
static int coming(const struct hp_feed *f, long g)
{
    return f->q[g % f->nq].j == g || (f->cur_j == g && f->cur_i == 0);
}

int hp_feed_epoch(struct hp_feed *f, int epoch, long j0)
{
    const long g0 = (long)epoch * f->n.my_mb + j0;
    int rc = 0;

    if (!(f->c.mode & HP_FEED_INPUT))
        return 0;
    if (f->text) { /* no order to build: a sequence is a function of (seed, epoch, index) */
        f->epoch = epoch;
        f->ord_ep[epoch & 1] = epoch;
        return 0;
    }
    pthread_mutex_lock(&f->mu);
    f->epoch = epoch;
    f->skipped_epoch = 0;
    if (f->ord_ep[epoch & 1] == epoch && f->nth && coming(f, g0)) {
        f->end_j = lookahead_end(f); /* looked ahead to it already: go on */
        pthread_cond_broadcast(&f->work);
        pthread_mutex_unlock(&f->mu);
        return 0;
    }
    f->end_j = 0;
    rc = wait_until(f, idle, 0); /* nobody reads an order now */
    pthread_mutex_unlock(&f->mu);
    if (!rc && f->ord_ep[epoch & 1] != epoch) {
        f->ord_ep[epoch & 1] = -1;
        rc = make_order(f, epoch, f->ord[epoch & 1]);
        f->ord_ep[epoch & 1] = rc ? -1 : epoch;
    }
    if (rc)
        return rc;
    if (f->src->ops->begin)
        f->src->ops->begin(f->src, HP_SPLIT_TRAIN, f->ord[epoch & 1] + j0 * f->c.batch,
                           (f->n.my_mb - j0) * f->c.batch);
    pthread_mutex_lock(&f->mu);
    rc = restart(f, g0);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* ---- asking ---- */

/* A prepared minibatch's failures: an error (stop), or each failed sample replaced by the
 * batch's first good one (skip) and counted; too many is an error. */
static int failures(struct hp_feed *f, struct slot *s, const char *what)
{
    const int b = f->c.batch;
    int good = -1;

    if (!s->bad)
        return 0;
    if (s->fatal) {
        hp_error("data: %s", s->err);
        return -HP_EDATA;
    }
    if (!f->c.skip_errors) {
        hp_error("data: %s (--data-on-error skip skips such samples)", s->err);
        return -HP_EDATA;
    }
    for (int i = 0; i < b && good < 0; i++)
        if (!s->failed[i])
            good = i;
    if (good < 0) {
        hp_error("data: every sample of %s failed, the first: %s", what, s->err);
        return -HP_EDATA;
    }
    for (int i = 0; i < b; i++)
        if (s->failed[i]) {
            memcpy(s->x + (size_t)i * f->sample_floats, s->x + (size_t)good * f->sample_floats,
                   f->sample_floats * sizeof(float));
            s->lab[i] = s->lab[good];
        }
    f->skipped += s->bad;
    if (s == &f->test)
        return 0;
    f->skipped_epoch += s->bad;
    const double share = (double)f->skipped_epoch / ((double)f->n.my_mb * b);
    if (share > f->c.error_limit) {
        hp_error("data: %ld of the %ld samples this input rank reads an epoch could not be "
                 "decoded, more than --data-error-limit %g; the last: %s",
                 f->skipped_epoch, f->n.my_mb * b, f->c.error_limit, s->err);
        return -HP_EDATA;
    }
    return 0;
}

/* With no threads: the slot's minibatch (or the test batch) prepared here. */
static void prepare_here(struct hp_feed *f, struct slot *s)
{
    pthread_mutex_lock(&f->mu);
    s->done = s->bad = s->fatal = 0;
    pthread_mutex_unlock(&f->mu);
    for (int i = 0; i < f->c.batch; i++)
        prepare_item(f, f->scr[0], s, i);
}

/* ---- text: sequences (text.h) ---- */

/* Sequence `id` (training: of epoch `epoch`; else validation window `id`) as sample i of
 * slot s: its T inputs as floats (token ids are exact in a float up to 2^24) and its T
 * targets as labels. */
static int text_sample(struct hp_feed *f, int train, int epoch, long id, struct slot *s, int i)
{
    const int T = f->positions;
    int rc = train ? hp_text_train_seq(f->text, f->c.seed, epoch, id, f->tok)
                   : hp_text_val_seq(f->text, id, f->tok);

    if (rc)
        return rc;
    for (int t = 0; t < T; t++)
        s->x[(size_t)i * T + t] = (float)f->tok[t];
    memcpy(s->lab + (size_t)i * T, f->tok + 1, (size_t)T * sizeof(int32_t));
    f->decoded++;
    return 0;
}

/* The VW's minibatch j of the epoch: the job's minibatch m = j V + v of hetpipe train's
 * order, sequences m B .. m B + B - 1 (each a pure function of (seed, epoch, index)). */
static int text_train(struct hp_feed *f, long j)
{
    const long m = j * f->c.nvws + f->c.v;
    int rc = 0;

    for (int i = 0; i < f->c.batch && !rc; i++)
        rc = text_sample(f, 1, f->epoch, m * f->c.batch + i, &f->q[0], i);
    return rc;
}

int hp_feed_train(struct hp_feed *f, long j, const float **x, int32_t *lab, double *wait_s)
{
    const double t0 = hp_now_s();
    const long g = (long)f->epoch * f->n.my_mb + j; /* counted over epochs, as the slots */
    struct slot *s = &f->q[g % f->nq];
    int rc = 0;

    if (j < 0 || j >= f->n.my_mb || !(f->c.mode & HP_FEED_INPUT) ||
        f->ord_ep[f->epoch & 1] != f->epoch)
        return -HP_EINVAL;
    if (f->text) {
        rc = text_train(f, j);
        *x = s->x;
        memcpy(lab, s->lab, (size_t)f->c.batch * f->positions * sizeof(int32_t));
        *wait_s = hp_now_s() - t0;
        f->wait_s += *wait_s;
        f->asks++;
        return rc;
    }
    pthread_mutex_lock(&f->mu);
    if (f->given >= 0 && f->given != g)
        f->q[f->given % f->nq].j = -1; /* released: the pool may fill it */
    f->given = -1;
    if (!f->nth) {
        s->j = g;
        pthread_mutex_unlock(&f->mu);
        prepare_here(f, s);
        pthread_mutex_lock(&f->mu);
    } else {
        int depth = 0;
        for (int k = 0; k < f->nq; k++)
            depth += f->q[k].j >= g && f->q[k].done == f->c.batch;
        f->depth_sum += depth;
        if (!coming(f, g))
            rc = restart(f, g); /* not on its way: the order restarts there */
        pthread_cond_broadcast(&f->work);
        if (!rc)
            rc = wait_until(f, slot_ready, g);
        if (rc)
            hp_error("data: no minibatch %ld of epoch %d from %s in %d s (%d threads)", j,
                     f->epoch + 1, f->what, f->c.timeout_ms / 1000, f->nth);
    }
    f->asks++;
    f->given = g;
    pthread_mutex_unlock(&f->mu);
    if (!rc) {
        char what[64];
        snprintf(what, sizeof(what), "minibatch %ld", j);
        rc = failures(f, s, what);
    }
    if (!rc) {
        *x = s->x;
        memcpy(lab, s->lab, (size_t)f->c.batch * sizeof(int32_t));
    }
    *wait_s = hp_now_s() - t0;
    f->wait_s += *wait_s;
    if (f->fresh)
        f->wait_start_s += *wait_s;
    f->fresh = 0;
    return rc;
}

int hp_feed_test(struct hp_feed *f, int b, const float **x, int32_t *lab, int32_t *count)
{
    const int bs = f->c.batch;
    const int m = f->n.ntest - b * bs < bs ? f->n.ntest - b * bs : bs;
    int rc = 0;

    if (!(f->c.mode & HP_FEED_TEST) || !(f->c.mode & HP_FEED_INPUT) || b < 0 ||
        b >= f->n.test_batches)
        return -HP_EINVAL;
    for (int i = 0; i < bs; i++)
        f->test_ids[i] = (long)b * bs + (i < m ? i : 0);
    if (f->text) {
        for (int i = 0; i < bs && !rc; i++)
            rc = text_sample(f, 0, 0, f->test_ids[i], &f->test, i);
    } else if (!f->nth) {
        prepare_here(f, &f->test);
    } else {
        pthread_mutex_lock(&f->mu);
        f->test.done = f->test.bad = f->test.fatal = 0;
        f->test_i = 0;
        pthread_cond_broadcast(&f->work);
        rc = wait_until(f, test_ready, 0);
        if (rc) {
            f->test_i = bs; /* no more of it (a late thread finishes its item) */
            hp_error("data: no validation batch %d from %s in %d s", b, f->what,
                     f->c.timeout_ms / 1000);
        }
        pthread_mutex_unlock(&f->mu);
    }
    if (!rc) {
        char what[64];
        snprintf(what, sizeof(what), "validation batch %d", b);
        rc = failures(f, &f->test, what);
    }
    if (rc)
        return rc;
    *x = f->test.x;
    memcpy(lab, f->test.lab, (size_t)bs * f->positions * sizeof(int32_t));
    *count = m;
    return 0;
}

/* ---- opening ---- */

/* The data set against the model: classes, and an IDX set's shape, an image set's channels. */
static int check_model(const struct hp_feed *f)
{
    const struct hp_model *m = f->c.model;
    const struct hp_source *s = f->src;

    if (s->nclasses != m->classes) {
        hp_error("model '%s' has %d classes, but the data set at %s has %d: give --data a data "
                 "set of the model's classes, or a model made for it",
                 m->name, m->classes, s->root, s->nclasses);
        return -HP_EDATA;
    }
    if (!s->encoded && (s->c != m->input.c || s->h != m->input.h || s->w != m->input.w)) {
        hp_error("model '%s' takes inputs of %dx%dx%d, but the samples of the data set at %s "
                 "are %dx%dx%d (not resized: IDX samples are used as they are)",
                 m->name, m->input.c, m->input.h, m->input.w, s->root, s->c, s->h, s->w);
        return -HP_EDATA;
    }
    if (s->encoded && m->input.c != 1 && m->input.c != 3) {
        hp_error("model '%s' takes %d channels; images give 1 (grey) or 3 (RGB)", m->name,
                 m->input.c);
        return -HP_EDATA;
    }
    return 0;
}

/* Decoding threads: --data-threads, else the cores this process may run on. */
static int pool_size(const struct hp_feed *f)
{
    cpu_set_t set;

    if (!f->src->encoded)
        return 0; /* IDX: a copy per sample, in the asking thread */
    if (f->c.threads > 0)
        return f->c.threads;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return 1;
}

static int slot_alloc(struct slot *s, int batch, size_t floats, int positions)
{
    s->j = -1;
    s->x = malloc((size_t)batch * floats * sizeof(float));
    s->lab = calloc((size_t)batch * positions, sizeof(int32_t));
    s->failed = calloc((size_t)batch, 1);
    return s->x && s->lab && s->failed ? 0 : -HP_ENOMEM;
}

/* The input's buffers and threads. */
static int input_setup(struct hp_feed *f)
{
    const int nscr = f->nth ? f->nth : 1;
    int rc = 0;

    f->nq = f->nth ? f->c.queue : 1;
    f->q = calloc((size_t)f->nq, sizeof(*f->q));
    const size_t ord = f->text ? 1 : (size_t)(f->n.my_mb * f->c.batch); /* text: no order */
    f->ord[0] = malloc(ord * sizeof(long));
    f->ord[1] = malloc(ord * sizeof(long));
    f->test_ids = malloc((size_t)f->c.batch * sizeof(long));
    f->scr = calloc((size_t)nscr, sizeof(*f->scr));
    f->th = calloc((size_t)nscr, sizeof(*f->th));
    if (!f->q || !f->ord[0] || !f->ord[1] || !f->test_ids || !f->scr || !f->th)
        return -HP_ENOMEM;
    for (int k = 0; k < f->nq && !rc; k++)
        rc = slot_alloc(&f->q[k], f->c.batch, f->sample_floats, f->positions);
    if (!rc && (f->c.mode & HP_FEED_TEST))
        rc = slot_alloc(&f->test, f->c.batch, f->sample_floats, f->positions);
    for (int t = 0; t < nscr && !rc; t++)
        rc = hp_image_scratch_create(&f->scr[t]);
    for (int t = 0; t < f->nth && !rc; t++) {
        struct worker_arg *a = malloc(sizeof(*a));
        if (!a)
            return -HP_ENOMEM;
        *a = (struct worker_arg){f, t};
        if (pthread_create(&f->th[t], NULL, pool_thread, a)) {
            free(a);
            hp_error("data: cannot start decoding thread %d of %d", t + 1, f->nth);
            return -HP_ENOMEM;
        }
        f->started++;
    }
    return rc;
}

static void transforms(struct hp_feed *f)
{
    const struct hp_shape in = f->c.model->input;
    struct hp_image_tf tf = {
        .c = in.c, .h = in.h, .w = in.w, .aug = f->c.augment ? HP_AUG_NONE : HP_AUG_STANDARD};

    hp_image_norm_defaults(in.c, tf.mean, tf.std);
    f->tf_train = tf;
    f->tf_train.train = 1;
    f->tf_eval = tf;
}

/* A text model's corpus (text.h): --data, $HETPIPE_DATA, else HP_TEXT_DEFAULT_DIR; its
 * sequences are the samples. */
static int text_open(struct hp_feed *f)
{
    const struct hp_feed_config *c = &f->c;
    const char *dir = hp_data_dir_or(c->dir, HP_TEXT_DEFAULT_DIR);
    int rc =
        hp_text_open(dir, f->positions, c->model->classes, (c->mode & HP_FEED_TEST) != 0, &f->text);
    if (rc)
        return rc;
    const struct hp_text_counts *tn = hp_text_n(f->text);
    rc = hp_feed_counts(tn->nseq[HP_TEXT_TRAIN], tn->nseq[HP_TEXT_VAL], c->train_limit,
                        c->test_limit, c->batch, c->nvws, &f->n);
    f->n.text = hp_text_kind(f->text) == HP_TEXT_BYTES ? HP_FEED_BYTES : HP_FEED_TOKENS;
    f->sample_floats = (size_t)f->positions;
    snprintf(f->what, sizeof(f->what), "%s", hp_text_describe(f->text));
    f->tok = malloc(((size_t)f->positions + 1) * sizeof(int32_t));
    return rc ? rc : f->tok ? 0 : -HP_ENOMEM;
}

int hp_feed_open(const struct hp_feed_config *c, struct hp_feed **out)
{
    struct hp_feed *f = calloc(1, sizeof(*f));
    int rc;

    if (!f)
        return -HP_ENOMEM;
    f->c = *c;
    f->given = -1;
    f->ord_ep[0] = f->ord_ep[1] = -1;
    f->test_i = c->batch;
    f->test.done = c->batch;
    if (f->c.timeout_ms <= 0)
        f->c.timeout_ms = 600000;
    pthread_mutex_init(&f->mu, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&f->work, &ca);
        pthread_cond_init(&f->ready, &ca);
        pthread_condattr_destroy(&ca);
    }
    f->positions = hp_model_positions(c->model);
    if (c->model->positions > 0)
        rc = text_open(f);
    else
        rc = hp_source_open(c->dir, c->model->dataset, (c->mode & HP_FEED_TEST) != 0, &f->src);
    if (!rc && f->src)
        rc = check_model(f);
    if (!rc && f->src)
        rc = hp_feed_counts(f->src->n[HP_SPLIT_TRAIN], f->src->n[HP_SPLIT_VAL], c->train_limit,
                            c->test_limit, c->batch, c->nvws, &f->n);
    if (!rc && f->src) {
        f->shards = f->src->kind == HP_SOURCE_SHARDS;
        f->sample_floats = hp_shape_size(c->model->input);
        snprintf(f->what, sizeof(f->what), "%s %s", hp_source_kind_name(f->src), f->src->root);
        transforms(f);
        f->nth = pool_size(f);
    }
    if (!rc && (c->mode & HP_FEED_INPUT))
        rc = input_setup(f);
    if (rc) {
        hp_feed_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

void hp_feed_close(struct hp_feed *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->quit = 1;
    pthread_cond_broadcast(&f->work);
    pthread_mutex_unlock(&f->mu);
    for (int t = 0; t < f->started; t++)
        pthread_join(f->th[t], NULL);
    for (int k = 0; k < f->nq && f->q; k++) {
        free(f->q[k].x);
        free(f->q[k].lab);
        free(f->q[k].failed);
    }
    free(f->test.x);
    free(f->test.lab);
    free(f->test.failed);
    for (int t = 0; f->scr && t < (f->nth ? f->nth : 1); t++)
        hp_image_scratch_free(f->scr[t]);
    hp_source_close(f->src);
    hp_text_close(f->text);
    free(f->tok);
    pthread_cond_destroy(&f->work);
    pthread_cond_destroy(&f->ready);
    pthread_mutex_destroy(&f->mu);
    free(f->q);
    free(f->ord[0]);
    free(f->ord[1]);
    free(f->test_ids);
    free(f->scr);
    free(f->th);
    free(f);
}

void hp_feed_quality(const struct hp_feed_counts *n, double loss, double acc, char *buf, size_t len)
{
    if (!n->text)
        snprintf(buf, len, "loss %.4f acc %.2f%%", loss, 100.0 * acc);
    else if (n->text == HP_FEED_BYTES)
        snprintf(buf, len, "loss %.4f ppl %.2f bpb %.3f", loss, hp_text_perplexity(loss),
                 hp_text_bits_per_byte(loss, 1.0));
    else
        snprintf(buf, len, "loss %.4f ppl %.2f", loss, hp_text_perplexity(loss));
}

const char *hp_feed_metrics_header(const struct hp_feed_counts *n)
{
    return n->text ? HP_METRICS_HEADER_TEXT : HP_METRICS_HEADER;
}

void hp_feed_quality_csv(const struct hp_feed_counts *n, double loss, double acc, char *buf,
                         size_t len)
{
    if (!n->text)
        snprintf(buf, len, "%.6f,%.6f", loss, acc);
    else if (n->text == HP_FEED_BYTES)
        snprintf(buf, len, "%.6f,%.4f,%.6f", loss, hp_text_perplexity(loss),
                 hp_text_bits_per_byte(loss, 1.0));
    else
        snprintf(buf, len, "%.6f,%.4f,", loss, hp_text_perplexity(loss));
}

const char *hp_feed_rate_unit(const struct hp_feed_counts *n)
{
    return n->text ? "tok/s" : "img/s";
}

const struct hp_feed_counts *hp_feed_n(const struct hp_feed *f)
{
    return &f->n;
}

const char *hp_feed_describe(const struct hp_feed *f)
{
    return f->what;
}

void hp_feed_get_stats(const struct hp_feed *f, struct hp_feed_stats *out)
{
    *out = (struct hp_feed_stats){0};
    if (!f || !(f->c.mode & HP_FEED_INPUT))
        return;
    pthread_mutex_lock((pthread_mutex_t *)&f->mu);
    *out = (struct hp_feed_stats){.threads = f->nth,
                                  .queue = f->nq,
                                  .decoded = f->decoded,
                                  .skipped = f->skipped,
                                  .decode_s = f->decode_s,
                                  .wait_s = f->wait_s,
                                  .wait_start_s = f->wait_start_s,
                                  .depth_mean = f->asks ? (double)f->depth_sum / f->asks : 0,
                                  .asks = f->asks};
    pthread_mutex_unlock((pthread_mutex_t *)&f->mu);
}

static double process_cpu_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int hp_feed_bench(const struct hp_feed_config *c, long samples, double *images_per_s,
                  double *wall_s, double *cpu_s, struct hp_feed_stats *st)
{
    struct hp_feed_config cc = *c;
    struct hp_feed *f;
    int32_t *lab = malloc((size_t)c->batch * hp_model_positions(c->model) * sizeof(int32_t));
    long done = 0;
    int rc;

    cc.mode = HP_FEED_INPUT;
    cc.nvws = 1;
    cc.v = 0;
    if (!lab)
        return -HP_ENOMEM;
    rc = hp_feed_open(&cc, &f);
    if (rc) {
        free(lab);
        return rc;
    }
    const double t0 = hp_now_s(), c0 = process_cpu_s();
    for (int e = 0; !rc && done < samples; e++) {
        rc = hp_feed_epoch(f, e, 0);
        for (long j = 0; !rc && j < f->n.my_mb && done < samples; j++) {
            const float *x;
            double w;
            rc = hp_feed_train(f, j, &x, lab, &w);
            done += c->batch;
        }
    }
    *wall_s = hp_now_s() - t0;
    *cpu_s = process_cpu_s() - c0;
    *images_per_s = *wall_s > 0 ? (double)done / *wall_s : 0;
    hp_feed_get_stats(f, st);
    hp_feed_close(f);
    free(lab);
    return rc;
}
