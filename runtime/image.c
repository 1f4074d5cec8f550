/* image.c - one encoded image (JPEG or PNG) into a normalised float sample (image.h).
 *
 * The path of one sample: the header (hp_image_probe's work) gives the image's size; the
 * transform is planned in the image's own pixels (struct axis, one per direction: where each
 * output pixel's centre falls and which source pixels it may read); a JPEG is decoded at the
 * smallest DCT scale that keeps at least one decoded pixel per output pixel across the region
 * read (libjpeg-turbo decodes 1/8 of a large photo several times faster than all of it), and
 * the plan is scaled to the decoded pixels; then a separable resample (PIL's BILINEAR filter:
 * a triangle widened by the reduction factor when shrinking), horizontal on only the rows the
 * vertical pass reads, vertical into one float row at a time, normalised into [c][h][w].
 */
#include "image.h"
#include "error.h"
#include "rng.h"

#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <zlib.h>

struct hp_image_scratch {
    tjhandle tj;
    unsigned char *pix; /* decoded pixels, interleaved, tf->c (or 4: CMYK) per pixel */
    size_t pix_cap;
    unsigned char **rows; /* libpng's row pointers into pix */
    size_t rows_cap;
    float *tmp; /* the horizontal pass: [rows the vertical pass reads][w][c] */
    size_t tmp_cap;
    float *frow; /* one source row as floats, + 4 of slack */
    size_t frow_cap;
    float *acc; /* one output row, [w][c] */
    size_t acc_cap;
    int *xi, *yi; /* per output column / row: first source index, taps (2 each) */
    size_t xi_cap, yi_cap;
    float *xw, *yw; /* per output column / row: ksize weights */
    size_t xw_cap, yw_cap;
};

/* One direction of the plan. Output index o reads resampled position r = left + o: outside
 * [0, rlen) it is padding (0 before normalising, as torchvision's CenterCrop pads); inside,
 * its centre in source pixels is off + (r + 0.5) * scale and it reads source pixels in
 * [lo, hi) only (the crop's, for a training crop; the whole image's otherwise). */
struct axis {
    double off, scale;
    int left, rlen, lo, hi;
};

enum fmt { FMT_NONE, FMT_JPEG, FMT_PNG };

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;

    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Grow *p to hold n elements of size sz (never shrinks). 0 or -HP_ENOMEM. */
static int grow(void **p, size_t *cap, size_t n, size_t sz)
{
    void *q;

    if (n <= *cap)
        return 0;
    if (n > SIZE_MAX / sz)
        return -HP_ENOMEM;
    q = realloc(*p, n * sz);
    if (!q)
        return -HP_ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

int hp_image_scratch_create(struct hp_image_scratch **out)
{
    struct hp_image_scratch *s = calloc(1, sizeof(*s));

    *out = NULL;
    if (!s)
        return -HP_ENOMEM;
    s->tj = tjInitDecompress();
    if (!s->tj) {
        free(s);
        return -HP_ENOMEM;
    }
    *out = s;
    return 0;
}

void hp_image_scratch_free(struct hp_image_scratch *s)
{
    if (!s)
        return;
    tjDestroy(s->tj);
    free(s->pix);
    free(s->rows);
    free(s->tmp);
    free(s->acc);
    free(s->frow);
    free(s->xi);
    free(s->yi);
    free(s->xw);
    free(s->yw);
    free(s);
}

static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

static enum fmt sniff(const unsigned char *b, size_t n)
{
    if (n >= 2 && b[0] == 0xff && b[1] == 0xd8)
        return FMT_JPEG;
    if (n >= 8 && memcmp(b, png_sig, 8) == 0)
        return FMT_PNG;
    return FMT_NONE;
}

/* Width and height within HP_IMAGE_MAX_SIDE and HP_IMAGE_MAX_PIXELS. */
static int check_size(long w, long h, char *err, size_t errlen)
{
    if (w < 1 || h < 1)
        return fail(err, errlen, -HP_EDATA, "%ld x %ld pixels: an empty image", w, h);
    if (w > HP_IMAGE_MAX_SIDE || h > HP_IMAGE_MAX_SIDE)
        return fail(err, errlen, -HP_EDATA, "%ld x %ld pixels is more than %d pixels on a side", w,
                    h, HP_IMAGE_MAX_SIDE);
    if (w * h > HP_IMAGE_MAX_PIXELS)
        return fail(err, errlen, -HP_EDATA, "%ld x %ld pixels is more than %ld pixels in all", w, h,
                    (long)HP_IMAGE_MAX_PIXELS);
    return 0;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A PNG's IHDR, read by hand (no allocation: a bomb's size is refused before libpng runs). */
static int png_header(const unsigned char *b, size_t n, struct hp_image_info *info, char *err,
                      size_t errlen)
{
    static const int chans[7] = {1, 0, 3, 3, 2, 0, 4};
    uint32_t w, h;
    int ct;

    if (n < 33)
        return fail(err, errlen, -HP_EDATA, "truncated PNG: %zu bytes, shorter than its header", n);
    if (be32(b + 8) != 13 || memcmp(b + 12, "IHDR", 4) != 0)
        return fail(err, errlen, -HP_EDATA, "corrupt PNG: the first chunk is not a 13-byte IHDR");
    if (be32(b + 29) != (uint32_t)crc32(0, b + 12, 17))
        return fail(err, errlen, -HP_EDATA, "corrupt PNG: the IHDR chunk's CRC does not match");
    w = be32(b + 16);
    h = be32(b + 20);
    ct = b[25];
    if (ct > 6 || chans[ct] == 0)
        return fail(err, errlen, -HP_EDATA, "corrupt PNG: colour type %d (allowed: 0, 2, 3, 4, 6)",
                    ct);
    int rc = check_size(w > 0x7fffffffu ? 0x7fffffffL : (long)w,
                        h > 0x7fffffffu ? 0x7fffffffL : (long)h, err, errlen);
    if (rc)
        return rc;
    info->width = (int)w;
    info->height = (int)h;
    info->channels = chans[ct];
    info->format = "PNG";
    return 0;
}

/* libjpeg's message, as the error: "truncated" where libjpeg says the data end early,
 * "unsupported" for a kind of JPEG it does not decode, "corrupt or truncated" where the data do
 * not end with the EOI marker, else "corrupt". */
static int jpeg_fail(tjhandle tj, const char *why, const unsigned char *b, size_t n, char *err,
                     size_t errlen)
{
    const char *m = why ? why : tjGetErrorStr2(tj);

    if (!m)
        m = "unknown error";
    if (strstr(m, "Premature end"))
        return fail(err, errlen, -HP_EDATA, "truncated JPEG: %s", m);
    if (strstr(m, "Unsupported") && !strstr(m, "marker")) /* 12-bit, lossless */
        return fail(err, errlen, -HP_EDATA, "unsupported JPEG: %s", m);
    if (n < 4 || b[n - 2] != 0xff || b[n - 1] != 0xd9)
        return fail(err, errlen, -HP_EDATA, "corrupt or truncated JPEG (no end marker): %s", m);
    return fail(err, errlen, -HP_EDATA, "corrupt JPEG: %s", m);
}

/* The marker segments up to the first scan (SOS), walked by hand: each must lie inside the
 * data (libjpeg reads a header cut short as padding, and TurboJPEG 2.1 returns no size, and
 * no error, for one cut before its frame). The frame's size in *w, *h. */
static int jpeg_walk(const unsigned char *b, size_t n, int *w, int *h, char *err, size_t errlen)
{
    size_t p = 2;
    int frame = 0;

    for (;;) {
        while (p + 1 < n && b[p] == 0xff && b[p + 1] == 0xff)
            p++; /* fill bytes */
        if (p + 4 > n)
            return fail(err, errlen, -HP_EDATA,
                        "truncated JPEG: the header ends at byte %zu, before the first scan", n);
        if (b[p] != 0xff)
            return fail(err, errlen, -HP_EDATA,
                        "corrupt JPEG: no marker at byte %zu of the header (0x%02x)", p, b[p]);
        const unsigned m = b[p + 1];
        if (m == 0x01 || (m >= 0xd0 && m <= 0xd8)) { /* standalone markers */
            p += 2;
            continue;
        }
        if (m == 0xd9 || (m == 0xda && !frame))
            return fail(err, errlen, -HP_EDATA, "corrupt JPEG: %s before the frame header",
                        m == 0xd9 ? "the end marker" : "a scan");
        const size_t len = (size_t)b[p + 2] << 8 | b[p + 3];
        if (len < 2 || p + 2 + len > n)
            return fail(err, errlen, -HP_EDATA,
                        "truncated JPEG: marker 0x%02x at byte %zu runs past the end (%zu bytes)",
                        m, p, n);
        if (m == 0xda)
            return 0;
        if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc && !frame) {
            if (len < 8)
                return fail(err, errlen, -HP_EDATA, "corrupt JPEG: a frame header of %zu bytes",
                            len);
            *h = b[p + 5] << 8 | b[p + 6];
            *w = b[p + 7] << 8 | b[p + 8];
            frame = 1;
        }
        p += 2 + len;
    }
}

static int jpeg_header(tjhandle tj, const unsigned char *b, size_t n, struct hp_image_info *info,
                       int *cs, char *err, size_t errlen)
{
    int w = 0, h = 0, sub, space, fw = 0, fh = 0, rc;

    if (n > 0xffffffffUL)
        return fail(err, errlen, -HP_EDATA, "JPEG of %zu bytes: more than 4 GiB", n);
    if ((rc = jpeg_walk(b, n, &fw, &fh, err, errlen)) != 0)
        return rc;
    if ((rc = check_size(fw, fh, err, errlen)) != 0)
        return rc; /* before libjpeg allocates anything for it */
    if (tjDecompressHeader3(tj, b, (unsigned long)n, &w, &h, &sub, &space) != 0)
        return jpeg_fail(tj, NULL, b, n, err, errlen);
    if (w != fw || h != fh)
        return fail(err, errlen, -HP_EDATA,
                    "corrupt JPEG: a frame of %d x %d pixels read as %d x %d", fw, fh, w, h);
    info->width = w;
    info->height = h;
    info->channels = space == TJCS_GRAY ? 1 : (space == TJCS_CMYK || space == TJCS_YCCK) ? 4 : 3;
    info->format = "JPEG";
    *cs = space;
    return 0;
}

static int header(tjhandle tj, const void *buf, size_t n, struct hp_image_info *info, int *cs,
                  char *err, size_t errlen)
{
    if (!buf || n == 0)
        return fail(err, errlen, -HP_EDATA, "empty (0 bytes): not a JPEG or PNG image");
    switch (sniff(buf, n)) {
    case FMT_JPEG:
        return jpeg_header(tj, buf, n, info, cs, err, errlen);
    case FMT_PNG:
        return png_header(buf, n, info, err, errlen);
    default:
        return fail(err, errlen, -HP_EDATA,
                    "not a JPEG or PNG image (it starts with neither signature)");
    }
}

int hp_image_probe(const void *buf, size_t n, struct hp_image_info *info, char *err, size_t errlen)
{
    tjhandle tj = NULL;
    int cs, rc;

    memset(info, 0, sizeof(*info));
    if (buf && n >= 2 && sniff(buf, n) == FMT_JPEG) {
        tj = tjInitDecompress();
        if (!tj)
            return fail(err, errlen, -HP_ENOMEM, "out of memory for a JPEG decoder");
    }
    rc = header(tj, buf, n, info, &cs, err, errlen);
    if (tj)
        tjDestroy(tj);
    return rc;
}

void hp_image_random_crop(int w, int h, uint64_t seed, int *x0, int *y0, int *cw, int *ch)
{
    const double area = (double)w * h, lo = log(3.0 / 4.0), hi = log(4.0 / 3.0);

    if (w < 1 || h < 1) {
        *x0 = *y0 = *cw = *ch = 0;
        return;
    }
    /* torchvision's RandomResizedCrop.get_params; Python's round() rounds half to even, as
     * rint() does */
    for (int t = 0; t < 10; t++) {
        double target = area * (0.08 + 0.92 * hp_rng_uniform(seed, 4 * t));
        double ratio = exp(lo + (hi - lo) * hp_rng_uniform(seed, 4 * t + 1));
        int tw = (int)rint(sqrt(target * ratio)), th = (int)rint(sqrt(target / ratio));

        if (tw > 0 && tw <= w && th > 0 && th <= h) {
            *y0 = (int)(hp_rng_uniform(seed, 4 * t + 2) * (h - th + 1));
            *x0 = (int)(hp_rng_uniform(seed, 4 * t + 3) * (w - tw + 1));
            *cw = tw;
            *ch = th;
            return;
        }
    }
    double in_ratio = (double)w / h;
    int tw = w, th = h;
    if (in_ratio < 3.0 / 4.0)
        th = (int)rint(w / (3.0 / 4.0));
    else if (in_ratio > 4.0 / 3.0)
        tw = (int)rint(h * (4.0 / 3.0));
    th = th < 1 ? 1 : th > h ? h : th;
    tw = tw < 1 ? 1 : tw > w ? w : tw;
    *x0 = (w - tw) / 2;
    *y0 = (h - th) / 2;
    *cw = tw;
    *ch = th;
}

/* The draw that decides the horizontal flip (after the crop's 40). */
#define FLIP_DRAW 40

void hp_image_norm_defaults(int channels, float mean[3], float std[3])
{
    static const float im_mean[3] = {0.485f, 0.456f, 0.406f}, im_std[3] = {0.229f, 0.224f, 0.225f};

    if (channels == 1) {
        mean[0] = mean[1] = mean[2] = 0.2860f;
        std[0] = std[1] = std[2] = 0.3530f;
        return;
    }
    memcpy(mean, im_mean, sizeof(im_mean));
    memcpy(std, im_std, sizeof(im_std));
}

/* The plan, in the image's own pixels (W x H), and whether to flip. */
static void plan(const struct hp_image_tf *tf, int W, int H, uint64_t seed, struct axis *ax,
                 struct axis *ay, int *flip)
{
    *flip = 0;
    memset(ax, 0, sizeof(*ax));
    memset(ay, 0, sizeof(*ay));
    ax->hi = W;
    ay->hi = H;
    ax->rlen = tf->w;
    ay->rlen = tf->h;
    if (tf->aug == HP_AUG_NONE) {
        ax->scale = (double)W / tf->w;
        ay->scale = (double)H / tf->h;
    } else if (tf->train) {
        int x0, y0, cw, ch;

        hp_image_random_crop(W, H, seed, &x0, &y0, &cw, &ch);
        ax->off = ax->lo = x0;
        ay->off = ay->lo = y0;
        ax->hi = x0 + cw;
        ay->hi = y0 + ch;
        ax->scale = (double)cw / tf->w;
        ay->scale = (double)ch / tf->h;
        *flip = hp_rng_uniform(seed, FLIP_DRAW) < 0.5f;
    } else {
        /* torchvision: Resize(S) of the shorter side (the longer one truncated), then
         * CenterCrop(h, w), padding where the crop is larger */
        int S = (int)rint(tf->h * 256.0 / 224.0), rw, rh;

        if (W <= H) {
            rw = S;
            rh = (int)((double)S * H / W);
        } else {
            rh = S;
            rw = (int)((double)S * W / H);
        }
        ax->rlen = rw;
        ay->rlen = rh;
        ax->scale = (double)W / rw;
        ay->scale = (double)H / rh;
        ax->left = rw >= tf->w ? (int)rint((rw - tf->w) / 2.0) : -((tf->w - rw) / 2);
        ay->left = rh >= tf->h ? (int)rint((rh - tf->h) / 2.0) : -((tf->h - rh) / 2);
    }
}

/* The plan scaled to an image decoded at num/denom of its size (dim pixels in that direction). */
static void axis_scale(struct axis *a, int num, int denom, int dim)
{
    double f = (double)num / denom;

    a->off *= f;
    a->scale *= f;
    a->lo = (int)floor(a->lo * f);
    a->hi = (int)ceil(a->hi * f - 1e-9);
    if (a->hi > dim)
        a->hi = dim;
    if (a->lo > a->hi - 1)
        a->lo = a->hi - 1;
}

/* PIL's BILINEAR filter: a triangle. */
static double tri(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Coefficients of one direction for n outputs: idx[2o] first source index, idx[2o+1] taps,
 * w[o * *ksize ...] the normalised weights (PIL's precompute_coeffs, with bounds). */
static int coeffs(const struct axis *a, int n, int **idx, size_t *icap, float **w, size_t *wcap,
                  int *ksize)
{
    double fscale = a->scale > 1.0 ? a->scale : 1.0, support = fscale;
    int k = (int)ceil(support) * 2 + 1;

    if (grow((void **)idx, icap, 2 * (size_t)n, sizeof(int)) ||
        grow((void **)w, wcap, (size_t)n * k, sizeof(float)))
        return -HP_ENOMEM;
    *ksize = k;
    for (int o = 0; o < n; o++) {
        int r = a->left + o, lo, hi;
        float *wo = *w + (size_t)o * k;
        double center, sum = 0;

        (*idx)[2 * o] = a->lo;
        (*idx)[2 * o + 1] = 0;
        if (r < 0 || r >= a->rlen)
            continue; /* padding */
        center = a->off + (r + 0.5) * a->scale;
        lo = (int)floor(center - support + 0.5);
        hi = (int)floor(center + support + 0.5);
        lo = lo < a->lo ? a->lo : lo;
        hi = hi > a->hi ? a->hi : hi;
        if (hi - lo > k)
            hi = lo + k;
        for (int i = lo; i < hi; i++) {
            wo[i - lo] = (float)tri((i - center + 0.5) / fscale);
            sum += wo[i - lo];
        }
        if (hi <= lo || sum <= 0) { /* the centre beyond the bounds: the nearest pixel */
            lo = center < a->lo ? a->lo : a->hi - 1;
            hi = lo + 1;
            wo[0] = 1;
            sum = 1;
        }
        (*idx)[2 * o] = lo;
        (*idx)[2 * o + 1] = hi - lo;
        for (int i = 0; i < hi - lo; i++)
            wo[i] = (float)(wo[i] / sum);
    }
    return 0;
}

typedef float v4f __attribute__((vector_size(16)));

static inline v4f load4(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* The horizontal pass of source rows [r0, r1) (c channels, pitch bytes a row) into s->tmp.
 * Each row's columns that some output reads are converted to floats first (in s->frow); an RGB
 * pixel is then read as four floats (the next pixel's red too: frow has slack after its end),
 * the taps in two independent sums. */
static void hpass(struct hp_image_scratch *s, const unsigned char *pix, size_t pitch, int c, int r0,
                  int r1, int ow, int kx)
{
    int x0 = INT32_MAX, x1 = 0;

    for (int o = 0; o < ow; o++)
        if (s->xi[2 * o + 1] > 0) {
            x0 = s->xi[2 * o] < x0 ? s->xi[2 * o] : x0;
            x1 = s->xi[2 * o] + s->xi[2 * o + 1] > x1 ? s->xi[2 * o] + s->xi[2 * o + 1] : x1;
        }
    if (x1 <= x0)
        x0 = x1 = 0;
    for (int r = r0; r < r1; r++) {
        const unsigned char *row = pix + (size_t)r * pitch;
        float *t = s->tmp + (size_t)(r - r0) * ow * c, *f = s->frow - (size_t)x0 * c;

        for (size_t i = (size_t)x0 * c; i < (size_t)x1 * c; i++)
            f[i] = row[i];
        for (int o = 0; o < ow; o++) {
            const int n = s->xi[2 * o + 1];
            const float *w = s->xw + (size_t)o * kx, *p = f + (size_t)s->xi[2 * o] * c;
            int i = 0;

            if (c == 1) {
                float a = 0, b = 0;
                for (; i + 1 < n; i += 2) {
                    a += w[i] * p[i];
                    b += w[i + 1] * p[i + 1];
                }
                t[o] = (i < n ? a + w[i] * p[i] : a) + b;
            } else {
                v4f a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
                for (; i + 1 < n; i += 2) {
                    a += load4(p + 3 * i) * w[i];
                    b += load4(p + 3 * i + 3) * w[i + 1];
                }
                if (i < n)
                    a += load4(p + 3 * i) * w[i];
                a += b;
                t[3 * o] = a[0];
                t[3 * o + 1] = a[1];
                t[3 * o + 2] = a[2];
            }
        }
    }
}

/* One output row (acc: [ow][c] in 0..255) into out[c][y][.], normalised, flipped. */
static void store_row(const float *acc, int c, int oh, int ow, int y, int flip,
                      const struct hp_image_tf *tf, float *out)
{
    for (int ch = 0; ch < c; ch++) {
        float *o = out + ((size_t)ch * oh + y) * ow;
        const float a = 1.0f / (255.0f * tf->std[ch]), b = -tf->mean[ch] / tf->std[ch];
        const float *in = acc + ch;

        if (flip)
            for (int x = 0; x < ow; x++)
                o[ow - 1 - x] = in[(size_t)x * c] * a + b;
        else
            for (int x = 0; x < ow; x++)
                o[x] = in[(size_t)x * c] * a + b;
    }
}

/* Resample pix (dw x dh, c channels) by the plan into out. */
static int resample(struct hp_image_scratch *s, const unsigned char *pix, int dw, int dh, int c,
                    const struct axis *ax, const struct axis *ay, int flip,
                    const struct hp_image_tf *tf, float *out)
{
    const int ow = tf->w, oh = tf->h;
    const size_t pitch = (size_t)dw * c, rowlen = (size_t)ow * c;
    int kx, ky, r0 = dh, r1 = 0;

    if (ax->scale == 1.0 && ay->scale == 1.0 && ax->off == 0 && ay->off == 0 && ax->left == 0 &&
        ay->left == 0 && dw == ow && dh == oh && !flip) { /* the same size: a copy */
        for (int ch = 0; ch < c; ch++) /* (x / 255 - mean) / std to the last bit */
            for (size_t i = 0; i < (size_t)ow * oh; i++)
                out[(size_t)ch * ow * oh + i] =
                    (pix[i * c + ch] / 255.0f - tf->mean[ch]) / tf->std[ch];
        return 0;
    }
    if (coeffs(ax, ow, &s->xi, &s->xi_cap, &s->xw, &s->xw_cap, &kx) ||
        coeffs(ay, oh, &s->yi, &s->yi_cap, &s->yw, &s->yw_cap, &ky))
        return -HP_ENOMEM;
    for (int y = 0; y < oh; y++) {
        if (s->yi[2 * y + 1] == 0)
            continue;
        r0 = s->yi[2 * y] < r0 ? s->yi[2 * y] : r0;
        r1 = s->yi[2 * y] + s->yi[2 * y + 1] > r1 ? s->yi[2 * y] + s->yi[2 * y + 1] : r1;
    }
    if (r1 < r0)
        r1 = r0 = 0;
    if (grow((void **)&s->tmp, &s->tmp_cap, (size_t)(r1 - r0 > 0 ? r1 - r0 : 1) * rowlen,
             sizeof(float)) ||
        grow((void **)&s->acc, &s->acc_cap, rowlen, sizeof(float)) ||
        grow((void **)&s->frow, &s->frow_cap, pitch + 4, sizeof(float)))
        return -HP_ENOMEM;
    hpass(s, pix, pitch, c, r0, r1, ow, kx);
    for (int y = 0; y < oh; y++) {
        const int first = s->yi[2 * y], n = s->yi[2 * y + 1];
        const float *w = s->yw + (size_t)y * ky;
        float *acc = s->acc;

        const float *t = s->tmp + (size_t)(first - r0) * rowlen;
        int i = 1;

        if (n == 0)
            memset(acc, 0, rowlen * sizeof(float));
        else
            for (size_t j = 0; j < rowlen; j++)
                acc[j] = w[0] * t[j];
        for (; i + 1 < n; i += 2) { /* two taps a pass over the row */
            const float *t0 = t + i * rowlen, *t1 = t0 + rowlen, w0 = w[i], w1 = w[i + 1];
            for (size_t j = 0; j < rowlen; j++)
                acc[j] += w0 * t0[j] + w1 * t1[j];
        }
        if (i < n)
            for (size_t j = 0; j < rowlen; j++)
                acc[j] += w[i] * t[i * rowlen + j];
        for (int x = 0; x < ow; x++) /* padding columns */
            if (s->xi[2 * x + 1] == 0)
                for (int ch = 0; ch < c; ch++)
                    acc[(size_t)x * c + ch] = 0;
        store_row(acc, c, oh, ow, y, flip, tf, out);
    }
    return 0;
}

/* The smallest DCT scaling factor of 1/8, 1/4, 1/2 and 1 at which the plan reads at least one
 * decoded pixel per output pixel in both directions. The others (3/8, 5/8, 3/4...) have no SIMD
 * inverse DCT in libjpeg-turbo 2.1: measured, 5/8 of a 1200 x 900 photo decodes slower than
 * 1/2 and barely faster than all of it. */
static tjscalingfactor pick_scale(const struct axis *ax, const struct axis *ay)
{
    tjscalingfactor best = {1, 1};
    int n = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&n);

    for (int i = 0; sf && i < n; i++) {
        double f = (double)sf[i].num / sf[i].denom;
        if (sf[i].num != 1 || f >= (double)best.num / best.denom)
            continue;
        if (ax->scale * f >= 1.0 - 1e-9 && ay->scale * f >= 1.0 - 1e-9)
            best = sf[i];
    }
    return best;
}

/* CMYK (Adobe's inverted form, as libjpeg hands it over) to RGB or grey in place. */
static void cmyk_convert(unsigned char *p, size_t npix, int c)
{
    for (size_t i = 0; i < npix; i++) {
        const unsigned k = p[4 * i + 3];
        const unsigned r = (p[4 * i] * k + 127) / 255, g = (p[4 * i + 1] * k + 127) / 255,
                       b = (p[4 * i + 2] * k + 127) / 255;

        if (c == 1) {
            p[i] = (unsigned char)((r * 299 + g * 587 + b * 114 + 500) / 1000);
        } else {
            p[3 * i] = (unsigned char)r;
            p[3 * i + 1] = (unsigned char)g;
            p[3 * i + 2] = (unsigned char)b;
        }
    }
}

static int jpeg_sample(struct hp_image_scratch *s, const void *buf, size_t n,
                       const struct hp_image_info *info, int cs, const struct hp_image_tf *tf,
                       uint64_t seed, float *out, char *err, size_t errlen)
{
    struct axis ax, ay;
    int flip, cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    int pc = cmyk ? 4 : tf->c;

    plan(tf, info->width, info->height, seed, &ax, &ay, &flip);
    tjscalingfactor sf = pick_scale(&ax, &ay);
    int dw = TJSCALED(info->width, sf), dh = TJSCALED(info->height, sf);
    if (grow((void **)&s->pix, &s->pix_cap, (size_t)dw * dh * pc, 1))
        return fail(err, errlen, -HP_ENOMEM, "out of memory for %d x %d pixels", dw, dh);
    if (tjDecompress2(s->tj, buf, (unsigned long)n, s->pix, dw, dw * pc, dh,
                      cmyk         ? TJPF_CMYK
                      : tf->c == 1 ? TJPF_GRAY
                                   : TJPF_RGB,
                      TJFLAG_STOPONWARNING) != 0)
        return jpeg_fail(s->tj, NULL, buf, n, err, errlen);
    if (cmyk)
        cmyk_convert(s->pix, (size_t)dw * dh, tf->c);
    axis_scale(&ax, sf.num, sf.denom, dw);
    axis_scale(&ay, sf.num, sf.denom, dh);
    if (resample(s, s->pix, dw, dh, tf->c, &ax, &ay, flip, tf, out))
        return fail(err, errlen, -HP_ENOMEM, "out of memory for the resize");
    return 0;
}

/* libpng's memory reader and error handler. */
struct png_src {
    const unsigned char *b;
    size_t n, at;
    char *err;
    size_t errlen;
};

static void png_read_mem(png_structp png, png_bytep to, size_t len)
{
    struct png_src *src = png_get_io_ptr(png);

    if (len > src->n - src->at) {
        fail(src->err, src->errlen, -HP_EDATA, "truncated PNG: the data end at byte %zu", src->n);
        png_longjmp(png, 1);
    }
    memcpy(to, src->b + src->at, len);
    src->at += len;
}

static void png_on_error(png_structp png, png_const_charp msg)
{
    struct png_src *src = png_get_error_ptr(png);

    fail(src->err, src->errlen, -HP_EDATA, "corrupt PNG: %s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* benign (a colour profile libpng does not like): PIL reads these too */
}

/* The transforms that turn any PNG into 8-bit grey (c 1) or RGB (c 3), alpha dropped (as
 * PIL's convert does). */
static void png_transforms(png_structp png, png_infop pi, int c)
{
    int ct = png_get_color_type(png, pi), depth = png_get_bit_depth(png, pi);

    if (depth == 16)
        png_set_strip_16(png);
    if (ct == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (ct == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if ((ct & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, pi, PNG_INFO_tRNS))
        png_set_strip_alpha(png); /* also the alpha the expansions make of tRNS */
    if (c == 1 && (ct & PNG_COLOR_MASK_COLOR))
        png_set_rgb_to_gray_fixed(png, 1, 29900, 58700); /* ITU-R 601-2, as PIL's "L" */
    if (c == 3 && !(ct & PNG_COLOR_MASK_COLOR))
        png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, pi);
}

/* Decode a PNG into s->pix (tf->c channels); its size in *dw, *dh. */
static int png_decode(struct hp_image_scratch *s, const void *buf, size_t n, int c, int *dw,
                      int *dh, char *err, size_t errlen)
{
    struct png_src src = {buf, n, 0, err, errlen};
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    png_infop pi = png ? png_create_info_struct(png) : NULL;
    volatile int rc = -HP_EDATA;

    if (!pi) {
        png_destroy_read_struct(&png, NULL, NULL);
        return fail(err, errlen, -HP_ENOMEM, "out of memory for a PNG decoder");
    }
    if (setjmp(png_jmpbuf(png)))
        goto out; /* err already says why */
    png_set_read_fn(png, &src, png_read_mem);
    png_set_user_limits(png, HP_IMAGE_MAX_SIDE, HP_IMAGE_MAX_SIDE);
    png_set_chunk_malloc_max(png, 16 << 20);
    png_read_info(png, pi);
    png_uint_32 w = png_get_image_width(png, pi), h = png_get_image_height(png, pi);
    if (check_size((long)w, (long)h, err, errlen))
        goto out;
    png_transforms(png, pi, c);
    if (png_get_channels(png, pi) != c || png_get_rowbytes(png, pi) != (size_t)w * c) {
        fail(err, errlen, -HP_EDATA, "corrupt PNG: %d channels after conversion, not %d",
             png_get_channels(png, pi), c);
        goto out;
    }
    if (grow((void **)&s->pix, &s->pix_cap, (size_t)w * h * c, 1) ||
        grow((void **)&s->rows, &s->rows_cap, h, sizeof(*s->rows))) {
        rc = fail(err, errlen, -HP_ENOMEM, "out of memory for %u x %u pixels", w, h);
        goto out;
    }
    for (png_uint_32 y = 0; y < h; y++)
        s->rows[y] = s->pix + (size_t)y * w * c;
    png_read_image(png, s->rows);
    png_read_end(png, NULL);
    *dw = (int)w;
    *dh = (int)h;
    rc = 0;
out:
    png_destroy_read_struct(&png, &pi, NULL);
    return rc;
}

static int check_tf(const struct hp_image_tf *tf, char *err, size_t errlen)
{
    if (tf->c != 1 && tf->c != 3)
        return fail(err, errlen, -HP_EINVAL, "%d channels asked for (allowed: 1 or 3)", tf->c);
    if (tf->h < 1 || tf->w < 1 || tf->h > HP_IMAGE_MAX_SIDE || tf->w > HP_IMAGE_MAX_SIDE)
        return fail(err, errlen, -HP_EINVAL, "an output of %d x %d pixels (allowed: 1 to %d)",
                    tf->w, tf->h, HP_IMAGE_MAX_SIDE);
    for (int i = 0; i < tf->c; i++)
        if (!(tf->std[i] > 0))
            return fail(err, errlen, -HP_EINVAL, "channel %d's standard deviation is not > 0", i);
    if (tf->aug != HP_AUG_STANDARD && tf->aug != HP_AUG_NONE)
        return fail(err, errlen, -HP_EINVAL, "unknown augmentation %d", (int)tf->aug);
    return 0;
}

int hp_image_sample(struct hp_image_scratch *s, const void *buf, size_t n,
                    const struct hp_image_tf *tf, uint64_t seed, float *out, char *err,
                    size_t errlen)
{
    struct hp_image_info info = {0};
    struct axis ax, ay;
    int cs = 0, flip, dw, dh, rc;

    if ((rc = check_tf(tf, err, errlen)) != 0)
        return rc;
    if ((rc = header(s->tj, buf, n, &info, &cs, err, errlen)) != 0)
        return rc;
    if (strcmp(info.format, "JPEG") == 0)
        return jpeg_sample(s, buf, n, &info, cs, tf, seed, out, err, errlen);
    if ((rc = png_decode(s, buf, n, tf->c, &dw, &dh, err, errlen)) != 0)
        return rc;
    plan(tf, dw, dh, seed, &ax, &ay, &flip);
    if (resample(s, s->pix, dw, dh, tf->c, &ax, &ay, flip, tf, out))
        return fail(err, errlen, -HP_ENOMEM, "out of memory for the resize");
    return 0;
}
