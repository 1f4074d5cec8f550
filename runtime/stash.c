/* stash.c - weight stashing (stash.h). */
#include "stash.h"

#include "error.h"
#include "log.h"

#include <stdlib.h>

struct hp_stash {
    struct hp_backend *be;
    size_t n;
    int w, off;
    float **buf;       /* [w - 1] device vectors */
    long *buf_version; /* [w - 1] */
    int *slot_buf;     /* [w]: the buffer the slot's forward used, -1: the current weights */
    long *fwd_version; /* [w] */
    long version;      /* of the current weights */
};

void hp_stash_destroy(struct hp_stash *st)
{
    if (!st)
        return;
    for (int b = 0; st->buf && b < st->w - 1; b++)
        if (st->buf[b])
            st->be->ops->free(st->be, st->buf[b]);
    free(st->buf);
    free(st->buf_version);
    free(st->slot_buf);
    free(st->fwd_version);
    free(st);
}

int hp_stash_create(struct hp_backend *be, size_t n, int w, int off, struct hp_stash **out)
{
    struct hp_stash *st = calloc(1, sizeof(*st));
    int rc = 0;

    if (!st)
        return -HP_ENOMEM;
    *st = (struct hp_stash){.be = be, .n = n, .w = w > 0 ? w : 1, .off = off};
    st->buf = calloc((size_t)st->w, sizeof(*st->buf));
    st->buf_version = calloc((size_t)st->w, sizeof(long));
    st->slot_buf = calloc((size_t)st->w, sizeof(int));
    st->fwd_version = calloc((size_t)st->w, sizeof(long));
    if (!st->buf || !st->buf_version || !st->slot_buf || !st->fwd_version)
        rc = -HP_ENOMEM;
    for (int b = 0; b < st->w - 1 && !rc; b++)
        rc = be->ops->alloc(be, (n ? n : 1) * sizeof(float), (void **)&st->buf[b]);
    if (rc) {
        hp_stash_destroy(st);
        return rc;
    }
    *out = st;
    return 0;
}

void hp_stash_forward(struct hp_stash *st, int slot)
{
    st->slot_buf[slot] = -1;
    st->fwd_version[slot] = st->version;
}

int hp_stash_change(struct hp_stash *st, const float *params, long first, long end)
{
    int need = 0, free_buf = -1, rc = 0;

    for (long q = first; q < end; q++)
        need |= st->slot_buf[q % st->w] == -1;
    if (need && !st->off) {
        for (int b = 0; b < st->w - 1 && free_buf < 0; b++) {
            int used = 0;
            for (long q = first; q < end; q++)
                used |= st->slot_buf[q % st->w] == b;
            if (!used)
                free_buf = b;
        }
        if (free_buf < 0) {
            hp_error("weight stash: no free buffer for %ld minibatches in flight in %d slots "
                     "(internal error)",
                     end - first, st->w);
            return -HP_EINVAL;
        }
        rc = st->be->ops->copy(st->be, st->buf[free_buf], params, st->n * sizeof(float));
        st->buf_version[free_buf] = st->version;
        for (long q = first; q < end; q++)
            if (st->slot_buf[q % st->w] == -1)
                st->slot_buf[q % st->w] = free_buf;
    }
    st->version++;
    return rc;
}

const float *hp_stash_weights(const struct hp_stash *st, int slot, long *version)
{
    const int b = st->slot_buf[slot];

    *version = b >= 0 ? st->buf_version[b] : st->version;
    return b >= 0 ? st->buf[b] : NULL;
}

long hp_stash_version(const struct hp_stash *st)
{
    return st->version;
}

long hp_stash_forward_version(const struct hp_stash *st, int slot)
{
    return st->fwd_version[slot];
}
