/* train.c - the single-process training loop. */
#include "train.h"
#include "clock.h"

#include "backend.h"
#include "feed.h"
#include "error.h"
#include "log.h"
#include "lrsched.h"
#include "output.h"
#include "model.h"
#include "net.h"
#include "plan.h"
#include "rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Evaluate on the feed's validation batches (the last one padded by repeating samples,
 * which are not counted). */
static int evaluate(struct hp_net *net, struct hp_backend *be, struct hp_feed *feed,
                    size_t in_floats, int positions, int32_t *hlab, double *loss, double *acc)
{
    const struct hp_feed_counts *n = hp_feed_n(feed);
    double lsum = 0.0;
    long correct = 0;
    int rc = 0;

    for (int b = 0; b < n->test_batches; b++) {
        const float *x;
        int32_t m;
        double l;
        int c;
        rc = hp_feed_test(feed, b, &x, hlab, &m);
        if (!rc)
            rc = be->ops->upload(be, hp_net_input(net, 0), x, in_floats * sizeof(float));
        if (!rc)
            rc = hp_net_forward(net, 0, 0, 0);
        if (!rc)
            rc = hp_net_loss(net, 0, hlab, m, 0, &l, &c);
        if (rc)
            return rc;
        lsum += l;
        correct += c;
    }
    const double npos = (double)n->ntest * positions;
    *loss = lsum / npos;
    *acc = (double)correct / npos;
    return 0;
}

/* One training run's state. */
struct trainer {
    const struct hp_options *o;
    float lr, momentum, weight_decay; /* as the SGD step takes them (AdamW: lr, decay) */
    struct hp_feed *feed;
    struct hp_model *model;
    struct hp_backend *be;
    struct hp_net *net;
    FILE *csv, *slog;
    int32_t *hlab;
    int ntrain, steps_per_epoch, positions; /* positions: labels a sample (text: T) */
    long total_steps, step;
    size_t in_floats;
    double t_train;
};

static FILE *open_csv(const char *path, const char *what, const char *header, int *rc)
{
    FILE *f = hp_out_open(path, what, 0666);

    if (!f) {
        *rc = -HP_EIO;
        return NULL;
    }
    fprintf(f, "%s\n", header);
    return f;
}

/* The model, its data (feed.h), the net and every buffer, planned up front. */
static int trainer_setup(struct trainer *t)
{
    const struct hp_options *o = t->o;
    const struct hp_model *m;
    int rc = hp_model_load(o->model, &t->model);

    if (rc)
        return rc;
    m = t->model;
    const struct hp_feed_config fc = {.dir = o->data,
                                      .model = m,
                                      .mode = HP_FEED_INPUT | HP_FEED_TEST,
                                      .batch = (int)o->batch,
                                      .nvws = 1,
                                      .train_limit = o->train_limit,
                                      .test_limit = o->test_limit,
                                      .seed = (uint64_t)o->seed,
                                      .threads = (int)o->data_threads,
                                      .queue = (int)o->data_queue,
                                      .augment = o->data_augment,
                                      .skip_errors = o->data_on_error == 1,
                                      .error_limit = o->data_error_limit,
                                      .epochs = (int)o->epochs};
    if ((rc = hp_feed_open(&fc, &t->feed)) ||
        (rc = hp_backend_create(hp_opt_word(HP_OPT_DEVICE, o->device), &t->be)))
        return rc;
    const struct hp_net_config cfg = {.batch = (int)o->batch,
                                      .nslots = 1,
                                      .need_input_grad = 0,
                                      .recompute = o->recompute == HP_RECOMPUTE_ALWAYS,
                                      .optimizer = (int)o->optimizer};
    if ((rc = hp_net_create(t->be, m, 0, m->nunits, &cfg, &t->net)) ||
        (rc = hp_net_init_params(t->net, (uint64_t)o->seed)))
        return rc;
    t->ntrain = hp_feed_n(t->feed)->ntrain;
    t->steps_per_epoch = (int)hp_feed_n(t->feed)->total_mb;
    t->total_steps = (long)t->steps_per_epoch * o->epochs;
    t->in_floats = (size_t)o->batch * hp_shape_size(m->input);
    t->positions = hp_model_positions(m);
    t->hlab = malloc((size_t)o->batch * t->positions * sizeof(int32_t));
    if (!t->hlab)
        return -HP_ENOMEM;
    if (o->metrics && !(t->csv = open_csv(o->metrics, "metrics file",
                                          hp_feed_metrics_header(hp_feed_n(t->feed)), &rc)))
        return rc;
    if (o->step_log && !(t->slog = open_csv(o->step_log, "step log", "step,loss", &rc)))
        return rc;
    return 0;
}

/* The update after a backward pass: a tied head's and its embed's gradients summed, the
 * gradients clipped to the global norm --clip (the net's own: one net holds every
 * parameter), then an SGD or AdamW step (the update's count, AdamW's bias-correction
 * exponent, is step + 1). */
static int update(struct trainer *t, float lr)
{
    const struct hp_options *o = t->o;
    int rc = hp_net_tie_sum(t->net, NULL);

    if (!rc && o->clip > 0.0) {
        double sumsq;
        rc = hp_net_grad_sumsq(t->net, &sumsq);
        if (!rc)
            rc = hp_net_clip_grads(t->net, sqrt(sumsq), o->clip);
    }
    if (rc || o->optimizer != HP_OPTIMIZER_ADAMW)
        return rc ? rc : hp_net_sgd(t->net, lr, t->momentum, t->weight_decay);
    const struct hp_adamw_desc d = {.lr = lr,
                                    .wd = t->weight_decay,
                                    .beta1 = (float)o->beta1,
                                    .beta2 = (float)o->beta2,
                                    .eps = (float)o->eps,
                                    .step = t->step + 1};
    return hp_net_adamw(t->net, &d);
}

/* One training step: minibatch s of the epoch's permutation. */
static int train_step(struct trainer *t, int s, double *l, int *c)
{
    const struct hp_options *o = t->o;
    const int batch = (int)o->batch;
    const struct hp_lrsched sched = {.lr = t->lr,
                                     .floor = 0.0,
                                     .warmup = o->lr_warmup,
                                     .total = t->total_steps,
                                     .cosine = o->schedule == HP_SCHEDULE_COSINE};
    const float lr = (float)hp_lrsched_at(&sched, t->step);
    int rc;

    const float *x;
    double waited;
    rc = hp_feed_train(t->feed, s, &x, t->hlab, &waited);
    if (!rc)
        rc = t->be->ops->upload(t->be, hp_net_input(t->net, 0), x, t->in_floats * sizeof(float));
    if (!rc)
        rc = hp_net_forward(t->net, 0, 1,
                            hp_rng_derive((uint64_t)o->seed, 0x2000000 + (uint64_t)t->step));
    if (!rc)
        rc = hp_net_loss(t->net, 0, t->hlab, batch, 1, l, c);
    if (!rc)
        rc = hp_net_backward(t->net, 0);
    if (!rc)
        rc = update(t, lr);
    return rc;
}

/* One epoch of training, with a progress line (and a metrics row) every log_every steps. */
static int train_epoch(struct trainer *t, int epoch, struct hp_train_result *res)
{
    const struct hp_options *o = t->o;
    double lsum = 0.0, t_int = hp_now_s();
    long csum = 0, nint = 0;

    int rc0 = hp_feed_epoch(t->feed, epoch, 0);
    if (rc0)
        return rc0;
    for (int s = 0; s < t->steps_per_epoch; s++, t->step++) {
        const double t0 = hp_now_s();
        double l;
        int c, rc = train_step(t, s, &l, &c);
        if (rc)
            return rc;
        t->t_train += hp_now_s() - t0;
        lsum += l;
        csum += c;
        nint++;
        if (t->slog)
            fprintf(t->slog, "%ld,%.9e\n", t->step, l / ((double)o->batch * t->positions));
        if (!isfinite(l)) {
            hp_error("loss is %g at step %ld: training diverged (lower --lr)", l, t->step);
            return -HP_ERANGE;
        }
        if ((o->log_every > 0 && (s + 1) % o->log_every == 0) || s + 1 == t->steps_per_epoch) {
            const double npos = (double)nint * o->batch * t->positions;
            const double ips = npos / (hp_now_s() - t_int);
            const double acc = (double)csum / npos;
            const struct hp_feed_counts *fc = hp_feed_n(t->feed);
            char q[160];
            res->last_loss = lsum / npos;
            hp_feed_quality(fc, res->last_loss, acc, q, sizeof(q));
            if (o->log_every > 0)
                printf("epoch %d/%ld step %d/%d %s %.0f %s\n", epoch + 1, o->epochs, s + 1,
                       t->steps_per_epoch, q, ips, hp_feed_rate_unit(fc));
            hp_feed_quality_csv(fc, res->last_loss, acc, q, sizeof(q));
            if (t->csv)
                fprintf(t->csv, "train,%d,%ld,%.3f,%s,%.1f\n", epoch + 1, t->step + 1, t->t_train,
                        q, ips);
            fflush(stdout);
            lsum = 0.0;
            csum = 0;
            nint = 0;
            t_int = hp_now_s();
        }
    }
    return 0;
}

/* The validation after an epoch: a line (images: "test loss .. accuracy ..", text:
 * "validation loss .. ppl .."), and a metrics row. */
static void report_test(struct trainer *t, int epoch, const struct hp_train_result *res)
{
    const struct hp_options *o = t->o;
    const struct hp_feed_counts *fc = hp_feed_n(t->feed);
    const double rate = (double)t->step * o->batch * t->positions / t->t_train;
    char q[160];

    if (fc->text) {
        hp_feed_quality(fc, res->test_loss, res->test_acc, q, sizeof(q));
        printf("epoch %d/%ld validation %s (%.1f s of training, %.0f tok/s)\n", epoch + 1,
               o->epochs, q, t->t_train, rate);
    } else {
        printf("epoch %d/%ld test loss %.4f accuracy %.2f%% (%.1f s of training, %.0f img/s)\n",
               epoch + 1, o->epochs, res->test_loss, 100.0 * res->test_acc, t->t_train, rate);
    }
    hp_feed_quality_csv(fc, res->test_loss, res->test_acc, q, sizeof(q));
    if (t->csv)
        fprintf(t->csv, "test,%d,%ld,%.3f,%s,\n", epoch + 1, t->step, t->t_train, q);
    fflush(stdout);
}

/* The final parameters: their hash, and the file --save-params names. */
static int finish(struct trainer *t, struct hp_train_result *res)
{
    const size_t np = hp_net_nparams(t->net);
    float *hp = malloc((np ? np : 1) * sizeof(float));
    int rc;

    if (!hp)
        return -HP_ENOMEM;
    rc = t->be->ops->download(t->be, hp, hp_net_params(t->net), np * sizeof(float));
    res->param_hash = hp_fnv1a(HP_FNV_OFFSET, hp, np * sizeof(float));
    if (!rc && t->o->save_params)
        rc = hp_save_floats(t->o->save_params, hp, np);
    free(hp);
    return rc;
}

/* Close an output (hp_out_close): rc, or -HP_EIO when it was 0 and the close failed. */
static int close_csv(FILE *f, int rc)
{
    if (hp_out_close(f, 1) && rc == 0)
        rc = -HP_EIO;
    return rc;
}

int hp_train_run(const struct hp_options *o, struct hp_train_result *res)
{
    struct trainer t = {.o = o,
                        .lr = (float)o->lr,
                        .momentum = (float)o->momentum,
                        .weight_decay = (float)o->weight_decay};
    int rc;

    memset(res, 0, sizeof(*res));
    rc = trainer_setup(&t);
    if (!rc) {
        printf("hetpipe train: model %s (%zu parameters, %d units) on %s, %ld epochs of %d "
               "steps, batch %ld, lr %g, seed %llu%s\n",
               t.model->name, t.model->nparams, t.model->nunits, t.be->name, o->epochs,
               t.steps_per_epoch, o->batch, t.lr, (unsigned long long)o->seed,
               o->optimizer == HP_OPTIMIZER_ADAMW ? ", adamw" : "");
        fflush(stdout);
    }
    for (int epoch = 0; epoch < o->epochs && !rc; epoch++) {
        rc = train_epoch(&t, epoch, res);
        if (!rc)
            rc = evaluate(t.net, t.be, t.feed, t.in_floats, t.positions, t.hlab, &res->test_loss,
                          &res->test_acc);
        if (rc)
            break;
        report_test(&t, epoch, res);
        fflush(stdout);
    }
    res->steps = t.step;
    res->seconds = t.t_train;
    res->images_per_s = t.t_train > 0 ? (double)t.step * o->batch / t.t_train : 0.0;
    res->tokens_per_s = res->images_per_s * t.positions;
    res->text = t.feed ? hp_feed_n(t.feed)->text : 0;
    if (!rc)
        rc = finish(&t, res);
    rc = close_csv(t.csv, rc);
    rc = close_csv(t.slog, rc);
    free(t.hlab);
    hp_net_destroy(t.net);
    hp_backend_destroy(t.be);
    hp_model_destroy(t.model);
    hp_feed_close(t.feed);
    return rc;
}
