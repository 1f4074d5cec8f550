/* torch_ref.c - one side of the PyTorch cross-check (tests/cli/torch_equiv.py is the other):
 * trains the CNN (etc/models/cnn.ini) for N steps on the CPU backend at minibatch 64 and
 * constant learning rate 0.01 (momentum 0.9, weight decay 5e-4), writing into DIR:
 *   params0.bin   the initial parameters, float32 in hetpipe's layout (= PyTorch's order)
 *   indices.bin   the training-sample indices of every step, int32 [N, 64]
 *   losses.txt    the mean loss of every step
 *   params1.bin   the parameters after N steps
 * With "adamw" as third argument, the steps are AdamW's instead (lr 1e-3, betas 0.9 and 0.95,
 * eps 1e-8, decoupled weight decay 0.1 on the conv and linear weights only), after clipping
 * the gradients to global norm 1 (hp_net_grad_sumsq, hp_net_clip_grads).
 * Usage: torch_ref DIR [N] [sgd|adamw]
 */
#include "backend.h"
#include "data.h"
#include "model.h"
#include "net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 64

static int write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        perror(path);
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    const int steps = argc > 2 ? atoi(argv[2]) : 20;
    struct hp_dataset train = {0};
    struct hp_model *m = NULL;
    struct hp_backend *be = NULL;
    struct hp_net *net = NULL;
    const int adamw = argc > 3 && strcmp(argv[3], "adamw") == 0;
    const struct hp_net_config cfg = {.batch = BATCH,
                                      .nslots = 1,
                                      .need_input_grad = 0,
                                      .optimizer = adamw ? HP_OPTIMIZER_ADAMW : HP_OPTIMIZER_SGD};
    char path[4096];
    FILE *lf;

    hp_backend_cpu_set_threads(1);
    if (steps <= 0 || hp_model_load("cnn", &m) || hp_dataset_load_fashion_mnist(NULL, 1, &train) ||
        hp_backend_cpu_create(&be) || hp_net_create(be, m, 0, m->nunits, &cfg, &net) ||
        hp_net_init_params(net, 1))
        return 1;
    const size_t np = hp_net_nparams(net);
    int32_t *idx = malloc((size_t)steps * BATCH * sizeof(int32_t)), lab[BATCH];
    int sel[BATCH];
    if (!idx)
        return 1;
    for (int i = 0; i < steps * BATCH; i++)
        idx[i] = (int32_t)(((long)i * 7919 + 13) % train.n);
    if (write_file(dir, "params0.bin", hp_net_params(net), np * sizeof(float)) ||
        write_file(dir, "indices.bin", idx, (size_t)steps * BATCH * sizeof(int32_t)))
        return 1;
    snprintf(path, sizeof(path), "%s/losses.txt", dir);
    lf = fopen(path, "w");
    if (!lf)
        return 1;
    for (int s = 0; s < steps; s++) {
        double l;
        int c;
        for (int i = 0; i < BATCH; i++)
            sel[i] = idx[s * BATCH + i];
        hp_dataset_gather(&train, sel, BATCH, hp_net_input(net, 0), lab);
        if (hp_net_forward(net, 0, 1, (uint64_t)s) || hp_net_loss(net, 0, lab, BATCH, 1, &l, &c) ||
            hp_net_backward(net, 0))
            return 1;
        if (adamw) {
            const struct hp_adamw_desc d = {.lr = 1e-3f,
                                            .wd = 0.1f,
                                            .beta1 = 0.9f,
                                            .beta2 = 0.95f,
                                            .eps = 1e-8f,
                                            .step = s + 1};
            double sumsq;
            if (hp_net_grad_sumsq(net, &sumsq) || hp_net_clip_grads(net, sqrt(sumsq), 1.0) ||
                hp_net_adamw(net, &d))
                return 1;
        } else if (hp_net_sgd(net, 0.01f, 0.9f, 5e-4f)) {
            return 1;
        }
        fprintf(lf, "%.9g\n", l / BATCH);
    }
    fclose(lf);
    if (write_file(dir, "params1.bin", hp_net_params(net), np * sizeof(float)))
        return 1;
    printf("torch_ref: %d %s steps, %zu parameters written to %s\n", steps, adamw ? "AdamW" : "SGD",
           np, dir);
    free(idx);
    hp_net_destroy(net);
    hp_backend_destroy(be);
    hp_model_destroy(m);
    hp_dataset_release(&train);
    return 0;
}
