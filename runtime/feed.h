/* feed.h - the data a virtual worker trains and evaluates on, as its first stage takes it:
 * minibatch m of an epoch's order, and the test set's batches. The order is hetpipe train's:
 * a permutation of the training samples seeded by (seed, epoch), so a job, a resumed job and
 * hetpipe train see the same samples in the same order. VW v of V takes minibatches v, v + V,
 * v + 2V, ... of it (the worker's loop says which).
 *
 * Only stage 0 of a VW opens a feed (the others get the samples' labels with the
 * activations); every stage derives the counts from the same options (hp_feed_counts).
 * Today's source is Fashion-MNIST (data.h), held in memory.
 */
#ifndef HP_FEED_H
#define HP_FEED_H

#include <stddef.h>
#include <stdint.h>

struct hp_feed_counts {
    int ntrain;    /* training samples used (--train-limit) */
    int ntest;     /* test samples evaluated (--test-limit) */
    long total_mb; /* minibatches of the training samples per epoch (the last partial one
                      dropped) */
    long my_mb;    /* each VW's share: floor(total_mb / nvws), the same for every VW (the last
                      total_mb % nvws minibatches of an epoch's order are left out) */
    int test_batches;
};

/* The counts for --train-limit, --test-limit (0: all), minibatch `batch` and nvws VWs. 0, or
 * -HP_EINVAL (logged) when a VW would get no minibatch. */
int hp_feed_counts(long train_limit, long test_limit, int batch, int nvws,
                   struct hp_feed_counts *out);

struct hp_feed;

/* Open the data set in `dir` (data.h: NULL for the default) for minibatches of `batch`
 * samples: the training set, and the test set too when `test` (the VW that evaluates). The
 * sets must hold the counts' samples. 0, or a negative code (logged, naming the file). */
int hp_feed_open(const char *dir, int test, const struct hp_feed_counts *n, int batch,
                 struct hp_feed **out);
void hp_feed_close(struct hp_feed *f);

/* Floats of one sample. */
size_t hp_feed_sample_floats(const struct hp_feed *f);

/* Epoch `epoch`'s order of the training samples, from `seed`. */
void hp_feed_epoch(struct hp_feed *f, uint64_t seed, int epoch);

/* Minibatch m of the epoch's order: its images [batch, sample] (host memory of the feed,
 * valid until the next call), its labels into lab [batch]. */
const float *hp_feed_train(struct hp_feed *f, long m, int32_t *lab);

/* Test batch b (0 <= b < test_batches): its images (as above) and labels; *count: the
 * samples that count (the last batch is filled up with repeats of its first sample). */
const float *hp_feed_test(struct hp_feed *f, int b, int32_t *lab, int32_t *count);

#endif
