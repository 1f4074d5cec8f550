/* cost.c - the planner's cost and memory model. */
#include "cost.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN_BYTES 256.0

static void refresh(struct hp_cost *c, int type)
{
    double *p = c->prefix + (size_t)type * (c->nunits + 1);

    p[0] = 0.0;
    for (int u = 0; u < c->nunits; u++)
        p[u + 1] = p[u] + c->fwd_s[(size_t)type * c->nunits + u] +
                   c->bwd_s[(size_t)type * c->nunits + u];
}

int hp_cost_init(struct hp_cost *c, const struct hp_model *m, const struct hp_gpudb *db,
                 int batch)
{
    memset(c, 0, sizeof(*c));
    c->model = m;
    c->db = db;
    c->batch = batch;
    c->nunits = m->nunits;
    c->ntypes = db->ntypes;
    c->fwd_s = calloc((size_t)c->ntypes * c->nunits, sizeof(double));
    c->bwd_s = calloc((size_t)c->ntypes * c->nunits, sizeof(double));
    c->prefix = calloc((size_t)c->ntypes * (c->nunits + 1), sizeof(double));
    if (!c->fwd_s || !c->bwd_s || !c->prefix) {
        hp_cost_release(c);
        return -HP_ENOMEM;
    }
    for (int t = 0; t < c->ntypes; t++) {
        const struct hp_gpu_type *g = &db->types[t];
        const double flops = g->tflops * 1e12 * db->efficiency, bw = g->bandwidth_gbs * 1e9;
        for (int u = 0; u < c->nunits; u++) {
            const struct hp_unit_cost *uc = &m->units[u].cost;
            const double f = uc->fwd_flops * batch / flops, fb = uc->fwd_bytes * batch / bw;
            const double b = uc->bwd_flops * batch / flops, bb = uc->bwd_bytes * batch / bw;
            c->fwd_s[(size_t)t * c->nunits + u] = f > fb ? f : fb;
            c->bwd_s[(size_t)t * c->nunits + u] = b > bb ? b : bb;
        }
        refresh(c, t);
    }
    return 0;
}

void hp_cost_release(struct hp_cost *c)
{
    free(c->fwd_s);
    free(c->bwd_s);
    free(c->prefix);
    c->fwd_s = c->bwd_s = c->prefix = NULL;
}

void hp_cost_set(struct hp_cost *c, int type, int unit, double fwd_s, double bwd_s)
{
    c->fwd_s[(size_t)type * c->nunits + unit] = fwd_s;
    c->bwd_s[(size_t)type * c->nunits + unit] = bwd_s;
    refresh(c, type);
}

double hp_cost_stage_time(const struct hp_cost *c, int type, int u0, int u1)
{
    const double *p = c->prefix + (size_t)type * (c->nunits + 1);

    return p[u1] - p[u0];
}

double hp_cost_boundary_bytes(const struct hp_cost *c, int u)
{
    return (double)c->model->units[u].cost.out_bytes * c->batch;
}

double hp_cost_transfer(double bytes, double gbs, double lat_us)
{
    return bytes / (gbs * 1e9) + lat_us * 1e-6;
}

static double aligned(double bytes)
{
    return bytes <= 0.0 ? ALIGN_BYTES : ((double)(long long)((bytes + ALIGN_BYTES - 1) /
                                                             ALIGN_BYTES)) * ALIGN_BYTES;
}

double hp_cost_stage_memory(const struct hp_cost *c, int u0, int u1, int in_flight, int first)
{
    const struct hp_model *m = c->model;
    const double b = c->batch;
    const struct hp_unit *first_unit = &m->units[u0];
    double params = 0.0, state = 0.0, saved = 0.0, grads, ws = 0.0, largest;

    largest = (double)hp_shape_size(first_unit->in) * sizeof(float) * b;
    for (int u = u0; u < u1; u++) {
        const struct hp_unit *un = &m->units[u];
        params += (double)un->cost.param_bytes;
        state += (double)un->cost.state_bytes;
        saved += (double)un->cost.saved_bytes * b;
        /* the CPU backend's im2col works one image at a time; the CUDA backend caps cuDNN's
         * workspace at 256 MiB (backend_cuda.cuh) */
        if ((double)un->cost.workspace_bytes > ws)
            ws = (double)un->cost.workspace_bytes;
        for (int o = 0; o < un->nops; o++) {
            double t = (double)hp_shape_size(un->ops[o].out_shape) * sizeof(float) * b;
            if (t > largest)
                largest = t;
        }
    }
    const double input = (double)hp_shape_size(first_unit->in) * sizeof(float) * b;
    /* activations: the input and every op output (dropout masks included in saved) */
    const double acts = input + saved;
    /* one set of activation gradients: every op output, and the input unless first */
    grads = saved + (first ? 0.0 : input);
    params = aligned(params);
    if (ws > 268435456.0)
        ws = 268435456.0;
    return params * (1.0 + (in_flight - 1)) /* weights and stashed versions */
           + params                          /* gradients */
           + params                          /* momentum */
           + aligned(state) + acts * in_flight + grads + aligned(ws) + aligned(largest);
}
