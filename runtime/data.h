/* data.h - data sets: Fashion-MNIST from Debian's dataset-fashion-mnist (gzip IDX files).
 *
 * Images are stored as floats [n, 1, 28, 28], scaled to [0, 1] and standardised with the
 * training set's mean 0.2860 and standard deviation 0.3530; labels as int32 in [0, 10).
 */
#ifndef HP_DATA_H
#define HP_DATA_H

#include <stddef.h>
#include <stdint.h>

#define HP_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

struct hp_dataset {
    int n;       /* samples */
    int c, h, w; /* shape of one sample */
    int classes;
    float *images;   /* [n, c, h, w], owned */
    int32_t *labels; /* [n], owned */
};

/* The directory to read from: `dir` if not NULL (nor empty), else $HETPIPE_DATA, else
 * `fallback`. Static, dir or fallback itself. */
const char *hp_data_dir_or(const char *dir, const char *fallback);
/* hp_data_dir_or(dir, HP_FASHION_MNIST_DIR) */
const char *hp_dataset_dir(const char *dir);

/* Load the training (train != 0; Fashion-MNIST's has 60000 samples) or test (10000) split
 * from `dir` (see hp_dataset_dir). Checks the gzip stream, the IDX magic numbers (0x803
 * images, 0x801 labels), the sizes (28x28, matching counts, no missing or trailing bytes) and
 * the labels.
 * A missing or corrupt file gives one error naming the file, what is wrong, and how to
 * install the data set; returns -HP_EDATA (or -errno), and *out is untouched. */
int hp_dataset_load_fashion_mnist(const char *dir, int train, struct hp_dataset *out);

/* The samples of the training (train != 0) or test split in `dir`, from the two files'
 * headers alone (the magic numbers, 28x28, as many labels as images). 0, or -HP_EDATA
 * (logged, naming the file). */
int hp_dataset_count(const char *dir, int train, long *n);

/* Free what a successful load allocated; safe on a zeroed struct. */
void hp_dataset_release(struct hp_dataset *d);

/* Copy samples idx[0..n) into images [n, c, h, w] and labels [n] (host buffers). */
void hp_dataset_gather(const struct hp_dataset *d, const int *idx, int n, float *images,
                       int32_t *labels);

/* idx = a seeded Fisher-Yates permutation of 0..n-1 (one epoch's order in hetpipe train and
 * in the pipeline: the same seed gives the same order in both). */
void hp_permute(int *idx, int n, uint64_t seed);

#endif
