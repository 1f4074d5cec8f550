/* train.c - the single-process training loop. */
#include "train.h"
#include "clock.h"

#include "backend.h"
#include "data.h"
#include "error.h"
#include "log.h"
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

/* Evaluate on `d` (first `limit` samples, 0 = all) in minibatches; the last one is padded
 * by repeating samples, which are not counted. */
static int evaluate(struct hp_net *net, struct hp_backend *be, const struct hp_dataset *d,
                    int limit, int batch, float *himg, int32_t *hlab, int *idx, double *loss,
                    double *acc)
{
    const int n = limit > 0 && limit < d->n ? limit : d->n;
    const size_t in_bytes = (size_t)batch * d->c * d->h * d->w * sizeof(float);
    double lsum = 0.0;
    long correct = 0;
    int rc;

    for (int s = 0; s < n; s += batch) {
        const int m = n - s < batch ? n - s : batch;
        double l;
        int c;
        for (int i = 0; i < batch; i++)
            idx[i] = s + (i < m ? i : 0);
        hp_dataset_gather(d, idx, batch, himg, hlab);
        rc = be->ops->upload(be, hp_net_input(net, 0), himg, in_bytes);
        if (!rc)
            rc = hp_net_forward(net, 0, 0, 0);
        if (!rc)
            rc = hp_net_loss(net, 0, hlab, m, 0, &l, &c);
        if (rc)
            return rc;
        lsum += l;
        correct += c;
    }
    *loss = lsum / n;
    *acc = (double)correct / n;
    return 0;
}

/* One training run's state. */
struct trainer {
    const struct hp_options *o;
    float lr, momentum, weight_decay; /* as the SGD step takes them */
    struct hp_dataset train, test;
    struct hp_model *model;
    struct hp_backend *be;
    struct hp_net *net;
    FILE *csv, *slog;
    float *himg;
    int32_t *hlab;
    int *perm, *idx;
    int ntrain, steps_per_epoch;
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
    fputs(header, f);
    return f;
}

/* The model (a Fashion-MNIST one), the data, the net and every buffer, planned up front. */
static int trainer_setup(struct trainer *t)
{
    const struct hp_options *o = t->o;
    const struct hp_model *m;
    int rc = hp_model_load(o->model, &t->model);

    if (rc)
        return rc;
    m = t->model;
    if (strcmp(m->dataset, "fashion-mnist") != 0 || m->input.c != 1 || m->input.h != 28 ||
        m->input.w != 28 || m->classes != 10) {
        hp_error("model '%s' is for data set '%s' with input %dx%dx%d; hetpipe train needs a "
                 "fashion-mnist model (1x28x28, 10 classes), e.g. cnn or mlp",
                 m->name, m->dataset, m->input.c, m->input.h, m->input.w);
        return -HP_EMODEL;
    }
    if ((rc = hp_dataset_load_fashion_mnist(o->data, 1, &t->train)) ||
        (rc = hp_dataset_load_fashion_mnist(o->data, 0, &t->test)) ||
        (rc = hp_backend_create(hp_opt_word(HP_OPT_DEVICE, o->device), &t->be)))
        return rc;
    const struct hp_net_config cfg = {.batch = (int)o->batch,
                                      .nslots = 1,
                                      .need_input_grad = 0,
                                      .recompute = o->recompute == HP_RECOMPUTE_ALWAYS};
    if ((rc = hp_net_create(t->be, m, 0, m->nunits, &cfg, &t->net)) ||
        (rc = hp_net_init_params(t->net, (uint64_t)o->seed)))
        return rc;
    t->ntrain =
        o->train_limit > 0 && o->train_limit < t->train.n ? (int)o->train_limit : t->train.n;
    t->steps_per_epoch = t->ntrain / (int)o->batch;
    t->total_steps = (long)t->steps_per_epoch * o->epochs;
    t->in_floats = (size_t)o->batch * t->train.c * t->train.h * t->train.w;
    if (t->steps_per_epoch == 0) {
        hp_error("minibatch %ld is larger than the %d training samples", o->batch, t->ntrain);
        return -HP_EINVAL;
    }
    t->himg = malloc(t->in_floats * sizeof(float));
    t->hlab = malloc((size_t)o->batch * sizeof(int32_t));
    t->perm = malloc((size_t)t->ntrain * sizeof(int));
    t->idx = malloc((size_t)o->batch * sizeof(int));
    if (!t->himg || !t->hlab || !t->perm || !t->idx)
        return -HP_ENOMEM;
    if (o->metrics &&
        !(t->csv = open_csv(o->metrics, "metrics file",
                            "split,epoch,step,seconds,loss,accuracy,images_per_s\n", &rc)))
        return rc;
    if (o->step_log && !(t->slog = open_csv(o->step_log, "step log", "step,loss\n", &rc)))
        return rc;
    return 0;
}

/* One training step: minibatch s of the epoch's permutation. */
static int train_step(struct trainer *t, int s, double *l, int *c)
{
    const struct hp_options *o = t->o;
    const int batch = (int)o->batch;
    const float lr =
        o->schedule == HP_SCHEDULE_COSINE
            ? (float)(0.5 * t->lr * (1.0 + cos(M_PI * (double)t->step / t->total_steps)))
            : t->lr;
    int rc;

    hp_dataset_gather(&t->train, t->perm + (size_t)s * batch, batch, t->himg, t->hlab);
    rc = t->be->ops->upload(t->be, hp_net_input(t->net, 0), t->himg, t->in_floats * sizeof(float));
    if (!rc)
        rc = hp_net_forward(t->net, 0, 1,
                            hp_rng_derive((uint64_t)o->seed, 0x2000000 + (uint64_t)t->step));
    if (!rc)
        rc = hp_net_loss(t->net, 0, t->hlab, batch, 1, l, c);
    if (!rc)
        rc = hp_net_backward(t->net, 0);
    if (!rc)
        rc = hp_net_sgd(t->net, lr, t->momentum, t->weight_decay);
    return rc;
}

/* One epoch of training, with a progress line (and a metrics row) every log_every steps. */
static int train_epoch(struct trainer *t, int epoch, struct hp_train_result *res)
{
    const struct hp_options *o = t->o;
    double lsum = 0.0, t_int = hp_now_s();
    long csum = 0, nint = 0;

    hp_permute(t->perm, t->ntrain, hp_rng_derive((uint64_t)o->seed, 0x1000 + (uint64_t)epoch));
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
            fprintf(t->slog, "%ld,%.9e\n", t->step, l / o->batch);
        if (!isfinite(l)) {
            hp_error("loss is %g at step %ld: training diverged (lower --lr)", l, t->step);
            return -HP_ERANGE;
        }
        if ((o->log_every > 0 && (s + 1) % o->log_every == 0) || s + 1 == t->steps_per_epoch) {
            const double ips = (double)nint * o->batch / (hp_now_s() - t_int);
            const double acc = (double)csum / ((double)nint * o->batch);
            res->last_loss = lsum / ((double)nint * o->batch);
            if (o->log_every > 0)
                printf("epoch %d/%ld step %d/%d loss %.4f acc %.2f%% %.0f img/s\n", epoch + 1,
                       o->epochs, s + 1, t->steps_per_epoch, res->last_loss, 100.0 * acc, ips);
            if (t->csv)
                fprintf(t->csv, "train,%d,%ld,%.3f,%.6f,%.6f,%.1f\n", epoch + 1, t->step + 1,
                        t->t_train, res->last_loss, acc, ips);
            fflush(stdout);
            lsum = 0.0;
            csum = 0;
            nint = 0;
            t_int = hp_now_s();
        }
    }
    return 0;
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
               "steps, batch %ld, lr %g, seed %llu\n",
               t.model->name, t.model->nparams, t.model->nunits, t.be->name, o->epochs,
               t.steps_per_epoch, o->batch, t.lr, (unsigned long long)o->seed);
        fflush(stdout);
    }
    for (int epoch = 0; epoch < o->epochs && !rc; epoch++) {
        rc = train_epoch(&t, epoch, res);
        if (!rc)
            rc = evaluate(t.net, t.be, &t.test, (int)o->test_limit, (int)o->batch, t.himg, t.hlab,
                          t.idx, &res->test_loss, &res->test_acc);
        if (rc)
            break;
        printf("epoch %d/%ld test loss %.4f accuracy %.2f%% (%.1f s of training, %.0f img/s)\n",
               epoch + 1, o->epochs, res->test_loss, 100.0 * res->test_acc, t.t_train,
               (double)t.step * o->batch / t.t_train);
        if (t.csv)
            fprintf(t.csv, "test,%d,%ld,%.3f,%.6f,%.6f,\n", epoch + 1, t.step, t.t_train,
                    res->test_loss, res->test_acc);
        fflush(stdout);
    }
    res->steps = t.step;
    res->seconds = t.t_train;
    res->images_per_s = t.t_train > 0 ? (double)t.step * o->batch / t.t_train : 0.0;
    if (!rc)
        rc = finish(&t, res);
    rc = close_csv(t.csv, rc);
    rc = close_csv(t.slog, rc);
    free(t.himg);
    free(t.hlab);
    free(t.perm);
    free(t.idx);
    hp_net_destroy(t.net);
    hp_backend_destroy(t.be);
    hp_model_destroy(t.model);
    hp_dataset_release(&t.train);
    hp_dataset_release(&t.test);
    return rc;
}
