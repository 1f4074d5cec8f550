/* stage_mem.c - the memory model against memory really used, for one pipeline stage: units
 * [U0, U1) of MODEL at minibatch BATCH with NSLOTS minibatches in flight, allocated as a rank
 * allocates its stage (the net, and NSLOTS - 1 stashed versions of the weights, schedule.c),
 * then trained for two rounds of NSLOTS forward passes, NSLOTS backward passes (each with the
 * stashed weights of its forward) and an SGD step. Real memory is the backend's memory_used:
 * on the CPU the growth of the peak resident set over the resident set just before the net was
 * created; on a GPU the growth of the device's used memory. Predicted is the planner's
 * hp_cost_stage_memory (launcher/cost.c, a second implementation of net.c's layout).
 *
 * usage: bench_stage_mem MODEL BATCH U0 U1 NSLOTS RECOMPUTE(0|1) [DEVICE]   (from the
 * repository root; one stage per process, so that the peak is this stage's). Prints one line:
 * model units first-last (unit names) nslots recompute predicted_MiB real_MiB ratio.
 * tests/bench/memory runs it over stages of ResNet-152 and VGG-19. */
#include "backend.h"
#include "cost.h"
#include "error.h"
#include "gpudb.h"
#include "model.h"
#include "net.h"
#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_int(const char *s, const char *what, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "bench_stage_mem: %s '%s': an integer in [%d, %d]\n", what, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static void random_floats(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = hp_rng_uniform(seed, i) - 0.5f;
}

/* Two rounds of what a stage does with nslots minibatches in flight. */
static int train_rounds(struct hp_backend *be, struct hp_net *net, const struct hp_model *m, int u0,
                        int u1, int batch, int nslots, float **stash)
{
    const size_t in_n = (size_t)batch * hp_shape_size(m->units[u0].in);
    const size_t out_n = (size_t)batch * hp_shape_size(m->units[u1 - 1].out);
    const int last = u1 == m->nunits;
    float *h = malloc((in_n > out_n ? in_n : out_n) * sizeof(float));
    int32_t *labels = malloc((size_t)batch * sizeof(int32_t));
    int rc = h && labels ? 0 : -HP_ENOMEM;

    for (int i = 0; !rc && i < batch; i++)
        labels[i] = (int32_t)(hp_rng_u64(7, (uint64_t)i) %
                              (uint64_t)hp_shape_size(m->units[m->nunits - 1].out));
    for (int round = 0; !rc && round < 2; round++) {
        for (int s = 0; !rc && s < nslots; s++) {
            if (s > 0) /* the weights this slot's forward used */
                rc = be->ops->copy(be, stash[s - 1], hp_net_params(net),
                                   hp_net_nparams(net) * sizeof(float));
            random_floats(h, in_n, (uint64_t)(2 * (round * nslots + s)));
            if (!rc)
                rc = be->ops->upload(be, hp_net_input(net, s), h, in_n * sizeof(float));
            if (!rc)
                rc = hp_net_forward(net, s, 1, (uint64_t)(round * nslots + s));
        }
        for (int s = 0; !rc && s < nslots; s++) {
            double loss;
            int correct;
            if (last) {
                rc = hp_net_loss(net, s, labels, batch, 1, &loss, &correct);
            } else {
                random_floats(h, out_n, (uint64_t)(2 * (round * nslots + s) + 1));
                rc = be->ops->upload(be, hp_net_output_grad(net), h, out_n * sizeof(float));
            }
            if (!rc)
                rc = hp_net_backward_weights(net, s, s > 0 ? stash[s - 1] : NULL);
        }
        if (!rc)
            rc = hp_net_sgd(net, 0.01f, 0.9f, 1e-4f);
    }
    if (!rc)
        rc = be->ops->sync(be);
    free(h);
    free(labels);
    return rc;
}

int main(int argc, char **argv)
{
    struct hp_model *m = NULL;
    struct hp_backend *be = NULL;
    struct hp_net *net = NULL;
    struct hp_gpudb db;
    struct hp_cost cost;
    float *stash[64] = {0};
    int batch, u0, u1, nslots, recompute, rc;
    size_t base, peak, now;

    if (argc < 7 || argc > 8) {
        fprintf(stderr, "usage: bench_stage_mem MODEL BATCH U0 U1 NSLOTS RECOMPUTE [DEVICE]\n");
        return 2;
    }
    if (hp_model_load(argv[1], &m))
        return 1;
    if (parse_int(argv[2], "BATCH", 1, 4096, &batch) ||
        parse_int(argv[3], "U0", 0, m->nunits - 1, &u0) ||
        parse_int(argv[4], "U1", u0 + 1, m->nunits, &u1) ||
        parse_int(argv[5], "NSLOTS", 1, 64, &nslots) ||
        parse_int(argv[6], "RECOMPUTE", 0, 1, &recompute))
        return 2;
    if (hp_gpudb_load("etc/hetpipe.conf", &db) || hp_cost_init(&cost, m, &db, batch))
        return 1;
    const double predicted = hp_cost_stage_memory(&cost, u0, u1, nslots, u0 == 0, recompute);

    const struct hp_net_config cfg = {
        .batch = batch, .nslots = nslots, .need_input_grad = u0 > 0, .recompute = recompute};
    rc = hp_backend_create(argc == 8 ? argv[7] : "cpu", &be);
    if (!rc)
        rc = be->ops->memory_used(be, &base, &peak);
    if (!rc)
        rc = hp_net_create(be, m, u0, u1, &cfg, &net);
    if (!rc)
        rc = hp_net_init_params(net, 1);
    for (int s = 0; !rc && s < nslots - 1; s++)
        rc = be->ops->alloc(be, hp_net_nparams(net) * sizeof(float), (void **)&stash[s]);
    if (!rc)
        rc = train_rounds(be, net, m, u0, u1, batch, nslots, stash);
    if (!rc)
        rc = be->ops->memory_used(be, &now, &peak);
    if (rc) {
        fprintf(stderr, "bench_stage_mem: %s\n", hp_strerror(rc));
        return 1;
    }
    const double real = (double)(peak - base);
    printf("%-10s %3d-%-3d %-26.26s %3d %3s %10.1f %10.1f %7.3f\n", argv[1], u0, u1 - 1,
           m->units[u0].name, nslots, recompute ? "yes" : "-", predicted / 1048576.0,
           real / 1048576.0, real / predicted);
    for (int s = 0; s < nslots - 1; s++)
        if (stash[s])
            be->ops->free(be, stash[s]);
    hp_net_destroy(net);
    hp_backend_destroy(be);
    hp_cost_release(&cost);
    hp_gpudb_release(&db);
    hp_model_destroy(m);
    return 0;
}
