/* partition.c - the best split of a model over one virtual worker's GPUs. */
#include "partition.h"

#include "error.h"
#include "log.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

static double link_gbs(const struct hp_cluster *cl, int a, int b)
{
    return cl->gpus[a].node == cl->gpus[b].node ? cl->intra_node_gbs : cl->inter_node_gbs;
}

static double link_lat(const struct hp_cluster *cl, int a, int b)
{
    return cl->gpus[a].node == cl->gpus[b].node ? cl->intra_latency_us : cl->inter_latency_us;
}

static double capacity(const struct hp_cluster *cl, const struct hp_cost *c, int gpu)
{
    return c->db->types[cl->gpus[gpu].type].memory_gib * 1073741824.0;
}

/* time to move the activation after unit u (and its gradient: same size) between a and b */
static double boundary(const struct hp_cost *c, const struct hp_cluster *cl, int a, int b, int u)
{
    return hp_cost_transfer(hp_cost_boundary_bytes(c, u), link_gbs(cl, a, b), link_lat(cl, a, b));
}

/* The seconds stage s of an order spends sending its activation forward and the gradient of
 * its input back (0 at the ends of the pipeline). */
static void stage_sends(const struct hp_cost *c, const struct hp_cluster *cl, const int *order,
                        int k, int s, int u0, int u1, double *send, double *back)
{
    *send = s + 1 < k ? boundary(c, cl, order[s], order[s + 1], u1 - 1) : 0.0;
    *back = s > 0 ? boundary(c, cl, order[s - 1], order[s], u0 - 1) : 0.0;
}

double hp_partition_stage_cost(const struct hp_cost *c, const struct hp_cluster *cl,
                               const int *order, int k, int s, int u0, int u1)
{
    double send, back;

    stage_sends(c, cl, order, k, s, u0, u1, &send, &back);
    return hp_cost_stage_time(c, cl->gpus[order[s]].type, u0, u1) + (send + back);
}

/* Minibatches stage s keeps between forward and backward in one-forward-one-backward with
 * Nm in flight in the VW: k - s when Nm >= k (PipeDream's schedule); with fewer, Nm - s, and
 * at least 1 (a stage that waited for more forwards before its backward would only stall). */
static int in_flight(int nm, int k, int s)
{
    const int m = (nm < k ? nm : k) - s;
    return m < 1 ? 1 : m;
}

int hp_partition_recompute(const struct hp_cost *c, int u0, int u1, int in_flight, int first,
                           double capacity)
{
    switch (c->recompute) {
    case HP_RECOMPUTE_ALWAYS:
        return 1;
    case HP_RECOMPUTE_NEVER:
        return 0;
    default:
        return !hp_cost_stage_fits(c, u0, u1, in_flight, first, 0, capacity);
    }
}

int hp_partition_evaluate(const struct hp_cost *c, const struct hp_cluster *cl,
                          struct hp_vw_plan *vw)
{
    const int k = vw->nstages;
    int order[HP_MAX_VW_GPUS], fits = 1;
    double bottleneck = 0.0, round = 0.0;

    for (int s = 0; s < k; s++)
        order[s] = vw->stages[s].gpu;
    for (int s = 0; s < k; s++) {
        struct hp_stage_plan *st = &vw->stages[s];
        const int type = cl->gpus[st->gpu].type;
        st->in_flight = in_flight(vw->nm, k, s);
        st->capacity = capacity(cl, c, st->gpu);
        st->recompute =
            hp_partition_recompute(c, st->u0, st->u1, st->in_flight, s == 0, st->capacity);
        st->fwd_s = hp_cost_stage_fwd(c, type, st->u0, st->u1);
        st->bwd_s = hp_cost_stage_bwd(c, type, st->u0, st->u1) +
                    hp_cost_recompute_s(c, type, st->u0, st->u1, st->recompute);
        stage_sends(c, cl, order, k, s, st->u0, st->u1, &st->send_s, &st->send_back_s);
        st->compute_s = st->fwd_s + st->bwd_s;
        st->transfer_s = st->send_s + st->send_back_s;
        const double cost = st->compute_s + st->transfer_s;
        st->memory = hp_cost_stage_memory(c, st->u0, st->u1, st->in_flight, s == 0, st->recompute);
        if (st->memory > st->capacity)
            fits = 0;
        if (cost > bottleneck)
            bottleneck = cost;
        round += st->compute_s;
        round += 2.0 * st->send_s; /* the activation forward, its gradient back */
    }
    vw->bottleneck_s = bottleneck;
    vw->round_s = round;
    {
        const double full = 1.0 / bottleneck, partial = vw->nm / round;
        vw->rate = (full < partial ? full : partial) * c->batch;
    }
    return fits;
}

/* The split's working memory for one VW: the DP's rows, the per-stage transfer times of
 * every boundary, the minima of each row's blocks of PREV_BLOCK entries. */
#define PREV_BLOCK 32

struct dp {
    int U, k;
    double *best;        /* [k x (U + 1)] */
    int *cut;            /* [k x (U + 1)] */
    double *send, *back; /* [U]: forward from this stage, back into it, after unit u */
    double *bmin;        /* [(U + 1) / PREV_BLOCK + 1] over the previous row */
    int binding;         /* memory decided something (a failed check, a recomputation under auto) */
};

/* One stage (s, ending at j) of the DP: what stage s needs to weigh a start i. */
struct cell {
    const struct hp_cost *c;
    struct dp *d;
    const double *prev; /* row s - 1, NULL for s == 0 */
    int s, j, type, m, first;
    double cap, send;
    double best;
    int cut;
};

/* Stage time of [i, j) on the cell's type: hp_cost_stage_time's sum, from the prefix sums */
static double stage_time(const struct cell *x, int i)
{
    const size_t o = (size_t)x->type * (x->c->nunits + 1);
    const double *pf = x->c->prefix_fwd + o, *pb = x->c->prefix_bwd + o;

    return (pf[x->j] - pf[i]) + (pb[x->j] - pb[i]);
}

/* Weigh start i for the cell: the bottleneck of stages 0..s with stage s = [i, j), kept when
 * it is smaller, or equal with a larger i (the order's DP scans i downwards and keeps the
 * first strictly smaller), and the stage fits its GPU, recomputing where c->recompute says
 * (hp_partition_recompute; under auto its memory is looked at only for a start that would
 * be kept). Returns 1 when it would have been kept but does not fit, else 0. */
static int weigh(struct cell *x, int i)
{
    const struct hp_cost *c = x->c;
    const double prev = x->s == 0 ? (i == 0 ? 0.0 : DBL_MAX) : x->prev[i];

    if (prev == DBL_MAX)
        return 0;
    const double back = x->s > 0 ? x->d->back[i - 1] : 0.0;
    const double base = stage_time(x, i) + (x->send + back);
    int r = c->recompute == HP_RECOMPUTE_ALWAYS;
    double cost = r ? base + hp_cost_stage_fwd(c, x->type, i, x->j) : base;
    double b = cost > prev ? cost : prev;
    if (!(b < x->best || (b == x->best && i > x->cut)))
        return 0;
    if (c->recompute == HP_RECOMPUTE_AUTO) {
        /* it fits as it is, or recomputes (and costs more) */
        if (hp_cost_stage_fits(c, i, x->j, x->m, x->first, 0, x->cap))
            goto keep;
        x->d->binding = 1;
        r = 1;
        cost = base + hp_cost_stage_fwd(c, x->type, i, x->j);
        b = cost > prev ? cost : prev;
        if (!(b < x->best || (b == x->best && i > x->cut)))
            return 0;
    }
    if (!hp_cost_stage_fits(c, i, x->j, x->m, x->first, r, x->cap)) {
        x->d->binding = 1;
        return 1;
    }
keep:
    x->best = b;
    x->cut = i;
    return 0;
}

/* The best start of a cell, as the order's DP would find it scanning i from j - 1 down (the
 * smallest bottleneck, the largest i among equals) but searched from a guess g: the starts
 * above g only where the previous row is not already worse (block minima), those below
 * until the stage alone (compute, its sends at their least) is no better. Without
 * recomputation (never) a start that does not fit ends the scan where the DP's does, so
 * that mode keeps the DP's order. */
static void cell_search(struct cell *x, int g, double back_min)
{
    const struct hp_cost *c = x->c;
    const int j = x->j, lo = x->s;

    if (x->s == 0) {
        weigh(x, 0);
        return;
    }
    if (c->recompute == HP_RECOMPUTE_NEVER) {
        /* the DP's own scan: a start that would have won and does not fit ends it */
        for (int i = j - 1; i >= lo; i--)
            if (stage_time(x, i) >= x->best || weigh(x, i))
                break;
        return;
    }
    weigh(x, g);
    for (int blk = (g + 1) / PREV_BLOCK; blk * PREV_BLOCK <= j - 1; blk++) {
        if (x->d->bmin[blk] > x->best)
            continue;
        const int a = blk * PREV_BLOCK > g + 1 ? blk * PREV_BLOCK : g + 1;
        const int e = (blk + 1) * PREV_BLOCK < j ? (blk + 1) * PREV_BLOCK : j;
        for (int i = a; i < e; i++)
            if (x->prev[i] <= x->best)
                weigh(x, i);
    }
    for (int i = g - 1; i >= lo; i--) {
        if (stage_time(x, i) + (x->send + back_min) >= x->best)
            break;
        if (x->prev[i] < x->best)
            weigh(x, i);
    }
}

/* DP for one order and Nm: best[s][j] = smallest bottleneck of stages 0..s covering units
 * [0, j), stage s ending at j; cut[s][j] = where stage s starts. Returns the bottleneck (or
 * DBL_MAX when nothing fits) and the cuts; d->binding says whether memory decided anything
 * (if not, every Nm with fewer minibatches in flight gives the same split). */
static double split(const struct hp_cost *c, const struct hp_cluster *cl, const int *order, int k,
                    int nm, struct dp *d)
{
    const int U = c->nunits;

    d->binding = 0;
    for (int i = 0; i < k * (U + 1); i++)
        d->best[i] = DBL_MAX;
    for (int s = 0; s < k; s++) {
        struct cell x = {.c = c,
                         .d = d,
                         .s = s,
                         .type = cl->gpus[order[s]].type,
                         .m = in_flight(nm, k, s),
                         .first = s == 0,
                         .cap = capacity(cl, c, order[s])};
        double back_min = DBL_MAX;
        x.prev = s > 0 ? d->best + (size_t)(s - 1) * (U + 1) : NULL;
        for (int u = 0; u + 1 < U; u++) {
            d->send[u] = s + 1 < k ? boundary(c, cl, order[s], order[s + 1], u) : 0.0;
            d->back[u] = s > 0 ? boundary(c, cl, order[s - 1], order[s], u) : 0.0;
            back_min = d->back[u] < back_min ? d->back[u] : back_min;
        }
        for (int blk = 0; s > 0 && blk * PREV_BLOCK <= U; blk++) {
            double mn = DBL_MAX;
            for (int i = blk * PREV_BLOCK; i < (blk + 1) * PREV_BLOCK && i <= U; i++)
                mn = x.prev[i] < mn ? x.prev[i] : mn;
            d->bmin[blk] = mn;
        }
        /* stage s ends at j (the last stage only at U), leaving a unit per later stage */
        int g = s;
        for (int j = s + 1 == k ? U : s + 1; j <= U - (k - 1 - s); j++) {
            x.j = j;
            x.send = s + 1 < k ? d->send[j - 1] : 0.0;
            x.best = DBL_MAX;
            x.cut = -1;
            cell_search(&x, g < j ? g : j - 1, back_min);
            d->best[s * (U + 1) + j] = x.best;
            d->cut[s * (U + 1) + j] = x.cut;
            if (x.cut >= 0)
                g = x.cut;
        }
    }
    return d->best[(k - 1) * (U + 1) + U];
}

/* Candidate orders: all distinct permutations (by type and node) for small VWs. */
struct orders {
    int n, count, cap;
    int *list; /* count x n */
};

static int push_order(struct orders *o, const int *order)
{
    if (o->count == o->cap) {
        int ncap = o->cap ? 2 * o->cap : 64;
        int *nl = realloc(o->list, (size_t)ncap * o->n * sizeof(int));
        if (!nl)
            return -HP_ENOMEM;
        o->list = nl;
        o->cap = ncap;
    }
    memcpy(o->list + (size_t)o->count * o->n, order, (size_t)o->n * sizeof(int));
    o->count++;
    return 0;
}

static int same_kind(const struct hp_cluster *cl, int a, int b)
{
    return cl->gpus[a].type == cl->gpus[b].type && cl->gpus[a].node == cl->gpus[b].node;
}

/* Heap-free permutation enumeration that skips orders equal up to GPUs of the same type on
 * the same node (swapping those changes neither times nor memory). */
static int permute(const struct hp_cluster *cl, int *a, int l, int n, struct orders *o)
{
    if (l == n)
        return push_order(o, a);
    for (int i = l; i < n; i++) {
        int dup = 0;
        for (int j = l; j < i; j++)
            if (same_kind(cl, a[j], a[i]))
                dup = 1;
        if (dup)
            continue;
        int t = a[l];
        a[l] = a[i];
        a[i] = t;
        int rc = permute(cl, a, l + 1, n, o);
        t = a[l];
        a[l] = a[i];
        a[i] = t;
        if (rc)
            return rc;
    }
    return 0;
}

static const struct hp_cost *sort_cost;
static const struct hp_cluster *sort_cl;
static int sort_dir, sort_by_node;

static int by_speed(const void *pa, const void *pb)
{
    const int a = *(const int *)pa, b = *(const int *)pb;
    const double ta = sort_cost->db->types[sort_cl->gpus[a].type].tflops;
    const double tb = sort_cost->db->types[sort_cl->gpus[b].type].tflops;

    if (sort_by_node && sort_cl->gpus[a].node != sort_cl->gpus[b].node) {
        /* nodes ordered by their first GPU's speed, then kept together */
        return sort_cl->gpus[a].node < sort_cl->gpus[b].node ? -1 : 1;
    }
    if (ta != tb)
        return (ta > tb ? -1 : 1) * sort_dir;
    return a - b;
}

static int heuristic_orders(const struct hp_cost *c, const struct hp_cluster *cl, const int *gpus,
                            int n, struct orders *o)
{
    int a[HP_MAX_VW_GPUS];

    sort_cost = c;
    sort_cl = cl;
    for (int node = 0; node < 2; node++) {
        for (int dir = -1; dir <= 1; dir += 2) {
            memcpy(a, gpus, (size_t)n * sizeof(int));
            sort_dir = dir;
            sort_by_node = node;
            qsort(a, (size_t)n, sizeof(int), by_speed);
            if (push_order(o, a))
                return -HP_ENOMEM;
        }
    }
    return 0;
}

static void no_fit_error(const struct hp_cost *c, const struct hp_cluster *cl, const int *gpus,
                         int n)
{
    /* the smallest any stage can be: the largest single unit, with one minibatch */
    double need = 0.0, cap = 0.0;
    int unit = 0, gpu = gpus[0];

    for (int u = 0; u < c->nunits; u++) {
        double m = hp_cost_stage_memory(c, u, u + 1, 1, u == 0, c->recompute != HP_RECOMPUTE_NEVER);
        if (m > need) {
            need = m;
            unit = u;
        }
    }
    for (int i = 0; i < n; i++)
        if (capacity(cl, c, gpus[i]) > cap) {
            cap = capacity(cl, c, gpus[i]);
            gpu = gpus[i];
        }
    const struct hp_gpu *g = &cl->gpus[gpu];
    if (need > cap)
        hp_error("model '%s' does not fit: its smallest stage (unit '%s' alone, minibatch %d) "
                 "needs %.2f GiB, more than the largest GPU of the virtual worker (%s, GPU %d "
                 "of node '%s', %.2f GiB)",
                 c->model->name, c->model->units[unit].name, c->batch, need / 1073741824.0,
                 c->db->types[g->type].name, g->index, cl->nodes[g->node].name, cap / 1073741824.0);
    else
        hp_error("model '%s' does not fit on the %d GPUs of the virtual worker at minibatch %d: "
                 "no split into %d stages fits every GPU's memory (the largest unit alone needs "
                 "%.2f GiB; GPU %d of node '%s' (%s) has %.2f GiB)",
                 c->model->name, n, c->batch, n, need / 1073741824.0, g->index,
                 cl->nodes[g->node].name, c->db->types[g->type].name, cap / 1073741824.0);
}

/* The candidate of one order's split (cuts in d) with Nm nm, evaluated. */
static void candidate(const struct hp_cost *c, const struct hp_cluster *cl, const int *order, int n,
                      int nm, const int *cut, struct hp_vw_plan *cand)
{
    const int U = c->nunits;

    memset(cand, 0, sizeof(*cand));
    cand->nstages = n;
    cand->nm = nm;
    for (int s = n - 1, j = U; s >= 0; s--) {
        const int i0 = cut[s * (U + 1) + j];
        cand->stages[s].gpu = order[s];
        cand->stages[s].u0 = i0;
        cand->stages[s].u1 = j;
        j = i0;
    }
    hp_partition_evaluate(c, cl, cand);
}

/* For one Nm: the better rate wins, at equal rate the smaller bottleneck. */
static int better(const struct hp_vw_plan *cand, const struct hp_vw_plan *b, int have)
{
    return !have || cand->rate > b->rate * (1.0 + 1e-9) ||
           (cand->rate >= b->rate * (1.0 - 1e-9) &&
            cand->bottleneck_s < b->bottleneck_s * (1.0 - 1e-9));
}

static int dp_alloc(struct dp *d, int U, int k)
{
    d->U = U;
    d->k = k;
    d->best = malloc((size_t)k * (U + 1) * sizeof(double));
    d->cut = malloc((size_t)k * (U + 1) * sizeof(int));
    d->send = malloc(((size_t)U + 1) * sizeof(double));
    d->back = malloc(((size_t)U + 1) * sizeof(double));
    d->bmin = malloc(((size_t)(U + 1) / PREV_BLOCK + 2) * sizeof(double));
    return d->best && d->cut && d->send && d->back && d->bmin ? 0 : -HP_ENOMEM;
}

static void dp_free(struct dp *d)
{
    free(d->best);
    free(d->cut);
    free(d->send);
    free(d->back);
    free(d->bmin);
}

/* Every order's best split for every Nm in lo..hi into per[nm - lo] (have[]: any fits). An
 * order is split once with the most minibatches in flight; only where memory decided
 * something there is it split again for each smaller Nm. */
static int search(const struct hp_cost *c, const struct hp_cluster *cl, const struct orders *o,
                  int lo, int hi, struct hp_vw_plan *per, int *have)
{
    const int n = o->n, U = c->nunits;
    struct dp d;
    int *cut_hi = malloc((size_t)n * (U + 1) * sizeof(int));
    int rc = dp_alloc(&d, U, n);

    if (rc || !cut_hi) {
        rc = -HP_ENOMEM;
        goto out;
    }
    for (int i = 0; i < o->count; i++) {
        const int *order = o->list + (size_t)i * n;
        const int fits_hi = split(c, cl, order, n, hi, &d) != DBL_MAX, binding = d.binding;
        memcpy(cut_hi, d.cut, (size_t)n * (U + 1) * sizeof(int));
        for (int nm = lo; nm <= hi; nm++) {
            struct hp_vw_plan cand;
            const int *cut = cut_hi;
            if (binding && nm < hi) {
                if (split(c, cl, order, n, nm, &d) == DBL_MAX)
                    continue;
                cut = d.cut;
            } else if (!fits_hi) {
                continue;
            }
            candidate(c, cl, order, n, nm, cut, &cand);
            if (better(&cand, &per[nm - lo], have[nm - lo])) {
                per[nm - lo] = cand;
                have[nm - lo] = 1;
            }
        }
    }
out:
    dp_free(&d);
    free(cut_hi);
    return rc;
}

int hp_partition_vw(const struct hp_cost *c, const struct hp_cluster *cl, const int *gpus, int n,
                    int nm_max, int nm_fixed, struct hp_vw_plan *out)
{
    const int U = c->nunits;
    struct orders o = {.n = n};
    int a[HP_MAX_VW_GPUS], rc = 0, found = 0;
    struct hp_vw_plan *per = NULL;
    int *have = NULL;
    double top = 0.0;

    if (n < 1 || n > HP_MAX_VW_GPUS || n > U) {
        hp_error("cannot split %d units over %d GPUs (at most one stage per unit, %d GPUs per "
                 "virtual worker)",
                 U, n, HP_MAX_VW_GPUS);
        return -HP_EINVAL;
    }
    if (nm_fixed < 0 || (nm_fixed == 0 && nm_max < 1)) {
        hp_error("minibatches in flight (Nm) must be at least 1");
        return -HP_EINVAL;
    }
    memcpy(a, gpus, (size_t)n * sizeof(int));
    rc = n <= HP_PARTITION_EXHAUSTIVE ? permute(cl, a, 0, n, &o)
                                      : heuristic_orders(c, cl, gpus, n, &o);
    const int lo = nm_fixed ? nm_fixed : 1, hi = nm_fixed ? nm_fixed : nm_max;
    /* per[nm - lo]: the best plan with that Nm (have[]: whether any fits) */
    per = malloc((size_t)(hi - lo + 1) * sizeof(*per));
    have = calloc((size_t)(hi - lo + 1), sizeof(*have));
    if (rc || !per || !have) {
        rc = -HP_ENOMEM;
        goto out;
    }
    memset(out, 0, sizeof(*out));
    rc = search(c, cl, &o, lo, hi, per, have);
    if (rc)
        goto out;
    for (int nm = lo; nm <= hi; nm++)
        if (have[nm - lo] && per[nm - lo].rate > top)
            top = per[nm - lo].rate;
    /* Nm: the smallest whose rate is within the site's nm_tolerance of the best (and at least
     * as good up to rounding): each minibatch in flight beyond the first makes a stage's
     * weights one update staler, which costs accuracy per sample, so a few per cent of rate
     * are not worth one */
    for (int nm = lo; nm <= hi && !found; nm++)
        if (have[nm - lo] &&
            per[nm - lo].rate >= top * (1.0 - c->db->nm_tolerance) * (1.0 - 1e-9)) {
            *out = per[nm - lo];
            found = 1;
        }
    if (!found) {
        no_fit_error(c, cl, gpus, n);
        rc = -HP_ERANGE;
    }
out:
    free(per);
    free(have);
    free(o.list);
    return rc;
}
