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

/* bytes rounded up as the runtime rounds every buffer (hp_align_up), 0 staying 0. */
static double aligned(double bytes)
{
    return ((double)(long long)((bytes + HP_ALIGN - 1) / HP_ALIGN)) * HP_ALIGN;
}

/* Per-unit figures of the memory model at c->batch: prefix sums of parameter, state and slot
 * bytes, and each unit's aligned output, largest tensor and largest transient tensor. */
struct unit_mem {
    double *params, *state, *out, *scratch, *temp; /* params, state: [n + 1] prefix sums */
};

/* The activation gradient region of every unit range, with and without recomputation
 * (hp_grad_place, as the runtime places them): one pass from each range end u1 back gives
 * the region of [u0, u1) for every u0. need: [2 x n], the units' slot blocks (without, then
 * with recomputation), outputs and inner gradients. 0 or -HP_ENOMEM. */
static int grad_tables(struct hp_cost *c, struct hp_grad_need *need)
{
    const int n = c->nunits;
    struct hp_grad_spot *sp = calloc(2 * (size_t)n, sizeof(*sp));
    size_t *ded = calloc((size_t)n, sizeof(*ded));

    if (!sp || !ded) {
        free(sp);
        free(ded);
        return -HP_ENOMEM;
    }
    for (int rc = 0; rc < 2; rc++)
        for (int u1 = 1; u1 <= n; u1++) {
            /* recomputing, the range's last unit keeps its output in the slot whether it
             * ends a segment or not */
            struct hp_grad_need *last = &need[(size_t)rc * n + u1 - 1];
            const size_t block = last->block;
            if (rc)
                last->block = last->out;
            hp_grad_place(need + (size_t)rc * n, 0, u1, sp, sp + n, ded);
            last->block = block;
            for (int u0 = 0; u0 < u1; u0++)
                c->grads[rc][(size_t)u0 * n + (size_t)(u1 - 1)] = (uint32_t)(ded[u0] / HP_ALIGN);
        }
    free(sp);
    free(ded);
    return 0;
}

/* Prefix sums and range tables of the memory model, at c->batch (see cost.h). 0 or
 * -HP_ENOMEM. */
static int memory_tables(struct hp_cost *c)
{
    const struct hp_model *m = c->model;
    const int n = c->nunits;
    const double b = c->batch;
    double *buf = calloc(5 * (size_t)n + 2, sizeof(double)),
           *own = calloc((size_t)n, sizeof(double));
    struct hp_grad_need *need = calloc(2 * (size_t)n, sizeof(*need));
    struct unit_mem um = {buf, buf + n + 1, buf + 2 * n + 2, buf + 3 * n + 2, buf + 4 * n + 2};
    int rc;

    if (!buf || !own || !need) {
        free(buf);
        free(own);
        free(need);
        return -HP_ENOMEM;
    }
    for (int u = 0; u < n; u++) {
        const struct hp_unit *un = &m->units[u];
        struct hp_unit_layout l;
        hp_unit_layout(un, c->batch, HP_ALIGN, &l);
        um.params[u + 1] = um.params[u] + (double)un->cost.param_bytes;
        um.state[u + 1] = um.state[u] + (double)un->cost.state_bytes;
        c->p_slot[u + 1] = c->p_slot[u] + (double)(l.acts + l.extra);
        c->in_bytes[u] = aligned((double)hp_shape_size(un->in) * sizeof(float) * b);
        um.out[u] = aligned((double)hp_shape_size(un->out) * sizeof(float) * b);
        um.scratch[u] = (double)un->cost.scratch_bytes;
        um.temp[u] = (double)l.temp;
        /* recomputation keeps per slot the outputs of the units that end a segment (and the
         * range's last unit's); the rest goes to the work area, a segment at a time */
        const int end = hp_model_segment_end(c->seg, u);
        c->p_bound[u + 1] = c->p_bound[u] + (end ? um.out[u] : 0.0);
        c->last_out[u] = end ? 0.0 : um.out[u];
        own[u] = (double)(l.acts + l.extra);
        need[u] = (struct hp_grad_need){l.acts, (size_t)um.out[u], l.grads};
        need[n + u] =
            (struct hp_grad_need){end ? (size_t)um.out[u] : 0, (size_t)um.out[u], l.grads};
    }
    for (int u = 0; u < n; u++) {
        /* row u0 = u: over [u, v] for v >= u */
        double ws = 0.0, tb = 0.0, wk = 0.0, tt = 0.0, seg = 0.0;
        for (int v = u; v < n; v++) {
            const double wv = (double)m->units[v].cost.workspace_bytes;
            const double p = um.params[v + 1] - um.params[u], st = um.state[v + 1] - um.state[u];
            ws = wv > ws ? wv : ws;
            tb = um.scratch[v] > tb ? um.scratch[v] : tb;
            tt = um.temp[v] > tt ? um.temp[v] : tt;
            /* the segments cut at u and at v: the largest one's blocks but its end's output */
            seg += own[v];
            c->work[(size_t)u * n + v] = seg - um.out[v] > wk ? seg - um.out[v] : wk;
            if (hp_model_segment_end(c->seg, v)) {
                wk = c->work[(size_t)u * n + v];
                seg = 0.0;
            }
            c->stash[(size_t)u * n + v] = aligned(p > 0.0 ? p : sizeof(float));
            /* the CPU backend's im2col works one image at a time; the CUDA backend caps
             * cuDNN's workspace at 256 MiB (backend_cuda.cuh) */
            c->fixed[(size_t)u * n + v] =
                3.0 * c->stash[(size_t)u * n + v]              /* parameters, gradients, momentum */
                + aligned(st > 0.0 ? st : sizeof(float))       /* batch norm state */
                + aligned(ws > 268435456.0 ? 268435456.0 : ws) /* workspace */
                + aligned(tb * b)                              /* scratch */
                + tt                                           /* transient tensors */
                + aligned(b * sizeof(int32_t));                /* labels */
        }
    }
    rc = grad_tables(c, need);
    free(buf);
    free(own);
    free(need);
    return rc;
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
    c->p_slot = calloc((size_t)c->nunits + 1, sizeof(double));
    c->p_bound = calloc((size_t)c->nunits + 1, sizeof(double));
    c->last_out = calloc((size_t)c->nunits, sizeof(double));
    c->seg = hp_model_recompute_segment(m);
    c->work = calloc((size_t)c->nunits * c->nunits, sizeof(double));
    c->in_bytes = calloc((size_t)c->nunits, sizeof(double));
    c->fixed = calloc((size_t)c->nunits * c->nunits, sizeof(double));
    c->grads[0] = calloc((size_t)c->nunits * c->nunits, sizeof(uint32_t));
    c->grads[1] = calloc((size_t)c->nunits * c->nunits, sizeof(uint32_t));
    c->stash = calloc((size_t)c->nunits * c->nunits, sizeof(double));
    if (!c->fwd_s || !c->bwd_s || !c->prefix_fwd || !c->prefix_bwd || !c->p_slot || !c->in_bytes ||
        !c->fixed || !c->stash || !c->p_bound || !c->work || !c->grads[0] || !c->grads[1] ||
        !c->last_out) {
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
    free(c->p_slot);
    free(c->in_bytes);
    free(c->fixed);
    free(c->stash);
    free(c->p_bound);
    free(c->work);
    free(c->grads[0]);
    free(c->grads[1]);
    free(c->last_out);
    c->grads[0] = c->grads[1] = NULL;
    c->last_out = NULL;
    c->fwd_s = c->bwd_s = c->prefix_fwd = c->prefix_bwd = NULL;
    c->p_slot = c->in_bytes = c->fixed = c->stash = c->p_bound = c->work = NULL;
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

double hp_cost_net_memory(const struct hp_cost *c, int u0, int u1, int nslots, int input_grad,
                          int recompute)
{
    const double in = c->in_bytes[u0];
    const size_t r = (size_t)u0 * c->nunits + (size_t)(u1 - 1);
    const double acts =
        recompute
            ? nslots * (in + c->p_bound[u1] - c->p_bound[u0] + c->last_out[u1 - 1]) + c->work[r]
            : nslots * (in + c->p_slot[u1] - c->p_slot[u0]);

    return c->fixed[r] + acts                                  /* activations, extras */
           + (double)c->grads[recompute ? 1 : 0][r] * HP_ALIGN /* activation gradients */
           + (input_grad ? in : 0.0);                          /* the input's gradient */
}

double hp_cost_stage_memory(const struct hp_cost *c, int u0, int u1, int in_flight, int first,
                            int recompute)
{
    /* in_flight - 1 stashed versions of the weights (schedule.c) */
    return hp_cost_net_memory(c, u0, u1, in_flight, !first, recompute) +
           (in_flight - 1) * c->stash[(size_t)u0 * c->nunits + (size_t)(u1 - 1)];
}

double hp_cost_recompute_s(const struct hp_cost *c, int type, int u0, int u1, int recompute)
{
    return recompute ? hp_cost_stage_fwd(c, type, u0, u1) : 0.0;
}
