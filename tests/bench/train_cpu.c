/* train_cpu.c - the CPU training benchmark, one BLAS thread, measured in one run:
 *
 *   1. OpenBLAS sgemm on 1024x1024x1024 (the ceiling of this core);
 *   2. training images/s of the CNN at minibatch 64 on real Fashion-MNIST (hp_train_run);
 *   3. GFLOP/s inside its conv and linear layers (per-op profile of training steps);
 *   4. that figure / sgemm's (target >= 0.5).
 *
 * Rounds alternate 1-3 so that noise from other tenants of the machine hits both; the best
 * round of each is reported. Prints key=value lines that tests/bench/train_cpu reads.
 */
#include "backend.h"
#include "clock.h"
#include "model.h"
#include "net.h"
#include "rng.h"
#include "train.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double sgemm_gflops(void)
{
    const int n = 1024, reps = 10;
    float *a = malloc((size_t)n * n * 4), *b = malloc((size_t)n * n * 4),
          *c = malloc((size_t)n * n * 4);
    double best = 0.0;

    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = hp_rng_uniform(1, i) - 0.5f;
        b[i] = hp_rng_uniform(2, i) - 0.5f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    for (int r = 0; r < reps; r++) {
        double t0 = hp_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                    n);
        double g = 2.0 * n * n * (double)n / (hp_now_s() - t0) / 1e9;
        if (g > best)
            best = g;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

/* GFLOP/s of conv + linear (forward and backward) over `steps` profiled training steps. */
static int layer_gflops(int steps, double *gflops, double *share)
{
    struct hp_backend *be = NULL;
    struct hp_model *m = NULL;
    struct hp_net *net = NULL;
    struct hp_net_profile prof;
    const struct hp_net_config cfg = {.batch = 64, .nslots = 1, .need_input_grad = 0};
    int32_t lab[64];
    int rc;

    if ((rc = hp_model_load("cnn", &m)) || (rc = hp_backend_cpu_create(&be)) ||
        (rc = hp_net_create(be, m, 0, m->nunits, &cfg, &net)) || (rc = hp_net_init_params(net, 1)))
        goto out;
    float *x = hp_net_input(net, 0);
    for (size_t i = 0; i < 64 * 784; i++)
        x[i] = 2.0f * hp_rng_uniform(3, i) - 1.0f;
    for (int i = 0; i < 64; i++)
        lab[i] = i % 10;
    memset(&prof, 0, sizeof(prof));
    for (int s = 0; s < steps + 2 && !rc; s++) {
        double l;
        int c;
        if (s == 2)
            hp_net_set_profile(net, &prof);
        rc = hp_net_forward(net, 0, 1, (uint64_t)s);
        if (!rc)
            rc = hp_net_loss(net, 0, lab, 64, 1, &l, &c);
        if (!rc)
            rc = hp_net_backward(net, 0);
        if (!rc)
            rc = hp_net_sgd(net, 0.01f, 0.9f, 0.0f);
    }
    double ts = 0, tf = 0, all = 0;
    for (int t = 0; t < HP_OP_NTYPES; t++) {
        all += prof.fwd_s[t] + prof.bwd_s[t];
        if (t == HP_OP_CONV || t == HP_OP_LINEAR) {
            ts += prof.fwd_s[t] + prof.bwd_s[t];
            tf += prof.fwd_flops[t] + prof.bwd_flops[t];
        }
    }
    *gflops = ts > 0 ? tf / ts / 1e9 : 0.0;
    *share = all > 0 ? ts / all : 0.0;
out:
    hp_net_destroy(net);
    hp_backend_destroy(be);
    hp_model_destroy(m);
    return rc;
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 3;
    double best_sgemm = 0, best_ips = 0, best_layer = 0, share = 0;
    double g = 0, sh = 0;

    hp_backend_cpu_set_threads(1);
    for (int r = 0; r < rounds; r++) {
        struct hp_options o;
        struct hp_train_result res;

        double s = sgemm_gflops();
        hp_options_init(&o, HP_CMD_TRAIN);
        o.model = "cnn";
        o.device = HP_DEVICE_CHOICE_CPU;
        o.epochs = 1;
        o.train_limit = 6400;
        o.test_limit = 64;
        o.log_every = 0;
        if (hp_train_run(&o, &res) || layer_gflops(30, &g, &sh)) {
            fprintf(stderr, "train_cpu: benchmark failed\n");
            return 1;
        }
        printf("round %d: sgemm %.1f GFLOP/s, cnn %.0f images/s, conv+linear %.1f GFLOP/s\n", r + 1,
               s, res.images_per_s, g);
        if (s > best_sgemm)
            best_sgemm = s;
        if (res.images_per_s > best_ips)
            best_ips = res.images_per_s;
        if (g > best_layer) {
            best_layer = g;
            share = sh;
        }
    }
    printf("sgemm_1024_gflops=%.1f\n", best_sgemm);
    printf("cnn_images_per_s=%.1f\n", best_ips);
    printf("conv_linear_gflops=%.1f\n", best_layer);
    printf("conv_linear_share_of_op_time=%.3f\n", share);
    printf("ratio_conv_linear_to_sgemm=%.3f\n", best_layer / best_sgemm);
    return 0;
}
