/* cost.c - the planner's cost and memory model. */
#include "cost.h"

#include "error.h"
#include "options.h"

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

/* levels of a sparse table over n entries: 1 + floor(log2 n) (1 for n <= 1) */
static int table_levels(int n)
{
    int l = 1;

    while ((1 << l) <= n)
        l++;
    return l;
}

/* Fill the levels above the first of a range-maximum table over n entries. */
static void table_build(double *t, int n, int levels)
{
    for (int l = 1; l < levels; l++)
        for (int i = 0; i + (1 << l) <= n; i++) {
            const double x = t[(size_t)(l - 1) * n + i],
                         y = t[(size_t)(l - 1) * n + i + (1 << (l - 1))];
            t[(size_t)l * n + i] = x > y ? x : y;
        }
}

/* The largest entry of [a, b] (a <= b) of a table over n entries. */
static double table_max(const double *t, int n, int a, int b)
{
    const int l = 31 - __builtin_clz((unsigned)(b - a + 1));
    const double x = t[(size_t)l * n + a], y = t[(size_t)l * n + b - (1 << l) + 1];

    return x > y ? x : y;
}

/* Append (at, val) to a column list, growing it. 0 or -HP_ENOMEM. */
static int grad_push(struct hp_cost *c, int rc, size_t *len, size_t *cap, int at, uint32_t val)
{
    if (*len == *cap) {
        const size_t ncap = *cap ? 2 * *cap : 1024;
        int *na = realloc(c->grad_at[rc], ncap * sizeof(int));
        if (na)
            c->grad_at[rc] = na;
        uint32_t *nv = na ? realloc(c->grad_val[rc], ncap * sizeof(uint32_t)) : NULL;
        if (!nv)
            return -HP_ENOMEM;
        c->grad_val[rc] = nv;
        *cap = ncap;
    }
    c->grad_at[rc][*len] = at;
    c->grad_val[rc][(*len)++] = val;
    return 0;
}

/* The activation gradient region of every unit range, with and without recomputation
 * (hp_grad_place, as the runtime places them): one pass from each range end u1 back gives
 * the region of [u0, u1) for every u0, kept where it changes. need: [2 x n], the units' slot
 * blocks (without, then with recomputation), outputs and inner gradients. 0 or -HP_ENOMEM. */
static int grad_tables(struct hp_cost *c, struct hp_grad_need *need)
{
    const int n = c->nunits;
    struct hp_grad_spot *sp = calloc(2 * (size_t)n, sizeof(*sp));
    size_t *ded = calloc((size_t)n, sizeof(*ded));
    int rc = sp && ded ? 0 : -HP_ENOMEM;

    for (int r = 0; r < 2 && !rc; r++) {
        size_t len = 0, cap = 0;
        for (int u1 = 1; u1 <= n && !rc; u1++) {
            /* recomputing, the range's last unit keeps its output in the slot whether it
             * ends a segment or not */
            struct hp_grad_need *last = &need[(size_t)r * n + u1 - 1];
            const size_t block = last->block;
            if (r)
                last->block = last->out;
            hp_grad_place(need + (size_t)r * n, 0, u1, sp, sp + n, ded);
            last->block = block;
            c->grad_col[r][u1 - 1] = len;
            for (int u0 = u1 - 1; u0 >= 0 && !rc; u0--) {
                const uint32_t v = (uint32_t)(ded[u0] / HP_ALIGN);
                if (u0 == u1 - 1 || v != c->grad_val[r][len - 1])
                    rc = grad_push(c, r, &len, &cap, u0, v);
            }
        }
        c->grad_col[r][n] = len;
    }
    free(sp);
    free(ded);
    return rc;
}

/* The work area of a recomputing stage of units [u, v] (as the runtime's net.c: segments cut
 * at u and at every segment end, the largest one's activations and extras but its last
 * unit's output; 0 at least): the first piece, the whole segments between (a table), the
 * last piece. Sums of whole bytes, exact in doubles, as a unit-by-unit sum is. */
static double work_area(const struct hp_cost *c, int u, int v)
{
    const int S = c->seg, e0 = (u / S + 1) * S - 1; /* the first segment end >= u */
    double w = 0.0, x;

    if (e0 >= v) {
        x = c->p_own[v + 1] - c->p_own[u] - c->out_bytes[v];
        return x > w ? x : w;
    }
    const int e1 = (v / S) * S - 1; /* the last segment end < v */
    x = c->p_own[e0 + 1] - c->p_own[u] - c->out_bytes[e0];
    w = x > w ? x : w;
    if (e1 > e0) {
        /* whole segments q (units (q - 1) S .. q S - 1) ending after e0, up to e1 */
        x = table_max(c->max_seg, c->nseg, (e0 + 1) / S + 1, (e1 + 1) / S);
        w = x > w ? x : w;
    }
    x = c->p_own[v + 1] - c->p_own[e1 + 1] - c->out_bytes[v];
    return x > w ? x : w;
}

/* Prefix sums and range tables of the memory model, at c->batch (see cost.h). 0 or
 * -HP_ENOMEM. */
static int memory_tables(struct hp_cost *c)
{
    const struct hp_model *m = c->model;
    const int n = c->nunits;
    const double b = c->batch;
    struct hp_grad_need *need = calloc(2 * (size_t)n, sizeof(*need));
    int rc;

    if (!need)
        return -HP_ENOMEM;
    for (int u = 0; u < n; u++) {
        const struct hp_unit *un = &m->units[u];
        struct hp_unit_layout l;
        hp_unit_layout(un, c->batch, HP_ALIGN, &l);
        c->p_params[u + 1] = c->p_params[u] + (double)un->cost.param_bytes;
        c->p_state[u + 1] = c->p_state[u] + (double)un->cost.state_bytes;
        c->p_slot[u + 1] = c->p_slot[u] + (double)(l.acts + l.extra);
        c->in_bytes[u] = aligned((double)hp_shape_size(un->in) * sizeof(float) * b);
        c->out_bytes[u] = aligned((double)hp_shape_size(un->out) * sizeof(float) * b);
        c->max_ws[u] = (double)un->cost.workspace_bytes;
        c->max_scratch[u] = (double)un->cost.scratch_bytes;
        c->max_temp[u] = (double)l.temp;
        /* recomputation keeps per slot the outputs of the units that end a segment (and the
         * range's last unit's); the rest goes to the work area, a segment at a time */
        const int end = hp_model_segment_end(c->seg, u);
        c->p_bound[u + 1] = c->p_bound[u] + (end ? c->out_bytes[u] : 0.0);
        c->last_out[u] = end ? 0.0 : c->out_bytes[u];
        c->p_own[u + 1] = c->p_own[u] + (double)(l.acts + l.extra);
        need[u] = (struct hp_grad_need){l.acts, (size_t)c->out_bytes[u], l.grads};
        need[n + u] = (struct hp_grad_need){end ? (size_t)c->out_bytes[u] : 0,
                                            (size_t)c->out_bytes[u], l.grads};
    }
    table_build(c->max_ws, n, c->levels);
    table_build(c->max_scratch, n, c->levels);
    table_build(c->max_temp, n, c->levels);
    for (int q = 1; q < c->nseg; q++) {
        const int e = q * c->seg - 1;
        c->max_seg[q] = c->p_own[e + 1] - c->p_own[e + 1 - c->seg] - c->out_bytes[e];
    }
    table_build(c->max_seg, c->nseg, c->seg_levels);
    rc = grad_tables(c, need);
    free(need);
    return rc;
}

int hp_cost_init(struct hp_cost *c, const struct hp_model *m, const struct hp_gpudb *db, int batch)
{
    memset(c, 0, sizeof(*c));
    c->optimizer = HP_OPTIMIZER_SGD;
    c->model = m;
    c->db = db;
    c->batch = batch;
    c->nunits = m->nunits;
    c->ntypes = db->ntypes;
    c->tie_head = hp_model_tied_head(m, &c->tie_embed);
    c->tie_bytes = 4.0 * (double)m->ntied; /* the one tied copy: the token matrix */
    c->seg = hp_model_recompute_segment(m);
    c->nseg = c->nunits / c->seg + 1;
    c->levels = table_levels(c->nunits);
    c->seg_levels = table_levels(c->nseg);
    const size_t n = (size_t)c->nunits, nt = (size_t)c->ntypes, lv = (size_t)c->levels;
    c->fwd_s = calloc(nt * n, sizeof(double));
    c->bwd_s = calloc(nt * n, sizeof(double));
    c->prefix_fwd = calloc(nt * (n + 1), sizeof(double));
    c->prefix_bwd = calloc(nt * (n + 1), sizeof(double));
    c->p_slot = calloc(n + 1, sizeof(double));
    c->p_params = calloc(n + 1, sizeof(double));
    c->p_state = calloc(n + 1, sizeof(double));
    c->p_bound = calloc(n + 1, sizeof(double));
    c->p_own = calloc(n + 1, sizeof(double));
    c->last_out = calloc(n, sizeof(double));
    c->out_bytes = calloc(n, sizeof(double));
    c->in_bytes = calloc(n, sizeof(double));
    c->max_ws = calloc(lv * n, sizeof(double));
    c->max_scratch = calloc(lv * n, sizeof(double));
    c->max_temp = calloc(lv * n, sizeof(double));
    c->max_seg = calloc((size_t)c->seg_levels * c->nseg, sizeof(double));
    c->grad_col[0] = calloc(n + 1, sizeof(size_t));
    c->grad_col[1] = calloc(n + 1, sizeof(size_t));
    if (!c->fwd_s || !c->bwd_s || !c->prefix_fwd || !c->prefix_bwd || !c->p_slot || !c->p_params ||
        !c->p_state || !c->p_bound || !c->p_own || !c->last_out || !c->out_bytes || !c->in_bytes ||
        !c->max_ws || !c->max_scratch || !c->max_temp || !c->max_seg || !c->grad_col[0] ||
        !c->grad_col[1]) {
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
    double **d[] = {&c->fwd_s,  &c->bwd_s,       &c->prefix_fwd, &c->prefix_bwd,
                    &c->p_slot, &c->p_params,    &c->p_state,    &c->p_bound,
                    &c->p_own,  &c->last_out,    &c->out_bytes,  &c->in_bytes,
                    &c->max_ws, &c->max_scratch, &c->max_temp,   &c->max_seg};

    for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
        free(*d[i]);
        *d[i] = NULL;
    }
    for (int r = 0; r < 2; r++) {
        free(c->grad_col[r]);
        free(c->grad_at[r]);
        free(c->grad_val[r]);
        c->grad_col[r] = NULL;
        c->grad_at[r] = NULL;
        c->grad_val[r] = NULL;
    }
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

/* the stash of [u0, v]: one version of its parameters (at least one float) */
static double stash(const struct hp_cost *c, int u0, int v)
{
    const double p = c->p_params[v + 1] - c->p_params[u0];

    return aligned(p > 0.0 ? p : sizeof(float));
}

/* The bytes of [u0, v] that do not depend on the slots (see cost.h). The CPU backend's im2col
 * works one image at a time; the CUDA backend caps cuDNN's workspace at 256 MiB
 * (backend_cuda.cuh). */
static double fixed(const struct hp_cost *c, int u0, int v)
{
    const int n = c->nunits;
    const double st = c->p_state[v + 1] - c->p_state[u0];
    const double ws = table_max(c->max_ws, n, u0, v), tb = table_max(c->max_scratch, n, u0, v);

    const double bufs = c->optimizer == HP_OPTIMIZER_ADAMW ? 4.0 : 3.0;

    return bufs * stash(c, u0, v) /* parameters, gradients, momentum (AdamW's m), AdamW's v */
           + aligned(st > 0.0 ? st : sizeof(float))       /* batch norm state */
           + aligned(ws > 268435456.0 ? 268435456.0 : ws) /* workspace */
           + aligned(tb * c->batch)                       /* scratch */
           + table_max(c->max_temp, n, u0, v)             /* transient tensors */
           + aligned((double)c->batch * hp_model_positions(c->model) *
                     sizeof(int32_t)); /* labels, one per position of a text model */
}

/* The activation gradient region of [u0, v] in HP_ALIGN units: column v's last entry that
 * starts at or above u0 (the starts decrease) */
static uint32_t grad_region(const struct hp_cost *c, int r, int u0, int v)
{
    const int *at = c->grad_at[r];
    size_t lo = c->grad_col[r][v], hi = c->grad_col[r][v + 1]; /* at[lo] == v >= u0 */

    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (at[mid] >= u0)
            lo = mid;
        else
            hi = mid;
    }
    return c->grad_val[r][lo];
}

/* The activations and extras of [u0, u1) for nslots minibatches (with the work area when
 * recomputing): one term of the net's memory, and no larger than the whole (see
 * hp_cost_stage_fits). */
static double acts_bytes(const struct hp_cost *c, int u0, int u1, int nslots, int recompute)
{
    const double in = c->in_bytes[u0];
    const int v = u1 - 1;

    return recompute ? nslots * (in + c->p_bound[u1] - c->p_bound[u0] + c->last_out[v]) +
                           work_area(c, u0, v)
                     : nslots * (in + c->p_slot[u1] - c->p_slot[u0]);
}

/* The net's memory given its activations' bytes (acts_bytes). */
static double net_memory(const struct hp_cost *c, int u0, int u1, int input_grad, int recompute,
                         double acts)
{
    const int v = u1 - 1;

    return fixed(c, u0, v) + acts                                        /* activations, extras */
           + (double)grad_region(c, recompute ? 1 : 0, u0, v) * HP_ALIGN /* activation grads */
           + (input_grad ? c->in_bytes[u0] : 0.0);                       /* the input's gradient */
}

double hp_cost_net_memory(const struct hp_cost *c, int u0, int u1, int nslots, int input_grad,
                          int recompute)
{
    return net_memory(c, u0, u1, input_grad, recompute, acts_bytes(c, u0, u1, nslots, recompute));
}

/* The tied head's gradient a stage keeps beside its net (vwsync.c): the stage that holds
 * the embed of a tied head held elsewhere. */
static double tie_extra(const struct hp_cost *c, int u0, int u1)
{
    const int embed = c->tie_embed >= u0 && c->tie_embed < u1;
    const int head = c->tie_head >= u0 && c->tie_head < u1;

    return embed && !head ? c->tie_bytes : 0.0;
}

double hp_cost_stage_memory(const struct hp_cost *c, int u0, int u1, int in_flight, int first,
                            int recompute)
{
    /* in_flight - 1 stashed versions of the weights (schedule.c) */
    return hp_cost_net_memory(c, u0, u1, in_flight, !first, recompute) +
           (in_flight - 1) * stash(c, u0, u1 - 1) + tie_extra(c, u0, u1);
}

int hp_cost_stage_fits(const struct hp_cost *c, int u0, int u1, int in_flight, int first,
                       int recompute, double capacity)
{
    const double acts = acts_bytes(c, u0, u1, in_flight, recompute);

    /* every other term is >= 0 and a rounded sum of terms >= 0 is no smaller than any of
     * them: activations alone above the capacity decide it */
    if (acts > capacity)
        return 0;
    return net_memory(c, u0, u1, !first, recompute, acts) + (in_flight - 1) * stash(c, u0, u1 - 1) +
               tie_extra(c, u0, u1) <=
           capacity;
}

double hp_cost_recompute_s(const struct hp_cost *c, int type, int u0, int u1, int recompute)
{
    return recompute ? hp_cost_stage_fwd(c, type, u0, u1) : 0.0;
}
