/* test_model.c - the shipped models' sizes, and bad model files. */
#include "suites.h"
#include "util.h"

#include "error.h"
#include "model.h"

#include <check.h>
#include <math.h>
#include <string.h>

static struct hp_model *load_ok(const char *name)
{
    struct hp_model *m = NULL;

    ck_assert_int_eq(hp_model_load(name, &m), 0);
    return m;
}

static void check_size(const char *name, double params_m, double macs_g)
{
    struct hp_model *m = load_ok(name);
    struct hp_unit_cost c = hp_model_cost(m, 0, m->nunits);

    /* published: parameters within 1%, forward multiply-adds within 5% */
    ck_assert_msg(fabs((double)m->nparams / 1e6 - params_m) <= 0.01 * params_m,
                  "%s: %.3f M parameters, published %.2f M", name, (double)m->nparams / 1e6,
                  params_m);
    ck_assert_msg(fabs(c.fwd_macs / 1e9 - macs_g) <= 0.05 * macs_g,
                  "%s: %.3f G multiply-adds, published %.1f G", name, c.fwd_macs / 1e9, macs_g);
    hp_model_destroy(m);
}

START_TEST(vgg19_size)
{
    check_size("vgg19", 143.67, 19.6);
}
END_TEST

START_TEST(resnet152_size)
{
    struct hp_model *m = load_ok("resnet152");
    int bottlenecks = 0;

    for (int i = 0; i < m->nunits; i++)
        bottlenecks += strcmp(m->units[i].kind, "bottleneck") == 0;
    ck_assert_int_eq(bottlenecks, 3 + 8 + 36 + 3);
    ck_assert_int_eq(m->units[m->nunits - 1].out.c, 1000);
    hp_model_destroy(m);
    check_size("resnet152", 60.19, 11.5);
}
END_TEST

START_TEST(small_models)
{
    struct hp_model *m = load_ok("cnn");

    ck_assert_str_eq(m->dataset, "fashion-mnist");
    ck_assert_int_eq(m->input.c, 1);
    ck_assert_int_eq(m->input.h, 28);
    ck_assert_int_eq(m->classes, 10);
    /* conv 1->32 3x3 + bias, bn 32, conv 32->64 3x3 + bias... (bias off under bn) */
    ck_assert_int_eq(m->nparams,
                     (32 * 9) + 64 + (64 * 32 * 9) + 128 + (3136 * 128 + 128) + (128 * 10 + 10));
    hp_model_destroy(m);
    m = load_ok("mlp");
    ck_assert_int_eq(m->nparams, 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
    hp_model_destroy(m);
}
END_TEST

/* Each case: a model file, and strings its error must contain. */
struct bad {
    const char *text;
    const char *expect[3];
};

#define HEAD "[model]\ninput = 1x8x8\nclasses = 10\n"

static const struct bad bad_models[] = {
    {HEAD "[c1]\ntype = convolution\nfilters = 4\nkernel = 3\n",
     {"[c1]", "unknown value 'convolution'", "conv, linear"}},
    {HEAD "[c1]\ntype = conv\nfilters = 4\nkernel = 9\n[fc]\ntype = linear\noutputs = 10\n",
     {"'c1'", "does not fit the input 8x8", NULL}},
    {HEAD "[c1]\ntype = conv\nfilters = -4\nkernel = 3\n",
     {"[c1]", "key 'filters'", "out of range"}},
    {HEAD "[c1]\ntype = conv\nfilters = 4\nkernel = 3\nstrides = 2\n",
     {"[c1]", "unknown key 'strides'", "stride"}},
    {HEAD "[c1]\ntype = conv\nfilters = 4x\nkernel = 3\n",
     {"[c1]", "'4x' is not an integer", NULL}},
    {HEAD "[fc]\ntype = linear\noutputs = 7\n", {"outputs 7x1x1", "classes = 10", NULL}},
    {"[model]\ninput = 1x8\nclasses = 10\n[fc]\ntype = linear\noutputs = 10\n",
     {"key 'input'", "CxHxW", NULL}},
    {"[model]\ninput = 1x8x8\nclasses = 10\ncolour = red\n", {"[model]", "'colour'", NULL}},
    {"[fc]\ntype = linear\noutputs = 10\n", {"missing section [model]", NULL, NULL}},
    {HEAD "[fc]\noutputs = 10\n", {"[fc]", "missing required key 'type'", NULL}},
    {HEAD "[p]\ntype = maxpool\nkernel = 0\n", {"[p]", "key 'kernel'", "out of range"}},
    {HEAD "[d]\ntype = dropout\np = 1.5\n", {"[d]", "key 'p'", "out of range"}},
    {HEAD "[b]\ntype = bottleneck\nfilters = 2\nstride = 0\n", {"[b]", "key 'stride'", NULL}},
    {HEAD "[model2]\ntype = linear\noutputs = 10\nrepeat = 0\n", {"key 'repeat'", NULL, NULL}},
    {HEAD, {"no units", NULL, NULL}},
    {HEAD "[fc]\ntype = linear\noutputs = 10\n[FC]\ntype = relu\n",
     {"section [fc] appears again (first at line 4)", NULL, NULL}},
};

START_TEST(bad_model_files)
{
    const struct bad *b = &bad_models[_i];
    struct hp_model *m = NULL;
    const char *path = test_write_file("bad.ini", b->text), *err;

    test_capture_begin();
    ck_assert_int_eq(hp_model_load(path, &m), -HP_EMODEL);
    err = test_capture_end();
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err, "bad.ini") != NULL, "case %d: no file name in: %s", _i, err);
    for (int k = 0; k < 3 && b->expect[k]; k++)
        ck_assert_msg(strstr(err, b->expect[k]) != NULL, "case %d: '%s' not in: %s", _i,
                      b->expect[k], err);
}
END_TEST

START_TEST(unknown_model_name)
{
    struct hp_model *m = NULL;

    test_capture_begin();
    ck_assert_int_eq(hp_model_load("no-such-model", &m), -HP_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "unknown model 'no-such-model'"));
}
END_TEST

START_TEST(repeat_and_costs)
{
    const char *p = test_write_file("rep.ini", "[model]\ninput = 3x16x16\nclasses = 5\n"
                                               "[blk]\ntype = basic\nfilters = 8\nstride = 2\n"
                                               "repeat = 3\n[gap]\ntype = gap\n"
                                               "[fc]\ntype = linear\noutputs = 5\n");
    struct hp_model *m = load_ok(p);

    ck_assert_int_eq(m->nunits, 5);
    ck_assert_str_eq(m->units[0].name, "blk.1");
    ck_assert_str_eq(m->units[2].name, "blk.3");
    /* only the first block has the stride and the projection shortcut */
    ck_assert_int_eq(m->units[0].out.h, 8);
    ck_assert_int_eq(m->units[1].out.h, 8);
    ck_assert_int_gt(m->units[0].nops, m->units[1].nops);
    /* block 2: two 3x3 convs 8->8 on 8x8 plus two batch norms */
    ck_assert_int_eq(m->units[1].nparams, 2 * (8 * 8 * 9) + 2 * 16);
    ck_assert_double_eq(m->units[1].cost.fwd_macs, 2.0 * 8 * 8 * 9 * 64);
    ck_assert_int_eq(m->units[1].cost.out_bytes, 8 * 8 * 8 * 4);
    ck_assert_int_eq(m->units[3].out.h, 1);
    hp_model_destroy(m);
}
END_TEST

Suite *suite_model(void)
{
    Suite *s = suite_create("model");
    TCase *t = tcase_create("model");

    tcase_add_test(t, vgg19_size);
    tcase_add_test(t, resnet152_size);
    tcase_add_test(t, small_models);
    tcase_add_loop_test(t, bad_model_files, 0, (int)(sizeof(bad_models) / sizeof(bad_models[0])));
    tcase_add_test(t, unknown_model_name);
    tcase_add_test(t, repeat_and_costs);
    suite_add_tcase(s, t);
    return s;
}
