/* weights.h - a worker stage's parameter vector as the modules that move it see it: the
 * current weights on the stage's device and one host buffer to carry them through (the
 * stage's, shared: WSP's pull and push, checkpoints, hashes use it one after the other).
 */
#ifndef HP_WEIGHTS_H
#define HP_WEIGHTS_H

#include "backend.h"

#include <stddef.h>

struct hp_weights {
    struct hp_backend *be;
    float *dev;  /* the current weights: hp_net_params (device) */
    float *host; /* [n] host floats (at least one, also for n = 0) */
    size_t n;
};

/* host := dev, and dev := host. 0 or the backend's code. */
static inline int hp_weights_download(const struct hp_weights *w)
{
    return w->n ? w->be->ops->download(w->be, w->host, w->dev, w->n * sizeof(float)) : 0;
}

static inline int hp_weights_upload(const struct hp_weights *w)
{
    return w->n ? w->be->ops->upload(w->be, w->dev, w->host, w->n * sizeof(float)) : 0;
}

#endif
