/* backend_cpu.c - the CPU backend: the reference implementation of every op.
 *
 * GEMM is OpenBLAS's sgemm; convolution is im2col + sgemm per image (1x1 stride-1 unpadded
 * convolutions skip im2col). Everything else is plain loops written for clarity first; the
 * time of a training step is in the GEMMs (tests/bench/train_cpu measures how close).
 */
#include "backend.h"

#include "error.h"
#include "infile.h"
#include "log.h"
#include "rng.h"

#include <cblas.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The elementwise loops of the sequence ops, the loss and AdamW are compiled for AVX-512, AVX2
 * and the baseline, the CPU picking at load time (GCC's target_clones): the same arithmetic
 * in wider vectors (no FMA contraction in ISO C mode; the lane sums keep their eight lanes),
 * so the same floats on every CPU (-DHP_NO_CLONES builds the baseline alone, to compare). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) &&                  \
    !defined(__SANITIZE_THREAD__) && !defined(HP_NO_CLONES)
#define HP_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HP_CLONES
#endif
/* a helper of those loops, compiled into each clone (for its vector width) */
#define HP_INLINE static inline __attribute__((always_inline))

/* exp(x) in float, written so that a loop of it vectorises (libm's expf is a call per
 * element): x clamped to [-70, 70] (exp(-70) = 4e-31, 0 next to the 1 of a softmax's largest
 * term or of 1 + exp in a sigmoid; the bounds keep what the compiler computes for a clamped
 * lane, and its products, clear of subnormal floats, whose arithmetic is ~100 times slower),
 * x = n ln 2 + r with |r| <= ln 2 / 2 (n by the 1.5 2^23 rounding trick, whose bits hold n),
 * Cephes' degree-6 polynomial for exp(r) (a relative error below 1e-7 on [-70, 70]), times 2^n
 * built in the exponent bits. */
static inline float vexpf(float x)
{
    const float magic = 12582912.0f; /* 1.5 2^23: adding it rounds to an integer */
    float p, s;
    int32_t bits;

    x = x < -70.0f ? -70.0f : x;
    x = x > 70.0f ? 70.0f : x;
    const float t = x * 1.44269504088896341f + magic, n = t - magic;
    const float r = x - n * 0.693359375f - n * -2.12194440e-4f;
    memcpy(&bits, &t, sizeof(bits));
    bits = (bits - 0x4B400000 + 127) * (1 << 23); /* the low bits of t are n */
    memcpy(&s, &bits, sizeof(s));
    p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    return (p * r * r + r + 1.0f) * s;
}

/* The largest of x[0..n), n >= 1, in eight lanes (so that it vectorises). */
HP_INLINE float lane_max(const float *x, int n)
{
    float acc[8], m = x[0];
    int j = 0;

    for (int l = 0; l < 8; l++)
        acc[l] = x[0];
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++)
            acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    for (int l = 0; l < 8; l++)
        m = acc[l] > m ? acc[l] : m;
    return m;
}

/* x[j] = exp(x[j] - shift) over j < n; returns their sum (float lanes, added in double). */
HP_INLINE double exp_shift_sum(float *x, int n, float shift)
{
    float acc[8] = {0};
    double s = 0.0;
    int j = 0;

    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) {
            x[j + l] = vexpf(x[j + l] - shift);
            acc[l] += x[j + l];
        }
    for (; j < n; j++) {
        x[j] = vexpf(x[j] - shift);
        s += x[j];
    }
    for (int l = 0; l < 8; l++)
        s += acc[l];
    return s;
}

/* The dot product of a[0..n) and b[0..n), in eight float lanes added in double. */
HP_INLINE double lane_dot(const float *a, const float *b, int n)
{
    float acc[8] = {0};
    double s = 0.0;
    int j = 0;

    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += a[j + l] * b[j + l];
    for (; j < n; j++)
        s += (double)a[j] * b[j];
    for (int l = 0; l < 8; l++)
        s += acc[l];
    return s;
}

struct hp_conv {
    struct hp_conv_desc d;
    int direct; /* 1x1, stride 1, no padding: the input is already the column matrix */
};

static void cpu_destroy(struct hp_backend *be)
{
    free(be);
}

static int cpu_alloc(struct hp_backend *be, size_t bytes, void **ptr)
{
    void *p = NULL;

    if (bytes == 0)
        return -HP_EINVAL;
    /* 64-byte alignment for the vector units; rounded up as aligned_alloc requires. */
    if (posix_memalign(&p, 64, (bytes + 63) & ~(size_t)63) != 0) {
        hp_error("cpu backend: cannot allocate %zu bytes", bytes);
        return -HP_ENOMEM;
    }
    memset(p, 0, bytes);
    *ptr = p;
    return 0;
}

static void cpu_free(struct hp_backend *be, void *ptr)
{
    free(ptr);
}

static int cpu_copy(struct hp_backend *be, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memmove(dst, src, bytes);
    return 0;
}

static int cpu_zero(struct hp_backend *be, void *ptr, size_t bytes)
{
    if (bytes)
        memset(ptr, 0, bytes);
    return 0;
}

static int cpu_sync(struct hp_backend *be)
{
    return 0;
}

static int cpu_gemm(struct hp_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                    const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, a, lda, b, ldb, beta, c, ldc);
    return 0;
}

HP_CLONES static int cpu_bias_add(struct hp_backend *be, float *y, const float *b, int rows,
                                  int cols)
{
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * cols;
        for (int j = 0; j < cols; j++)
            yr[j] += b[j];
    }
    return 0;
}

HP_CLONES static int cpu_bias_grad(struct hp_backend *be, const float *dy, float *db, int rows,
                                   int cols)
{
    memset(db, 0, (size_t)cols * sizeof(float));
    for (int r = 0; r < rows; r++) {
        const float *dr = dy + (size_t)r * cols;
        for (int j = 0; j < cols; j++)
            db[j] += dr[j];
    }
    return 0;
}

/* ---- convolution ---------------------------------------------------------------------- */

static int cpu_conv_create(struct hp_backend *be, const struct hp_conv_desc *d,
                           struct hp_conv **out, size_t *workspace)
{
    struct hp_conv *conv;

    if (d->n <= 0 || d->c <= 0 || d->h <= 0 || d->w <= 0 || d->k <= 0 || d->r <= 0 || d->s <= 0 ||
        d->stride <= 0 || d->pad < 0 || d->p != (d->h + 2 * d->pad - d->r) / d->stride + 1 ||
        d->q != (d->w + 2 * d->pad - d->s) / d->stride + 1 || d->p <= 0 || d->q <= 0) {
        hp_error("cpu backend: invalid convolution shape");
        return -HP_ESHAPE;
    }
    conv = calloc(1, sizeof(*conv));
    if (!conv)
        return -HP_ENOMEM;
    conv->d = *d;
    conv->direct = d->r == 1 && d->s == 1 && d->stride == 1 && d->pad == 0;
    *workspace = conv->direct ? 0 : (size_t)d->c * d->r * d->s * d->p * d->q * sizeof(float);
    *out = conv;
    return 0;
}

static void cpu_conv_destroy(struct hp_backend *be, struct hp_conv *conv)
{
    free(conv);
}

/* The range [q0, q1) of output columns whose input column q stride - pad + j is inside
 * [0, w). */
static void valid_cols(const struct hp_conv_desc *d, int j, int *q0, int *q1)
{
    /* q stride + j - pad >= 0  <=>  q >= ceil((pad - j) / stride) */
    int lo = d->pad - j > 0 ? (d->pad - j + d->stride - 1) / d->stride : 0;
    /* q stride + j - pad <= w - 1  <=>  q <= floor((w - 1 + pad - j) / stride) */
    int num = d->w - 1 + d->pad - j, hi = num < 0 ? 0 : num / d->stride + 1;

    *q0 = lo < d->q ? lo : d->q;
    *q1 = hi < d->q ? hi : d->q;
    if (*q1 < *q0)
        *q1 = *q0;
}

/* "Same" convolutions (stride 1, output size = input size): a row (c, i, j) of the column
 * matrix is the input plane c shifted by (i - pad) rows and (j - pad) columns, so it is one
 * flat copy, after which the cells that wrapped around a row edge or fell off the plane are
 * zeroed. */
static int same_conv(const struct hp_conv_desc *d)
{
    return d->stride == 1 && d->p == d->h && d->q == d->w;
}

/* Zero the cells of column-matrix row (., ., j) whose input column falls outside the plane
 * (in a flat shift they wrapped around from the neighbouring image row). */
static void zero_wrapped(const struct hp_conv_desc *d, int j, float *row)
{
    int q0, q1;

    valid_cols(d, j, &q0, &q1);
    if (q0 == 0 && q1 == d->q)
        return;
    for (int p = 0; p < d->p; p++) {
        for (int q = 0; q < q0; q++)
            row[p * d->q + q] = 0.0f;
        for (int q = q1; q < d->q; q++)
            row[p * d->q + q] = 0.0f;
    }
}

static void im2col_same(const struct hp_conv_desc *d, const float *x, float *col)
{
    const int hw = d->h * d->w;

    for (int c = 0; c < d->c; c++) {
        const float *xc = x + (size_t)c * hw;
        for (int i = 0; i < d->r; i++) {
            for (int j = 0; j < d->s; j++) {
                float *row = col + ((size_t)(c * d->r + i) * d->s + j) * hw;
                const int shift = (i - d->pad) * d->w + (j - d->pad);
                const int t0 = shift < 0 ? -shift : 0, t1 = shift > 0 ? hw - shift : hw;
                for (int t = 0; t < t0; t++)
                    row[t] = 0.0f;
                if (t1 > t0)
                    memcpy(row + t0, xc + t0 + shift, (size_t)(t1 - t0) * sizeof(float));
                for (int t = t1 > t0 ? t1 : t0; t < hw; t++)
                    row[t] = 0.0f;
                zero_wrapped(d, j, row);
            }
        }
    }
}

/* The reverse of im2col_same; col is scratch and its wrapped cells are zeroed first. */
static void col2im_same(const struct hp_conv_desc *d, float *col, float *dx)
{
    const int hw = d->h * d->w;

    for (int c = 0; c < d->c; c++) {
        float *xc = dx + (size_t)c * hw;
        for (int i = 0; i < d->r; i++) {
            for (int j = 0; j < d->s; j++) {
                float *row = col + ((size_t)(c * d->r + i) * d->s + j) * hw;
                const int shift = (i - d->pad) * d->w + (j - d->pad);
                const int t0 = shift < 0 ? -shift : 0, t1 = shift > 0 ? hw - shift : hw;
                zero_wrapped(d, j, row);
                for (int t = t0; t < t1; t++)
                    xc[t + shift] += row[t];
            }
        }
    }
}

/* x [c, h, w] of one image -> col [c r s, p q]. Zero outside the input (padding). */
static void im2col(const struct hp_conv_desc *d, const float *x, float *col)
{
    const int pq = d->p * d->q, st = d->stride;

    if (same_conv(d)) {
        im2col_same(d, x, col);
        return;
    }

    for (int c = 0; c < d->c; c++) {
        const float *xc = x + (size_t)c * d->h * d->w;
        for (int i = 0; i < d->r; i++) {
            for (int j = 0; j < d->s; j++) {
                float *row = col + ((size_t)(c * d->r + i) * d->s + j) * pq;
                int q0, q1;
                valid_cols(d, j, &q0, &q1);
                for (int p = 0; p < d->p; p++) {
                    const int hh = p * st - d->pad + i;
                    float *dst = row + p * d->q;
                    if (hh < 0 || hh >= d->h) {
                        for (int q = 0; q < d->q; q++)
                            dst[q] = 0.0f;
                        continue;
                    }
                    const float *src = xc + (size_t)hh * d->w;
                    const int off = j - d->pad; /* input column of q is q st + off */
                    for (int q = 0; q < q0; q++)
                        dst[q] = 0.0f;
                    if (st == 1)
                        for (int q = q0; q < q1; q++)
                            dst[q] = src[q + off];
                    else
                        for (int q = q0; q < q1; q++)
                            dst[q] = src[q * st + off];
                    for (int q = q1; q < d->q; q++)
                        dst[q] = 0.0f;
                }
            }
        }
    }
}

/* col [c r s, p q] -> dx [c, h, w] of one image, accumulating (dx zeroed by the caller).
 * col is scratch: the "same" path zeroes its padding cells. */
static void col2im(const struct hp_conv_desc *d, float *col, float *dx)
{
    const int pq = d->p * d->q, st = d->stride;

    if (same_conv(d)) {
        col2im_same(d, col, dx);
        return;
    }

    for (int c = 0; c < d->c; c++) {
        float *xc = dx + (size_t)c * d->h * d->w;
        for (int i = 0; i < d->r; i++) {
            for (int j = 0; j < d->s; j++) {
                const float *row = col + ((size_t)(c * d->r + i) * d->s + j) * pq;
                int q0, q1;
                valid_cols(d, j, &q0, &q1);
                for (int p = 0; p < d->p; p++) {
                    const int hh = p * st - d->pad + i;
                    if (hh < 0 || hh >= d->h)
                        continue;
                    float *dst = xc + (size_t)hh * d->w;
                    const float *src = row + p * d->q;
                    const int off = j - d->pad;
                    if (st == 1)
                        for (int q = q0; q < q1; q++)
                            dst[q + off] += src[q];
                    else
                        for (int q = q0; q < q1; q++)
                            dst[q * st + off] += src[q];
                }
            }
        }
    }
}

static int cpu_conv_forward(struct hp_backend *be, struct hp_conv *conv, const float *x,
                            const float *w, const float *b, float *y, void *ws)
{
    const struct hp_conv_desc *d = &conv->d;
    const int crs = d->c * d->r * d->s, pq = d->p * d->q;
    float *col = ws;

    for (int n = 0; n < d->n; n++) {
        const float *xn = x + (size_t)n * d->c * d->h * d->w;
        float *yn = y + (size_t)n * d->k * pq;
        const float *cm = xn;

        if (!conv->direct) {
            im2col(d, xn, col);
            cm = col;
        }
        /* yn [k, pq] = w [k, crs] x col [crs, pq] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d->k, pq, crs, 1.0f, w, crs, cm, pq,
                    0.0f, yn, pq);
        if (d->has_bias) {
            for (int k = 0; k < d->k; k++) {
                float *yk = yn + (size_t)k * pq;
                const float bk = b[k];
                for (int i = 0; i < pq; i++)
                    yk[i] += bk;
            }
        }
    }
    return 0;
}

static int cpu_conv_backward(struct hp_backend *be, struct hp_conv *conv, const float *x,
                             const float *w, const float *dy, float *dx, float *dw, float *db,
                             void *ws)
{
    const struct hp_conv_desc *d = &conv->d;
    const int crs = d->c * d->r * d->s, pq = d->p * d->q;
    float *col = ws;

    if (d->has_bias) {
        memset(db, 0, (size_t)d->k * sizeof(float));
        for (int n = 0; n < d->n; n++) {
            const float *dyn = dy + (size_t)n * d->k * pq;
            for (int k = 0; k < d->k; k++) {
                const float *dk = dyn + (size_t)k * pq;
                float s = 0.0f;
                for (int i = 0; i < pq; i++)
                    s += dk[i];
                db[k] += s;
            }
        }
    }
    for (int n = 0; n < d->n; n++) {
        const float *xn = x + (size_t)n * d->c * d->h * d->w;
        const float *dyn = dy + (size_t)n * d->k * pq;

        const float *cm = xn;

        if (!conv->direct) {
            im2col(d, xn, col);
            cm = col;
        }
        /* dw [k, crs] (+)= dyn [k, pq] x col^T [pq, crs] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d->k, crs, pq, 1.0f, dyn, pq, cm, pq,
                    n == 0 ? 0.0f : 1.0f, dw, crs);
        if (!dx)
            continue;
        float *dxn = dx + (size_t)n * d->c * d->h * d->w;
        if (conv->direct) {
            /* dxn [c, hw] = w^T [crs, k] x dyn [k, pq] */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, crs, pq, d->k, 1.0f, w, crs, dyn,
                        pq, 0.0f, dxn, pq);
        } else {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, crs, pq, d->k, 1.0f, w, crs, dyn,
                        pq, 0.0f, col, pq);
            memset(dxn, 0, (size_t)d->c * d->h * d->w * sizeof(float));
            col2im(d, col, dxn);
        }
    }
    return 0;
}

/* ---- elementwise ---------------------------------------------------------------------- */

static int cpu_relu_forward(struct hp_backend *be, const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    return 0;
}

static int cpu_relu_backward(struct hp_backend *be, const float *y, const float *dy, float *dx,
                             size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const float g = dy[i]; /* read unconditionally, so the loop vectorises */
        dx[i] = y[i] > 0.0f ? g : 0.0f;
    }
    return 0;
}

static int cpu_add(struct hp_backend *be, const float *a, const float *b, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
    return 0;
}

static int cpu_axpy(struct hp_backend *be, float alpha, const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
    return 0;
}

static int cpu_dropout_forward(struct hp_backend *be, const float *x, float *y, float *mask,
                               size_t n, float p, uint64_t seed)
{
    const float keep = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;

    for (size_t i = 0; i < n; i++) {
        mask[i] = hp_rng_uniform(seed, i) < p ? 0.0f : keep;
        y[i] = x[i] * mask[i];
    }
    return 0;
}

static int cpu_dropout_backward(struct hp_backend *be, const float *dy, const float *mask,
                                float *dx, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * mask[i];
    return 0;
}

/* ---- pooling -------------------------------------------------------------------------- */

/* The common 2x2 stride-2 unpadded case, with even input sizes. */
static int pool2x2(const struct hp_pool_desc *d)
{
    return d->kernel == 2 && d->stride == 2 && d->pad == 0 && d->h % 2 == 0 && d->w % 2 == 0;
}

/* The input rows [*h0, *h1) and columns [*w0, *w1) that output cell (p, q)'s window covers,
 * padding cut off (an empty range when the window lies wholly in the padding). */
static void window(const struct hp_pool_desc *d, int p, int q, int *h0, int *h1, int *w0, int *w1)
{
    const int hs = p * d->stride - d->pad, ws = q * d->stride - d->pad;

    *h0 = hs < 0 ? 0 : hs;
    *h1 = hs + d->kernel > d->h ? d->h : hs + d->kernel;
    *w0 = ws < 0 ? 0 : ws;
    *w1 = ws + d->kernel > d->w ? d->w : ws + d->kernel;
}

/* Index into the plane xp of the first maximum (row-major) of output cell (p, q)'s window,
 * padding ignored; -1 if the window lies wholly in the padding. */
static int window_argmax(const struct hp_pool_desc *d, const float *xp, int p, int q)
{
    int best = -1, h0, h1, w0, w1;

    window(d, p, q, &h0, &h1, &w0, &w1);
    for (int hh = h0; hh < h1; hh++)
        for (int ww = w0; ww < w1; ww++)
            if (best < 0 || xp[hh * d->w + ww] > xp[best])
                best = hh * d->w + ww;
    return best;
}

static int cpu_maxpool_forward(struct hp_backend *be, const struct hp_pool_desc *d, const float *x,
                               float *y)
{
    if (pool2x2(d)) {
        for (int nc = 0; nc < d->n * d->c; nc++) {
            const float *xp = x + (size_t)nc * d->h * d->w;
            float *yp = y + (size_t)nc * d->p * d->q;
            for (int p = 0; p < d->p; p++) {
                const float *r0 = xp + (size_t)2 * p * d->w, *r1 = r0 + d->w;
                for (int q = 0; q < d->q; q++) {
                    const float a = fmaxf(r0[2 * q], r0[2 * q + 1]);
                    const float b = fmaxf(r1[2 * q], r1[2 * q + 1]);
                    yp[p * d->q + q] = fmaxf(a, b);
                }
            }
        }
        return 0;
    }
    for (int nc = 0; nc < d->n * d->c; nc++) {
        const float *xp = x + (size_t)nc * d->h * d->w;
        float *yp = y + (size_t)nc * d->p * d->q;
        for (int p = 0; p < d->p; p++)
            for (int q = 0; q < d->q; q++) {
                const int at = window_argmax(d, xp, p, q);
                yp[p * d->q + q] = at < 0 ? -FLT_MAX : xp[at];
            }
    }
    return 0;
}

static int cpu_maxpool_backward(struct hp_backend *be, const struct hp_pool_desc *d, const float *x,
                                const float *y, const float *dy, float *dx)
{
    if (pool2x2(d)) {
        /* every input cell is in exactly one window: write each once, no memset */
        for (int nc = 0; nc < d->n * d->c; nc++) {
            const float *xp = x + (size_t)nc * d->h * d->w;
            const float *yp = y + (size_t)nc * d->p * d->q;
            float *dxp = dx + (size_t)nc * d->h * d->w;
            const float *dyp = dy + (size_t)nc * d->p * d->q;
            for (int p = 0; p < d->p; p++) {
                const float *r0 = xp + (size_t)2 * p * d->w, *r1 = r0 + d->w;
                float *d0 = dxp + (size_t)2 * p * d->w, *d1 = d0 + d->w;
                for (int q = 0; q < d->q; q++) {
                    const float m = yp[p * d->q + q], g = dyp[p * d->q + q];
                    /* the first maximum in row-major order gets the gradient */
                    const int a = r0[2 * q] == m;
                    const int b = !a && r0[2 * q + 1] == m;
                    const int c = !a && !b && r1[2 * q] == m;
                    const int e = !a && !b && !c;
                    d0[2 * q] = a ? g : 0.0f;
                    d0[2 * q + 1] = b ? g : 0.0f;
                    d1[2 * q] = c ? g : 0.0f;
                    d1[2 * q + 1] = e ? g : 0.0f;
                }
            }
        }
        return 0;
    }
    memset(dx, 0, (size_t)d->n * d->c * d->h * d->w * sizeof(float));
    for (int nc = 0; nc < d->n * d->c; nc++) {
        const float *xp = x + (size_t)nc * d->h * d->w;
        float *dxp = dx + (size_t)nc * d->h * d->w;
        const float *dyp = dy + (size_t)nc * d->p * d->q;
        for (int p = 0; p < d->p; p++) {
            for (int q = 0; q < d->q; q++) {
                const int best = window_argmax(d, xp, p, q);
                if (best >= 0)
                    dxp[best] += dyp[p * d->q + q];
            }
        }
    }
    return 0;
}

static int cpu_avgpool_forward(struct hp_backend *be, const struct hp_pool_desc *d, const float *x,
                               float *y)
{
    const float inv = 1.0f / (float)(d->kernel * d->kernel);

    for (int nc = 0; nc < d->n * d->c; nc++) {
        const float *xp = x + (size_t)nc * d->h * d->w;
        float *yp = y + (size_t)nc * d->p * d->q;
        for (int p = 0; p < d->p; p++) {
            for (int q = 0; q < d->q; q++) {
                float s = 0.0f;
                int h0, h1, w0, w1;
                window(d, p, q, &h0, &h1, &w0, &w1);
                for (int hh = h0; hh < h1; hh++)
                    for (int ww = w0; ww < w1; ww++)
                        s += xp[hh * d->w + ww];
                yp[p * d->q + q] = s * inv;
            }
        }
    }
    return 0;
}

static int cpu_avgpool_backward(struct hp_backend *be, const struct hp_pool_desc *d,
                                const float *dy, float *dx)
{
    const float inv = 1.0f / (float)(d->kernel * d->kernel);

    memset(dx, 0, (size_t)d->n * d->c * d->h * d->w * sizeof(float));
    for (int nc = 0; nc < d->n * d->c; nc++) {
        float *dxp = dx + (size_t)nc * d->h * d->w;
        const float *dyp = dy + (size_t)nc * d->p * d->q;
        for (int p = 0; p < d->p; p++) {
            for (int q = 0; q < d->q; q++) {
                const float g = dyp[p * d->q + q] * inv;
                int h0, h1, w0, w1;
                window(d, p, q, &h0, &h1, &w0, &w1);
                for (int hh = h0; hh < h1; hh++)
                    for (int ww = w0; ww < w1; ww++)
                        dxp[hh * d->w + ww] += g;
            }
        }
    }
    return 0;
}

/* ---- batch normalisation -------------------------------------------------------------- */

/* Sums with 8 independent accumulators (float reductions do not vectorise without
 * reassociation; this order is fixed, so results stay deterministic). */
static float sum_f(const float *x, int n)
{
    float a[8] = {0};
    int i = 0;

    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            a[k] += x[i + k];
    for (; i < n; i++)
        a[0] += x[i];
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

static float sumsq_dev(const float *x, int n, float mean)
{
    float a[8] = {0};
    int i = 0;

    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            const float t = x[i + k] - mean;
            a[k] += t * t;
        }
    for (; i < n; i++) {
        const float t = x[i] - mean;
        a[0] += t * t;
    }
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* sum of dy and of dy (x - mean) */
static void sum_dy_dyx(const float *dy, const float *x, int n, float mean, float *s1, float *s2)
{
    float a[8] = {0}, b[8] = {0};
    int i = 0;

    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            a[k] += dy[i + k];
            b[k] += dy[i + k] * (x[i + k] - mean);
        }
    for (; i < n; i++) {
        a[0] += dy[i];
        b[0] += dy[i] * (x[i] - mean);
    }
    *s1 = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    *s2 = ((b[0] + b[1]) + (b[2] + b[3])) + ((b[4] + b[5]) + (b[6] + b[7]));
}

static int cpu_bn_forward_train(struct hp_backend *be, const struct hp_bn_desc *d, const float *x,
                                const float *gamma, const float *beta, float *y,
                                float *running_mean, float *running_var, float *save_mean,
                                float *save_invstd)
{
    const size_t m = (size_t)d->n * d->hw;

    for (int c = 0; c < d->c; c++) {
        /* two passes (mean, then squared deviations); each row summed in float so the loops
         * vectorise, rows added in double */
        double s = 0.0, ss = 0.0;
        for (int n = 0; n < d->n; n++) {
            s += sum_f(x + ((size_t)n * d->c + c) * d->hw, d->hw);
        }
        const double mean = s / (double)m;
        const float fmean = (float)mean;
        for (int n = 0; n < d->n; n++) {
            ss += sumsq_dev(x + ((size_t)n * d->c + c) * d->hw, d->hw, fmean);
        }
        const double var = ss / (double)m;
        const float invstd = (float)(1.0 / sqrt(var + d->eps));
        const float g = gamma[c] * invstd, bb = beta[c] - (float)mean * g;
        for (int n = 0; n < d->n; n++) {
            const float *xc = x + ((size_t)n * d->c + c) * d->hw;
            float *yc = y + ((size_t)n * d->c + c) * d->hw;
            for (int i = 0; i < d->hw; i++)
                yc[i] = xc[i] * g + bb;
        }
        save_mean[c] = (float)mean;
        save_invstd[c] = invstd;
        if (!running_mean)
            continue;
        running_mean[c] = (1.0f - d->momentum) * running_mean[c] + d->momentum * (float)mean;
        running_var[c] = (1.0f - d->momentum) * running_var[c] +
                         d->momentum * (float)(m > 1 ? var * (double)m / (double)(m - 1) : var);
    }
    return 0;
}

static int cpu_bn_forward_eval(struct hp_backend *be, const struct hp_bn_desc *d, const float *x,
                               const float *gamma, const float *beta, const float *running_mean,
                               const float *running_var, float *y)
{
    for (int c = 0; c < d->c; c++) {
        const float g = gamma[c] / sqrtf(running_var[c] + d->eps);
        const float bb = beta[c] - running_mean[c] * g;
        for (int n = 0; n < d->n; n++) {
            const float *xc = x + ((size_t)n * d->c + c) * d->hw;
            float *yc = y + ((size_t)n * d->c + c) * d->hw;
            for (int i = 0; i < d->hw; i++)
                yc[i] = xc[i] * g + bb;
        }
    }
    return 0;
}

static int cpu_bn_backward(struct hp_backend *be, const struct hp_bn_desc *d, const float *x,
                           const float *dy, const float *gamma, const float *save_mean,
                           const float *save_invstd, float *dx, float *dgamma, float *dbeta)
{
    const double m = (double)d->n * d->hw;

    for (int c = 0; c < d->c; c++) {
        const float mean = save_mean[c], invstd = save_invstd[c];
        double sdy = 0.0, sdyx = 0.0;
        for (int n = 0; n < d->n; n++) {
            float r1, r2;
            sum_dy_dyx(dy + ((size_t)n * d->c + c) * d->hw, x + ((size_t)n * d->c + c) * d->hw,
                       d->hw, mean, &r1, &r2);
            sdy += r1;
            sdyx += r2;
        }
        dbeta[c] = (float)sdy;
        dgamma[c] = (float)(sdyx * invstd);
        /* dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)) */
        const float k = gamma[c] * invstd;
        const float mdy = (float)(sdy / m);
        const float mdyx = (float)(sdyx * invstd * invstd / m);
        for (int n = 0; n < d->n; n++) {
            const float *xc = x + ((size_t)n * d->c + c) * d->hw;
            const float *dc = dy + ((size_t)n * d->c + c) * d->hw;
            float *dxc = dx + ((size_t)n * d->c + c) * d->hw;
            for (int i = 0; i < d->hw; i++)
                dxc[i] = k * (dc[i] - mdy - (xc[i] - mean) * mdyx);
        }
    }
    return 0;
}

/* ---- loss and optimiser --------------------------------------------------------------- */

HP_CLONES static int cpu_softmax_xent(struct hp_backend *be, const float *logits,
                                      const int32_t *labels, int n, int classes, float grad_scale,
                                      float *dlogits, double *loss_sum, int *correct)
{
    double loss = 0.0;
    int ok = 0;

    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * classes;
        const float zmax = lane_max(z, classes);
        int arg = 0;
        while (z[arg] != zmax) /* the first arg-max */
            arg++;
        /* exp(z - zmax) into dz (or, without dlogits, summed on the fly) */
        float *dz = dlogits ? dlogits + (size_t)i * classes : NULL;
        double sum = 0.0;
        if (dz) {
            memcpy(dz, z, (size_t)classes * sizeof(float));
            sum = exp_shift_sum(dz, classes, zmax);
        } else {
            for (int j = 0; j < classes; j++)
                sum += vexpf(z[j] - zmax);
        }
        loss += log(sum) + zmax - z[labels[i]];
        ok += arg == labels[i];
        if (dz) {
            const float a = (float)(grad_scale / sum);
            for (int j = 0; j < classes; j++)
                dz[j] *= a;
            dz[labels[i]] -= grad_scale;
        }
    }
    *loss_sum = loss;
    *correct = ok;
    return 0;
}

static int cpu_sgd_update(struct hp_backend *be, float *w, const float *g, float *m, size_t n,
                          float lr, float momentum, float wd)
{
    for (size_t i = 0; i < n; i++) {
        const float gi = g[i] + wd * w[i];
        m[i] = momentum * m[i] + gi;
        w[i] -= lr * m[i];
    }
    return 0;
}

/* PyTorch's single-tensor AdamW, element by element in float (backend.h): the decay, then
 * m lerped towards g (torch.lerp's formula for a weight below 0.5), v = b2 v + (1 - b2) g g,
 * then w += -step_size m / (sqrt(v) / sqrt(bc2) + eps). The CUDA twin rounds the same. */
HP_CLONES static int cpu_adamw_update(struct hp_backend *be, float *w, const float *g, float *m,
                                      float *v, size_t n, const struct hp_adamw_desc *d)
{
    const double t = (double)d->step;
    const float decay = (float)(1.0 - (double)d->lr * (double)d->wd);
    const float step_size = (float)((double)d->lr / (1.0 - pow((double)d->beta1, t)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow((double)d->beta2, t));
    const float a1 = (float)(1.0 - (double)d->beta1), a2 = (float)(1.0 - (double)d->beta2);
    const float b2 = d->beta2, eps = d->eps;

    (void)be;
    for (size_t i = 0; i < n; i++) {
        const float gi = g[i];
        const float wi = w[i] * decay;
        const float mi = a1 < 0.5f ? m[i] + a1 * (gi - m[i]) : gi - (gi - m[i]) * (1.0f - a1);
        const float vi = v[i] * b2 + a2 * gi * gi;
        const float den = sqrtf(vi) / bc2_sqrt + eps;
        m[i] = mi;
        v[i] = vi;
        w[i] = wi + -step_size * mi / den;
    }
    return 0;
}

static int cpu_sumsq(struct hp_backend *be, const float *x, size_t n, double *out)
{
    double s = 0.0;

    (void)be;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * (double)x[i];
    *out = s;
    return 0;
}

static int cpu_scale(struct hp_backend *be, float *x, size_t n, float alpha)
{
    (void)be;
    for (size_t i = 0; i < n; i++)
        x[i] *= alpha;
    return 0;
}

/* VmRSS and VmHWM of /proc/self/status, in bytes. */
static int cpu_memory_used(struct hp_backend *be, size_t *now, size_t *peak)
{
    char line[256];
    unsigned long long kib;
    int found = 0;
    int rc;
    FILE *f = hp_infile_fopen("/proc/self/status", 0, NULL, &rc);

    if (!f) {
        hp_error("cpu backend: cannot read /proc/self/status: %s", hp_strerror(rc));
        return -HP_EIO;
    }
    while (found != 3 && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "VmRSS: %llu kB", &kib) == 1) {
            *now = (size_t)kib * 1024;
            found |= 1;
        } else if (sscanf(line, "VmHWM: %llu kB", &kib) == 1) {
            *peak = (size_t)kib * 1024;
            found |= 2;
        }
    }
    fclose(f);
    if (found != 3) {
        hp_error("cpu backend: no VmRSS and VmHWM in /proc/self/status");
        return -HP_EIO;
    }
    return 0;
}

/* ---- sequence ops (GPT) ------------------------------------------------------------------ */

static int cpu_embed_forward(struct hp_backend *be, const float *ids, const float *wte,
                             const float *wpe, float *y, int n, int T, int d, int vocab)
{
    for (size_t r = 0; r < (size_t)n * T; r++) {
        const float id = ids[r];
        const int tok = (int)id, t = (int)(r % (size_t)T);
        if (!(id >= 0.0f && id < (float)vocab) || (float)tok != id) {
            hp_error("cpu backend: token id %g at position %d of sequence %zu is not an integer "
                     "in 0..%d",
                     (double)id, t, r / (size_t)T, vocab - 1);
            return -HP_EINVAL;
        }
        const float *e = wte + (size_t)tok * d, *p = wpe + (size_t)t * d;
        float *yr = y + r * d;
        for (int j = 0; j < d; j++)
            yr[j] = e[j] + p[j];
    }
    return 0;
}

/* The ids were checked by the forward pass that made dy. */
static int cpu_embed_backward(struct hp_backend *be, const float *ids, const float *dy, float *dwte,
                              float *dwpe, int n, int T, int d, int vocab)
{
    memset(dwte, 0, (size_t)vocab * d * sizeof(float));
    memset(dwpe, 0, (size_t)T * d * sizeof(float));
    for (size_t r = 0; r < (size_t)n * T; r++) {
        const float *g = dy + r * d;
        float *e = dwte + (size_t)ids[r] * d, *p = dwpe + (r % (size_t)T) * d;
        for (int j = 0; j < d; j++) {
            e[j] += g[j];
            p[j] += g[j];
        }
    }
    return 0;
}

/* The sum of x[0..n), in eight float lanes added in double. */
HP_INLINE double lane_sum(const float *x, int n)
{
    float acc[8] = {0};
    double s = 0.0;
    int j = 0;

    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += x[j + l];
    for (; j < n; j++)
        s += x[j];
    for (int l = 0; l < 8; l++)
        s += acc[l];
    return s;
}

/* The sum of (x[j] - m) (y[j] - m) over j < n, in eight float lanes added in double. */
HP_INLINE double lane_dot_shift(const float *x, const float *y, float m, int n)
{
    float acc[8] = {0};
    double s = 0.0;
    int j = 0;

    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += (x[j + l] - m) * (y[j + l] - m);
    for (; j < n; j++)
        s += (double)(x[j] - m) * (y[j] - m);
    for (int l = 0; l < 8; l++)
        s += acc[l];
    return s;
}

HP_CLONES static int cpu_layernorm_forward(struct hp_backend *be, const float *x,
                                           const float *gamma, const float *beta, float *y,
                                           float *mean, float *rstd, int rows, int d, float eps)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * d;
        float *yr = y + (size_t)r * d;
        const float m = (float)(lane_sum(xr, d) / d);
        const double v = lane_dot_shift(xr, xr, m, d);
        const float is = (float)(1.0 / sqrt(v / d + eps));
        for (int j = 0; j < d; j++)
            yr[j] = (xr[j] - m) * is * gamma[j] + beta[j];
        mean[r] = m;
        rstd[r] = is;
    }
    return 0;
}

/* dxhat = dy gamma; dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)). */
HP_CLONES static int cpu_layernorm_backward(struct hp_backend *be, const float *x, const float *dy,
                                            const float *gamma, const float *mean,
                                            const float *rstd, float *dx, float *dgamma,
                                            float *dbeta, int rows, int d)
{
    memset(dgamma, 0, (size_t)d * sizeof(float));
    memset(dbeta, 0, (size_t)d * sizeof(float));
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * d, *g = dy + (size_t)r * d;
        const float m = mean[r], is = rstd[r];
        for (int j = 0; j < d; j++) {
            dgamma[j] += g[j] * ((xr[j] - m) * is);
            dbeta[j] += g[j];
        }
        if (!dx)
            continue;
        /* s1 = sum dxhat, s2 = sum dxhat xhat (dxhat = dy gamma), in float lanes */
        float a1[8] = {0}, a2[8] = {0};
        double s1 = 0.0, s2 = 0.0;
        int j = 0;
        for (; j + 8 <= d; j += 8)
            for (int l = 0; l < 8; l++) {
                const float dxh = g[j + l] * gamma[j + l];
                a1[l] += dxh;
                a2[l] += dxh * ((xr[j + l] - m) * is);
            }
        for (; j < d; j++) {
            const float dxh = g[j] * gamma[j];
            s1 += dxh;
            s2 += (double)dxh * ((xr[j] - m) * is);
        }
        for (int l = 0; l < 8; l++) {
            s1 += a1[l];
            s2 += a2[l];
        }
        const float a = (float)(s1 / d), b = (float)(s2 / d);
        float *dr = dx + (size_t)r * d;
        for (j = 0; j < d; j++)
            dr[j] = is * (g[j] * gamma[j] - a - (xr[j] - m) * is * b);
    }
    return 0;
}

/* Row i of a causal score matrix s [T, T] turned into probabilities in place. */
HP_CLONES static void causal_softmax_row(float *s, int i, int T)
{
    const float mx = lane_max(s, i + 1);
    const float inv = (float)(1.0 / exp_shift_sum(s, i + 1, mx));

    for (int j = 0; j <= i; j++)
        s[j] *= inv;
    for (int j = i + 1; j < T; j++)
        s[j] = 0.0f;
}

/* ds = p (dp - sum_j p dp) in place of dp [T, T], row by row; 0 above the diagonal (p is). */
HP_CLONES static void softmax_grad(const float *p, float *ds, int T)
{
    for (int i = 0; i < T; i++) {
        const float *pr = p + (size_t)i * T;
        float *sr = ds + (size_t)i * T;
        const float dot = (float)lane_dot(pr, sr, i + 1);
        for (int j = 0; j <= i; j++)
            sr[j] = pr[j] * (sr[j] - dot);
        for (int j = i + 1; j < T; j++)
            sr[j] = 0.0f;
    }
}

static int attn_check(const struct hp_attn_desc *a)
{
    if (a->n <= 0 || a->T <= 0 || a->heads <= 0 || a->d <= 0 || a->d % a->heads != 0) {
        hp_error("cpu backend: invalid attention shape (n %d, T %d, d %d, heads %d)", a->n, a->T,
                 a->d, a->heads);
        return -HP_ESHAPE;
    }
    return 0;
}

static int cpu_attention_forward(struct hp_backend *be, const struct hp_attn_desc *a,
                                 const float *qkv, float *y, float *probs)
{
    const int T = a->T, d = a->d, dh = d / (a->heads ? a->heads : 1);
    const float scale = 1.0f / sqrtf((float)dh);

    if (attn_check(a))
        return -HP_ESHAPE;
    for (int b = 0; b < a->n; b++) {
        const float *x = qkv + (size_t)b * T * 3 * d;
        for (int h = 0; h < a->heads; h++) {
            float *p = probs + ((size_t)b * a->heads + h) * T * T;
            const float *q = x + h * dh, *k = x + d + h * dh, *v = x + 2 * d + h * dh;
            /* p [T, T] = scale q k^T, then the causal softmax of each row */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, dh, scale, q, 3 * d, k,
                        3 * d, 0.0f, p, T);
            for (int i = 0; i < T; i++)
                causal_softmax_row(p + (size_t)i * T, i, T);
            /* y_h [T, dh] = p v */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, dh, T, 1.0f, p, T, v, 3 * d,
                        0.0f, y + (size_t)b * T * d + h * dh, d);
        }
    }
    return 0;
}

static int cpu_attention_backward(struct hp_backend *be, const struct hp_attn_desc *a,
                                  const float *qkv, const float *probs, const float *dy,
                                  float *dqkv, float *ws)
{
    const int T = a->T, d = a->d, dh = d / (a->heads ? a->heads : 1);
    const float scale = 1.0f / sqrtf((float)dh);

    if (attn_check(a))
        return -HP_ESHAPE;
    for (int b = 0; b < a->n; b++) {
        const float *x = qkv + (size_t)b * T * 3 * d, *g = dy + (size_t)b * T * d;
        float *dx = dqkv + (size_t)b * T * 3 * d;
        for (int h = 0; h < a->heads; h++) {
            const float *p = probs + ((size_t)b * a->heads + h) * T * T;
            const float *q = x + h * dh, *k = x + d + h * dh, *v = x + 2 * d + h * dh;
            const float *gh = g + h * dh;
            /* dv = p^T dy_h; dp [T, T] = dy_h v^T (in ws) */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, dh, T, 1.0f, p, T, gh, d, 0.0f,
                        dx + 2 * d + h * dh, 3 * d);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, dh, 1.0f, gh, d, v, 3 * d,
                        0.0f, ws, T);
            softmax_grad(p, ws, T);
            /* dq = scale ds k; dk = scale ds^T q */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, dh, T, scale, ws, T, k, 3 * d,
                        0.0f, dx + h * dh, 3 * d);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, dh, T, scale, ws, T, q, 3 * d,
                        0.0f, dx + d + h * dh, 3 * d);
        }
    }
    return 0;
}

#define GELU_S 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

/* 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)), u = GELU_S (v + GELU_C v^3): with
 * vexpf, a loop of it vectorises (libm's tanhf, and expf, are a call per element). */
static inline float gelu_sigmoid(float v)
{
    return 1.0f / (1.0f + vexpf(-2.0f * GELU_S * (v + GELU_C * v * v * v)));
}

HP_CLONES static int cpu_gelu_forward(struct hp_backend *be, const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * gelu_sigmoid(x[i]);
    return 0;
}

HP_CLONES static int cpu_gelu_backward(struct hp_backend *be, const float *x, const float *dy,
                                       float *dx, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        /* d/dv v sg = sg + v 2 sg (1 - sg) du/dv (1 - tanh^2 = 4 sg (1 - sg)) */
        const float v = x[i], sg = gelu_sigmoid(v);
        const float du = GELU_S * (1.0f + 3.0f * GELU_C * v * v);
        dx[i] = dy[i] * (sg + 2.0f * v * sg * (1.0f - sg) * du);
    }
    return 0;
}

static const struct hp_backend_ops cpu_ops = {
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .gemm = cpu_gemm,
    .bias_add = cpu_bias_add,
    .bias_grad = cpu_bias_grad,
    .conv_create = cpu_conv_create,
    .conv_destroy = cpu_conv_destroy,
    .conv_forward = cpu_conv_forward,
    .conv_backward = cpu_conv_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .maxpool_forward = cpu_maxpool_forward,
    .maxpool_backward = cpu_maxpool_backward,
    .avgpool_forward = cpu_avgpool_forward,
    .avgpool_backward = cpu_avgpool_backward,
    .bn_forward_train = cpu_bn_forward_train,
    .bn_forward_eval = cpu_bn_forward_eval,
    .bn_backward = cpu_bn_backward,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .add = cpu_add,
    .axpy = cpu_axpy,
    .softmax_xent = cpu_softmax_xent,
    .sgd_update = cpu_sgd_update,
    .adamw_update = cpu_adamw_update,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .memory_used = cpu_memory_used,
    .embed_forward = cpu_embed_forward,
    .embed_backward = cpu_embed_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
};

void hp_backend_cpu_set_threads(int n)
{
    if (n >= 1)
        openblas_set_num_threads(n);
}

int hp_backend_cpu_threads(void)
{
    return openblas_get_num_threads();
}

int hp_backend_cpu_create(struct hp_backend **out)
{
    struct hp_backend *be = calloc(1, sizeof(*be));

    if (!be)
        return -HP_ENOMEM;
    be->ops = &cpu_ops;
    be->kind = HP_DEVICE_CPU;
    snprintf(be->name, sizeof(be->name), "cpu");
    *out = be;
    return 0;
}
