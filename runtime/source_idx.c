/* source_idx.c - Fashion-MNIST's gzip IDX files as a source (source.h): data.c loads a split
 * into memory as standardised floats at its first read (a rank that only needs the counts
 * loads nothing); a read points into them (no copy). */
#include "data.h"
#include "source.h"

#include "error.h"
#include "infile.h"
#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Fashion-MNIST's classes, named so that sorted order is label order (as in folder form). */
static const char *const class_names[10] = {"0_tshirt", "1_trouser",   "2_pullover", "3_dress",
                                            "4_coat",   "5_sandal",    "6_shirt",    "7_sneaker",
                                            "8_bag",    "9_ankle_boot"};

struct idx_source {
    struct hp_source s;
    struct hp_dataset d[2];
    pthread_mutex_t mu;
    int tried[2], rc[2]; /* a split's load: tried, and its outcome */
};

/* The split in memory (loaded at the first call; a failure is kept and logged once). */
static int idx_load(struct idx_source *x, int split, char *err, size_t errlen)
{
    pthread_mutex_lock(&x->mu);
    if (!x->tried[split]) {
        x->tried[split] = 1;
        x->rc[split] =
            hp_dataset_load_fashion_mnist(x->s.root, split == HP_SPLIT_TRAIN, &x->d[split]);
        if (!x->rc[split] && x->d[split].n != x->s.n[split]) {
            hp_error("%s: the %s split holds %d samples now, %ld when it was opened", x->s.root,
                     split == HP_SPLIT_VAL ? "test" : "training", x->d[split].n, x->s.n[split]);
            x->rc[split] = -HP_EDATA;
        }
    }
    const int rc = x->rc[split];
    pthread_mutex_unlock(&x->mu);
    if (rc)
        snprintf(err, errlen, "%.400s: the %s split cannot be loaded (above)", x->s.root,
                 split == HP_SPLIT_VAL ? "test" : "training");
    return rc;
}

static int idx_read(struct hp_source *src, int split, long id, struct hp_sample *out, char *err,
                    size_t errlen)
{
    struct idx_source *x = (struct idx_source *)src;
    const struct hp_dataset *d = &x->d[split == HP_SPLIT_VAL];

    if ((split != HP_SPLIT_TRAIN && split != HP_SPLIT_VAL) || id < 0 || id >= src->n[split]) {
        snprintf(err, errlen, "%.400s: sample %ld is not in split %d (%ld samples)", src->root, id,
                 split, split == 0 || split == 1 ? src->n[split] : 0L);
        return -HP_EINVAL;
    }
    const int rc = idx_load(x, split, err, errlen);
    if (rc)
        return rc;
    const size_t per = (size_t)d->c * d->h * d->w;
    out->data = d->images + (size_t)id * per;
    out->size = per * sizeof(float);
    out->label = d->labels[id];
    out->hold = NULL;
    snprintf(out->name, sizeof(out->name), "%.400s/%s-images-idx3-ubyte.gz:%ld", src->root,
             split == HP_SPLIT_VAL ? "t10k" : "train", id);
    return 0;
}

static void idx_release(struct hp_source *src, struct hp_sample *smp)
{
    (void)src;
    (void)smp;
}

static void idx_begin(struct hp_source *src, int split, const long *ids, long n)
{
    (void)src, (void)split, (void)ids, (void)n;
}

static void idx_close(struct hp_source *src)
{
    struct idx_source *x = (struct idx_source *)src;

    hp_dataset_release(&x->d[0]);
    hp_dataset_release(&x->d[1]);
    pthread_mutex_destroy(&x->mu);
    hp_source_free_common(src);
    free(x);
}

static const struct hp_source_ops idx_ops = {idx_read, idx_release, idx_begin, idx_close};

int hp_source_open_idx(const char *dir, int need_val, struct hp_source **out)
{
    struct idx_source *x = calloc(1, sizeof(*x));
    char path[4200];
    int rc;

    if (!x)
        return -HP_ENOMEM;
    x->s.ops = &idx_ops;
    x->s.kind = HP_SOURCE_IDX;
    pthread_mutex_init(&x->mu, NULL);
    snprintf(x->s.root, sizeof(x->s.root), "%s", dir);
    /* the counts from the files' headers; their contents are checked at the first read */
    rc = hp_dataset_count(dir, 1, &x->s.n[HP_SPLIT_TRAIN]);
    snprintf(path, sizeof(path), "%s/t10k-images-idx3-ubyte.gz", dir);
    if (!rc && (need_val || access(path, F_OK) == 0))
        rc = hp_dataset_count(dir, 0, &x->s.n[HP_SPLIT_VAL]);
    x->s.classes = rc == 0 ? calloc(10, sizeof(char *)) : NULL;
    if (rc == 0 && !x->s.classes)
        rc = -HP_ENOMEM;
    for (int k = 0; rc == 0 && k < 10; k++) {
        x->s.classes[k] = strdup(class_names[k]);
        x->s.nclasses = k + 1;
        if (!x->s.classes[k])
            rc = -HP_ENOMEM;
    }
    if (rc) {
        idx_close(&x->s);
        return rc;
    }
    x->s.encoded = 0;
    x->s.c = 1, x->s.h = 28, x->s.w = 28;
    *out = &x->s;
    return 0;
}
