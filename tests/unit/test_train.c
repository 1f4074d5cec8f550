/* test_train.c - single-process training: determinism and a short run that must learn. */
#include "suites.h"

#include "backend.h"
#include "train.h"

#include <check.h>
#include <stdio.h>

static void small_run(struct hp_train_opts *o, uint64_t seed, int ntrain)
{
    hp_train_opts_init(o);
    o->device = "cpu";
    o->epochs = 1;
    o->seed = seed;
    o->train_limit = ntrain;
    o->test_limit = 1000;
    o->log_every = 0;
}

/* Same seed, same parameters bit for bit; another seed, other parameters. */
START_TEST(deterministic_for_a_seed)
{
    struct hp_train_opts o;
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
    struct hp_train_opts o;
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
    struct hp_train_opts o;
    struct hp_train_result r;

    hp_backend_cpu_set_threads(1);
    small_run(&o, 1, 8000);
    o.model = "mlp";
    ck_assert_int_eq(hp_train_run(&o, &r), 0);
    ck_assert_msg(r.test_acc >= 0.72, "test accuracy %.3f < 0.72", r.test_acc);
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
    suite_add_tcase(s, t);
    return s;
}
