/* cost.c - the planner's cost and memory model. */
#include "cost.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN_BYTES 256.0

static void refresh(struct hp_cost *c, int type)
{
    double *pf = c->prefix_fwd + (size_t)type * (c->nunits + 1);
    double *pb = c->prefix_bwd + (size_t)type * (c->nunits + 1);

    pf[0] = pb[0] = 0.0;
    for (int u = 0; u < c->nunits; u++) {
        pf[u + 1] = pf[u] + c->fwd_s[(size_t)type * c->nunits + u];
        pb[u + 1] = pb[u] + c->bwd_s[(size_t)type * c->nunits + u];
    }
}

int hp_cost_init(struct hp_cost *c, const struct hp_model *m, const struct hp_gpudb *db, int batch)
{
    memset(c, 0, sizeof(*c));
    c->model = m;
    c->db = db;
    c->batch = batch;
    c->nunits = m->nunits;
    c->ntypes = db->ntypes;
    c->fwd_s = calloc((size_t)c->ntypes * c->nunits, sizeof(double));
    c->bwd_s = calloc((size_t)c->ntypes * c->nunits, sizeof(double));
    c->prefix_fwd = calloc((size_t)c->ntypes * (c->nunits + 1), sizeof(double));
    c->prefix_bwd = calloc((size_t)c->ntypes * (c->nunits + 1), sizeof(double));
    c->p_params = calloc((size_t)c->nunits + 1, sizeof(double));
    c->p_state = calloc((size_t)c->nunits + 1, sizeof(double));
    c->p_saved = calloc((size_t)c->nunits + 1, sizeof(double));
    c->max_ws = calloc((size_t)c->nunits * c->nunits, sizeof(double));
    c->max_tensor = calloc((size_t)c->nunits * c->nunits, sizeof(double));
    if (!c->fwd_s || !c->bwd_s || !c->prefix_fwd || !c->prefix_bwd || !c->p_params || !c->p_state ||
        !c->p_saved || !c->max_ws || !c->max_tensor) {
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
    for (int u = 0; u < c->nunits; u++) {
        const struct hp_unit *un = &m->units[u];
        double big = (double)hp_shape_size(un->in) * sizeof(float);
        c->p_params[u + 1] = c->p_params[u] + (double)un->cost.param_bytes;
        c->p_state[u + 1] = c->p_state[u] + (double)un->cost.state_bytes;
        c->p_saved[u + 1] = c->p_saved[u] + (double)un->cost.saved_bytes;
        for (int o = 0; o < un->nops; o++) {
            const double t = (double)hp_shape_size(un->ops[o].out_shape) * sizeof(float);
            if (t > big)
                big = t;
        }
        /* row u0 = u: maxima over [u, v] for v >= u */
        double ws = 0.0, tb = 0.0;
        for (int v = u; v < c->nunits; v++) {
            const struct hp_unit *uv = &m->units[v];
            double bv = v == u ? big : 0.0;
            for (int o = 0; v != u && o < uv->nops; o++) {
                const double t = (double)hp_shape_size(uv->ops[o].out_shape) * sizeof(float);
                if (t > bv)
                    bv = t;
            }
            if ((double)uv->cost.workspace_bytes > ws)
                ws = (double)uv->cost.workspace_bytes;
            if (bv > tb)
                tb = bv;
            c->max_ws[(size_t)u * c->nunits + v] = ws;
            c->max_tensor[(size_t)u * c->nunits + v] = tb;
        }
    }
    return 0;
}

void hp_cost_release(struct hp_cost *c)
{
    free(c->fwd_s);
    free(c->bwd_s);
    free(c->prefix_fwd);
    free(c->prefix_bwd);
    free(c->p_params);
    free(c->p_state);
    free(c->p_saved);
    free(c->max_ws);
    free(c->max_tensor);
    c->fwd_s = c->bwd_s = c->prefix_fwd = c->prefix_bwd = NULL;
    c->p_params = c->p_state = c->p_saved = c->max_ws = c->max_tensor = NULL;
}

void hp_cost_set(struct hp_cost *c, int type, int unit, double fwd_s, double bwd_s)
{
    c->fwd_s[(size_t)type * c->nunits + unit] = fwd_s;
    c->bwd_s[(size_t)type * c->nunits + unit] = bwd_s;
    refresh(c, type);
}

double hp_cost_stage_fwd(const struct hp_cost *c, int type, int u0, int u1)
{
    const double *p = c->prefix_fwd + (size_t)type * (c->nunits + 1);

    return p[u1] - p[u0];
}

double hp_cost_stage_bwd(const struct hp_cost *c, int type, int u0, int u1)
{
    const double *p = c->prefix_bwd + (size_t)type * (c->nunits + 1);

    return p[u1] - p[u0];
}

double hp_cost_stage_time(const struct hp_cost *c, int type, int u0, int u1)
{
    return hp_cost_stage_fwd(c, type, u0, u1) + hp_cost_stage_bwd(c, type, u0, u1);
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
    return bytes <= 0.0
               ? ALIGN_BYTES
               : ((double)(long long)((bytes + ALIGN_BYTES - 1) / ALIGN_BYTES)) * ALIGN_BYTES;
}

double hp_cost_stage_memory(const struct hp_cost *c, int u0, int u1, int in_flight, int first)
{
    const double b = c->batch;
    const double input = (double)hp_shape_size(c->model->units[u0].in) * sizeof(float) * b;
    const double params = aligned(c->p_params[u1] - c->p_params[u0]);
    const double state = c->p_state[u1] - c->p_state[u0];
    const double saved = (c->p_saved[u1] - c->p_saved[u0]) * b;
    /* the CPU backend's im2col works one image at a time; the CUDA backend caps cuDNN's
     * workspace at 256 MiB (backend_cuda.cuh) */
    double ws = c->max_ws[(size_t)u0 * c->nunits + (u1 - 1)];
    const double largest = c->max_tensor[(size_t)u0 * c->nunits + (u1 - 1)] * b;

    if (ws > 268435456.0)
        ws = 268435456.0;
    /* activations: the input and every op output (dropout masks included in saved) */
    const double acts = input + saved;
    /* one set of activation gradients: every op output, and the input unless first */
    const double grads = saved + (first ? 0.0 : input);
    return params * (1.0 + (in_flight - 1)) /* weights and stashed versions */
           + params                         /* gradients */
           + params                         /* momentum */
           + aligned(state) + acts * in_flight + grads + aligned(ws) + aligned(largest);
}
