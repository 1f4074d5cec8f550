/* feed.c - a virtual worker's minibatches from the data set (feed.h). */
#include "feed.h"

#include "data.h"
#include "error.h"
#include "log.h"
#include "rng.h"

#include <stdlib.h>

#define FASHION_TRAIN_N 60000 /* samples, as data.c checks */
#define FASHION_TEST_N 10000

struct hp_feed {
    struct hp_dataset train, test;
    struct hp_feed_counts n;
    int batch;
    int *perm, *idx;
    float *img;
};

int hp_feed_counts(long train_limit, long test_limit, int batch, int nvws,
                   struct hp_feed_counts *out)
{
    struct hp_feed_counts n = {0};

    n.ntrain =
        train_limit > 0 && train_limit < FASHION_TRAIN_N ? (int)train_limit : FASHION_TRAIN_N;
    n.ntest = test_limit > 0 && test_limit < FASHION_TEST_N ? (int)test_limit : FASHION_TEST_N;
    n.total_mb = n.ntrain / batch;
    n.my_mb = n.total_mb / nvws;
    n.test_batches = (n.ntest + batch - 1) / batch;
    if (n.my_mb == 0) {
        hp_error("minibatch %d x %d virtual workers is more than the %d training samples", batch,
                 nvws, n.ntrain);
        return -HP_EINVAL;
    }
    *out = n;
    return 0;
}

void hp_feed_close(struct hp_feed *f)
{
    if (!f)
        return;
    hp_dataset_release(&f->train);
    hp_dataset_release(&f->test);
    free(f->perm);
    free(f->idx);
    free(f->img);
    free(f);
}

int hp_feed_open(const char *dir, int test, const struct hp_feed_counts *n, int batch,
                 struct hp_feed **out)
{
    struct hp_feed *f = calloc(1, sizeof(*f));
    int rc;

    if (!f)
        return -HP_ENOMEM;
    f->n = *n;
    f->batch = batch;
    rc = hp_dataset_load_fashion_mnist(dir, 1, &f->train);
    if (!rc && test)
        rc = hp_dataset_load_fashion_mnist(dir, 0, &f->test);
    if (!rc && f->train.n < n->ntrain) {
        hp_error("the training set has %d samples, fewer than %d", f->train.n, n->ntrain);
        rc = -HP_EDATA;
    }
    if (!rc && test && f->test.n < n->ntest) {
        hp_error("test set has %d samples, expected %d", f->test.n, n->ntest);
        rc = -HP_EDATA;
    }
    if (!rc) {
        f->perm = malloc((size_t)f->train.n * sizeof(int));
        f->idx = malloc((size_t)batch * sizeof(int));
        f->img = malloc((size_t)batch * hp_feed_sample_floats(f) * sizeof(float));
        if (!f->perm || !f->idx || !f->img)
            rc = -HP_ENOMEM;
    }
    if (rc) {
        hp_feed_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

size_t hp_feed_sample_floats(const struct hp_feed *f)
{
    return (size_t)f->train.c * f->train.h * f->train.w;
}

void hp_feed_epoch(struct hp_feed *f, uint64_t seed, int epoch)
{
    hp_permute(f->perm, f->train.n < f->n.ntrain ? f->train.n : f->n.ntrain,
               hp_rng_derive(seed, 0x1000 + (uint64_t)epoch));
}

const float *hp_feed_train(struct hp_feed *f, long m, int32_t *lab)
{
    hp_dataset_gather(&f->train, f->perm + (size_t)m * f->batch, f->batch, f->img, lab);
    return f->img;
}

const float *hp_feed_test(struct hp_feed *f, int b, int32_t *lab, int32_t *count)
{
    const int m = f->n.ntest - b * f->batch < f->batch ? f->n.ntest - b * f->batch : f->batch;

    for (int i = 0; i < f->batch; i++)
        f->idx[i] = b * f->batch + (i < m ? i : 0);
    hp_dataset_gather(&f->test, f->idx, f->batch, f->img, lab);
    *count = m;
    return f->img;
}
