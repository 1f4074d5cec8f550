/* cost.c - the planner's cost and memory model. */
#include "cost.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

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

/* The largest tensor of unit u, in bytes per sample (its input included). */
static double unit_largest(const struct hp_unit *un)
{
    double big = (double)hp_shape_size(un->in) * sizeof(float);

    for (int o = 0; o < un->nops; o++) {
        const double t = (double)hp_shape_size(un->ops[o].out_shape) * sizeof(float);
        if (t > big)
            big = t;
    }
    return big;
}

/* Prefix sums and range tables of the memory model, at c->batch (see cost.h). 0 or
 * -HP_ENOMEM. */
static int memory_tables(struct hp_cost *c)
{
    const struct hp_model *m = c->model;
    const int n = c->nunits;
    double *out = calloc(2 * (size_t)n, sizeof(double)), *inner = out + n;

    if (!out)
        return -HP_ENOMEM;
    for (int u = 0; u < n; u++) {
        const struct hp_unit *un = &m->units[u];
        struct hp_unit_layout l;
        hp_unit_layout(un, c->batch, HP_ALIGN, &l);
        c->p_params[u + 1] = c->p_params[u] + (double)un->cost.param_bytes;
        c->p_state[u + 1] = c->p_state[u] + (double)un->cost.state_bytes;
        c->p_slot[u + 1] = c->p_slot[u] + (double)(l.acts + l.extra);
        out[u] = (double)hp_align_up((size_t)c->batch * hp_shape_size(un->out) * sizeof(float),
                                     HP_ALIGN);
        inner[u] = (double)l.grads;
        c->max_tensor[(size_t)u * n + u] = unit_largest(un);
    }
    for (int u = 0; u < n; u++) {
        /* row u0 = u: over [u, v] for v >= u */
        double ws = 0.0, tb = 0.0, ob = 0.0, ib = 0.0;
        for (int v = u; v < n; v++) {
            const double wv = (double)m->units[v].cost.workspace_bytes;
            const double tv = c->max_tensor[(size_t)v * n + v];
            ws = wv > ws ? wv : ws;
            tb = tv > tb ? tv : tb;
            ob = out[v] > ob ? out[v] : ob;
            ib = inner[v] > ib ? inner[v] : ib;
            c->max_ws[(size_t)u * n + v] = ws;
            c->max_tensor[(size_t)u * n + v] = tb;
            c->act_grads[(size_t)u * n + v] = (v > u ? 2.0 : 1.0) * ob + ib;
        }
    }
    free(out);
    return 0;
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
    c->p_slot = calloc((size_t)c->nunits + 1, sizeof(double));
    c->max_ws = calloc((size_t)c->nunits * c->nunits, sizeof(double));
    c->max_tensor = calloc((size_t)c->nunits * c->nunits, sizeof(double));
    c->act_grads = calloc((size_t)c->nunits * c->nunits, sizeof(double));
    if (!c->fwd_s || !c->bwd_s || !c->prefix_fwd || !c->prefix_bwd || !c->p_params || !c->p_state ||
        !c->p_slot || !c->max_ws || !c->max_tensor || !c->act_grads) {
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
    if (memory_tables(c)) {
        hp_cost_release(c);
        return -HP_ENOMEM;
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
    free(c->p_slot);
    free(c->max_ws);
    free(c->max_tensor);
    free(c->act_grads);
    c->fwd_s = c->bwd_s = c->prefix_fwd = c->prefix_bwd = NULL;
    c->p_params = c->p_state = c->p_slot = c->max_ws = c->max_tensor = c->act_grads = NULL;
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

/* bytes rounded up as the runtime rounds every buffer (hp_align_up), 0 staying 0. */
static double aligned(double bytes)
{
    return ((double)(long long)((bytes + HP_ALIGN - 1) / HP_ALIGN)) * HP_ALIGN;
}

double hp_cost_net_memory(const struct hp_cost *c, int u0, int u1, int nslots, int input_grad)
{
    const double b = c->batch;
    const size_t r = (size_t)u0 * c->nunits + (size_t)(u1 - 1);
    const double input = aligned((double)hp_shape_size(c->model->units[u0].in) * sizeof(float) * b);
    const double p = c->p_params[u1] - c->p_params[u0], st = c->p_state[u1] - c->p_state[u0];
    /* the CPU backend's im2col works one image at a time; the CUDA backend caps cuDNN's
     * workspace at 256 MiB (backend_cuda.cuh) */
    const double ws = c->max_ws[r] > 268435456.0 ? 268435456.0 : c->max_ws[r];

    return 3.0 * aligned(p > 0.0 ? p : sizeof(float))         /* parameters, gradients, momentum */
           + aligned(st > 0.0 ? st : sizeof(float))           /* batch norm state */
           + nslots * (input + c->p_slot[u1] - c->p_slot[u0]) /* activations, extras */
           + (input_grad ? input : 0.0) + c->act_grads[r]     /* activation gradients */
           + aligned(ws) + aligned(c->max_tensor[r] * b)      /* workspace, scratch */
           + aligned(b * sizeof(int32_t));                    /* labels */
}

double hp_cost_stage_memory(const struct hp_cost *c, int u0, int u1, int in_flight, int first)
{
    const double p = c->p_params[u1] - c->p_params[u0];

    /* in_flight - 1 stashed versions of the weights (schedule.c) */
    return hp_cost_net_memory(c, u0, u1, in_flight, !first) +
           (in_flight - 1) * aligned(p > 0.0 ? p : sizeof(float));
}
