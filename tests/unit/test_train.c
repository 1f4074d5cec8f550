/* test_train.c - single-process training: determinism and a short run that must learn. */
#include "suites.h"
#include "util.h"

#include "backend.h"
#include "model.h"
#include "net.h"
#include "rng.h"
#include "train.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void small_run(struct hp_options *o, uint64_t seed, int ntrain)
{
    hp_options_init(o, HP_CMD_TRAIN);
    o->device = HP_DEVICE_CHOICE_CPU;
    o->epochs = 1;
    o->seed = (long)seed;
    o->train_limit = ntrain;
    o->test_limit = 1000;
    o->log_every = 0;
}

/* Same seed, same parameters bit for bit; another seed, other parameters. */
START_TEST(deterministic_for_a_seed)
{
    struct hp_options o;
    struct hp_train_result a, b, c;

    hp_backend_cpu_set_threads(1);
    small_run(&o, 5, 640);
    o.model = "cnn";
    ck_assert_int_eq(hp_train_run(&o, &a), 0);
    ck_assert_int_eq(hp_train_run(&o, &b), 0);
    o.seed = 6;
    ck_assert_int_eq(hp_train_run(&o, &c), 0);
    ck_assert_int_eq(a.steps, 10);
    ck_assert_uint_eq(a.param_hash, b.param_hash);
    ck_assert_double_eq(a.test_loss, b.test_loss);
    ck_assert_uint_ne(a.param_hash, c.param_hash);
}
END_TEST

/* 1 epoch on 8,000 images (125 steps): the CNN must reach 75% on 1,000 test images
 * (chance is 10%; it reaches ~80% here, and ~91% after 5 full epochs). */
START_TEST(cnn_learns_on_a_subset)
{
    struct hp_options o;
    struct hp_train_result r;

    hp_backend_cpu_set_threads(1);
    small_run(&o, 1, 8000);
    o.model = "cnn";
    ck_assert_int_eq(hp_train_run(&o, &r), 0);
    ck_assert_msg(r.test_acc >= 0.75, "test accuracy %.3f < 0.75", r.test_acc);
    ck_assert_double_lt(r.test_loss, 0.8);
}
END_TEST

/* The MLP (with dropout) learns too. */
START_TEST(mlp_learns_on_a_subset)
{
    struct hp_options o;
    struct hp_train_result r;

    hp_backend_cpu_set_threads(1);
    small_run(&o, 1, 8000);
    o.model = "mlp";
    ck_assert_int_eq(hp_train_run(&o, &r), 0);
    ck_assert_msg(r.test_acc >= 0.72, "test accuracy %.3f < 0.72", r.test_acc);
}
END_TEST

/* Nothing is allocated inside the per-minibatch loop: after one warm-up step, further
 * training steps (forward, loss, backward, SGD) and evaluation passes allocate nothing. */
static void no_alloc_in_steps(const char *model_name, int recompute)
{
    struct hp_backend *be;
    struct hp_model *m;
    struct hp_net *net;
    const struct hp_net_config cfg = {
        .batch = 16, .nslots = 2, .need_input_grad = 1, .recompute = recompute};
    int32_t lab[16];
    long before;

    ck_assert_int_eq(hp_model_load(model_name, &m), 0);
    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(hp_net_create(be, m, 0, m->nunits, &cfg, &net), 0);
    ck_assert_int_eq(hp_net_init_params(net, 1), 0);
    for (int i = 0; i < 16; i++)
        lab[i] = i % 10;
    float *x = hp_net_input(net, 1);
    for (size_t i = 0; i < 16 * hp_shape_size(m->input); i++)
        x[i] = hp_rng_uniform(4, i);
    /* no ck_assert inside the counted loop: Check allocates when it records a location */
    int rc = 0;
    before = -1;
    for (int s = 0; s < 4 && rc == 0; s++) {
        double l;
        int c;
        if (s == 1)
            before = test_allocations();
        rc = hp_net_forward(net, 1, 1, (uint64_t)s);
        rc = rc ? rc : hp_net_loss(net, 1, lab, 16, 1, &l, &c);
        rc = rc ? rc : hp_net_backward(net, 1);
        rc = rc ? rc : hp_net_sgd(net, 0.01f, 0.9f, 1e-4f);
        rc = rc ? rc : hp_net_forward(net, 1, 0, 0);
        rc = rc ? rc : hp_net_loss(net, 1, lab, 10, 0, &l, &c);
    }
    const long during = test_allocations() - before;
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(during, 0);
    ck_assert_int_gt(before, 0); /* the counter does count (net creation allocated) */
    hp_net_destroy(net);
    hp_backend_destroy(be);
    hp_model_destroy(m);
}

/* A model with every unit type (dropout and batch norm included). */
static const char *all_units_model(void)
{
    return test_write_file(
        "all.ini", "[model]\ninput = 3x16x16\nclasses = 10\n"
                   "[c]\ntype = conv\nfilters = 8\nkernel = 3\npad = 1\nbn = true\nrelu = true\n"
                   "[p]\ntype = maxpool\nkernel = 2\n[b]\ntype = bottleneck\nfilters = 4\n"
                   "stride = 2\n[r]\ntype = basic\nfilters = 8\nstride = 1\n"
                   "[a]\ntype = avgpool\nkernel = 2\n[n]\ntype = batchnorm\n[u]\ntype = relu\n"
                   "[f]\ntype = flatten\n[d]\ntype = dropout\n[g]\ntype = linear\noutputs = 10\n");
}

START_TEST(no_allocation_per_minibatch)
{
    for (int rc = 0; rc < 2; rc++) {
        no_alloc_in_steps("cnn", rc);
        no_alloc_in_steps("mlp", rc);
        no_alloc_in_steps(all_units_model(), rc);
    }
}
END_TEST

/* Pipeline-like steps of a net of units [u0, u1): three minibatches in flight, forwards of
 * slots 0, 1, 2 with their own inputs and seeds, then backward of each with the weights
 * stashed at its forward, an SGD step after each backward and an evaluation forward (in a
 * fourth slot) in between. The parameters, state and input gradient after `rounds` rounds into
 * *params, *state, *dx (caller frees). */
static void pipeline_steps(const struct hp_model *m, int u0, int u1, int recompute, int rounds,
                           float **params, float **state, float **dx)
{
    enum { B = 8, SLOTS = 3 }; /* and one more for evaluation */
    struct hp_backend *be;
    struct hp_net *net;
    const struct hp_net_config cfg = {
        .batch = B, .nslots = SLOTS + 1, .need_input_grad = 1, .recompute = recompute};
    const size_t in = B * hp_shape_size(m->units[u0].in);
    const size_t out = B * hp_shape_size(m->units[u1 - 1].out);

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(hp_net_create(be, m, u0, u1, &cfg, &net), 0);
    ck_assert_int_eq(hp_net_init_params(net, 7), 0);
    const size_t np = hp_net_nparams(net);
    float *stash = malloc(SLOTS * np * sizeof(float));
    ck_assert_ptr_nonnull(stash);
    for (int r = 0; r < rounds; r++) {
        for (int sl = 0; sl < SLOTS; sl++) {
            float *x = hp_net_input(net, sl);
            for (size_t i = 0; i < in; i++)
                x[i] = 2.0f * hp_rng_uniform(100 + (uint64_t)(r * SLOTS + sl), i) - 1.0f;
            memcpy(stash + sl * np, hp_net_params(net), np * sizeof(float));
            ck_assert_int_eq(hp_net_forward(net, sl, 1, 1000 + (uint64_t)(r * SLOTS + sl)), 0);
        }
        /* an evaluation pass in between overwrites what a recomputing net shares */
        memcpy(hp_net_input(net, SLOTS), hp_net_input(net, 1), in * sizeof(float));
        ck_assert_int_eq(hp_net_forward(net, SLOTS, 0, 0), 0);
        for (int sl = 0; sl < SLOTS; sl++) {
            float *dy = hp_net_output_grad(net);
            for (size_t i = 0; i < out; i++)
                dy[i] = hp_rng_uniform(200 + (uint64_t)(r * SLOTS + sl), i) - 0.5f;
            ck_assert_int_eq(hp_net_backward_weights(net, sl, stash + sl * np), 0);
            ck_assert_int_eq(hp_net_sgd(net, 0.05f, 0.9f, 1e-4f), 0);
        }
    }
    *params = malloc(np * sizeof(float));
    *state = malloc((hp_net_nstate(net) + 1) * sizeof(float));
    *dx = malloc(in * sizeof(float));
    memcpy(*params, hp_net_params(net), np * sizeof(float));
    memcpy(*state, hp_net_state(net), hp_net_nstate(net) * sizeof(float));
    memcpy(*dx, hp_net_input_grad(net), in * sizeof(float));
    free(stash);
    hp_net_destroy(net);
    hp_backend_destroy(be);
}

/* Recomputation gives the same parameters, batch norm statistics and input gradient bit for
 * bit as keeping the activations, on the CPU: whole models with every unit type, and stages
 * of them. */
START_TEST(recompute_bit_for_bit)
{
    const char *models[] = {"cnn", "mlp", "tests/models/resnet-mini.ini", all_units_model()};

    hp_backend_cpu_set_threads(1);
    for (size_t mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++) {
        struct hp_model *m;
        ck_assert_int_eq(hp_model_load(models[mi], &m), 0);
        const int ranges[3][2] = {{0, m->nunits}, {0, m->nunits / 2}, {m->nunits / 2, m->nunits}};
        for (int ri = 0; ri < 3; ri++) {
            const int u0 = ranges[ri][0], u1 = ranges[ri][1];
            if (u0 >= u1)
                continue;
            float *p[2], *st[2], *dx[2];
            for (int rc = 0; rc < 2; rc++)
                pipeline_steps(m, u0, u1, rc, 2, &p[rc], &st[rc], &dx[rc]);
            struct hp_backend *be;
            struct hp_net *net;
            const struct hp_net_config cfg = {.batch = 8, .nslots = 1, .need_input_grad = 1};
            ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
            ck_assert_int_eq(hp_net_create(be, m, u0, u1, &cfg, &net), 0);
            ck_assert_int_eq(hp_net_init_params(net, 7), 0);
            const size_t np = hp_net_nparams(net), ns = hp_net_nstate(net);
            /* training moved them: the comparison is not of two untouched copies */
            ck_assert(memcmp(p[0], hp_net_params(net), np * sizeof(float)) != 0);
            hp_net_destroy(net);
            hp_backend_destroy(be);
            ck_assert_msg(memcmp(p[0], p[1], np * sizeof(float)) == 0,
                          "%s [%d, %d): parameters differ with recomputation", m->name, u0, u1);
            ck_assert_msg(memcmp(st[0], st[1], ns * sizeof(float)) == 0,
                          "%s [%d, %d): batch norm statistics differ", m->name, u0, u1);
            ck_assert_msg(memcmp(dx[0], dx[1], 8 * hp_shape_size(m->units[u0].in) * 4) == 0,
                          "%s [%d, %d): input gradients differ", m->name, u0, u1);
            for (int rc = 0; rc < 2; rc++) {
                free(p[rc]);
                free(st[rc]);
                free(dx[rc]);
            }
        }
        hp_model_destroy(m);
    }
}
END_TEST

/* Forward of slot `sl` from inputs of seed `seed`, then (if dy_seed) its backward from an
 * output gradient of dy_seed. */
static void step_slot(struct hp_net *net, int sl, size_t in, size_t out, uint64_t seed,
                      uint64_t dy_seed, int fwd)
{
    if (fwd) {
        float *x = hp_net_input(net, sl);
        for (size_t i = 0; i < in; i++)
            x[i] = 2.0f * hp_rng_uniform(seed, i) - 1.0f;
        ck_assert_int_eq(hp_net_forward(net, sl, 1, seed), 0);
    }
    if (dy_seed) {
        float *dy = hp_net_output_grad(net);
        for (size_t i = 0; i < out; i++)
            dy[i] = hp_rng_uniform(dy_seed, i) - 0.5f;
        ck_assert_int_eq(hp_net_backward(net, sl), 0);
    }
}

/* Activation gradients go where the slot running backward held the activations of later
 * units (hp_grad_place): that leaves every other slot alone, and the gradients are those of
 * a net with one slot, bit for bit; and the region of their own is smaller than the two
 * largest unit outputs the gradients of a whole model would need otherwise. */
START_TEST(gradients_in_dead_activations)
{
    const char *models[] = {"cnn", "tests/models/resnet-mini.ini", all_units_model()};

    hp_backend_cpu_set_threads(1);
    for (size_t mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++) {
        struct hp_model *m;
        ck_assert_int_eq(hp_model_load(models[mi], &m), 0);
        const int ranges[3][2] = {{0, m->nunits}, {0, m->nunits / 2}, {m->nunits / 2, m->nunits}};
        for (int ri = 0; ri < 3; ri++)
            for (int rc = 0; rc < 2; rc++) {
                const int u0 = ranges[ri][0], u1 = ranges[ri][1];
                if (u0 >= u1)
                    continue;
                struct hp_backend *be;
                struct hp_net *two, *one;
                const struct hp_net_config c2 = {8, 2, 1, rc, HP_OPTIMIZER_SGD},
                                           c1 = {8, 1, 1, rc, HP_OPTIMIZER_SGD};
                const size_t in = 8 * hp_shape_size(m->units[u0].in);
                const size_t out = 8 * hp_shape_size(m->units[u1 - 1].out);
                ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
                ck_assert_int_eq(hp_net_create(be, m, u0, u1, &c2, &two), 0);
                ck_assert_int_eq(hp_net_create(be, m, u0, u1, &c1, &one), 0);
                ck_assert_int_eq(hp_net_init_params(two, 7), 0);
                ck_assert_int_eq(hp_net_init_params(one, 7), 0);
                const size_t np = hp_net_nparams(two);
                const size_t slot =
                    (size_t)(hp_net_tensor(two, 1, 0) - hp_net_tensor(two, 0, 0)) * sizeof(float);
                char *keep = malloc(slot);
                float *g = malloc(np * sizeof(float));
                float *dx = malloc(in * sizeof(float));
                ck_assert_ptr_nonnull(keep);
                /* slot 0 forward, slot 1 forward and backward: slot 0 is untouched */
                step_slot(two, 0, in, out, 11, 0, 1);
                memcpy(keep, hp_net_tensor(two, 0, 0), slot);
                step_slot(two, 1, in, out, 12, 22, 1);
                ck_assert_msg(memcmp(keep, hp_net_tensor(two, 0, 0), slot) == 0,
                              "%s [%d, %d) recompute %d: slot 1's backward wrote into slot 0",
                              m->name, u0, u1, rc);
                step_slot(two, 0, in, out, 11, 21, 0);
                memcpy(g, hp_net_grads(two), np * sizeof(float));
                memcpy(dx, hp_net_input_grad(two), in * sizeof(float));
                /* the same minibatch alone in a net of one slot (the same batch norm
                 * statistics: one training forward before it, as slot 1's above) */
                step_slot(one, 0, in, out, 12, 0, 1);
                step_slot(one, 0, in, out, 11, 21, 1);
                ck_assert_msg(memcmp(g, hp_net_grads(one), np * sizeof(float)) == 0,
                              "%s [%d, %d) recompute %d: gradients differ", m->name, u0, u1, rc);
                ck_assert_msg(memcmp(dx, hp_net_input_grad(one), in * sizeof(float)) == 0,
                              "%s [%d, %d) recompute %d: input gradients differ", m->name, u0, u1,
                              rc);
                if (u0 == 0 && u1 == m->nunits && !rc) {
                    struct hp_net_memory mem;
                    size_t big[2] = {0, 0};
                    for (int u = 0; u < m->nunits; u++) {
                        const size_t b = hp_align_up(
                            8 * hp_shape_size(m->units[u].out) * sizeof(float), HP_ALIGN);
                        if (b > big[0]) {
                            big[1] = big[0];
                            big[0] = b;
                        } else if (b > big[1]) {
                            big[1] = b;
                        }
                    }
                    hp_net_memory(one, &mem);
                    ck_assert_msg(mem.act_grads - hp_align_up(in * sizeof(float), HP_ALIGN) <
                                      big[0] + big[1],
                                  "%s: %zu bytes of activation gradients", m->name, mem.act_grads);
                }
                free(keep);
                free(g);
                free(dx);
                hp_net_destroy(two);
                hp_net_destroy(one);
                hp_backend_destroy(be);
            }
        hp_model_destroy(m);
    }
}
END_TEST

Suite *suite_train(void)
{
    Suite *s = suite_create("train");
    TCase *t = tcase_create("train");

    tcase_set_timeout(t, 300);
    tcase_add_test(t, deterministic_for_a_seed);
    tcase_add_test(t, cnn_learns_on_a_subset);
    tcase_add_test(t, mlp_learns_on_a_subset);
    tcase_add_test(t, no_allocation_per_minibatch);
    tcase_add_test(t, recompute_bit_for_bit);
    tcase_add_test(t, gradients_in_dead_activations);
    suite_add_tcase(s, t);
    return s;
}
