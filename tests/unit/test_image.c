/* test_image.c - runtime/image.c: images encoded here (libpng, TurboJPEG) with known pixels,
 * decoded and transformed, checked against a second implementation of the resize (a direct
 * double-precision formula) and torchvision's geometry written out again; broken images. */
#include "suites.h"

#include "error.h"
#include "image.h"
#include "rng.h"

#include <check.h>
#include <math.h>
#include <png.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <zlib.h>

/* ---- encoders ---- */

struct membuf {
    unsigned char *b;
    size_t n, cap;
};

static void mem_write(png_structp png, png_bytep data, size_t len)
{
    struct membuf *m = png_get_io_ptr(png);

    if (m->n + len > m->cap) {
        m->cap = (m->n + len) * 2;
        m->b = realloc(m->b, m->cap);
        ck_assert_ptr_nonnull(m->b);
    }
    memcpy(m->b + m->n, data, len);
    m->n += len;
}

static void mem_flush(png_structp png)
{
    (void)png;
}

/* A PNG of w x h pixels with c channels (1 grey, 2 grey+alpha, 3 RGB, 4 RGBA), 8 bits. */
static unsigned char *make_png(const unsigned char *pix, int w, int h, int c, int interlace,
                               size_t *n)
{
    static const int types[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                 PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
    struct membuf m = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop pi = png_create_info_struct(png);
    png_bytep *rows = malloc(sizeof(*rows) * h);

    ck_assert(png && pi && rows);
    ck_assert_int_eq(setjmp(png_jmpbuf(png)), 0);
    png_set_write_fn(png, &m, mem_write, mem_flush);
    png_set_IHDR(png, pi, w, h, 8, types[c], interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    for (int y = 0; y < h; y++)
        rows[y] = (png_bytep)pix + (size_t)y * w * c;
    png_set_rows(png, pi, rows);
    png_write_png(png, pi, PNG_TRANSFORM_IDENTITY, NULL);
    png_destroy_write_struct(&png, &pi);
    free(rows);
    *n = m.n;
    return m.b;
}

/* A palette PNG (8 bits an index) with a tRNS chunk: pal[3 * i] the colours. */
static unsigned char *make_palette_png(const unsigned char *idx, int w, int h,
                                       const unsigned char *pal, int ncol, size_t *n)
{
    struct membuf m = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop pi = png_create_info_struct(png);
    png_color colours[256];
    png_byte alpha[256];

    ck_assert(png && pi);
    ck_assert_int_eq(setjmp(png_jmpbuf(png)), 0);
    for (int i = 0; i < ncol; i++) {
        colours[i] = (png_color){pal[3 * i], pal[3 * i + 1], pal[3 * i + 2]};
        alpha[i] = (png_byte)(i * 37);
    }
    png_set_write_fn(png, &m, mem_write, mem_flush);
    png_set_IHDR(png, pi, w, h, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_PLTE(png, pi, colours, ncol);
    png_set_tRNS(png, pi, alpha, ncol, NULL);
    png_write_info(png, pi);
    for (int y = 0; y < h; y++)
        png_write_row(png, idx + (size_t)y * w);
    png_write_end(png, pi);
    png_destroy_write_struct(&png, &pi);
    *n = m.n;
    return m.b;
}

/* A JPEG (4:4:4, quality q) of w x h pixels, grey (c 1) or RGB (c 3); free with tjFree. */
static unsigned char *make_jpeg(const unsigned char *pix, int w, int h, int c, int q, size_t *n)
{
    tjhandle tj = tjInitCompress();
    unsigned char *out = NULL;
    unsigned long len = 0;

    ck_assert_ptr_nonnull(tj);
    ck_assert_int_eq(tjCompress2(tj, pix, w, 0, h, c == 1 ? TJPF_GRAY : TJPF_RGB, &out, &len,
                                 c == 1 ? TJSAMP_GRAY : TJSAMP_444, q, 0),
                     0);
    tjDestroy(tj);
    *n = len;
    return out;
}

/* A full-scale decode with TurboJPEG, for comparisons. */
static unsigned char *full_decode(const unsigned char *jpg, size_t n, int w, int h, int c)
{
    tjhandle tj = tjInitDecompress();
    unsigned char *pix = malloc((size_t)w * h * c);

    ck_assert(tj && pix);
    ck_assert_int_eq(tjDecompress2(tj, jpg, n, pix, w, 0, h, c == 1 ? TJPF_GRAY : TJPF_RGB, 0), 0);
    tjDestroy(tj);
    return pix;
}

static unsigned char *random_pixels(int w, int h, int c, uint64_t seed)
{
    unsigned char *p = malloc((size_t)w * h * c);

    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < (size_t)w * h * c; i++)
        p[i] = (unsigned char)(hp_rng_uniform(seed, i) * 256);
    return p;
}

/* A smooth picture (gradients and a slow wave): what a JPEG keeps well. */
static unsigned char *smooth_pixels(int w, int h, int c)
{
    unsigned char *p = malloc((size_t)w * h * c);

    ck_assert_ptr_nonnull(p);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++)
                p[((size_t)y * w + x) * c + k] =
                    (unsigned char)(128 + 60 * sin((x + 40.0 * k) / 37.0) + 50 * cos(y / 53.0 + k) +
                                    10 * sin((x + y) / 11.0));
    return p;
}

static struct hp_image_tf make_tf(int c, int h, int w, int train, enum hp_image_aug aug)
{
    struct hp_image_tf tf = {.c = c, .h = h, .w = w, .train = train, .aug = aug};

    hp_image_norm_defaults(c, tf.mean, tf.std);
    return tf;
}

/* ---- the second implementation: the filter as a direct formula, in doubles ---- */

/* One direction, as torchvision and PIL define it: output o is resampled position left + o
 * (padding outside [0, rlen)), centred at off + (r + 0.5) * scale source pixels, reading
 * source pixels in [lo, hi). */
struct nax {
    double off, scale;
    int left, rlen, lo, hi;
};

static double tri(double x)
{
    return fabs(x) < 1 ? 1 - fabs(x) : 0;
}

/* The weights of every source pixel of one direction for output o (0 outside the bounds);
 * returns 0 for padding. */
static int weights(const struct nax *a, int o, double *w, int dim)
{
    int r = a->left + o;
    double fs = a->scale > 1 ? a->scale : 1, c, sum = 0;

    if (r < 0 || r >= a->rlen)
        return 0;
    c = a->off + (r + 0.5) * a->scale;
    for (int i = 0; i < dim; i++) {
        w[i] = i >= a->lo && i < a->hi ? tri((i + 0.5 - c) / fs) : 0;
        sum += w[i];
    }
    ck_assert_double_gt(sum, 0);
    for (int i = 0; i < dim; i++)
        w[i] /= sum;
    return 1;
}

/* out[c][oh][ow], normalised by tf's mean and std, flipped if asked. */
static void naive(const unsigned char *pix, int W, int H, int c, const struct nax *ax,
                  const struct nax *ay, const struct hp_image_tf *tf, int flip, double *out)
{
    double *wx = malloc(sizeof(double) * W), *wy = malloc(sizeof(double) * H);

    for (int oy = 0; oy < tf->h; oy++) {
        int vy = weights(ay, oy, wy, H);
        for (int ox = 0; ox < tf->w; ox++) {
            int vx = weights(ax, ox, wx, W);
            for (int k = 0; k < c; k++) {
                double v = 0;
                for (int i = 0; vx && vy && i < H; i++)
                    for (int j = 0; wy[i] != 0 && j < W; j++)
                        v += wy[i] * wx[j] * pix[((size_t)i * W + j) * c + k];
                int x = flip ? tf->w - 1 - ox : ox;
                out[((size_t)k * tf->h + oy) * tf->w + x] = (v / 255 - tf->mean[k]) / tf->std[k];
            }
        }
    }
    free(wx);
    free(wy);
}

/* The plan torchvision follows, written out: training crop, evaluation resize + centre crop,
 * or the whole image. */
static void geometry(const struct hp_image_tf *tf, int W, int H, uint64_t seed, struct nax *ax,
                     struct nax *ay)
{
    *ax = (struct nax){0, (double)W / tf->w, 0, tf->w, 0, W};
    *ay = (struct nax){0, (double)H / tf->h, 0, tf->h, 0, H};
    if (tf->aug == HP_AUG_NONE)
        return;
    if (tf->train) {
        int x0, y0, cw, ch;
        hp_image_random_crop(W, H, seed, &x0, &y0, &cw, &ch);
        *ax = (struct nax){x0, (double)cw / tf->w, 0, tf->w, x0, x0 + cw};
        *ay = (struct nax){y0, (double)ch / tf->h, 0, tf->h, y0, y0 + ch};
        return;
    }
    int size = (int)lround(tf->h * 256.0 / 224.0);
    int rw = W <= H ? size : (int)((double)size * W / H);
    int rh = W <= H ? (int)((double)size * H / W) : size;
    /* torchvision's center_crop: pad (left (cw - w) / 2) when smaller; else round() */
    int left = rw < tf->w ? -((tf->w - rw) / 2) : (int)nearbyint((rw - tf->w) / 2.0);
    int top = rh < tf->h ? -((tf->h - rh) / 2) : (int)nearbyint((rh - tf->h) / 2.0);
    *ax = (struct nax){0, (double)W / rw, left, rw, 0, W};
    *ay = (struct nax){0, (double)H / rh, top, rh, 0, H};
}

static double max_diff(const float *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

/* hp_image_sample on buf against the naive resize of pix; returns whether it came flipped. */
static int check_against_naive(struct hp_image_scratch *s, const unsigned char *buf, size_t n,
                               const unsigned char *pix, int W, int H, const struct hp_image_tf *tf,
                               uint64_t seed)
{
    size_t len = (size_t)tf->c * tf->h * tf->w;
    float *out = malloc(len * sizeof(float));
    double *ref = malloc(len * sizeof(double));
    char err[256] = "";
    struct nax ax, ay;
    int flipped = 0;

    ck_assert_int_eq(hp_image_sample(s, buf, n, tf, seed, out, err, sizeof(err)), 0);
    geometry(tf, W, H, seed, &ax, &ay);
    naive(pix, W, H, tf->c, &ax, &ay, tf, 0, ref);
    if (max_diff(out, ref, len) > 1e-4) {
        naive(pix, W, H, tf->c, &ax, &ay, tf, 1, ref);
        flipped = 1;
        ck_assert_msg(tf->train, "only a training sample may come flipped");
    }
    ck_assert_msg(max_diff(out, ref, len) <= 1e-4, "%dx%d -> %dx%d (train %d, aug %d, seed %d): %g",
                  W, H, tf->w, tf->h, tf->train, tf->aug, (int)seed, max_diff(out, ref, len));
    free(out);
    free(ref);
    return flipped;
}

/* ---- tests ---- */

START_TEST(png_exact)
{
    struct hp_image_scratch *s;
    unsigned char *pix = random_pixels(28, 28, 3, 7);
    char err[256] = "";
    float out[3 * 28 * 28];

    ck_assert_int_eq(hp_image_scratch_create(&s), 0);
    for (int c = 1; c <= 3; c += 2)
        for (int interlace = 0; interlace < 2; interlace++) {
            size_t n;
            unsigned char *png = make_png(pix, 28, 28, c, interlace, &n);
            struct hp_image_tf tf = make_tf(c, 28, 28, 1, HP_AUG_NONE);
            struct hp_image_info info;

            ck_assert_int_eq(hp_image_probe(png, n, &info, err, sizeof(err)), 0);
            ck_assert_int_eq(info.width, 28);
            ck_assert_int_eq(info.height, 28);
            ck_assert_int_eq(info.channels, c);
            ck_assert_str_eq(info.format, "PNG");
            ck_assert_int_eq(hp_image_sample(s, png, n, &tf, 99, out, err, sizeof(err)), 0);
            for (int k = 0; k < c; k++)
                for (int i = 0; i < 28 * 28; i++)
                    ck_assert_float_eq(out[k * 784 + i],
                                       (pix[i * c + k] / 255.0f - tf.mean[k]) / tf.std[k]);
            free(png);
        }
    hp_image_scratch_free(s);
    free(pix);
}
END_TEST

START_TEST(resize_naive)
{
    struct hp_image_scratch *s;
    static const int sizes[][4] = {/* W, H, out w, out h */
                                   {37, 23, 16, 20}, {37, 23, 50, 60}, {97, 61, 24, 24},
                                   {40, 30, 14, 14}, {40, 40, 30, 10}, {30, 40, 9, 21},
                                   {301, 17, 12, 12}};
    int flips = 0, train = 0;

    ck_assert_int_eq(hp_image_scratch_create(&s), 0);
    for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
        const int W = sizes[t][0], H = sizes[t][1];
        for (int c = 1; c <= 3; c += 2) {
            unsigned char *pix = random_pixels(W, H, c, 100 + t);
            size_t n;
            unsigned char *png = make_png(pix, W, H, c, 0, &n);
            struct hp_image_tf none = make_tf(c, sizes[t][3], sizes[t][2], 0, HP_AUG_NONE);
            struct hp_image_tf eval = make_tf(c, sizes[t][3], sizes[t][2], 0, HP_AUG_STANDARD);
            struct hp_image_tf tr = make_tf(c, sizes[t][3], sizes[t][2], 1, HP_AUG_STANDARD);

            check_against_naive(s, png, n, pix, W, H, &none, 1);
            check_against_naive(s, png, n, pix, W, H, &eval, 1);
            for (uint64_t seed = 0; seed < 12; seed++, train++)
                flips += check_against_naive(s, png, n, pix, W, H, &tr, seed * 7919 + t);
            free(png);
            free(pix);
        }
    }
    /* a flip is a fair coin */
    ck_assert_int_gt(flips, train / 4);
    ck_assert_int_lt(flips, 3 * train / 4);
    hp_image_scratch_free(s);
}
END_TEST

START_TEST(antialias)
{
    struct hp_image_scratch *s;
    unsigned char *pix = malloc(256 * 256);
    struct hp_image_tf tf = make_tf(1, 20, 20, 0, HP_AUG_NONE);
    float out[400];
    char err[256];
    size_t n;

    for (int y = 0; y < 256; y++)
        for (int x = 0; x < 256; x++)
            pix[y * 256 + x] = (x + y) & 1 ? 255 : 0;
    unsigned char *png = make_png(pix, 256, 256, 1, 0, &n);
    ck_assert_int_eq(hp_image_scratch_create(&s), 0);
    ck_assert_int_eq(hp_image_sample(s, png, n, &tf, 0, out, err, sizeof(err)), 0);
    /* plain bilinear sampling would read 0.1 x 0 + 0.9 x 255 at some pixels */
    for (int i = 0; i < 400; i++)
        ck_assert_double_eq_tol((out[i] * tf.std[0] + tf.mean[0]) * 255, 127.5, 4);
    hp_image_scratch_free(s);
    free(png);
    free(pix);
}
END_TEST

START_TEST(random_crop)
{
    int x0, y0, cw, ch, x1, y1, cw1, ch1;
    double area = 0, lr = 0;
    const int N = 4000, W = 500, H = 375;

    for (uint64_t seed = 0; seed < (uint64_t)N; seed++) {
        hp_image_random_crop(W, H, seed, &x0, &y0, &cw, &ch);
        hp_image_random_crop(W, H, seed, &x1, &y1, &cw1, &ch1);
        ck_assert(x0 == x1 && y0 == y1 && cw == cw1 && ch == ch1); /* deterministic */
        ck_assert(x0 >= 0 && y0 >= 0 && cw > 0 && ch > 0 && x0 + cw <= W && y0 + ch <= H);
        double a = (double)cw * ch / (W * H), r = (double)cw / ch;
        /* torchvision's ranges, up to the rounding of w and h to whole pixels */
        ck_assert_double_ge(a, 0.08 * 0.99);
        ck_assert_double_le(a, 1.0);
        ck_assert_double_ge(r, 0.75 * 0.99);
        ck_assert_double_le(r, 4.0 / 3.0 * 1.01);
        area += a;
        lr += log(r);
    }
    /* area uniform in [0.08, 1], tries beyond the image redrawn: torchvision's algorithm
     * gives a mean of 0.433 on 500 x 375 (simulated in Python, 200000 draws); the log of
     * the ratio, uniform but wide crops fit a wide image more often: a mean of 0.031 */
    ck_assert_double_ge(area / N, 0.42);
    ck_assert_double_le(area / N, 0.445);
    ck_assert_double_eq_tol(lr / N, 0.031, 0.006);
    /* different seeds, different crops */
    hp_image_random_crop(W, H, 1, &x0, &y0, &cw, &ch);
    hp_image_random_crop(W, H, 2, &x1, &y1, &cw1, &ch1);
    ck_assert(x0 != x1 || y0 != y1 || cw != cw1 || ch != ch1);
    /* the fallback: no try fits a 1000 x 10 strip; the centre crop of ratio 4/3 */
    hp_image_random_crop(1000, 10, 5, &x0, &y0, &cw, &ch);
    ck_assert_int_eq(ch, 10);
    ck_assert_int_eq(cw, 13);
    ck_assert_int_eq(x0, (1000 - 13) / 2);
    ck_assert_int_eq(y0, 0);
    hp_image_random_crop(10, 1000, 5, &x0, &y0, &cw, &ch);
    ck_assert_int_eq(cw, 10);
    ck_assert_int_eq(ch, 13);
    ck_assert_int_eq(y0, (1000 - 13) / 2);
    hp_image_random_crop(1, 1, 5, &x0, &y0, &cw, &ch);
    ck_assert(x0 == 0 && y0 == 0 && cw == 1 && ch == 1);
}
END_TEST

/* Evaluation: 224 of a 500 x 375 image reads the centre 224 x 224 of it resized to 341 x 256. */
START_TEST(eval_geometry)
{
    struct hp_image_scratch *s;
    const int W = 500, H = 375;
    unsigned char *pix = malloc((size_t)W * H);
    struct hp_image_tf tf = make_tf(1, 224, 224, 0, HP_AUG_STANDARD);
    float *out = malloc(sizeof(float) * 224 * 224);
    char err[256];
    size_t n;

    /* a bright vertical bar at x 150..159: 341/500 of that, less the crop's left (58) */
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            pix[y * W + x] = x >= 150 && x < 160 ? 255 : 0;
    unsigned char *png = make_png(pix, W, H, 1, 0, &n);
    ck_assert_int_eq(hp_image_scratch_create(&s), 0);
    ck_assert_int_eq(hp_image_sample(s, png, n, &tf, 0, out, err, sizeof(err)), 0);
    /* the bar's centroid: 155 x 341 / 500 = 105.71 in the resized image, less the crop's left
     * (58), is 47.71 in the crop, the centre of pixel 47.21 */
    for (int y = 0; y < 224; y++) {
        double sum = 0, sx = 0;
        for (int x = 0; x < 224; x++) {
            double v = (out[y * 224 + x] * tf.std[0] + tf.mean[0]) * 255;
            sum += v;
            sx += v * x;
        }
        ck_assert_double_eq_tol(sx / sum, 47.21, 0.05);
        ck_assert_double_eq_tol(sum, 10 * 341.0 / 500 * 255, 10); /* the bar's mass, scaled */
    }
    hp_image_scratch_free(s);
    free(png);
    free(pix);
    free(out);
}
END_TEST

/* A JPEG 8 times the output decodes at 1/8 of its size: close to the full decode resized. */
START_TEST(dct_scale)
{
    struct hp_image_scratch *s;
    const int W = 512, H = 512;
    unsigned char *pix = smooth_pixels(W, H, 3);
    size_t n;
    unsigned char *jpg = make_jpeg(pix, W, H, 3, 95, &n);
    unsigned char *full = full_decode(jpg, n, W, H, 3);
    struct hp_image_tf tfs[3] = {make_tf(3, 64, 64, 0, HP_AUG_NONE),
                                 make_tf(3, 48, 48, 0, HP_AUG_STANDARD),
                                 make_tf(3, 32, 32, 1, HP_AUG_STANDARD)};
    char err[256];

    ck_assert_int_eq(hp_image_scratch_create(&s), 0);
    for (int t = 0; t < 3; t++) {
        size_t len = (size_t)3 * tfs[t].h * tfs[t].w;
        float *out = malloc(len * sizeof(float));
        double *ref = malloc(len * sizeof(double)), mad = 0;
        struct nax ax, ay;

        for (uint64_t seed = 0; seed < 4; seed++) {
            ck_assert_int_eq(hp_image_sample(s, jpg, n, &tfs[t], seed, out, err, sizeof(err)), 0);
            geometry(&tfs[t], W, H, seed, &ax, &ay);
            naive(full, W, H, 3, &ax, &ay, &tfs[t], hp_rng_uniform(seed, 40) < 0.5f, ref);
            double d1 = 0, d0 = 0;
            for (size_t i = 0; i < len; i++)
                d1 += fabs(out[i] - ref[i]);
            naive(full, W, H, 3, &ax, &ay, &tfs[t], !(hp_rng_uniform(seed, 40) < 0.5f), ref);
            for (size_t i = 0; i < len; i++)
                d0 += fabs(out[i] - ref[i]);
            mad = fmax(mad, fmin(d0, d1) / len);
        }
        /* in normalised units (1/255 of a level is 0.017): within about a level on average */
        ck_assert_msg(mad < 0.03, "transform %d: mean abs difference %g", t, mad);
        free(out);
        free(ref);
    }
    hp_image_scratch_free(s);
    tjFree(jpg);
    free(full);
    free(pix);
}
END_TEST

/* Grey into 3 channels (repeated), colour into 1 (luma), from PNG and JPEG. */
START_TEST(channels)
{
    struct hp_image_scratch *s;
    unsigned char *grey = random_pixels(16, 16, 1, 3), *rgb = random_pixels(16, 16, 3, 4);
    struct hp_image_tf tf3 = make_tf(3, 16, 16, 0, HP_AUG_NONE),
                       tf1 = make_tf(1, 16, 16, 0, HP_AUG_NONE);
    float out[3 * 256];
    char err[256];
    size_t n;

    ck_assert_int_eq(hp_image_scratch_create(&s), 0);
    unsigned char *png = make_png(grey, 16, 16, 1, 0, &n);
    ck_assert_int_eq(hp_image_sample(s, png, n, &tf3, 0, out, err, sizeof(err)), 0);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 256; i++)
            ck_assert_float_eq(out[k * 256 + i], (grey[i] / 255.0f - tf3.mean[k]) / tf3.std[k]);
    free(png);
    png = make_png(rgb, 16, 16, 3, 0, &n);
    ck_assert_int_eq(hp_image_sample(s, png, n, &tf1, 0, out, err, sizeof(err)), 0);
    for (int i = 0; i < 256; i++) {
        double l = 0.299 * rgb[3 * i] + 0.587 * rgb[3 * i + 1] + 0.114 * rgb[3 * i + 2];
        ck_assert_double_eq_tol((out[i] * tf1.std[0] + tf1.mean[0]) * 255, l, 1.01);
    }
    free(png);
    /* an RGBA PNG: the alpha dropped */
    unsigned char rgba[4 * 256];
    for (int i = 0; i < 256; i++) {
        memcpy(rgba + 4 * i, rgb + 3 * i, 3);
        rgba[4 * i + 3] = (unsigned char)i;
    }
    png = make_png(rgba, 16, 16, 4, 0, &n);
    ck_assert_int_eq(hp_image_sample(s, png, n, &tf3, 0, out, err, sizeof(err)), 0);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 256; i++)
            ck_assert_float_eq(out[k * 256 + i],
                               (rgb[3 * i + k] / 255.0f - tf3.mean[k]) / tf3.std[k]);
    free(png);
    /* a palette PNG with transparency: the colours, the transparency dropped (as PIL's
     * convert("RGB")) */
    unsigned char idx[256];
    for (int i = 0; i < 256; i++)
        idx[i] = (unsigned char)(grey[i] % 5);
    png = make_palette_png(idx, 16, 16, rgb, 5, &n);
    ck_assert_int_eq(hp_image_sample(s, png, n, &tf3, 0, out, err, sizeof(err)), 0);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 256; i++)
            ck_assert_float_eq(out[k * 256 + i],
                               (rgb[3 * idx[i] + k] / 255.0f - tf3.mean[k]) / tf3.std[k]);
    free(png);
    /* JPEG: grey into 3 equal channels; colour into its luma */
    unsigned char *sm = smooth_pixels(16, 16, 3);
    unsigned char *jpg = make_jpeg(grey, 16, 16, 1, 90, &n);
    struct hp_image_info info;
    ck_assert_int_eq(hp_image_probe(jpg, n, &info, err, sizeof(err)), 0);
    ck_assert_int_eq(info.channels, 1);
    ck_assert_str_eq(info.format, "JPEG");
    ck_assert_int_eq(hp_image_sample(s, jpg, n, &tf3, 0, out, err, sizeof(err)), 0);
    for (int i = 0; i < 256; i++) {
        double v0 = out[i] * tf3.std[0] + tf3.mean[0], v1 = out[256 + i] * tf3.std[1] + tf3.mean[1];
        double v2 = out[512 + i] * tf3.std[2] + tf3.mean[2];
        ck_assert_double_eq_tol(v0, v1, 1e-5);
        ck_assert_double_eq_tol(v0, v2, 1e-5);
    }
    tjFree(jpg);
    jpg = make_jpeg(sm, 16, 16, 3, 95, &n);
    unsigned char *full = full_decode(jpg, n, 16, 16, 3);
    ck_assert_int_eq(hp_image_sample(s, jpg, n, &tf1, 0, out, err, sizeof(err)), 0);
    for (int i = 0; i < 256; i++) {
        double l = 0.299 * full[3 * i] + 0.587 * full[3 * i + 1] + 0.114 * full[3 * i + 2];
        ck_assert_double_eq_tol((out[i] * tf1.std[0] + tf1.mean[0]) * 255, l, 2.5);
    }
    tjFree(jpg);
    free(full);
    free(sm);
    free(grey);
    free(rgb);
    hp_image_scratch_free(s);
}
END_TEST

/* A hand-made PNG header: signature and IHDR (with its CRC) of w x h, then nothing. */
static size_t png_bomb(unsigned char *b, uint32_t w, uint32_t h)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char *p = b;

    memcpy(p, sig, 8);
    p += 8;
    memcpy(p, "\0\0\0\15IHDR", 8);
    for (int i = 0; i < 4; i++) {
        p[8 + i] = (unsigned char)(w >> (24 - 8 * i));
        p[12 + i] = (unsigned char)(h >> (24 - 8 * i));
    }
    p[16] = 8; /* depth */
    p[17] = 2; /* RGB */
    p[18] = p[19] = p[20] = 0;
    uLong crc = crc32(0, p + 4, 17);
    for (int i = 0; i < 4; i++)
        p[21 + i] = (unsigned char)(crc >> (24 - 8 * i));
    return 33;
}

static void expect_error(struct hp_image_scratch *s, const void *buf, size_t n, const char *what1,
                         const char *what2)
{
    struct hp_image_tf tfs[2] = {make_tf(3, 16, 16, 1, HP_AUG_STANDARD),
                                 make_tf(1, 16, 16, 0, HP_AUG_STANDARD)};
    float out[3 * 256];
    char err[256] = "";

    for (int t = 0; t < 2; t++) {
        err[0] = '\0';
        int rc = hp_image_sample(s, buf, n, &tfs[t], 0, out, err, sizeof(err));
        ck_assert_msg(rc == -HP_EDATA, "%zu bytes (expecting '%s'): %d", n, what1, rc);
        ck_assert_msg(strstr(err, what1) && strstr(err, what2), "'%s' lacks '%s' or '%s'", err,
                      what1, what2);
    }
}

START_TEST(broken)
{
    struct hp_image_scratch *s;
    unsigned char *pix = smooth_pixels(64, 48, 3), b[64];
    size_t n, pn;
    unsigned char *jpg = make_jpeg(pix, 64, 48, 3, 90, &n);
    unsigned char *png = make_png(pix, 64, 48, 3, 0, &pn);
    struct hp_image_info info;
    char err[256];

    size_t sos = 2; /* the first scan's marker: the entropy-coded data follow */
    while (sos + 1 < n && !(jpg[sos] == 0xff && jpg[sos + 1] == 0xda))
        sos++;
    ck_assert_uint_lt(sos + 100, n);
    const size_t mid = sos + (n - sos) / 2;
    ck_assert_int_eq(hp_image_scratch_create(&s), 0);
    expect_error(s, jpg, mid, "truncated", "JPEG");
    expect_error(s, jpg, n - 2, "truncated", "JPEG");   /* only the EOI missing */
    expect_error(s, jpg, 20, "truncated", "JPEG");      /* cut inside the header */
    expect_error(s, jpg, sos + 4, "truncated", "JPEG"); /* inside the scan's header */
    /* garbage after SOI */
    unsigned char garbage[200] = {0xff, 0xd8};
    for (int i = 2; i < 200; i++)
        garbage[i] = (unsigned char)(hp_rng_uniform(9, i) * 255);
    expect_error(s, garbage, sizeof(garbage), "corrupt", "JPEG");
    /* a marker in the middle of the entropy-coded data: libjpeg's warning is an error */
    unsigned char *bad = malloc(n);
    memcpy(bad, jpg, n);
    bad[mid] = 0xff;
    bad[mid + 1] = 0x12;
    expect_error(s, bad, n, "corrupt JPEG", "premature end of data segment");
    free(bad);
    /* PNG: a bomb's header, refused before anything is allocated */
    expect_error(s, b, png_bomb(b, 100000, 100000), "100000 x 100000", "more than");
    ck_assert_int_eq(hp_image_probe(b, png_bomb(b, 100000, 100000), &info, err, sizeof(err)),
                     -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(err, "100000 x 100000 pixels is more than"));
    expect_error(s, b, png_bomb(b, 30000, 30000), "30000 x 30000", "in all");
    expect_error(s, b, png_bomb(b, 64, 48), "truncated", "PNG");
    b[20] ^= 1; /* the CRC no longer matches */
    expect_error(s, b, 33, "CRC", "PNG");
    expect_error(s, png, pn - 20, "truncated", "PNG");
    bad = malloc(pn);
    memcpy(bad, png, pn);
    bad[pn / 2] ^= 0x55; /* inside IDAT: its CRC */
    expect_error(s, bad, pn, "corrupt PNG", "");
    free(bad);
    /* neither */
    expect_error(s, "", 0, "empty", "");
    ck_assert_int_eq(hp_image_probe("", 0, &info, err, sizeof(err)), -HP_EDATA);
    expect_error(s, "GIF89a...", 9, "not a JPEG or PNG", "");
    expect_error(s, "\xff", 1, "not a JPEG or PNG", "");
    /* a good image still decodes after all that */
    struct hp_image_tf tf = make_tf(3, 16, 16, 1, HP_AUG_STANDARD);
    float out[3 * 256];
    ck_assert_int_eq(hp_image_sample(s, jpg, n, &tf, 0, out, err, sizeof(err)), 0);
    ck_assert_int_eq(hp_image_sample(s, png, pn, &tf, 0, out, err, sizeof(err)), 0);
    tf.c = 2;
    ck_assert_int_eq(hp_image_sample(s, png, pn, &tf, 0, out, err, sizeof(err)), -HP_EINVAL);
    hp_image_scratch_free(s);
    tjFree(jpg);
    free(png);
    free(pix);
}
END_TEST

START_TEST(norm_defaults)
{
    float m[3], sd[3];

    hp_image_norm_defaults(3, m, sd);
    ck_assert_float_eq_tol(m[0], 0.485f, 1e-6);
    ck_assert_float_eq_tol(sd[2], 0.225f, 1e-6);
    hp_image_norm_defaults(1, m, sd);
    ck_assert_float_eq_tol(m[0], 0.2860f, 1e-6);
    ck_assert_float_eq_tol(sd[0], 0.3530f, 1e-6);
}
END_TEST

Suite *suite_image(void)
{
    Suite *s = suite_create("image");
    TCase *t = tcase_create("image");

    tcase_set_timeout(t, 120);
    tcase_add_test(t, png_exact);
    tcase_add_test(t, resize_naive);
    tcase_add_test(t, antialias);
    tcase_add_test(t, random_crop);
    tcase_add_test(t, eval_geometry);
    tcase_add_test(t, dct_scale);
    tcase_add_test(t, channels);
    tcase_add_test(t, broken);
    tcase_add_test(t, norm_defaults);
    suite_add_tcase(s, t);
    return s;
}
