/* train.c - the single-process training loop. */
#include "train.h"
#include "clock.h"

#include "backend.h"
#include "data.h"
#include "error.h"
#include "log.h"
#include "model.h"
#include "net.h"
#include "rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void hp_train_opts_init(struct hp_train_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->model = "cnn";
    o->device = "auto";
    o->epochs = 5;
    o->batch = 64;
    o->lr = 0.05f;
    o->momentum = 0.9f;
    o->weight_decay = 5e-4f;
    o->cosine = 1;
    o->seed = 1;
    o->log_every = 100;
}

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

int hp_train_run(const struct hp_train_opts *o, struct hp_train_result *res)
{
    struct hp_dataset train = {0}, test = {0};
    struct hp_model *model = NULL;
    struct hp_backend *be = NULL;
    struct hp_net *net = NULL;
    FILE *csv = NULL, *slog = NULL;
    float *himg = NULL;
    int32_t *hlab = NULL;
    int *perm = NULL, *idx = NULL;
    double t_train = 0.0;
    long step = 0;
    int rc;

    memset(res, 0, sizeof(*res));
    rc = hp_model_load(o->model, &model);
    if (rc)
        goto out;
    if (strcmp(model->dataset, "fashion-mnist") != 0 || model->input.c != 1 ||
        model->input.h != 28 || model->input.w != 28 || model->classes != 10) {
        hp_error("model '%s' is for data set '%s' with input %dx%dx%d; hetpipe train needs a "
                 "fashion-mnist model (1x28x28, 10 classes), e.g. cnn or mlp",
                 model->name, model->dataset, model->input.c, model->input.h, model->input.w);
        rc = -HP_EMODEL;
        goto out;
    }
    rc = hp_dataset_load_fashion_mnist(o->data_dir, 1, &train);
    if (!rc)
        rc = hp_dataset_load_fashion_mnist(o->data_dir, 0, &test);
    if (rc)
        goto out;
    rc = hp_backend_create(o->device, &be);
    if (rc)
        goto out;

    const struct hp_net_config cfg = {.batch = o->batch, .nslots = 1, .need_input_grad = 0};
    rc = hp_net_create(be, model, 0, model->nunits, &cfg, &net);
    if (!rc)
        rc = hp_net_init_params(net, o->seed);
    if (rc)
        goto out;

    const int ntrain = o->train_limit > 0 && o->train_limit < train.n ? o->train_limit : train.n;
    const int steps_per_epoch = ntrain / o->batch;
    const long total_steps = (long)steps_per_epoch * o->epochs;
    const size_t in_floats = (size_t)o->batch * train.c * train.h * train.w;
    if (steps_per_epoch == 0) {
        hp_error("minibatch %d is larger than the %d training samples", o->batch, ntrain);
        rc = -HP_EINVAL;
        goto out;
    }
    himg = malloc(in_floats * sizeof(float));
    hlab = malloc((size_t)o->batch * sizeof(int32_t));
    perm = malloc((size_t)ntrain * sizeof(int));
    idx = malloc((size_t)o->batch * sizeof(int));
    if (!himg || !hlab || !perm || !idx) {
        rc = -HP_ENOMEM;
        goto out;
    }
    if (o->metrics) {
        csv = fopen(o->metrics, "w");
        if (!csv) {
            rc = -errno;
            hp_error("cannot write metrics file '%s': %s", o->metrics, hp_strerror(rc));
            goto out;
        }
        fprintf(csv, "split,epoch,step,seconds,loss,accuracy,images_per_s\n");
    }
    if (o->step_log) {
        slog = fopen(o->step_log, "w");
        if (!slog) {
            rc = -errno;
            hp_error("cannot write step log '%s': %s", o->step_log, hp_strerror(rc));
            goto out;
        }
        fprintf(slog, "step,loss\n");
    }
    printf("hetpipe train: model %s (%zu parameters, %d units) on %s, %d epochs of %d steps, "
           "batch %d, lr %g, seed %llu\n",
           model->name, model->nparams, model->nunits, be->name, o->epochs, steps_per_epoch,
           o->batch, o->lr, (unsigned long long)o->seed);
    fflush(stdout);

    for (int epoch = 0; epoch < o->epochs; epoch++) {
        double lsum = 0.0, t_int = hp_now_s();
        long csum = 0, nint = 0;

        hp_permute(perm, ntrain, hp_rng_derive(o->seed, 0x1000 + (uint64_t)epoch));
        for (int s = 0; s < steps_per_epoch; s++, step++) {
            const double t0 = hp_now_s();
            const float lr =
                o->cosine ? (float)(0.5 * o->lr * (1.0 + cos(M_PI * (double)step / total_steps)))
                          : o->lr;
            double l;
            int c;

            hp_dataset_gather(&train, perm + (size_t)s * o->batch, o->batch, himg, hlab);
            rc = be->ops->upload(be, hp_net_input(net, 0), himg, in_floats * sizeof(float));
            if (!rc)
                rc = hp_net_forward(net, 0, 1, hp_rng_derive(o->seed, 0x2000000 + (uint64_t)step));
            if (!rc)
                rc = hp_net_loss(net, 0, hlab, o->batch, 1, &l, &c);
            if (!rc)
                rc = hp_net_backward(net, 0);
            if (!rc)
                rc = hp_net_sgd(net, lr, o->momentum, o->weight_decay);
            if (rc)
                goto out;
            t_train += hp_now_s() - t0;
            lsum += l;
            csum += c;
            nint++;
            if (slog)
                fprintf(slog, "%ld,%.9e\n", step, l / o->batch);
            if (!isfinite(l)) {
                hp_error("loss is %g at step %ld: training diverged (lower --lr)", l, step);
                rc = -HP_ERANGE;
                goto out;
            }
            if ((o->log_every > 0 && (s + 1) % o->log_every == 0) || s + 1 == steps_per_epoch) {
                const double dt = hp_now_s() - t_int;
                const double ips = (double)nint * o->batch / dt;
                res->last_loss = lsum / ((double)nint * o->batch);
                if (o->log_every > 0)
                    printf("epoch %d/%d step %d/%d loss %.4f acc %.2f%% %.0f img/s\n", epoch + 1,
                           o->epochs, s + 1, steps_per_epoch, res->last_loss,
                           100.0 * (double)csum / ((double)nint * o->batch), ips);
                if (csv)
                    fprintf(csv, "train,%d,%ld,%.3f,%.6f,%.6f,%.1f\n", epoch + 1, step + 1, t_train,
                            res->last_loss, (double)csum / ((double)nint * o->batch), ips);
                fflush(stdout);
                lsum = 0.0;
                csum = 0;
                nint = 0;
                t_int = hp_now_s();
            }
        }
        rc = evaluate(net, be, &test, o->test_limit, o->batch, himg, hlab, idx, &res->test_loss,
                      &res->test_acc);
        if (rc)
            goto out;
        printf("epoch %d/%d test loss %.4f accuracy %.2f%% (%.1f s of training, %.0f img/s)\n",
               epoch + 1, o->epochs, res->test_loss, 100.0 * res->test_acc, t_train,
               (double)step * o->batch / t_train);
        if (csv)
            fprintf(csv, "test,%d,%ld,%.3f,%.6f,%.6f,\n", epoch + 1, step, t_train, res->test_loss,
                    res->test_acc);
        fflush(stdout);
    }

    res->steps = step;
    res->seconds = t_train;
    res->images_per_s = t_train > 0 ? (double)step * o->batch / t_train : 0.0;
    {
        const size_t np = hp_net_nparams(net);
        float *hp = malloc(np * sizeof(float));
        if (!hp) {
            rc = -HP_ENOMEM;
            goto out;
        }
        rc = be->ops->download(be, hp, hp_net_params(net), np * sizeof(float));
        res->param_hash = hp_fnv1a(HP_FNV_OFFSET, hp, np * sizeof(float));
        if (!rc && o->save_params)
            rc = hp_save_floats(o->save_params, hp, np);
        free(hp);
    }
out:
    if (csv && fclose(csv) != 0 && rc == 0) {
        rc = -errno;
        hp_error("cannot write metrics file '%s': %s", o->metrics, hp_strerror(rc));
    }
    if (slog && fclose(slog) != 0 && rc == 0) {
        rc = -errno;
        hp_error("cannot write step log '%s': %s", o->step_log, hp_strerror(rc));
    }
    free(himg);
    free(hlab);
    free(perm);
    free(idx);
    hp_net_destroy(net);
    hp_backend_destroy(be);
    hp_model_destroy(model);
    hp_dataset_release(&train);
    hp_dataset_release(&test);
    return rc;
}
