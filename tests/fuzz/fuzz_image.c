/* fuzz_image.c - an encoded image (runtime/image.h): hp_image_probe, then hp_image_sample into
 * 16 x 16 outputs (RGB training, grey evaluation, RGB without augmentation) with one scratch
 * kept across inputs, as a decoding thread keeps it. What is promised: a refusal says why; a
 * sample that decodes was probed as the same image, and its floats are finite. */
#include "error.h"
#include "fuzz.h"
#include "image.h"

#include <math.h>

static struct hp_image_scratch *scratch;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    if (hp_image_scratch_create(&scratch) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct {
        int c, train;
        enum hp_image_aug aug;
    } modes[3] = {{3, 1, HP_AUG_STANDARD}, {1, 0, HP_AUG_STANDARD}, {3, 0, HP_AUG_NONE}};
    struct hp_image_info info;
    float out[3 * 16 * 16];
    char err[256];
    int probed;

    fuzz_begin();
    err[0] = '\0';
    probed = hp_image_probe(data, size, &info, err, sizeof(err));
    if (probed != 0 && !err[0])
        abort(); /* refused without a word */
    if (probed == 0 &&
        (info.width < 1 || info.height < 1 || info.width > HP_IMAGE_MAX_SIDE ||
         info.height > HP_IMAGE_MAX_SIDE || info.channels < 1 || info.channels > 4 || !info.format))
        abort();
    snprintf(fuzz_log, sizeof(fuzz_log), "%s", probed ? err : "");
    for (int m = 0; m < 3; m++) {
        struct hp_image_tf tf = {
            .c = modes[m].c, .h = 16, .w = 16, .train = modes[m].train, .aug = modes[m].aug};

        hp_image_norm_defaults(tf.c, tf.mean, tf.std);
        err[0] = '\0';
        int rc = hp_image_sample(scratch, data, size, &tf, size * 31 + m, out, err, sizeof(err));
        if (rc != 0) {
            if (!err[0] || (rc != -HP_EDATA && rc != -HP_ENOMEM))
                abort();
            if (!fuzz_log[0])
                snprintf(fuzz_log, sizeof(fuzz_log), "%s", err);
            continue;
        }
        if (probed != 0)
            abort(); /* decoded what the probe refused */
        for (int i = 0; i < tf.c * 16 * 16; i++)
            if (!isfinite(out[i]) || fabsf(out[i]) > 10.0f)
                abort();
    }
    return 0;
}
