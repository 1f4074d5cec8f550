/* check_ops.c - every op of backend.h on the CUDA backend, compared with the CPU reference.
 *
 * Each check fills its inputs with seeded uniform numbers (hp_rng_uniform), uploads the same
 * values to both backends, runs the op on both, downloads the outputs and compares them
 * element by element:
 *
 *     |cuda - cpu| <= atol + rtol |cpu|,   rtol = 1e-3, atol = 1e-4
 *
 * An output that is a sum of K terms (GEMM and convolution outputs, bias and batch-norm
 * reductions, the loss sum) gets atol = 1e-4 sqrt(K): the two backends add in different
 * orders, and the rounding error of a sum of K random-sign terms grows like sqrt(K). Outputs
 * that involve no rounding (dropout masks, ReLU, max pooling forward, add, the correct count)
 * must be equal. Two "_fp32" checks (a GEMM and a convolution, inputs in [-1, 1)) use
 * atol = 3e-5 sqrt(K), rtol = 0: the difference of two fp32 sums has an rms of about
 * 4e-7 sqrt(K) (ten times that leaves room for Winograd and FFT algorithms), while rounding the
 * inputs to TF32 (10-bit mantissa) gives about 1.3e-4 sqrt(K); so they fail if cuBLAS or
 * cuDNN used TF32 tensor cores. AdamW's update rounds alike on both (no fused multiply-adds)
 * and is held to a few ulps (rtol 1e-6); the sum of squares, in double on both, to 1e-12.
 *
 * The sequence ops (test_seq_ops; GPT's embed, layer norm, plinear, attention, GELU and the
 * token loss) at gpt-tiny's shapes, an odd one and gpt2-xl's widths: the embedding forward and
 * backward must be equal (the CUDA backend adds in the CPU's order); layer norm, attention
 * and plinear outputs get tol_k of the length of the sums behind them (said at each test);
 * GELU the plain tolerances. Bad token ids must fail on both. Last, a whole training step of
 * gpt-tiny (forward, hp_net_loss_tokens, backward, AdamW) through hp_net on both backends
 * (test_text_step): the net's wiring of the sequence ops on the device.
 *
 * Output: "ok <name> maxerr=<e>" or "FAIL <name> ..." per check, then
 * "gpu_check_ops: N passed, M failed". Exit status 0 if all passed, 1 otherwise, 77 (SKIP)
 * when there is no CUDA device or the build has no CUDA backend.
 *
 * The CUDA backend comes through the loader (runtime/backend_module.h): this program lives in
 * build/tests, so unless $HETPIPE_CUDA_MODULE says otherwise it loads ../hetpipe-cuda.so.
 */
#include "backend.h"
#include "error.h"
#include "log.h"
#include "model.h"
#include "net.h"
#include "rng.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RTOL 1e-3
#define ATOL 1e-4
#define FP32_ATOL 3e-5 /* times sqrt(K), with rtol 0, for the TF32 detectors */

static struct hp_backend *be[2]; /* [0] the CPU reference, [1] CUDA */
static int n_passed, n_failed;
static uint64_t next_seed = 20261202;

/* be[i]->ops->op(be[i], ...) */
#define OP(i, op, ...) be[i]->ops->op(be[i], __VA_ARGS__)

/* ---- reporting ------------------------------------------------------------------------ */

static void report_ok(const char *name, double maxerr)
{
    printf("ok %s maxerr=%.3g\n", name, maxerr);
    n_passed++;
}

static void report_fail(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void report_fail(const char *name, const char *fmt, ...)
{
    va_list ap;

    printf("FAIL %s ", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    n_failed++;
}

/* 1 if an op run on both backends returned 0 on both; else reports the failure. */
static int both_ok(const char *name, const int rc[2])
{
    if (rc[0] == 0 && rc[1] == 0)
        return 1;
    report_fail(name, "op returned cpu %s, cuda %s (%s)", hp_errname(rc[0]), hp_errname(rc[1]),
                hp_strerror(rc[0] ? rc[0] : rc[1]));
    return 0;
}

static double tol_k(double k)
{
    return ATOL * sqrt(k);
}

/* ---- tensors on both backends --------------------------------------------------------- */

/* A float tensor [n] on each backend: d[0] in CPU memory, d[1] on the device. */
struct pair {
    size_t n;
    float *d[2];
};

static void pair_free(struct pair *t)
{
    for (int i = 0; i < 2; i++) {
        if (t->d[i])
            OP(i, free, t->d[i]);
        t->d[i] = NULL;
    }
}

/* Zeroed memory for n floats on both backends. */
static int pair_alloc(struct pair *t, size_t n)
{
    int rc = 0;

    t->n = n;
    t->d[0] = t->d[1] = NULL;
    for (int i = 0; i < 2 && !rc; i++)
        rc = OP(i, alloc, n * sizeof(float), (void **)&t->d[i]);
    if (rc)
        pair_free(t);
    return rc;
}

static int pair_upload(struct pair *t, const float *host)
{
    int rc = 0;

    for (int i = 0; i < 2 && !rc; i++)
        rc = OP(i, upload, t->d[i], host, t->n * sizeof(float));
    return rc;
}

/* h[i] uniform in [lo, hi), from a fresh seed per call. */
static void fill_rand(float *h, size_t n, float lo, float hi)
{
    const uint64_t seed = next_seed++;

    for (size_t i = 0; i < n; i++)
        h[i] = lo + (hi - lo) * hp_rng_uniform(seed, i);
}

/* The same n uniform numbers in [lo, hi) on both backends. */
static int pair_rand(struct pair *t, size_t n, float lo, float hi)
{
    float *h = malloc(n * sizeof(float));
    int rc;

    if (!h)
        return -HP_ENOMEM;
    fill_rand(h, n, lo, hi);
    rc = pair_alloc(t, n);
    if (!rc)
        rc = pair_upload(t, h);
    if (rc)
        pair_free(t);
    free(h);
    return rc;
}

/* Downloads t from both backends and compares all t->n elements; reports the check. */
static void check(const char *name, const struct pair *t, double atol, double rtol)
{
    float *h[2];
    double maxerr = 0.0;
    size_t nbad = 0, first = 0;
    int rc = 0;

    h[0] = malloc(t->n * sizeof(float));
    h[1] = malloc(t->n * sizeof(float));
    if (!h[0] || !h[1]) {
        rc = -HP_ENOMEM;
        goto out;
    }
    for (int i = 0; i < 2 && !rc; i++)
        rc = OP(i, download, h[i], t->d[i], t->n * sizeof(float));
    if (rc)
        goto out;
    for (size_t i = 0; i < t->n; i++) {
        const double ref = h[0][i], err = fabs((double)h[1][i] - ref);
        if (!(err <= atol + rtol * fabs(ref)) && nbad++ == 0)
            first = i;
        if (!(err <= maxerr)) /* NaN sticks */
            maxerr = err;
    }
    if (nbad == 0)
        report_ok(name, maxerr);
    else
        report_fail(name,
                    "maxerr=%.3g: %zu of %zu elements beyond %.3g + %.3g |cpu|; first [%zu]: "
                    "cuda %.9g cpu %.9g",
                    maxerr, nbad, t->n, atol, rtol, first, (double)h[1][first],
                    (double)h[0][first]);
out:
    if (rc)
        report_fail(name, "download failed: %s", hp_strerror(rc));
    free(h[0]);
    free(h[1]);
}

static void check_scalar(const char *name, double cuda, double cpu, double atol, double rtol)
{
    const double err = fabs(cuda - cpu);

    if (err <= atol + rtol * fabs(cpu))
        report_ok(name, err);
    else
        report_fail(name, "maxerr=%.3g: cuda %.9g cpu %.9g (allowed %.3g + %.3g |cpu|)", err, cuda,
                    cpu, atol, rtol);
}

static void setup_failed(const char *name, int rc)
{
    report_fail(name, "setup failed: %s", hp_strerror(rc));
}

/* ---- memory --------------------------------------------------------------------------- */

static void test_memory(void)
{
    const size_t n = 10007;
    struct pair t = {0}, u = {0};
    float *h = malloc(n * sizeof(float));
    int rc[2], err;

    err = h ? 0 : -HP_ENOMEM;
    if (!err)
        err = pair_alloc(&t, n);
    if (!err)
        err = pair_alloc(&u, n);
    if (err) {
        setup_failed("memory", err);
        goto out;
    }
    check("alloc_zeroed", &t, 0.0, 0.0);

    fill_rand(h, n, -1.0f, 1.0f);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, upload, t.d[i], h, n * sizeof(float));
    if (!both_ok("upload", rc))
        goto out;
    check("upload_download", &t, 0.0, 0.0);

    /* copy a middle range, then zero an unaligned part of it */
    for (int i = 0; i < 2; i++) {
        rc[i] = OP(i, copy, u.d[i] + 3, t.d[i] + 5, (n - 10) * sizeof(float));
        if (!rc[i])
            rc[i] = OP(i, zero, u.d[i] + 100, 777 * sizeof(float));
        if (!rc[i])
            rc[i] = be[i]->ops->sync(be[i]);
    }
    if (!both_ok("copy_zero", rc))
        goto out;
    check("copy_zero", &u, 0.0, 0.0);
out:
    pair_free(&t);
    pair_free(&u);
    free(h);
}

/* ---- GEMM ----------------------------------------------------------------------------- */

/* C [m, n] (ldc) = alpha op(A) op(B) + beta C with padded leading dimensions; the whole C
 * buffer is compared, so writes into the padding are caught too. */
static void test_gemm(int ta, int tb, int m, int n, int k, float alpha, float beta, int pad,
                      double atol, double rtol, const char *tag)
{
    const int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    const size_t asz = (size_t)(ta ? k : m) * lda, bsz = (size_t)(tb ? n : k) * ldb;
    struct pair a = {0}, b = {0}, c = {0};
    char name[64];
    int rc[2];

    snprintf(name, sizeof(name), "gemm_%c%c%s", ta ? 't' : 'n', tb ? 't' : 'n', tag);
    if ((rc[0] = pair_rand(&a, asz, -1.0f, 1.0f)) || (rc[0] = pair_rand(&b, bsz, -1.0f, 1.0f)) ||
        (rc[0] = pair_rand(&c, (size_t)m * ldc, -1.0f, 1.0f))) {
        setup_failed(name, rc[0]);
        goto out;
    }
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, gemm, ta, tb, m, n, k, alpha, a.d[i], lda, b.d[i], ldb, beta, c.d[i], ldc);
    if (both_ok(name, rc))
        check(name, &c, atol, rtol);
out:
    pair_free(&a);
    pair_free(&b);
    pair_free(&c);
}

static void test_gemms(void)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            test_gemm(ta, tb, 37, 29, 53, 0.75f, -0.5f, 3, tol_k(53), RTOL, "");
    test_gemm(0, 1, 128, 96, 300, 1.0f, 0.0f, 0, tol_k(300), RTOL, "_large");
    test_gemm(1, 0, 64, 200, 1000, 0.5f, 1.0f, 0, tol_k(1000), RTOL, "_large");
    test_gemm(0, 0, 512, 512, 512, 1.0f, 0.0f, 0, FP32_ATOL * sqrt(512), 0.0, "_fp32");
}

/* ---- bias ----------------------------------------------------------------------------- */

static void test_bias(int rows, int cols)
{
    struct pair y = {0}, b = {0}, db = {0};
    char name[64];
    int rc[2];

    snprintf(name, sizeof(name), "bias_add/%dx%d", rows, cols);
    if ((rc[0] = pair_rand(&y, (size_t)rows * cols, -1.0f, 1.0f)) ||
        (rc[0] = pair_rand(&b, (size_t)cols, -1.0f, 1.0f)) ||
        (rc[0] = pair_rand(&db, (size_t)cols, -9.0f, 9.0f))) {
        setup_failed(name, rc[0]);
        goto out;
    }
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, bias_add, y.d[i], b.d[i], rows, cols);
    if (both_ok(name, rc))
        check(name, &y, ATOL, RTOL);

    /* db starts as garbage: it must be overwritten */
    snprintf(name, sizeof(name), "bias_grad/%dx%d", rows, cols);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, bias_grad, y.d[i], db.d[i], rows, cols);
    if (both_ok(name, rc))
        check(name, &db, tol_k(rows), RTOL);
out:
    pair_free(&y);
    pair_free(&b);
    pair_free(&db);
}

/* ---- convolution ---------------------------------------------------------------------- */

/* Forward, then backward with dx, dw, db pre-filled with garbage (they must be overwritten).
 * fp32 != 0: the TF32 detector tolerances instead of the usual ones. */
static void test_conv(const char *tag, int n, int c, int h, int w, int k, int r, int stride,
                      int pad, int has_bias, int with_dx, int fp32)
{
    struct hp_conv_desc d = {n, c, h, w, k, r, r, stride, pad, 0, 0, has_bias};
    struct hp_conv *conv[2] = {NULL, NULL};
    void *ws[2] = {NULL, NULL};
    struct pair x = {0}, wt = {0}, b = {0}, y = {0}, dy = {0}, dx = {0}, dw = {0}, db = {0};
    size_t wsz[2] = {0, 0};
    const double rtol = fp32 ? 0.0 : RTOL, atol = fp32 ? FP32_ATOL : ATOL;
    char name[96];
    int rc[2], err = 0;

    d.p = (h + 2 * pad - r) / stride + 1;
    d.q = (w + 2 * pad - r) / stride + 1;
    snprintf(name, sizeof(name), "conv_create/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, conv_create, &d, &conv[i], &wsz[i]);
    if (!both_ok(name, rc))
        goto out;
    for (int i = 0; i < 2 && !err; i++)
        if (wsz[i])
            err = OP(i, alloc, wsz[i], &ws[i]);
    if (!err)
        err = pair_rand(&x, (size_t)n * c * h * w, -1.0f, 1.0f);
    if (!err)
        err = pair_rand(&wt, (size_t)k * c * r * r, -1.0f, 1.0f);
    if (!err)
        err = pair_rand(&b, (size_t)k, -1.0f, 1.0f);
    if (!err)
        err = pair_rand(&y, (size_t)n * k * d.p * d.q, -9.0f, 9.0f);
    if (!err)
        err = pair_rand(&dy, (size_t)n * k * d.p * d.q, -1.0f, 1.0f);
    if (!err)
        err = pair_rand(&dx, (size_t)n * c * h * w, -9.0f, 9.0f);
    if (!err)
        err = pair_rand(&dw, (size_t)k * c * r * r, -9.0f, 9.0f);
    if (!err)
        err = pair_rand(&db, (size_t)k, -9.0f, 9.0f);
    if (err) {
        setup_failed(name, err);
        goto out;
    }

    snprintf(name, sizeof(name), "conv_forward/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] =
            OP(i, conv_forward, conv[i], x.d[i], wt.d[i], has_bias ? b.d[i] : NULL, y.d[i], ws[i]);
    if (both_ok(name, rc))
        check(name, &y, atol * sqrt((double)c * r * r), rtol);

    snprintf(name, sizeof(name), "conv_backward/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, conv_backward, conv[i], x.d[i], wt.d[i], dy.d[i], with_dx ? dx.d[i] : NULL,
                   dw.d[i], has_bias ? db.d[i] : NULL, ws[i]);
    if (!both_ok(name, rc))
        goto out;
    if (with_dx) {
        snprintf(name, sizeof(name), "conv_backward_dx/%s", tag);
        check(name, &dx, atol * sqrt((double)k * r * r), rtol);
    }
    snprintf(name, sizeof(name), "conv_backward_dw/%s", tag);
    check(name, &dw, atol * sqrt((double)n * d.p * d.q), rtol);
    if (has_bias) {
        snprintf(name, sizeof(name), "conv_backward_db/%s", tag);
        check(name, &db, atol * sqrt((double)n * d.p * d.q), rtol);
    }
out:
    pair_free(&x);
    pair_free(&wt);
    pair_free(&b);
    pair_free(&y);
    pair_free(&dy);
    pair_free(&dx);
    pair_free(&dw);
    pair_free(&db);
    for (int i = 0; i < 2; i++) {
        if (ws[i])
            OP(i, free, ws[i]);
        if (conv[i])
            be[i]->ops->conv_destroy(be[i], conv[i]);
    }
}

static void test_convs(void)
{
    /* tag, n, c, h, w, k, r = s, stride, pad, has_bias, with_dx, fp32 */
    test_conv("1x1+bias", 2, 16, 9, 9, 24, 1, 1, 0, 1, 1, 0);
    test_conv("1x1s2", 2, 8, 8, 8, 16, 1, 2, 0, 0, 1, 0);
    test_conv("3x3p1+bias", 2, 8, 12, 10, 16, 3, 1, 1, 1, 1, 0);
    test_conv("3x3p0", 1, 5, 7, 9, 6, 3, 1, 0, 0, 1, 0);
    test_conv("3x3s2p1+bias", 3, 8, 11, 11, 12, 3, 2, 1, 1, 1, 0);
    test_conv("3x3s2p0", 2, 4, 10, 9, 8, 3, 2, 0, 0, 1, 0);
    test_conv("7x7s2p3,no_dx", 2, 3, 23, 23, 8, 7, 2, 3, 0, 0, 0);
    test_conv("7x7s2p3+bias,no_dx", 2, 3, 32, 32, 16, 7, 2, 3, 1, 0, 0);
    test_conv("3x3p1_fp32", 8, 64, 16, 16, 64, 3, 1, 1, 0, 1, 1);
}

/* ---- ReLU ----------------------------------------------------------------------------- */

static void test_relu(void)
{
    const size_t n = 10007;
    struct pair x = {0}, y = {0}, dy = {0}, dx = {0};
    int rc[2];

    if ((rc[0] = pair_rand(&x, n, -1.0f, 1.0f)) || (rc[0] = pair_rand(&y, n, -9.0f, 9.0f)) ||
        (rc[0] = pair_rand(&dy, n, -1.0f, 1.0f)) || (rc[0] = pair_rand(&dx, n, -9.0f, 9.0f))) {
        setup_failed("relu", rc[0]);
        goto out;
    }
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, relu_forward, x.d[i], y.d[i], n);
    if (both_ok("relu_forward", rc))
        check("relu_forward", &y, 0.0, 0.0);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, relu_backward, y.d[i], dy.d[i], dx.d[i], n);
    if (both_ok("relu_backward", rc))
        check("relu_backward", &dx, 0.0, 0.0);
    /* in place: y = x, dx = dy */
    for (int i = 0; i < 2; i++) {
        rc[i] = OP(i, relu_forward, x.d[i], x.d[i], n);
        if (!rc[i])
            rc[i] = OP(i, relu_backward, x.d[i], dy.d[i], dy.d[i], n);
    }
    if (both_ok("relu_in_place", rc)) {
        check("relu_forward_in_place", &x, 0.0, 0.0);
        check("relu_backward_in_place", &dy, 0.0, 0.0);
    }
out:
    pair_free(&x);
    pair_free(&y);
    pair_free(&dy);
    pair_free(&dx);
}

/* ---- pooling -------------------------------------------------------------------------- */

static void test_pool(int is_max, int n, int c, int h, int w, int kernel, int stride, int pad)
{
    struct hp_pool_desc d = {n, c, h, w, kernel, stride, pad, 0, 0};
    struct pair x = {0}, y = {0}, dy = {0}, dx = {0};
    const char *op = is_max ? "maxpool" : "avgpool";
    char tag[48], name[96];
    int rc[2];

    d.p = (h + 2 * pad - kernel) / stride + 1;
    d.q = (w + 2 * pad - kernel) / stride + 1;
    snprintf(tag, sizeof(tag), "%dx%d,k%ds%dp%d", h, w, kernel, stride, pad);
    snprintf(name, sizeof(name), "%s/%s", op, tag);
    if ((rc[0] = pair_rand(&x, (size_t)n * c * h * w, -1.0f, 1.0f)) ||
        (rc[0] = pair_rand(&y, (size_t)n * c * d.p * d.q, -9.0f, 9.0f)) ||
        (rc[0] = pair_rand(&dy, (size_t)n * c * d.p * d.q, -1.0f, 1.0f)) ||
        (rc[0] = pair_rand(&dx, (size_t)n * c * h * w, -9.0f, 9.0f))) {
        setup_failed(name, rc[0]);
        goto out;
    }

    snprintf(name, sizeof(name), "%s_forward/%s", op, tag);
    for (int i = 0; i < 2; i++)
        rc[i] = is_max ? OP(i, maxpool_forward, &d, x.d[i], y.d[i])
                       : OP(i, avgpool_forward, &d, x.d[i], y.d[i]);
    if (!both_ok(name, rc))
        goto out;
    /* a maximum is one of the inputs: exact; an average rounds */
    check(name, &y, is_max ? 0.0 : ATOL, is_max ? 0.0 : RTOL);

    snprintf(name, sizeof(name), "%s_backward/%s", op, tag);
    for (int i = 0; i < 2; i++)
        rc[i] = is_max ? OP(i, maxpool_backward, &d, x.d[i], y.d[i], dy.d[i], dx.d[i])
                       : OP(i, avgpool_backward, &d, dy.d[i], dx.d[i]);
    if (both_ok(name, rc))
        check(name, &dx, ATOL, RTOL);
out:
    pair_free(&x);
    pair_free(&y);
    pair_free(&dy);
    pair_free(&dx);
}

static void test_pools(void)
{
    for (int is_max = 1; is_max >= 0; is_max--) {
        test_pool(is_max, 2, 3, 8, 8, 2, 2, 0);
        test_pool(is_max, 2, 4, 9, 11, 3, 2, 1); /* padded, ResNet's stem pooling */
        test_pool(is_max, 1, 2, 8, 8, 3, 2, 0);  /* the last row and column are unused */
        test_pool(is_max, 2, 3, 6, 7, 3, 1, 1);  /* overlapping windows */
        test_pool(is_max, 2, 5, 7, 7, 7, 1, 0);  /* global */
        test_pool(is_max, 3, 16, 4, 4, 4, 4, 0); /* global, stride = kernel */
    }
}

/* ---- batch normalisation -------------------------------------------------------------- */

static void test_bn(int n, int c, int hw)
{
    const struct hp_bn_desc d = {n, c, hw, 1e-5f, 0.1f};
    const size_t sz = (size_t)n * c * hw;
    const double m = (double)n * hw;
    struct pair x = {0}, gamma = {0}, beta = {0}, y = {0}, rmean = {0}, rvar = {0};
    struct pair smean = {0}, sinv = {0}, dy = {0}, dx = {0}, dgamma = {0}, dbeta = {0};
    float *h = NULL;
    char tag[48], name[96];
    int rc[2], err;

    snprintf(tag, sizeof(tag), "%dx%dx%d", n, c, hw);
    snprintf(name, sizeof(name), "bn/%s", tag);
    /* x with a non-zero mean, so that mean and variance both matter */
    err = pair_rand(&x, sz, -1.0f, 3.0f);
    if (!err)
        err = pair_rand(&gamma, (size_t)c, 0.5f, 1.5f);
    if (!err)
        err = pair_rand(&beta, (size_t)c, -0.5f, 0.5f);
    if (!err)
        err = pair_rand(&y, sz, -9.0f, 9.0f);
    if (!err)
        err = pair_rand(&rmean, (size_t)c, -0.5f, 0.5f);
    if (!err)
        err = pair_rand(&rvar, (size_t)c, 0.5f, 1.5f);
    if (!err)
        err = pair_rand(&smean, (size_t)c, -9.0f, 9.0f);
    if (!err)
        err = pair_rand(&sinv, (size_t)c, -9.0f, 9.0f);
    if (!err)
        err = pair_rand(&dy, sz, -1.0f, 1.0f);
    if (!err)
        err = pair_rand(&dx, sz, -9.0f, 9.0f);
    if (!err)
        err = pair_rand(&dgamma, (size_t)c, -9.0f, 9.0f);
    if (!err)
        err = pair_rand(&dbeta, (size_t)c, -9.0f, 9.0f);
    if (err) {
        setup_failed(name, err);
        goto out;
    }

    snprintf(name, sizeof(name), "bn_forward_train/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, bn_forward_train, &d, x.d[i], gamma.d[i], beta.d[i], y.d[i], rmean.d[i],
                   rvar.d[i], smean.d[i], sinv.d[i]);
    if (!both_ok(name, rc))
        goto out;
    check(name, &y, tol_k(m), RTOL);
    snprintf(name, sizeof(name), "bn_forward_train_running_mean/%s", tag);
    check(name, &rmean, tol_k(m), RTOL);
    snprintf(name, sizeof(name), "bn_forward_train_running_var/%s", tag);
    check(name, &rvar, tol_k(m), RTOL);
    snprintf(name, sizeof(name), "bn_forward_train_save_mean/%s", tag);
    check(name, &smean, tol_k(m), RTOL);
    snprintf(name, sizeof(name), "bn_forward_train_save_invstd/%s", tag);
    check(name, &sinv, tol_k(m), RTOL);

    snprintf(name, sizeof(name), "bn_backward/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, bn_backward, &d, x.d[i], dy.d[i], gamma.d[i], smean.d[i], sinv.d[i], dx.d[i],
                   dgamma.d[i], dbeta.d[i]);
    if (both_ok(name, rc)) {
        snprintf(name, sizeof(name), "bn_backward_dx/%s", tag);
        check(name, &dx, tol_k(m), RTOL);
        snprintf(name, sizeof(name), "bn_backward_dgamma/%s", tag);
        check(name, &dgamma, tol_k(m), RTOL);
        snprintf(name, sizeof(name), "bn_backward_dbeta/%s", tag);
        check(name, &dbeta, tol_k(m), RTOL);
    }

    /* eval with the same fresh running statistics on both backends */
    snprintf(name, sizeof(name), "bn_forward_eval/%s", tag);
    h = malloc((size_t)c * sizeof(float));
    if (!h) {
        setup_failed(name, -HP_ENOMEM);
        goto out;
    }
    fill_rand(h, (size_t)c, -0.5f, 0.5f);
    err = pair_upload(&rmean, h);
    fill_rand(h, (size_t)c, 0.5f, 1.5f);
    if (!err)
        err = pair_upload(&rvar, h);
    if (err) {
        setup_failed(name, err);
        goto out;
    }
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, bn_forward_eval, &d, x.d[i], gamma.d[i], beta.d[i], rmean.d[i], rvar.d[i],
                   y.d[i]);
    if (both_ok(name, rc))
        check(name, &y, ATOL, RTOL);
out:
    free(h);
    pair_free(&x);
    pair_free(&gamma);
    pair_free(&beta);
    pair_free(&y);
    pair_free(&rmean);
    pair_free(&rvar);
    pair_free(&smean);
    pair_free(&sinv);
    pair_free(&dy);
    pair_free(&dx);
    pair_free(&dgamma);
    pair_free(&dbeta);
}

static void test_bns(void)
{
    test_bn(4, 6, 25);
    test_bn(8, 10, 1); /* after a linear layer */
    test_bn(32, 16, 196);
}

/* ---- dropout -------------------------------------------------------------------------- */

static void test_dropout(size_t n, float p, uint64_t seed)
{
    struct pair x = {0}, y = {0}, mask = {0}, dy = {0}, dx = {0};
    char tag[48], name[96];
    int rc[2];

    snprintf(tag, sizeof(tag), "n%zu,p%.2f", n, (double)p);
    snprintf(name, sizeof(name), "dropout/%s", tag);
    if ((rc[0] = pair_rand(&x, n, -1.0f, 1.0f)) || (rc[0] = pair_rand(&y, n, -9.0f, 9.0f)) ||
        (rc[0] = pair_rand(&mask, n, -9.0f, 9.0f)) || (rc[0] = pair_rand(&dy, n, -1.0f, 1.0f)) ||
        (rc[0] = pair_rand(&dx, n, -9.0f, 9.0f))) {
        setup_failed(name, rc[0]);
        goto out;
    }
    snprintf(name, sizeof(name), "dropout_forward/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, dropout_forward, x.d[i], y.d[i], mask.d[i], n, p, seed);
    if (!both_ok(name, rc))
        goto out;
    snprintf(name, sizeof(name), "dropout_mask/%s", tag);
    check(name, &mask, 0.0, 0.0);
    snprintf(name, sizeof(name), "dropout_forward/%s", tag);
    check(name, &y, 0.0, 0.0);
    snprintf(name, sizeof(name), "dropout_backward/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, dropout_backward, dy.d[i], mask.d[i], dx.d[i], n);
    if (both_ok(name, rc))
        check(name, &dx, 0.0, 0.0);
out:
    pair_free(&x);
    pair_free(&y);
    pair_free(&mask);
    pair_free(&dy);
    pair_free(&dx);
}

/* ---- add, axpy ------------------------------------------------------------------------ */

static void test_add_axpy(void)
{
    const size_t n = 100003;
    struct pair a = {0}, b = {0}, y = {0};
    int rc[2];

    if ((rc[0] = pair_rand(&a, n, -1.0f, 1.0f)) || (rc[0] = pair_rand(&b, n, -1.0f, 1.0f)) ||
        (rc[0] = pair_rand(&y, n, -9.0f, 9.0f))) {
        setup_failed("add", rc[0]);
        goto out;
    }
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, add, a.d[i], b.d[i], y.d[i], n);
    if (both_ok("add", rc))
        check("add", &y, 0.0, 0.0); /* one rounding, the same on both */
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, add, a.d[i], b.d[i], a.d[i], n);
    if (both_ok("add_in_place", rc))
        check("add_in_place", &a, 0.0, 0.0);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, axpy, -0.375f, b.d[i], y.d[i], n);
    if (both_ok("axpy", rc))
        check("axpy", &y, ATOL, RTOL); /* the device may fuse the multiply-add */
out:
    pair_free(&a);
    pair_free(&b);
    pair_free(&y);
}

/* ---- softmax cross-entropy ------------------------------------------------------------ */

/* Random logits in [-3, 3); every third row has its label's logit raised so that some rows
 * are right; row 1 is all equal with label 0 (right: the first maximum wins), row 2 all equal
 * with the last label (wrong). Also run without dlogits. */
static void test_xent(int n, int classes)
{
    const size_t sz = (size_t)n * classes;
    struct pair z = {0}, dz = {0};
    int32_t *lab[2] = {NULL, NULL}, *hl = malloc((size_t)n * sizeof(int32_t));
    float *hz = malloc(sz * sizeof(float));
    const uint64_t seed = next_seed++;
    double loss[2] = {0.0, 0.0};
    int correct[2] = {-1, -1}, rc[2], err = 0;
    char tag[48], name[96];

    snprintf(tag, sizeof(tag), "%dx%d", n, classes);
    snprintf(name, sizeof(name), "softmax_xent/%s", tag);
    if (!hl || !hz) {
        setup_failed(name, -HP_ENOMEM);
        goto out;
    }
    fill_rand(hz, sz, -3.0f, 3.0f);
    for (int r = 0; r < n; r++) {
        hl[r] = (int32_t)(hp_rng_uniform(seed, (uint64_t)r) * (float)classes);
        if (hl[r] >= classes)
            hl[r] = classes - 1;
        if (r % 3 == 0)
            hz[(size_t)r * classes + hl[r]] += 4.0f;
    }
    if (n > 2) {
        for (int j = 0; j < classes; j++)
            hz[(size_t)1 * classes + j] = hz[(size_t)2 * classes + j] = 0.5f;
        hl[1] = 0;
        hl[2] = classes - 1;
    }
    err = pair_alloc(&z, sz);
    if (!err)
        err = pair_upload(&z, hz);
    if (!err)
        err = pair_rand(&dz, sz, -9.0f, 9.0f);
    for (int i = 0; i < 2 && !err; i++) {
        err = OP(i, alloc, (size_t)n * sizeof(int32_t), (void **)&lab[i]);
        if (!err)
            err = OP(i, upload, lab[i], hl, (size_t)n * sizeof(int32_t));
    }
    if (err) {
        setup_failed(name, err);
        goto out;
    }

    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, softmax_xent, z.d[i], lab[i], n, classes, 1.0f / (float)n, dz.d[i], &loss[i],
                   &correct[i]);
    if (!both_ok(name, rc))
        goto out;
    snprintf(name, sizeof(name), "softmax_xent_loss_sum/%s", tag);
    check_scalar(name, loss[1], loss[0], tol_k(n), RTOL);
    snprintf(name, sizeof(name), "softmax_xent_correct/%s", tag);
    if (correct[1] == correct[0])
        report_ok(name, 0.0);
    else
        report_fail(name, "cuda %d cpu %d", correct[1], correct[0]);
    snprintf(name, sizeof(name), "softmax_xent_dlogits/%s", tag);
    check(name, &dz, ATOL, RTOL);

    snprintf(name, sizeof(name), "softmax_xent_no_dlogits/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, softmax_xent, z.d[i], lab[i], n, classes, 1.0f, NULL, &loss[i], &correct[i]);
    if (!both_ok(name, rc))
        goto out;
    if (fabs(loss[1] - loss[0]) <= tol_k(n) + RTOL * fabs(loss[0]) && correct[1] == correct[0])
        report_ok(name, fabs(loss[1] - loss[0]));
    else
        report_fail(name, "loss cuda %.9g cpu %.9g, correct cuda %d cpu %d", loss[1], loss[0],
                    correct[1], correct[0]);
out:
    for (int i = 0; i < 2; i++)
        if (lab[i])
            OP(i, free, lab[i]);
    pair_free(&z);
    pair_free(&dz);
    free(hl);
    free(hz);
}

/* ---- SGD ------------------------------------------------------------------------------ */

/* Two steps (the second with a new gradient), momentum mu. */
static void test_sgd(float mu)
{
    const size_t n = 10007;
    struct pair w = {0}, g = {0}, m = {0};
    float *h = malloc(n * sizeof(float));
    char tag[32], name[64];
    int rc[2], err;

    snprintf(tag, sizeof(tag), "mu%.1f", (double)mu);
    snprintf(name, sizeof(name), "sgd_update/%s", tag);
    err = h ? 0 : -HP_ENOMEM;
    if (!err)
        err = pair_rand(&w, n, -1.0f, 1.0f);
    if (!err)
        err = pair_rand(&g, n, -1.0f, 1.0f);
    if (!err)
        err = pair_rand(&m, n, -1.0f, 1.0f);
    if (err) {
        setup_failed(name, err);
        goto out;
    }
    for (int step = 0; step < 2; step++) {
        if (step == 1) {
            fill_rand(h, n, -1.0f, 1.0f);
            err = pair_upload(&g, h);
            if (err) {
                setup_failed(name, err);
                goto out;
            }
        }
        for (int i = 0; i < 2; i++)
            rc[i] = OP(i, sgd_update, w.d[i], g.d[i], m.d[i], n, 0.05f, mu, 5e-4f);
        if (!both_ok(name, rc))
            goto out;
    }
    snprintf(name, sizeof(name), "sgd_update_w/%s", tag);
    check(name, &w, ATOL, RTOL);
    snprintf(name, sizeof(name), "sgd_update_m/%s", tag);
    check(name, &m, ATOL, RTOL);
out:
    pair_free(&w);
    pair_free(&g);
    pair_free(&m);
    free(h);
}

/* ---- AdamW, sum of squares, scale ----------------------------------------------------- */

/* Three steps from zero moments (new gradients each step, every 13th zero), decay wd. The
 * CUDA kernel rounds each operation as the CPU does (no fused multiply-adds), so the results
 * should agree to the bit; a few ulps are allowed. */
static void test_adamw(float wd)
{
    const size_t n = 10007;
    struct pair w = {0}, g = {0}, m = {0}, v = {0};
    float *h = malloc(n * sizeof(float));
    char tag[32], name[64];
    int rc[2], err;

    snprintf(tag, sizeof(tag), "wd%.1f", (double)wd);
    snprintf(name, sizeof(name), "adamw_update/%s", tag);
    err = h ? 0 : -HP_ENOMEM;
    if (!err)
        err = pair_rand(&w, n, -1.0f, 1.0f);
    if (!err)
        err = pair_alloc(&g, n);
    if (!err)
        err = pair_alloc(&m, n);
    if (!err)
        err = pair_alloc(&v, n);
    if (err) {
        setup_failed(name, err);
        goto out;
    }
    for (long step = 1; step <= 3; step++) {
        const struct hp_adamw_desc d = {
            .lr = 1e-3f, .wd = wd, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .step = step};
        fill_rand(h, n, -0.1f, 0.1f);
        for (size_t i = 0; i < n; i += 13)
            h[i] = 0.0f;
        err = pair_upload(&g, h);
        if (err) {
            setup_failed(name, err);
            goto out;
        }
        for (int i = 0; i < 2; i++)
            rc[i] = OP(i, adamw_update, w.d[i], g.d[i], m.d[i], v.d[i], n, &d);
        if (!both_ok(name, rc))
            goto out;
    }
    snprintf(name, sizeof(name), "adamw_update_w/%s", tag);
    check(name, &w, 0.0, 1e-6);
    snprintf(name, sizeof(name), "adamw_update_m/%s", tag);
    check(name, &m, 1e-12, 1e-6);
    snprintf(name, sizeof(name), "adamw_update_v/%s", tag);
    check(name, &v, 1e-15, 1e-6);
out:
    pair_free(&w);
    pair_free(&g);
    pair_free(&m);
    pair_free(&v);
    free(h);
}

/* The sum of squares (in double on both; the order of the additions differs) of n floats,
 * then the tensor scaled by alpha (exact: one rounding each). */
static void test_sumsq_scale(size_t n)
{
    struct pair x = {0};
    double s[2] = {0.0, 0.0};
    char name[64];
    int rc[2], err;

    snprintf(name, sizeof(name), "sumsq/%zu", n);
    err = pair_rand(&x, n, -2.0f, 2.0f);
    if (err) {
        setup_failed(name, err);
        return;
    }
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, sumsq, x.d[i], n, &s[i]);
    if (both_ok(name, rc))
        check_scalar(name, s[1], s[0], 0.0, 1e-12);
    snprintf(name, sizeof(name), "scale/%zu", n);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, scale, x.d[i], n, 0.37f);
    if (both_ok(name, rc))
        check(name, &x, 0.0, 0.0);
    pair_free(&x);
}

/* ---- sequence ops (GPT) --------------------------------------------------------------- */

/* check() under a name formatted from fmt. */
static void checkf(const struct pair *t, double atol, double rtol, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void checkf(const struct pair *t, double atol, double rtol, const char *fmt, ...)
{
    char name[128];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(name, sizeof(name), fmt, ap);
    va_end(ap);
    check(name, t, atol, rtol);
}

/* A tensor of a test: n uniform numbers in [lo, hi) on both backends (pair_rand). */
struct rand_spec {
    struct pair *t;
    size_t n;
    float lo, hi;
};
#define NSPECS(s) ((int)(sizeof(s) / sizeof((s)[0])))

/* pair_rand of each spec in turn: 0, or the first failure's code. */
static int pairs_rand(const struct rand_spec *s, int count)
{
    int rc = 0;

    for (int i = 0; i < count && !rc; i++)
        rc = pair_rand(s[i].t, s[i].n, s[i].lo, s[i].hi);
    return rc;
}

static void pairs_free(const struct rand_spec *s, int count)
{
    for (int i = 0; i < count; i++)
        pair_free(s[i].t);
}

/* Token ids of n sequences of T positions as floats, uniform in [0, vocab). */
static void fill_ids(float *h, size_t rows, int vocab)
{
    const uint64_t seed = next_seed++;

    for (size_t r = 0; r < rows; r++) {
        int id = (int)(hp_rng_uniform(seed, r) * (float)vocab);
        h[r] = (float)(id < vocab ? id : vocab - 1);
    }
}

/* Forward: the gather and its one addition are exact. Backward adds dy in the CPU's order
 * (positions ascending, in float), so dwte and dwpe must be equal too; they start as garbage
 * (overwritten, absent tokens' rows included). Then a bad id (vocab, and 2.5) must fail with
 * -HP_EINVAL on both. */
static void test_embed(int n, int T, int d, int vocab)
{
    const size_t rows = (size_t)n * T;
    struct pair ids = {0}, wte = {0}, wpe = {0}, y = {0}, dy = {0}, dwte = {0}, dwpe = {0};
    const struct rand_spec spec[] = {{&wte, (size_t)vocab * d, -1.0f, 1.0f},
                                     {&wpe, (size_t)T * d, -1.0f, 1.0f},
                                     {&y, rows * d, -9.0f, 9.0f},
                                     {&dy, rows * d, -1.0f, 1.0f},
                                     {&dwte, (size_t)vocab * d, -9.0f, 9.0f},
                                     {&dwpe, (size_t)T * d, -9.0f, 9.0f}};
    float *h = malloc(rows * sizeof(float));
    char tag[64], name[96];
    int rc[2], err;

    snprintf(tag, sizeof(tag), "n%d,T%d,d%d,V%d", n, T, d, vocab);
    snprintf(name, sizeof(name), "embed/%s", tag);
    err = h ? 0 : -HP_ENOMEM;
    if (!err) {
        fill_ids(h, rows, vocab);
        err = pair_alloc(&ids, rows);
    }
    if (!err)
        err = pair_upload(&ids, h);
    if (!err)
        err = pairs_rand(spec, NSPECS(spec));
    if (err) {
        setup_failed(name, err);
        goto out;
    }
    snprintf(name, sizeof(name), "embed_forward/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, embed_forward, ids.d[i], wte.d[i], wpe.d[i], y.d[i], n, T, d, vocab);
    if (both_ok(name, rc))
        check(name, &y, 0.0, 0.0);
    snprintf(name, sizeof(name), "embed_backward/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, embed_backward, ids.d[i], dy.d[i], dwte.d[i], dwpe.d[i], n, T, d, vocab);
    if (both_ok(name, rc)) {
        checkf(&dwte, 0.0, 0.0, "embed_backward_dwte/%s", tag);
        checkf(&dwpe, 0.0, 0.0, "embed_backward_dwpe/%s", tag);
    }
    for (int bad = 0; bad < 2; bad++) {
        snprintf(name, sizeof(name), "embed_forward_bad_id%d/%s", bad, tag);
        h[rows - 1] = bad ? 2.5f : (float)vocab;
        err = pair_upload(&ids, h);
        for (int i = 0; i < 2 && !err; i++)
            rc[i] = OP(i, embed_forward, ids.d[i], wte.d[i], wpe.d[i], y.d[i], n, T, d, vocab);
        if (err)
            setup_failed(name, err);
        else if (rc[0] == -HP_EINVAL && rc[1] == -HP_EINVAL)
            report_ok(name, 0.0);
        else
            report_fail(name, "expected EINVAL from both, got cpu %s, cuda %s", hp_errname(rc[0]),
                        hp_errname(rc[1]));
    }
out:
    free(h);
    pair_free(&ids);
    pairs_free(spec, NSPECS(spec));
}

/* Rows of x in [2, 4) (a mean to take out). y, mean and rstd: usual tolerances (sums of d
 * terms: tol_k(d)); dgamma and dbeta sum over rows (tol_k(rows)), dx over d (tol_k(d));
 * outputs start as garbage. Backward again without dx: dgamma is still written. */
static void test_layernorm(int rows, int d)
{
    struct pair x = {0}, gamma = {0}, beta = {0}, y = {0}, mean = {0}, rstd = {0}, dy = {0},
                dx = {0}, dgamma = {0}, dbeta = {0};
    const size_t sz = (size_t)rows * d;
    const struct rand_spec spec[] = {{&x, sz, 2.0f, 4.0f},
                                     {&gamma, (size_t)d, 0.5f, 1.5f},
                                     {&beta, (size_t)d, -1.0f, 1.0f},
                                     {&y, sz, -9.0f, 9.0f},
                                     {&mean, (size_t)rows, -9.0f, 9.0f},
                                     {&rstd, (size_t)rows, -9.0f, 9.0f},
                                     {&dy, sz, -1.0f, 1.0f},
                                     {&dx, sz, -9.0f, 9.0f},
                                     {&dgamma, (size_t)d, -9.0f, 9.0f},
                                     {&dbeta, (size_t)d, -9.0f, 9.0f}};
    char tag[48], name[96];
    int rc[2], err;

    snprintf(tag, sizeof(tag), "%dx%d", rows, d);
    snprintf(name, sizeof(name), "layernorm/%s", tag);
    err = pairs_rand(spec, NSPECS(spec));
    if (err) {
        setup_failed(name, err);
        goto out;
    }
    snprintf(name, sizeof(name), "layernorm_forward/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, layernorm_forward, x.d[i], gamma.d[i], beta.d[i], y.d[i], mean.d[i],
                   rstd.d[i], rows, d, 1e-5f);
    if (!both_ok(name, rc))
        goto out;
    check(name, &y, tol_k(d), RTOL);
    checkf(&mean, tol_k(d), RTOL, "layernorm_forward_mean/%s", tag);
    checkf(&rstd, tol_k(d), RTOL, "layernorm_forward_rstd/%s", tag);

    snprintf(name, sizeof(name), "layernorm_backward/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, layernorm_backward, x.d[i], dy.d[i], gamma.d[i], mean.d[i], rstd.d[i],
                   dx.d[i], dgamma.d[i], dbeta.d[i], rows, d);
    if (!both_ok(name, rc))
        goto out;
    checkf(&dx, tol_k(d), RTOL, "layernorm_backward_dx/%s", tag);
    checkf(&dgamma, tol_k(rows), RTOL, "layernorm_backward_dgamma/%s", tag);
    checkf(&dbeta, tol_k(rows), RTOL, "layernorm_backward_dbeta/%s", tag);

    /* without dx; dgamma and dbeta refilled with garbage first (the CPU's are too) */
    snprintf(name, sizeof(name), "layernorm_backward_no_dx/%s", tag);
    pair_free(&dgamma);
    pair_free(&dbeta);
    err = pairs_rand(spec + NSPECS(spec) - 2, 2);
    if (err) {
        setup_failed(name, err);
        goto out;
    }
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, layernorm_backward, x.d[i], dy.d[i], gamma.d[i], mean.d[i], rstd.d[i], NULL,
                   dgamma.d[i], dbeta.d[i], rows, d);
    if (both_ok(name, rc)) {
        check(name, &dgamma, tol_k(rows), RTOL);
        checkf(&dbeta, tol_k(rows), RTOL, "layernorm_backward_no_dx_dbeta/%s", tag);
    }
out:
    pairs_free(spec, NSPECS(spec));
}

/* The per-position linear layer as net.c runs it: y [rows, out] = x w^T + b; gw = dy^T x,
 * gb = the column sums of dy, dx = dy w. Sums of in, rows and out terms respectively. */
static void test_plinear(int rows, int in, int out)
{
    struct pair x = {0}, w = {0}, b = {0}, y = {0}, dy = {0}, gw = {0}, gb = {0}, dx = {0};
    const size_t xs = (size_t)rows * in, ys = (size_t)rows * out, ws = (size_t)out * in;
    const struct rand_spec spec[] = {{&x, xs, -1.0f, 1.0f},           {&w, ws, -1.0f, 1.0f},
                                     {&b, (size_t)out, -1.0f, 1.0f},  {&y, ys, -9.0f, 9.0f},
                                     {&dy, ys, -1.0f, 1.0f},          {&gw, ws, -9.0f, 9.0f},
                                     {&gb, (size_t)out, -9.0f, 9.0f}, {&dx, xs, -9.0f, 9.0f}};
    char tag[48], name[96];
    int rc[2], err;

    snprintf(tag, sizeof(tag), "%dx%d->%d", rows, in, out);
    snprintf(name, sizeof(name), "plinear/%s", tag);
    err = pairs_rand(spec, NSPECS(spec));
    if (err) {
        setup_failed(name, err);
        goto out;
    }
    snprintf(name, sizeof(name), "plinear_forward/%s", tag);
    for (int i = 0; i < 2; i++) {
        rc[i] = OP(i, gemm, 0, 1, rows, out, in, 1.0f, x.d[i], in, w.d[i], in, 0.0f, y.d[i], out);
        if (!rc[i])
            rc[i] = OP(i, bias_add, y.d[i], b.d[i], rows, out);
    }
    if (both_ok(name, rc))
        check(name, &y, tol_k(in), RTOL);
    snprintf(name, sizeof(name), "plinear_backward/%s", tag);
    for (int i = 0; i < 2; i++) {
        rc[i] = OP(i, gemm, 1, 0, out, in, rows, 1.0f, dy.d[i], out, x.d[i], in, 0.0f, gw.d[i], in);
        if (!rc[i])
            rc[i] = OP(i, bias_grad, dy.d[i], gb.d[i], rows, out);
        if (!rc[i])
            rc[i] =
                OP(i, gemm, 0, 0, rows, in, out, 1.0f, dy.d[i], out, w.d[i], in, 0.0f, dx.d[i], in);
    }
    if (!both_ok(name, rc))
        goto out;
    checkf(&gw, tol_k(rows), RTOL, "plinear_backward_dw/%s", tag);
    checkf(&gb, tol_k(rows), RTOL, "plinear_backward_db/%s", tag);
    checkf(&dx, tol_k(out), RTOL, "plinear_backward_dx/%s", tag);
out:
    pairs_free(spec, NSPECS(spec));
}

/* qkv in [-1, 1); probs and y start as garbage (probs' zeros above the diagonal must be
 * written). probs: tol_k(dh) (scores are sums of dh terms); y: tol_k(T) (sums over keys);
 * dqkv: tol_k(T dh) (dq and dk sum T terms of ds, which carries dp's sum of dh terms). The
 * shapes cover both of the CUDA backend's walks (heads <= n: the sequences batched; else the
 * heads), its chunked scratch (T 1024 and more than 16 heads: chunks of 16 and a remainder)
 * and, with one (sequence, head) pair, the caller's workspace. */
static void test_attention(int n, int T, int d, int heads)
{
    const struct hp_attn_desc a = {n, T, d, heads};
    const size_t xsz = (size_t)n * T * 3 * d, ysz = (size_t)n * T * d;
    const size_t psz = (size_t)n * heads * T * T;
    const int dh = d / heads;
    struct pair qkv = {0}, y = {0}, probs = {0}, dy = {0}, dqkv = {0}, ws = {0};
    const struct rand_spec spec[] = {{&qkv, xsz, -1.0f, 1.0f},   {&y, ysz, -9.0f, 9.0f},
                                     {&probs, psz, -9.0f, 9.0f}, {&dy, ysz, -1.0f, 1.0f},
                                     {&dqkv, xsz, -9.0f, 9.0f},  {&ws, (size_t)T * T, -9.0f, 9.0f}};
    char tag[64], name[96];
    int rc[2], err;

    snprintf(tag, sizeof(tag), "n%d,T%d,d%d,h%d", n, T, d, heads);
    snprintf(name, sizeof(name), "attention/%s", tag);
    err = pairs_rand(spec, NSPECS(spec));
    if (err) {
        setup_failed(name, err);
        goto out;
    }
    snprintf(name, sizeof(name), "attention_forward/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, attention_forward, &a, qkv.d[i], y.d[i], probs.d[i]);
    if (!both_ok(name, rc))
        goto out;
    check(name, &y, tol_k(T), RTOL);
    checkf(&probs, tol_k(dh), RTOL, "attention_forward_probs/%s", tag);
    snprintf(name, sizeof(name), "attention_backward/%s", tag);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, attention_backward, &a, qkv.d[i], probs.d[i], dy.d[i], dqkv.d[i], ws.d[i]);
    if (both_ok(name, rc))
        check(name, &dqkv, tol_k((double)T * dh), RTOL);
out:
    pairs_free(spec, NSPECS(spec));
}

/* x in [-6, 6) (both tails of tanh); then in place (y = x, dx = dy). The device's expf and
 * fused multiply-adds differ from the CPU's in the last bits only. */
static void test_gelu(size_t n)
{
    struct pair x = {0}, y = {0}, dy = {0}, dx = {0};
    const struct rand_spec spec[] = {
        {&x, n, -6.0f, 6.0f}, {&y, n, -9.0f, 9.0f}, {&dy, n, -1.0f, 1.0f}, {&dx, n, -9.0f, 9.0f}};
    char name[64];
    int rc[2], err;

    snprintf(name, sizeof(name), "gelu/%zu", n);
    err = pairs_rand(spec, NSPECS(spec));
    if (err) {
        setup_failed(name, err);
        goto out;
    }
    snprintf(name, sizeof(name), "gelu_forward/%zu", n);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, gelu_forward, x.d[i], y.d[i], n);
    if (both_ok(name, rc))
        check(name, &y, ATOL, RTOL);
    snprintf(name, sizeof(name), "gelu_backward/%zu", n);
    for (int i = 0; i < 2; i++)
        rc[i] = OP(i, gelu_backward, x.d[i], dy.d[i], dx.d[i], n);
    if (both_ok(name, rc))
        check(name, &dx, ATOL, RTOL);
    snprintf(name, sizeof(name), "gelu_in_place/%zu", n);
    for (int i = 0; i < 2; i++) {
        rc[i] = OP(i, gelu_backward, x.d[i], dy.d[i], dy.d[i], n);
        if (!rc[i])
            rc[i] = OP(i, gelu_forward, x.d[i], x.d[i], n);
    }
    if (both_ok(name, rc)) {
        checkf(&dy, ATOL, RTOL, "gelu_backward_in_place/%zu", n);
        checkf(&x, ATOL, RTOL, "gelu_forward_in_place/%zu", n);
    }
out:
    pairs_free(spec, NSPECS(spec));
}

/* Every sequence op at gpt-tiny's shapes (a batch of 4: T 64, d 128, 4 heads, vocab 256, the
 * block's 3d and 4d widths), at an odd shape (T 7, d 24, 3 heads, vocab 50) and at gpt2-xl's
 * widths (T 1024, d 1600, 25 heads, vocab 50257, one sequence). The token loss is
 * softmax_xent over the n T positions (hp_net_loss_tokens). */
static void test_seq_ops(void)
{
    test_embed(4, 64, 128, 256);
    test_embed(2, 7, 24, 50);
    test_embed(2, 1024, 1600, 50257); /* 2 stages of ids, 13 column tiles */
    test_layernorm(4 * 64, 128);
    test_layernorm(2 * 7, 24);
    test_layernorm(1024, 1600);
    test_plinear(4 * 64, 128, 3 * 128);
    test_plinear(4 * 64, 4 * 128, 128);
    test_plinear(2 * 7, 24, 3 * 24);
    test_plinear(2 * 7, 24, 4 * 24);
    test_attention(4, 64, 128, 4);     /* heads <= n */
    test_attention(2, 7, 24, 3);       /* heads > n */
    test_attention(1, 33, 16, 1);      /* one pair: the caller's workspace */
    test_attention(1, 1024, 1600, 25); /* chunks of 16 heads, then 9 */
    test_gelu(4 * 64 * 4 * 128);
    test_gelu(2 * 7 * 4 * 24);
    test_xent(4 * 64, 256);
    test_xent(2 * 7, 50);
    test_xent(64, 50257);
}

/* ---- a whole training step ------------------------------------------------------------ */

/* Compares n floats at p[0] (CPU) and p[1] (CUDA), e.g. a net's buffers. */
static void check_ptrs(const char *name, float *p0, float *p1, size_t n, double atol, double rtol)
{
    const struct pair t = {n, {p0, p1}};

    check(name, &t, atol, rtol);
}

/* A text model (gpt-tiny) on both backends from the same parameters (hp_net_init_params,
 * seed 1), token ids and labels: a training forward, hp_net_loss_tokens, backward and one
 * AdamW step, as `hetpipe train` runs them. Compared: the logits, the loss sum, the
 * gradients and the updated parameters. eps is 1e-6 here: AdamW's first step moves each
 * parameter by about lr g / (|g| + eps), whose slope at g = 0 is lr / eps, so a gradient
 * that is zero up to rounding on both backends would otherwise make it differ by a sizeable
 * part of lr. Tolerances: logits and loss as a sum over the net's depth; the gradients 1e-5
 * absolute (they are about 1e-3 and below); parameters 1e-4 + 1e-3 |w| (a tenth of lr: a
 * wrong gradient moves a parameter by about lr). */
static void test_text_step(const char *model, int batch)
{
    const struct hp_net_config cfg = {batch, 1, 0, 0, HP_OPTIMIZER_ADAMW};
    const struct hp_adamw_desc ad = {
        .lr = 1e-3f, .wd = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-6f, .step = 1};
    struct hp_model *m = NULL;
    struct hp_net *net[2] = {NULL, NULL};
    float *ids = NULL;
    int32_t *lab = NULL;
    double loss[2] = {0.0, 0.0};
    int correct[2] = {0, 0}, rc[2] = {0, 0}, err;
    char name[96];
    size_t rows = 0, nout = 0;

    snprintf(name, sizeof(name), "train_step/%s,batch%d", model, batch);
    err = hp_model_load(model, &m);
    for (int i = 0; i < 2 && !err; i++) {
        err = hp_net_create(be[i], m, 0, m->nunits, &cfg, &net[i]);
        if (!err)
            err = hp_net_init_params(net[i], 1);
    }
    if (!err) {
        rows = (size_t)batch * hp_model_positions(m);
        nout = rows * (size_t)m->classes;
        ids = malloc(rows * sizeof(float));
        lab = malloc(rows * sizeof(int32_t));
        err = ids && lab ? 0 : -HP_ENOMEM;
    }
    if (err) {
        setup_failed(name, err);
        goto out;
    }
    fill_ids(ids, rows, m->classes);
    for (size_t r = 0; r < rows; r++)
        lab[r] = (int32_t)ids[(r + 1) % rows]; /* the next token */
    for (int i = 0; i < 2; i++) {
        rc[i] = OP(i, upload, hp_net_input(net[i], 0), ids, rows * sizeof(float));
        if (!rc[i])
            rc[i] = hp_net_forward(net[i], 0, 1, 7);
        if (!rc[i])
            rc[i] = hp_net_loss_tokens(net[i], 0, lab, batch, 1, &loss[i], &correct[i]);
        if (!rc[i])
            rc[i] = hp_net_backward(net[i], 0);
    }
    if (!both_ok(name, rc))
        goto out;
    snprintf(name, sizeof(name), "train_step_logits/%s,batch%d", model, batch);
    check_ptrs(name, hp_net_output(net[0], 0), hp_net_output(net[1], 0), nout, tol_k(m->nunits),
               RTOL);
    snprintf(name, sizeof(name), "train_step_loss_tokens/%s,batch%d", model, batch);
    check_scalar(name, loss[1], loss[0], tol_k((double)rows * m->nunits), RTOL);
    snprintf(name, sizeof(name), "train_step_grads/%s,batch%d", model, batch);
    check_ptrs(name, hp_net_grads(net[0]), hp_net_grads(net[1]), hp_net_nparams(net[0]), 1e-5,
               RTOL);
    snprintf(name, sizeof(name), "train_step_adamw/%s,batch%d", model, batch);
    for (int i = 0; i < 2; i++)
        rc[i] = hp_net_adamw(net[i], &ad);
    if (both_ok(name, rc))
        check_ptrs(name, hp_net_params(net[0]), hp_net_params(net[1]), hp_net_nparams(net[0]), 1e-4,
                   RTOL);
out:
    for (int i = 0; i < 2; i++)
        hp_net_destroy(net[i]);
    hp_model_destroy(m);
    free(ids);
    free(lab);
}

/* ---- main ----------------------------------------------------------------------------- */

/* $HETPIPE_CUDA_MODULE, when unset: the module of this build tree (build/hetpipe-cuda.so). */
static void default_module(void)
{
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 64);
    char *slash;

    if (getenv("HETPIPE_CUDA_MODULE") || len <= 0)
        return;
    exe[len] = '\0';
    slash = strrchr(exe, '/');
    if (!slash)
        return;
    strcpy(slash + 1, "../hetpipe-cuda.so");
    setenv("HETPIPE_CUDA_MODULE", exe, 0);
}

int main(void)
{
    int rc;

    default_module();

    rc = hp_backend_cpu_create(&be[0]);
    if (rc) {
        printf("gpu_check_ops: cannot create the CPU backend: %s\n", hp_strerror(rc));
        return 1;
    }
    rc = hp_backend_cuda_create(0, &be[1]);
    if (rc == -HP_ENODEV || rc == -HP_EUNSUPPORTED) {
        printf("gpu_check_ops: SKIP: %s\n",
               rc == -HP_ENODEV ? "no usable CUDA device or driver"
                                : "no CUDA backend module (HP_CUDA=0 or no nvcc, or "
                                  "$HETPIPE_CUDA_MODULE names none)");
        hp_backend_destroy(be[0]);
        return 77;
    }
    if (rc) {
        printf("gpu_check_ops: cannot create the CUDA backend: %s\n", hp_strerror(rc));
        hp_backend_destroy(be[0]);
        return 1;
    }
    printf("gpu_check_ops: %s against %s\n", be[1]->name, be[0]->name);

    test_memory();
    test_gemms();
    test_bias(33, 70);
    test_bias(257, 70);
    test_bias(5, 3000);
    test_convs();
    test_relu();
    test_pools();
    test_bns();
    test_dropout(10007, 0.3f, 42);
    test_dropout(4096, 0.5f, 0x9e3779b97f4a7c15ULL);
    test_dropout(100, 0.0f, 7);
    test_add_axpy();
    test_xent(37, 10);
    test_xent(19, 1000);
    test_xent(5000, 7); /* more rows than the CUDA backend's initial loss scratch */
    test_sgd(0.9f);
    test_sgd(0.0f);
    test_adamw(0.1f);
    test_adamw(0.0f);
    test_sumsq_scale(1);
    test_sumsq_scale(10007);
    test_sumsq_scale(3000017); /* more than the CUDA first pass's 256 x 256 threads */
    test_seq_ops();
    test_text_step("gpt-tiny", 4);

    hp_backend_destroy(be[1]);
    hp_backend_destroy(be[0]);
    printf("gpu_check_ops: %d passed, %d failed\n", n_passed, n_failed);
    return n_failed == 0 ? 0 : 1;
}
