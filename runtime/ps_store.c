/* ps_store.c - a parameter-server shard's weights and clocks, and its rules (ps_store.h). */
#include "ps_store.h"

#include "backend.h"
#include "error.h"
#include "net.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hp_ps_store {
    const struct hp_model *model;
    int nunits, nvws;
    size_t *off; /* [nunits]: the unit's floats in w, or SIZE_MAX when not held */
    float *w;    /* the global weights of the units held */
    size_t floats;
    int64_t *clock; /* [nvws][nunits] */
};

/* The initial parameters of unit u, as every worker initialises them (hp_net_init_params
 * seeds each unit by its index, so a net of one unit gives the same floats). */
static int init_unit(const struct hp_model *m, int u, uint64_t seed, float *out)
{
    struct hp_backend *be = NULL;
    struct hp_net *net = NULL;
    const struct hp_net_config cfg = {.batch = 1, .nslots = 1, .need_input_grad = 0};
    int rc = hp_backend_create("cpu", &be);

    if (!rc)
        rc = hp_net_create(be, m, u, u + 1, &cfg, &net);
    if (!rc)
        rc = hp_net_init_params(net, seed);
    if (!rc && m->units[u].nparams)
        rc = be->ops->download(be, out, hp_net_params(net), m->units[u].nparams * sizeof(float));
    hp_net_destroy(net);
    hp_backend_destroy(be);
    return rc;
}

void hp_ps_store_destroy(struct hp_ps_store *st)
{
    if (!st)
        return;
    free(st->off);
    free(st->w);
    free(st->clock);
    free(st);
}

int hp_ps_store_create(const struct hp_plan *p, const struct hp_model *model, int index,
                       struct hp_ps_store **out)
{
    struct hp_ps_store *st = calloc(1, sizeof(*st));
    int rc = 0;

    if (!st)
        return -HP_ENOMEM;
    st->model = model;
    st->nunits = p->nunits;
    st->nvws = p->nvws;
    st->off = malloc((size_t)p->nunits * sizeof(size_t));
    st->clock = calloc((size_t)p->nvws * p->nunits, sizeof(int64_t));
    if (!st->off || !st->clock)
        rc = -HP_ENOMEM;
    for (int u = 0; u < p->nunits && !rc; u++) {
        /* units without parameters have nothing to synchronise */
        st->off[u] = p->unit_shard[u] == index && model->units[u].nparams ? st->floats : SIZE_MAX;
        if (st->off[u] != SIZE_MAX)
            st->floats += model->units[u].nparams;
    }
    if (!rc && !(st->w = malloc((st->floats ? st->floats : 1) * sizeof(float))))
        rc = -HP_ENOMEM;
    for (int u = 0; u < p->nunits && !rc; u++)
        if (hp_ps_store_holds(st, u))
            rc = init_unit(model, u, (uint64_t)p->opts.seed, st->w + st->off[u]);
    if (rc) {
        hp_ps_store_destroy(st);
        return rc;
    }
    *out = st;
    return 0;
}

int hp_ps_store_holds(const struct hp_ps_store *st, int u)
{
    return u >= 0 && u < st->nunits && st->off[u] != SIZE_MAX;
}

float *hp_ps_store_unit(struct hp_ps_store *st, int u)
{
    return hp_ps_store_holds(st, u) ? st->w + st->off[u] : NULL;
}

int64_t *hp_ps_store_clock(struct hp_ps_store *st, int x, int u)
{
    return &st->clock[(size_t)x * st->nunits + u];
}

size_t hp_ps_store_floats(const struct hp_ps_store *st, int u0, int u1)
{
    size_t n = 0;

    for (int u = u0; u < u1; u++)
        if (hp_ps_store_holds(st, u))
            n += st->model->units[u].nparams;
    return n;
}

int hp_ps_store_apply(struct hp_ps_store *st, int v, int u0, int u1, int64_t wave,
                      const float *delta, char *why, size_t n)
{
    for (int u = u0; u < u1; u++)
        if (hp_ps_store_holds(st, u) && st->clock[(size_t)v * st->nunits + u] != wave) {
            snprintf(why, n, "pushed wave %" PRId64 " of unit %d, whose next wave is %" PRId64,
                     wave, u, st->clock[(size_t)v * st->nunits + u]);
            return -HP_EPROTOCOL;
        }
    for (int u = u0, k = 0; u < u1; u++)
        if (hp_ps_store_holds(st, u)) {
            float *w = st->w + st->off[u];
            const size_t m = st->model->units[u].nparams;
            for (size_t i = 0; i < m; i++)
                w[i] += delta[k + i];
            k += (int)m;
            st->clock[(size_t)v * st->nunits + u] = wave + 1;
        }
    return 0;
}

int hp_ps_store_ready(const struct hp_ps_store *st, int u0, int u1, const int64_t *thr)
{
    for (int x = 0; x < st->nvws; x++)
        for (int u = u0; u < u1; u++)
            if (hp_ps_store_holds(st, u) && st->clock[(size_t)x * st->nunits + u] < thr[x])
                return 0;
    return 1;
}

int64_t hp_ps_store_view(const struct hp_ps_store *st, int u0, int u1, int64_t *mm)
{
    int64_t g = INT64_MAX;

    for (int x = 0; x < st->nvws; x++) {
        int64_t lo = INT64_MAX, hi = -1;
        for (int u = u0; u < u1; u++)
            if (hp_ps_store_holds(st, u)) {
                const int64_t k = st->clock[(size_t)x * st->nunits + u];
                lo = k < lo ? k : lo;
                hi = k > hi ? k : hi;
            }
        mm[2 * x] = lo;
        mm[2 * x + 1] = hi;
        g = lo < g ? lo : g;
    }
    return g;
}

void hp_ps_store_pack(const struct hp_ps_store *st, int u0, int u1, float *out)
{
    for (int u = u0, k = 0; u < u1; u++)
        if (hp_ps_store_holds(st, u)) {
            const size_t n = st->model->units[u].nparams;
            memcpy(out + k, st->w + st->off[u], n * sizeof(float));
            k += (int)n;
        }
}

const float *hp_ps_store_weights(const struct hp_ps_store *st)
{
    return st->w;
}
