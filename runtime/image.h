/* image.h - one training or evaluation sample from an encoded image: decoded with the
 * libraries made for it (libjpeg-turbo's TurboJPEG API, at a reduced DCT scale when the image
 * is much larger than what the crop needs; libpng), cropped, resized, flipped and normalised
 * into floats [c][h][w] as the model's input takes them.
 *
 * Transforms (torchvision's ImageNet recipe, the sizes following the model's input h x w):
 *   HP_AUG_STANDARD, training: RandomResizedCrop(h x w, scale 0.08-1, ratio 3/4-4/3: up to
 *     ten tries, then the centre crop of the clamped ratio, as torchvision) + horizontal flip
 *     with probability 1/2;
 *   HP_AUG_STANDARD, evaluation: resize the shorter side to round(h * 256 / 224), centre crop;
 *   HP_AUG_NONE (both): resize the whole image to h x w (nothing when it already is).
 *   Resizing is bilinear with antialiasing when shrinking (PIL's BILINEAR filter: a triangle
 *   of support max(1, scale)), then (x / 255 - mean[c]) / std[c].
 * Every random choice comes from `seed` alone (the caller derives it from the job's seed, the
 * epoch and the sample's id): the same seed gives the same floats, on any thread.
 * Channels: 1 (decoded as grey) or 3 (RGB; a grey image is repeated). As PIL's convert():
 * alpha and PNG transparency are dropped, colour to grey is ITU-R 601 luma, a CMYK JPEG is
 * taken as Adobe's inverted CMYK. A JPEG is decoded at 1/8, 1/4, 1/2 or all of its size: the
 * smallest that leaves at least one decoded pixel per output pixel in the region sampled.
 */
#ifndef HP_IMAGE_H
#define HP_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define HP_IMAGE_MAX_SIDE 32768          /* pixels: wider or taller is refused before decoding */
#define HP_IMAGE_MAX_PIXELS (256L << 20) /* w x h: more is refused before decoding (a PNG bomb) */

enum hp_image_aug { HP_AUG_STANDARD, HP_AUG_NONE };

struct hp_image_tf {
    int c, h, w; /* the output (the model's input) */
    int train;   /* training transform (random) or evaluation (fixed) */
    enum hp_image_aug aug;
    float mean[3], std[3];
};

/* What an image's header says, without decoding it. */
struct hp_image_info {
    int width, height, channels; /* channels as stored: 1 grey, 2 grey+alpha, 3, 4 */
    const char *format;          /* "JPEG" or "PNG" */
};

/* A thread's reusable buffers (decoder handles, pixels, resize rows); one per thread. */
struct hp_image_scratch;
int hp_image_scratch_create(struct hp_image_scratch **out);
void hp_image_scratch_free(struct hp_image_scratch *s);

/* The header of buf[0..n) (JPEG or PNG, by its signature). 0, or -HP_EDATA with err saying
 * what is wrong ("not a JPEG or PNG image", "truncated", "65536 x 65536 pixels is more than
 * ..."); the caller adds the file's name. */
int hp_image_probe(const void *buf, size_t n, struct hp_image_info *info, char *err, size_t errlen);

/* Decode buf[0..n) and transform it by tf with `seed` into out [tf->c][tf->h][tf->w].
 * 0, or -HP_EDATA (-HP_ENOMEM) with err as above (corrupt or truncated data, too large); out
 * is then unspecified. libjpeg-turbo's warnings on a damaged but decodable JPEG are errors
 * too (a truncated file is not trained on). */
int hp_image_sample(struct hp_image_scratch *s, const void *buf, size_t n,
                    const struct hp_image_tf *tf, uint64_t seed, float *out, char *err,
                    size_t errlen);

/* The training crop of an image of w x h for `seed` (exposed for tests and for choosing the
 * JPEG scale): x0, y0, cw, ch in the image's pixels. */
void hp_image_random_crop(int w, int h, uint64_t seed, int *x0, int *y0, int *cw, int *ch);

/* ImageNet's mean and standard deviation (RGB), and Fashion-MNIST's (grey) for 1 channel:
 * the normalisation feed.c uses. */
void hp_image_norm_defaults(int channels, float mean[3], float std[3]);

#endif
