/* test_data.c - the Fashion-MNIST reader on the real files and on broken ones. */
#include "suites.h"
#include "util.h"

#include "data.h"
#include "error.h"

#include <check.h>
#include <libgen.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

START_TEST(real_files)
{
    struct hp_dataset tr = {0}, te = {0};
    int counts[10] = {0};

    ck_assert_int_eq(hp_dataset_load_fashion_mnist(HP_FASHION_MNIST_DIR, 1, &tr), 0);
    ck_assert_int_eq(hp_dataset_load_fashion_mnist(HP_FASHION_MNIST_DIR, 0, &te), 0);
    ck_assert_int_eq(tr.n, 60000);
    ck_assert_int_eq(te.n, 10000);
    ck_assert_int_eq(tr.h * tr.w, 784);
    /* Fashion-MNIST is balanced: 6000 of each class in training, 1000 in test */
    for (int i = 0; i < tr.n; i++)
        counts[tr.labels[i]]++;
    for (int k = 0; k < 10; k++)
        ck_assert_int_eq(counts[k], 6000);
    /* standardised: mean ~0, standard deviation ~1 over the training set */
    double s = 0, ss = 0;
    const size_t n = (size_t)tr.n * 784;
    for (size_t i = 0; i < n; i++) {
        s += tr.images[i];
        ss += (double)tr.images[i] * tr.images[i];
    }
    ck_assert_double_le(s / n, 0.01);
    ck_assert_double_ge(s / n, -0.01);
    ck_assert_double_eq_tol(ss / n, 1.0, 0.02);
    hp_dataset_release(&tr);
    hp_dataset_release(&te);
}
END_TEST

static void be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* A test-split directory whose files are made by the case: returns the directory. */
static char *make_split(uint32_t img_magic, uint32_t count, uint32_t rows, size_t img_payload,
                        uint32_t lab_magic, uint32_t lab_count, int bad_label, int garbage)
{
    static char dirbuf[512];
    unsigned char *img = calloc(16 + img_payload + 1, 1), *lab = calloc(8 + 10000 + 1, 1);

    be32(img, img_magic);
    be32(img + 4, count);
    be32(img + 8, rows);
    be32(img + 12, 28);
    be32(lab, lab_magic);
    be32(lab + 4, lab_count);
    for (int i = 0; i < 10000; i++)
        lab[8 + i] = (unsigned char)(i % 10);
    if (bad_label)
        lab[8 + 77] = 12;
    const char *p;
    if (garbage)
        p = test_write_file("t10k-images-idx3-ubyte.gz", "this is not gzip data at all");
    else
        p = test_write_gz("t10k-images-idx3-ubyte.gz", img, 16 + img_payload);
    snprintf(dirbuf, sizeof(dirbuf), "%s", p);
    test_write_gz("t10k-labels-idx1-ubyte.gz", lab, 8 + (lab_count < 10000 ? lab_count : 10000));
    free(img);
    free(lab);
    return dirname(dirbuf);
}

struct corrupt {
    uint32_t img_magic, count, rows;
    size_t payload;
    uint32_t lab_magic, lab_count;
    int bad_label, garbage;
    const char *expect;
};

#define FULL (10000u * 784u)
static const struct corrupt cases[] = {
    {0x804, 10000, 28, FULL, 0x801, 10000, 0, 0, "bad magic number 0x00000804"},
    {0x803, 10000, 28, FULL, 0x803, 10000, 0, 0, "bad magic number 0x00000803"},
    {0x803, 10000, 28, FULL - 100, 0x801, 10000, 0, 0, "truncated"},
    {0x803, 10000, 28, FULL + 1, 0x801, 10000, 0, 0, "trailing data"},
    {0x803, 10000, 27, 10000u * 27 * 28, 0x801, 10000, 0, 0, "27x28, expected 28x28"},
    {0x803, 10000, 28, FULL, 0x801, 9999, 0, 0, "10000 images and 9999 labels"},
    {0x803, 10000, 28, FULL, 0x801, 10000, 1, 0, "label 12 of sample 77"},
    {0x803, 10000, 28, FULL, 0x801, 10000, 0, 1, "t10k-images-idx3-ubyte.gz"},
};

START_TEST(corrupt_files)
{
    const struct corrupt *c = &cases[_i];
    struct hp_dataset d = {0};
    char *dir = make_split(c->img_magic, c->count, c->rows, c->payload, c->lab_magic, c->lab_count,
                           c->bad_label, c->garbage);
    const char *err;

    test_capture_begin();
    ck_assert_int_eq(hp_dataset_load_fashion_mnist(dir, 0, &d), -HP_EDATA);
    err = test_capture_end();
    ck_assert_msg(strstr(err, c->expect) != NULL, "case %d: '%s' not in: %s", _i, c->expect, err);
    ck_assert_msg(strstr(err, "t10k-") != NULL, "case %d: no file name in: %s", _i, err);
    ck_assert_ptr_null(d.images);
}
END_TEST

START_TEST(missing_files)
{
    struct hp_dataset d = {0};
    const char *err;

    test_capture_begin();
    ck_assert_int_eq(hp_dataset_load_fashion_mnist("/nonexistent/fmnist", 1, &d), -HP_EDATA);
    err = test_capture_end();
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/fmnist/train-images-idx3-ubyte.gz"));
    ck_assert_ptr_nonnull(strstr(err, "not found"));
    ck_assert_ptr_nonnull(strstr(err, "apt-get install dataset-fashion-mnist"));
    ck_assert_ptr_null(d.images);
}
END_TEST

Suite *suite_data(void)
{
    Suite *s = suite_create("data");
    TCase *t = tcase_create("data");

    tcase_set_timeout(t, 60);
    tcase_add_test(t, real_files);
    tcase_add_loop_test(t, corrupt_files, 0, (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_test(t, missing_files);
    suite_add_tcase(s, t);
    return s;
}
