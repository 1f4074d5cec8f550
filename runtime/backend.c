/* backend.c - choosing a backend by name; counting a backend's memory. */
#include "backend.h"
#include "backend_module.h"

#include "error.h"
#include "log.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Memory tracking: a copy of the backend's op table whose alloc and free keep a list of the
 * live allocations (a stage makes a handful), placed in front of the original table. */
struct track_alloc {
    void *ptr;
    size_t bytes;
};

struct track {
    struct hp_backend_ops ops; /* first: be->ops points here */
    const struct hp_backend_ops *orig;
    struct track_alloc *live;
    int nlive, cap;
};

static struct track *track_of(struct hp_backend *be)
{
    return (struct track *)(void *)((char *)be->ops - offsetof(struct track, ops));
}

static int track_alloc(struct hp_backend *be, size_t bytes, void **ptr)
{
    struct track *t = track_of(be);
    int rc;

    if (t->nlive == t->cap) {
        const int cap = t->cap ? 2 * t->cap : 16;
        struct track_alloc *l = realloc(t->live, (size_t)cap * sizeof(*l));
        if (!l)
            return -HP_ENOMEM;
        t->live = l;
        t->cap = cap;
    }
    rc = t->orig->alloc(be, bytes, ptr);
    if (rc)
        return rc;
    t->live[t->nlive++] = (struct track_alloc){*ptr, bytes};
    be->mem_in_use += bytes;
    if (be->mem_in_use > be->mem_peak)
        be->mem_peak = be->mem_in_use;
    return 0;
}

static void track_free(struct hp_backend *be, void *ptr)
{
    struct track *t = track_of(be);

    for (int i = 0; i < t->nlive; i++)
        if (t->live[i].ptr == ptr) {
            be->mem_in_use -= t->live[i].bytes;
            t->live[i] = t->live[--t->nlive];
            break;
        }
    t->orig->free(be, ptr);
}

static void track_destroy(struct hp_backend *be)
{
    struct track *t = track_of(be);

    be->ops = t->orig;
    free(t->live);
    free(t);
    be->ops->destroy(be);
}

int hp_backend_track_memory(struct hp_backend *be)
{
    struct track *t;

    if (be->ops->alloc == track_alloc)
        return 0;
    t = calloc(1, sizeof(*t));
    if (!t)
        return -HP_ENOMEM;
    t->orig = be->ops;
    t->ops = *be->ops;
    t->ops.alloc = track_alloc;
    t->ops.free = track_free;
    t->ops.destroy = track_destroy;
    be->mem_in_use = be->mem_peak = 0;
    be->ops = &t->ops;
    return 0;
}

int hp_backend_create(const char *name, struct hp_backend **out)
{
    const char *why;
    int rc;

    if (strcmp(name, "cpu") == 0)
        return hp_backend_cpu_create(out);
    if (strcmp(name, "cuda") == 0) {
        rc = hp_backend_module_load(NULL, &why);
        if (rc == -HP_ENOTFOUND) {
            hp_error("device 'cuda': this hetpipe has no CUDA backend (%s)", why);
            return -HP_EUNSUPPORTED;
        }
        if (rc) {
            hp_error("device 'cuda': %s", why);
            return rc;
        }
        rc = hp_backend_cuda_create(0, out);
        if (rc == -HP_ENODEV)
            hp_error("device 'cuda': no usable CUDA device or driver on this machine "
                     "(use --device cpu or auto)");
        return rc;
    }
    if (strcmp(name, "auto") == 0) {
        /* hp_backend_cuda_device_count loads nothing without a driver */
        if (hp_backend_cuda_device_count() > 0 && hp_backend_cuda_create(0, out) == 0)
            return 0;
        return hp_backend_cpu_create(out);
    }
    hp_error("unknown device '%s' (allowed: cpu, cuda, auto)", name);
    return -HP_EINVAL;
}
