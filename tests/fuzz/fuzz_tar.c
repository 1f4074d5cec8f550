/* fuzz_tar.c - a tar shard (runtime/source_shards.c): the input written as
 * ROOT/train-000000.tar, opened as a shard source, and every sample read, once in an order
 * given to begin() (the loader thread) and once without. An accepted shard must hold what its
 * index says: ids shard by shard, labels in [0, nclasses), every read either the sample or a
 * message. */
#include "error.h"
#include "fuzz.h"
#include "source.h"

#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    return 0;
}

static volatile unsigned char sink;

static void read_all(struct hp_source *s, int ordered)
{
    const long n = s->n[HP_SPLIT_TRAIN];
    long *ids = malloc((size_t)(n ? n : 1) * sizeof(long));
    char err[512];

    if (!ids)
        abort();
    for (long i = 0; i < n; i++)
        ids[i] = ordered ? n - 1 - i : i;
    s->ops->begin(s, HP_SPLIT_TRAIN, ordered ? ids : NULL, n);
    for (long i = 0; i < n; i++) {
        struct hp_sample smp;
        err[0] = '\0';
        if (s->ops->read(s, HP_SPLIT_TRAIN, ids[i], &smp, err, sizeof(err)) != 0) {
            if (!err[0])
                abort(); /* a refusal without a message */
            continue;
        }
        if (smp.label < 0 || smp.label >= s->nclasses || smp.size > HP_SOURCE_MAX_SAMPLE ||
            (smp.size && !smp.data))
            abort();
        unsigned char sum = 0; /* touch every byte (ASan checks the bounds) */
        for (size_t b = 0; b < smp.size; b++)
            sum += ((const unsigned char *)smp.data)[b];
        sink = sum;
        s->ops->release(s, &smp);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hp_source *s;
    char root[512], path[600];

    fuzz_begin();
    snprintf(root, sizeof(root), "%s/shards", fuzz_dir);
    mkdir(root, 0700);
    fuzz_write("shards/train-000000.tar", data, size, path, sizeof(path));
    if (hp_source_open_shards(root, 0, &s) == 0) {
        if (s->nshards[0] != 1 || s->shard_first[0][0] != 0 || s->shard_n[0][0] != s->n[0] ||
            s->n[0] < 1 || s->nclasses < 1 || s->nclasses > HP_SOURCE_MAX_CLASSES)
            abort();
        read_all(s, 1);
        read_all(s, 0);
        hp_source_close(s);
    } else if (!fuzz_log[0]) {
        abort(); /* refused without a message */
    }
    unlink(path);
    rmdir(root);
    return 0;
}
