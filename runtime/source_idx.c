/* source_idx.c - Fashion-MNIST's gzip IDX files as a source (source.h): data.c loads both
 * splits into memory as standardised floats; a read points into them (no copy). */
#include "data.h"
#include "source.h"

#include "error.h"
#include "log.h"

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
};

static int idx_read(struct hp_source *src, int split, long id, struct hp_sample *out, char *err,
                    size_t errlen)
{
    struct idx_source *x = (struct idx_source *)src;
    const struct hp_dataset *d = &x->d[split == HP_SPLIT_VAL];
    const size_t per = (size_t)d->c * d->h * d->w;

    if ((split != HP_SPLIT_TRAIN && split != HP_SPLIT_VAL) || id < 0 || id >= src->n[split]) {
        snprintf(err, errlen, "%.400s: sample %ld is not in split %d (%ld samples)", src->root, id,
                 split, split == 0 || split == 1 ? src->n[split] : 0L);
        return -HP_EINVAL;
    }
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
    snprintf(x->s.root, sizeof(x->s.root), "%s", dir);
    rc = hp_dataset_load_fashion_mnist(dir, 1, &x->d[0]);
    snprintf(path, sizeof(path), "%s/t10k-images-idx3-ubyte.gz", dir);
    if (rc == 0 && (need_val || access(path, F_OK) == 0))
        rc = hp_dataset_load_fashion_mnist(dir, 0, &x->d[1]);
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
    x->s.c = x->d[0].c, x->s.h = x->d[0].h, x->s.w = x->d[0].w;
    x->s.n[0] = x->d[0].n;
    x->s.n[1] = x->d[1].n;
    *out = &x->s;
    return 0;
}
