/* test_optim.c - the optimizer's building blocks: AdamW (backend op and hp_net_adamw) against
 * a naive double-precision reference, the per-tensor decay flags, the AdamW moments in the
 * net's memory and the planner's, the learning-rate schedule (lrsched.h) and gradient
 * clipping by the global norm; and hetpipe train with AdamW, warm-up and clipping. */
#include "suites.h"
#include "util.h"

#include "backend.h"
#include "cost.h"
#include "error.h"
#include "lrsched.h"
#include "model.h"
#include "net.h"
#include "rng.h"
#include "train.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The textbook AdamW (Loshchilov and Hutter, as torch.optim.AdamW documents it), in double:
 * w -= lr wd w; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * w -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps). */
static void ref_adamw(double *w, const double *g, double *m, double *v, size_t n, double lr,
                      double wd, double b1, double b2, double eps, long t)
{
    for (size_t i = 0; i < n; i++) {
        w[i] -= lr * wd * w[i];
        m[i] = b1 * m[i] + (1.0 - b1) * g[i];
        v[i] = b2 * v[i] + (1.0 - b2) * g[i] * g[i];
        const double mh = m[i] / (1.0 - pow(b1, (double)t)), vh = v[i] / (1.0 - pow(b2, (double)t));
        w[i] -= lr * mh / (sqrt(vh) + eps);
    }
}

/* |a - b| within rel |b| + abs. */
static int close_to(double a, double b, double rel, double abs)
{
    return fabs(a - b) <= rel * fabs(b) + abs;
}

/* A gradient of step s for element i: mixed signs and scales over five decades, some zeros. */
static float grad_at(uint64_t seed, long s, size_t i)
{
    const double u = hp_rng_uniform(seed + (uint64_t)s, i);
    const double scale = pow(10.0, -3.0 + 5.0 * hp_rng_uniform(seed + 100, i)); /* its scale */

    return i % 17 == 0 ? 0.0f : (float)((2.0 * u - 1.0) * scale);
}

/* The backend op over 8 steps, with and without decay, against the double reference; the
 * first step from zero moments moves every weight by lr (1 - 1e-5 or so) against its
 * gradient's sign, as Adam's bias correction promises. */
START_TEST(adamw_op_matches_reference)
{
    enum { N = 2000, STEPS = 8 };
    struct hp_backend *be;
    const float wds[2] = {0.0f, 0.1f};

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    for (int k = 0; k < 2; k++) {
        float *w = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
        float *m = calloc(N, sizeof(float)), *v = calloc(N, sizeof(float));
        double *rw = malloc(N * sizeof(double)), *rg = malloc(N * sizeof(double));
        double *rm = calloc(N, sizeof(double)), *rv = calloc(N, sizeof(double));
        ck_assert(w && g && m && v && rw && rg && rm && rv);
        for (size_t i = 0; i < N; i++)
            rw[i] = w[i] = (float)(2.0 * hp_rng_uniform(7, i) - 1.0);
        for (long s = 1; s <= STEPS; s++) {
            const struct hp_adamw_desc d = {
                .lr = 1e-2f, .wd = wds[k], .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .step = s};
            for (size_t i = 0; i < N; i++)
                rg[i] = g[i] = grad_at(11, s, i);
            float w1 = w[5];
            ck_assert_int_eq(be->ops->adamw_update(be, w, g, m, v, N, &d), 0);
            /* the reference takes the float hyperparameters, as the op does */
            ref_adamw(rw, rg, rm, rv, N, d.lr, d.wd, d.beta1, d.beta2, d.eps, s);
            if (s == 1 && k == 0) /* g[5] != 0: w moves by lr g / (|g| + eps) */
                ck_assert(close_to(w1 - w[5], copysign(1e-2, g[5]), 1e-4, 0.0));
        }
        for (size_t i = 0; i < N; i++) {
            ck_assert_msg(close_to(w[i], rw[i], 2e-6, 1e-7), "wd %g w[%zu] %.9g, reference %.9g",
                          wds[k], i, w[i], rw[i]);
            /* m averages gradients of both signs: its rounding is relative to theirs */
            const double gs = pow(10.0, -3.0 + 5.0 * hp_rng_uniform(111, i));
            ck_assert_msg(close_to(m[i], rm[i], 1e-5, 1e-6 * gs), "m[%zu] %.9g, reference %.9g", i,
                          m[i], rm[i]);
            ck_assert_msg(close_to(v[i], rv[i], 1e-5, 1e-18), "v[%zu] %.9g, reference %.9g", i,
                          v[i], rv[i]);
        }
        free(w), free(g), free(m), free(v), free(rw), free(rg), free(rm), free(rv);
    }
    hp_backend_destroy(be);
}
END_TEST

/* The decay flags: weights of convolutions and linear layers decay; biases and batch norm's
 * gamma and beta do not; an op's tensors add up to its parameters. */
START_TEST(decay_flags)
{
    struct hp_model *m;
    int seen_w = 0, seen_b = 0, seen_bn = 0;

    ck_assert_int_eq(hp_model_load("tests/models/resnet-mini.ini", &m), 0);
    for (int u = 0; u < m->nunits; u++) {
        for (int i = 0; i < m->units[u].nops; i++) {
            const struct hp_op *op = &m->units[u].ops[i];
            size_t n[2] = {0, 0};
            int decay[2] = {-1, -1};
            const int k = hp_op_param_tensors(op, n, decay);
            ck_assert_uint_eq(k ? n[0] + (k > 1 ? n[1] : 0) : 0, op->nparams);
            if (op->type == HP_OP_CONV || op->type == HP_OP_LINEAR) {
                ck_assert_int_eq(k, op->bias ? 2 : 1);
                ck_assert_int_eq(decay[0], 1);
                seen_w++;
                if (op->bias) {
                    ck_assert_int_eq(decay[1], 0);
                    ck_assert_uint_eq(n[1], (size_t)op->filters);
                    seen_b++;
                }
            } else if (op->type == HP_OP_BN) {
                ck_assert_int_eq(k, 2);
                ck_assert_int_eq(decay[0] + decay[1], 0);
                ck_assert_uint_eq(n[0], (size_t)op->in_shape.c);
                seen_bn++;
            } else {
                ck_assert_int_eq(k, 0);
            }
        }
    }
    ck_assert(seen_w > 0 && seen_b > 0 && seen_bn > 0);
    hp_model_destroy(m);
}
END_TEST

/* hp_net_adamw on the CNN: with zero gradients only the decay moves the weights, exactly by
 * (1 - lr wd) on conv and linear weights and not at all elsewhere; with real gradients over
 * several steps, every parameter as the double reference with the per-tensor decay. An SGD
 * net refuses an AdamW step; the moments start at zero. */
START_TEST(net_adamw_per_tensor_decay)
{
    struct hp_backend *be;
    struct hp_model *m;
    struct hp_net *net, *sgd;
    const struct hp_net_config cfg = {.batch = 2, .nslots = 1, .optimizer = HP_OPTIMIZER_ADAMW};
    const struct hp_net_config scfg = {.batch = 2, .nslots = 1};
    const float lr = 0.05f, wd = 0.2f;

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(hp_model_load("cnn", &m), 0);
    ck_assert_int_eq(hp_net_create(be, m, 0, m->nunits, &cfg, &net), 0);
    ck_assert_int_eq(hp_net_init_params(net, 3), 0);
    const size_t np = hp_net_nparams(net);
    float *w = hp_net_params(net), *g = hp_net_grads(net);
    float *w0 = malloc(np * sizeof(float));
    double *rw = malloc(np * sizeof(double)), *rg = malloc(np * sizeof(double));
    double *rm = calloc(np, sizeof(double)), *rv = calloc(np, sizeof(double));
    char *dec = calloc(np, 1);
    ck_assert(w0 && rw && rg && rm && rv && dec);
    ck_assert_ptr_nonnull(hp_net_moment2(net));
    for (size_t i = 0; i < np; i++)
        ck_assert(hp_net_momentum(net)[i] == 0.0f && hp_net_moment2(net)[i] == 0.0f);
    /* which floats decay, from the layout (layers.h: unit after unit, op after op) */
    size_t p = 0;
    for (int u = 0; u < m->nunits; u++)
        for (int i = 0; i < m->units[u].nops; i++) {
            size_t n[2];
            int d[2];
            const int k = hp_op_param_tensors(&m->units[u].ops[i], n, d);
            for (int j = 0; j < k; p += n[j], j++)
                memset(dec + p, d[j], n[j]);
        }
    ck_assert_uint_eq(p, np);

    memcpy(w0, w, np * sizeof(float));
    memset(g, 0, np * sizeof(float));
    struct hp_adamw_desc d = {
        .lr = lr, .wd = wd, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .step = 1};
    ck_assert_int_eq(hp_net_adamw(net, &d), 0);
    const float f = (float)(1.0 - (double)lr * wd);
    size_t ndec = 0;
    for (size_t i = 0; i < np; i++) {
        ck_assert_msg(w[i] == (dec[i] ? w0[i] * f : w0[i]), "parameter %zu (decay %d)", i, dec[i]);
        ndec += (size_t)dec[i];
    }
    ck_assert(ndec > 0 && ndec < np);

    for (size_t i = 0; i < np; i++)
        rw[i] = w[i];
    for (long s = 2; s <= 6; s++) {
        d.step = s;
        for (size_t i = 0; i < np; i++)
            rg[i] = g[i] = grad_at(5, s, i);
        ck_assert_int_eq(hp_net_adamw(net, &d), 0);
        for (size_t i = 0; i < np; i++) /* the reference's step s, its moments from step 1 */
            ref_adamw(rw + i, rg + i, rm + i, rv + i, 1, lr, dec[i] ? wd : 0.0f, d.beta1, d.beta2,
                      d.eps, s);
    }
    for (size_t i = 0; i < np; i++)
        ck_assert_msg(close_to(w[i], rw[i], 2e-6, 1e-7), "w[%zu] %.9g, reference %.9g", i, w[i],
                      rw[i]);

    ck_assert_int_eq(hp_net_create(be, m, 0, m->nunits, &scfg, &sgd), 0);
    ck_assert_ptr_null(hp_net_moment2(sgd));
    test_capture_begin();
    ck_assert_int_eq(hp_net_adamw(sgd, &d), -HP_EINVAL);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "SGD"));
    d.step = 0;
    test_capture_begin();
    ck_assert_int_eq(hp_net_adamw(net, &d), -HP_EINVAL);
    test_capture_end();
    hp_net_destroy(sgd);
    hp_net_destroy(net);
    free(w0), free(rw), free(rg), free(rm), free(rv), free(dec);
    hp_model_destroy(m);
    hp_backend_destroy(be);
}
END_TEST

/* AdamW's second moment is in the net's one allocation and in the planner's model, to the
 * byte: every unit range of small models, slots, input gradient and recomputation varied;
 * the SGD figures unchanged (moment2 0) and AdamW's larger by exactly the parameters. */
START_TEST(adamw_memory_matches_planner)
{
    static const char *const models[] = {"cnn", "mlp", "tests/models/resnet-mini.ini"};
    struct hp_gpu_type type = {.name = "t", .memory_gib = 16, .tflops = 10, .bandwidth_gbs = 500};
    struct hp_gpudb db = {
        .ntypes = 1, .types = &type, .intra_node_gbs = 12, .inter_node_gbs = 6, .efficiency = 0.5};
    struct hp_backend *be;
    long checked = 0;

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    for (size_t mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++) {
        struct hp_model *m;
        struct hp_cost c;
        ck_assert_int_eq(hp_model_load(models[mi], &m), 0);
        ck_assert_int_eq(hp_cost_init(&c, m, &db, 3), 0);
        ck_assert_int_eq(c.optimizer, HP_OPTIMIZER_SGD);
        for (int u0 = 0; u0 < m->nunits; u0++) {
            for (int u1 = u0 + 1; u1 <= m->nunits; u1++) {
                const int nslots = 1 + (u0 + u1) % 3, ig = (u0 + u1) % 2, rc = u1 % 2;
                struct hp_net_config cfg = {3, nslots, ig, rc, HP_OPTIMIZER_SGD};
                struct hp_net_memory s, a, real;
                ck_assert_int_eq(hp_net_plan_memory(be, m, u0, u1, &cfg, &s), 0);
                cfg.optimizer = HP_OPTIMIZER_ADAMW;
                ck_assert_int_eq(hp_net_plan_memory(be, m, u0, u1, &cfg, &a), 0);
                ck_assert_uint_eq(s.moment2, 0);
                ck_assert_uint_eq(a.moment2, a.params);
                ck_assert_uint_eq(a.total, s.total + s.params);
                c.optimizer = HP_OPTIMIZER_SGD;
                ck_assert_double_eq((double)s.total,
                                    hp_cost_net_memory(&c, u0, u1, nslots, ig, rc));
                c.optimizer = HP_OPTIMIZER_ADAMW;
                ck_assert_double_eq((double)a.total,
                                    hp_cost_net_memory(&c, u0, u1, nslots, ig, rc));
                ck_assert_double_eq(hp_cost_stage_memory(&c, u0, u1, nslots, !ig, rc),
                                    (double)a.total + (nslots - 1) * (double)a.params);
                if (mi == 0) {
                    struct hp_net *net;
                    ck_assert_int_eq(hp_net_create(be, m, u0, u1, &cfg, &net), 0);
                    hp_net_memory(net, &real);
                    ck_assert_uint_eq(real.total, a.total);
                    hp_net_destroy(net);
                }
                checked++;
            }
        }
        hp_cost_release(&c);
        hp_model_destroy(m);
    }
    ck_assert_int_gt(checked, 20);
    hp_backend_destroy(be);
}
END_TEST

/* The schedule at known points: the warm-up's first and last steps, the cosine's start,
 * midpoint and end (the floor), past the end; the constant one after its warm-up. */
START_TEST(schedule_known_points)
{
    const struct hp_lrsched c = {.lr = 1.0, .floor = 0.1, .warmup = 10, .total = 110, .cosine = 1};
    const struct hp_lrsched k = {.lr = 0.5, .warmup = 4, .total = 100, .cosine = 0};
    const struct hp_lrsched z = {.lr = 0.3, .total = 4, .cosine = 1};

    ck_assert_double_eq_tol(hp_lrsched_at(&c, 0), 0.1, 1e-15);
    ck_assert_double_eq_tol(hp_lrsched_at(&c, 4), 0.5, 1e-15);
    ck_assert_double_eq(hp_lrsched_at(&c, 9), 1.0); /* the warm-up's last step: the peak */
    ck_assert_double_eq_tol(hp_lrsched_at(&c, 10), 1.0, 1e-15);
    ck_assert_double_eq_tol(hp_lrsched_at(&c, 60), 0.55, 1e-15); /* midpoint */
    ck_assert_double_eq_tol(hp_lrsched_at(&c, 35), 0.1 + 0.45 * (1.0 + sqrt(0.5)), 1e-15);
    ck_assert_double_eq(hp_lrsched_at(&c, 110), 0.1);
    ck_assert_double_eq(hp_lrsched_at(&c, 500), 0.1);
    for (long s = 10; s < 110; s++) /* decreasing after the warm-up */
        ck_assert(hp_lrsched_at(&c, s + 1) <= hp_lrsched_at(&c, s));
    ck_assert_double_eq(hp_lrsched_at(&k, 0), 0.125);
    ck_assert_double_eq(hp_lrsched_at(&k, 3), 0.5);
    ck_assert_double_eq(hp_lrsched_at(&k, 77), 0.5);
    ck_assert_double_eq(hp_lrsched_at(&z, 0), 0.3);
    ck_assert_double_eq_tol(hp_lrsched_at(&z, 2), 0.15, 1e-16);
    ck_assert_double_eq(hp_lrsched_at(&z, 4), 0.0);
}
END_TEST

/* Without warm-up and floor, the schedules are the ones hetpipe train and the ranks used
 * before lrsched.h, bit for bit: the cosine as runtime/worker.c's lr_at writes it. */
START_TEST(schedule_unchanged_without_warmup)
{
    const float lrs[] = {0.05f, 0.1f / 3.0f, 0.0125f, 1e-3f};
    const long totals[] = {1, 7, 390, 4690};

    for (size_t i = 0; i < sizeof(lrs) / sizeof(lrs[0]); i++) {
        for (size_t j = 0; j < sizeof(totals) / sizeof(totals[0]); j++) {
            const struct hp_lrsched cs = {.lr = lrs[i], .total = totals[j], .cosine = 1};
            const struct hp_lrsched ks = {.lr = lrs[i], .total = totals[j], .cosine = 0};
            for (long s = 0; s < totals[j]; s++) {
                const double lr = lrs[i];
                const float old = (float)(0.5 * lr * (1.0 + cos(M_PI * (double)s / totals[j])));
                ck_assert_msg((float)hp_lrsched_at(&cs, s) == old, "lr %g step %ld of %ld", lr, s,
                              totals[j]);
                ck_assert((float)hp_lrsched_at(&ks, s) == lrs[i]);
            }
        }
    }
}
END_TEST

/* Clipping: the sum of squares as a second (long double, pairwise-free) sum has it; scaled
 * by exactly max_norm / norm above the threshold, the new norm is max_norm; at or below it,
 * and with max_norm 0, the gradients are untouched bit for bit; a norm that is not finite is
 * refused. */
START_TEST(clip_by_global_norm)
{
    struct hp_backend *be;
    struct hp_model *m;
    struct hp_net *net;
    const struct hp_net_config cfg = {.batch = 2, .nslots = 1};
    double sumsq, after;
    long double ref = 0.0L;

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(hp_model_load("mlp", &m), 0);
    ck_assert_int_eq(hp_net_create(be, m, 0, m->nunits, &cfg, &net), 0);
    const size_t np = hp_net_nparams(net);
    float *g = hp_net_grads(net), *g0 = malloc(np * sizeof(float));
    ck_assert_ptr_nonnull(g0);
    for (size_t i = 0; i < np; i++) {
        g[i] = grad_at(9, 1, i);
        ref += (long double)g[i] * g[i];
    }
    memcpy(g0, g, np * sizeof(float));
    ck_assert_int_eq(hp_net_grad_sumsq(net, &sumsq), 0);
    ck_assert(close_to(sumsq, (double)ref, 1e-12, 0.0));
    const double norm = sqrt(sumsq);

    /* below, at the threshold, and no clipping: untouched */
    ck_assert_int_eq(hp_net_clip_grads(net, norm, 2.0 * norm), 0);
    ck_assert_int_eq(hp_net_clip_grads(net, norm, norm), 0);
    ck_assert_int_eq(hp_net_clip_grads(net, norm, 0.0), 0);
    ck_assert_int_eq(memcmp(g, g0, np * sizeof(float)), 0);

    /* above: scaled by max / norm, exactly as one float factor */
    const double max = norm / 3.0;
    const float f = (float)(max / norm);
    ck_assert_int_eq(hp_net_clip_grads(net, norm, max), 0);
    for (size_t i = 0; i < np; i++)
        ck_assert(g[i] == g0[i] * f);
    ck_assert_int_eq(hp_net_grad_sumsq(net, &after), 0);
    ck_assert(close_to(sqrt(after), max, 1e-6, 0.0));

    test_capture_begin();
    ck_assert_int_eq(hp_net_clip_grads(net, INFINITY, 1.0), -HP_ERANGE);
    ck_assert_int_eq(hp_net_clip_grads(net, NAN, 1.0), -HP_ERANGE);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "norm"));

    /* the backend ops on their own: n = 0, and scale */
    ck_assert_int_eq(be->ops->sumsq(be, g, 0, &after), 0);
    ck_assert_double_eq(after, 0.0);
    float x[3] = {1.0f, -2.0f, 0.5f};
    ck_assert_int_eq(be->ops->scale(be, x, 3, 0.5f), 0);
    ck_assert(x[0] == 0.5f && x[1] == -1.0f && x[2] == 0.25f);
    free(g0);
    hp_net_destroy(net);
    hp_model_destroy(m);
    hp_backend_destroy(be);
}
END_TEST

static void small_run(struct hp_options *o, int ntrain)
{
    hp_options_init(o, HP_CMD_TRAIN);
    o->device = HP_DEVICE_CHOICE_CPU;
    o->model = "cnn";
    o->epochs = 1;
    o->seed = 1;
    o->train_limit = ntrain;
    o->test_limit = 1000;
    o->log_every = 0;
}

/* hetpipe train with AdamW (lr 2e-3, decay 0.1, warm-up 20 steps, clipping at 1) learns the
 * CNN on 4,000 images (63 steps): chance is 10%. The SGD defaults given explicitly (--optimizer
 * sgd, --warmup 0, --clip 0) give the default run's parameters bit for bit. */
START_TEST(train_adamw_learns)
{
    struct hp_options o;
    struct hp_train_result r, a, b;

    hp_backend_cpu_set_threads(1);
    small_run(&o, 4000);
    o.optimizer = HP_OPTIMIZER_ADAMW;
    o.lr = 2e-3;
    o.weight_decay = 0.1;
    o.lr_warmup = 20;
    o.clip = 1.0;
    ck_assert_int_eq(hp_train_run(&o, &r), 0);
    ck_assert_msg(r.test_acc >= 0.70, "test accuracy %.3f < 0.70", r.test_acc);

    small_run(&o, 640);
    ck_assert_int_eq(hp_train_run(&o, &a), 0);
    o.optimizer = HP_OPTIMIZER_SGD;
    o.lr_warmup = 0;
    o.clip = 0.0;
    o.given[HP_OPT_OPTIMIZER] = o.given[HP_OPT_LR_WARMUP] = o.given[HP_OPT_CLIP] = 1;
    ck_assert_int_eq(hp_train_run(&o, &b), 0);
    ck_assert_uint_eq(a.param_hash, b.param_hash);
}
END_TEST

Suite *suite_optim(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("optim");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, adamw_op_matches_reference);
    tcase_add_test(tc, decay_flags);
    tcase_add_test(tc, net_adamw_per_tensor_decay);
    tcase_add_test(tc, adamw_memory_matches_planner);
    tcase_add_test(tc, schedule_known_points);
    tcase_add_test(tc, schedule_unchanged_without_warmup);
    tcase_add_test(tc, clip_by_global_norm);
    tcase_add_test(tc, train_adamw_learns);
    suite_add_tcase(s, tc);
    return s;
}
