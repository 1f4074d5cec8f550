/* planner.c - grouping GPUs into virtual workers, placing parameters, predicting throughput. */
#include "planner.h"

#include "error.h"
#include "log.h"

#include <float.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* auto's largest virtual worker in its snake groupings (np, ed and hd may make larger) */
#define AUTO_MAX_VW 16

/* A grouping: ngroups VWs; members of VW v are gpus[start[v] .. start[v + 1]). */
struct grouping {
    int ngroups;
    int *start; /* ngroups + 1 */
    int *gpus;  /* ngpus */
};

static int grouping_alloc(struct grouping *g, int ngroups, int ngpus)
{
    g->ngroups = ngroups;
    g->start = calloc((size_t)ngroups + 1, sizeof(int));
    g->gpus = calloc((size_t)ngpus + 1, sizeof(int));
    return g->start && g->gpus ? 0 : -HP_ENOMEM;
}

static void grouping_free(struct grouping *g)
{
    free(g->start);
    free(g->gpus);
    g->start = g->gpus = NULL;
}

/* Fill a grouping from an assignment vw_of[gpu] in 0..ngroups-1 (GPUs keep cluster order
 * inside a VW). VWs left empty are dropped. */
static int from_assignment(const struct hp_cluster *cl, const int *vw_of, int ngroups,
                           struct grouping *g)
{
    int rc = grouping_alloc(g, ngroups, cl->ngpus), k = 0, v2 = 0;

    if (rc)
        return rc;
    for (int v = 0; v < ngroups; v++) {
        int before = k;
        g->start[v2] = k;
        for (int i = 0; i < cl->ngpus; i++)
            if (vw_of[i] == v)
                g->gpus[k++] = i;
        if (k > before)
            v2++;
    }
    g->ngroups = v2;
    g->start[v2] = k;
    return 0;
}

static double node_speed(const struct hp_cost *c, const struct hp_cluster *cl, int n)
{
    const struct hp_node *nd = &cl->nodes[n];
    double s = 0.0;

    for (int i = 0; i < nd->ngpus; i++)
        s += c->db->types[cl->gpus[nd->first_gpu + i].type].tflops;
    return nd->ngpus ? s / nd->ngpus : 0.0;
}

static int group_np(const struct hp_cluster *cl, struct grouping *g, int *vw_of)
{
    for (int i = 0; i < cl->ngpus; i++)
        vw_of[i] = cl->gpus[i].node;
    return from_assignment(cl, vw_of, cl->nnodes, g);
}

static int group_ed(const struct hp_cluster *cl, struct grouping *g, int *vw_of)
{
    int v = cl->ngpus;

    for (int n = 0; n < cl->nnodes; n++)
        if (cl->nodes[n].ngpus < v)
            v = cl->nodes[n].ngpus;
    for (int i = 0; i < cl->ngpus; i++)
        vw_of[i] = (i - cl->nodes[cl->gpus[i].node].first_gpu) % v; /* position in its node */
    return from_assignment(cl, vw_of, v, g);
}

static const struct hp_cost *sort_c;
static const struct hp_cluster *sort_cl;

static int by_node_speed(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    const double sx = node_speed(sort_c, sort_cl, x), sy = node_speed(sort_c, sort_cl, y);

    if (sx != sy)
        return sx > sy ? -1 : 1;
    return x - y;
}

static int by_gpu_speed(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    const double sx = sort_c->db->types[sort_cl->gpus[x].type].tflops;
    const double sy = sort_c->db->types[sort_cl->gpus[y].type].tflops;

    if (sx != sy)
        return sx > sy ? -1 : 1;
    return x - y;
}

static int group_hd(const struct hp_cost *c, const struct hp_cluster *cl, struct grouping *g,
                    int *vw_of)
{
    int *order = malloc((size_t)cl->nnodes * sizeof(int)), next = 0, rc;

    if (!order)
        return -HP_ENOMEM;
    for (int n = 0; n < cl->nnodes; n++)
        order[n] = n;
    sort_c = c;
    sort_cl = cl;
    qsort(order, (size_t)cl->nnodes, sizeof(int), by_node_speed);
    for (int lo = 0, hi = cl->nnodes - 1; lo <= hi; lo++, hi--) {
        const struct hp_node *a = &cl->nodes[order[lo]], *b = &cl->nodes[order[hi]];
        int v = lo == hi ? 1 : (a->ngpus < b->ngpus ? a->ngpus : b->ngpus);
        if (v > 2)
            v = 2;
        for (int i = 0; i < a->ngpus; i++)
            vw_of[a->first_gpu + i] = next + i % v;
        if (lo != hi)
            for (int i = 0; i < b->ngpus; i++)
                vw_of[b->first_gpu + i] = next + i % v;
        next += v;
    }
    free(order);
    rc = from_assignment(cl, vw_of, next, g);
    return rc;
}

/* GPUs by speed, dealt to v VWs in snake order. */
static int group_snake(const struct hp_cost *c, const struct hp_cluster *cl, int v,
                       struct grouping *g, int *vw_of)
{
    int *order = malloc((size_t)cl->ngpus * sizeof(int));

    if (!order)
        return -HP_ENOMEM;
    for (int i = 0; i < cl->ngpus; i++)
        order[i] = i;
    sort_c = c;
    sort_cl = cl;
    qsort(order, (size_t)cl->ngpus, sizeof(int), by_gpu_speed);
    for (int i = 0; i < cl->ngpus; i++) {
        const int round = i / v, pos = i % v;
        vw_of[order[i]] = round % 2 == 0 ? pos : v - 1 - pos;
    }
    free(order);
    return from_assignment(cl, vw_of, v, g);
}

/* Partition every VW of a grouping; the job's rate is V x the slowest VW's. Identical VWs
 * (same types and the same pattern of shared nodes) are partitioned once per grouping. */
struct memo {
    int n;
    int key[HP_MAX_VW_GPUS * 3]; /* in a grouping 2 n ints, in the cache 3 n (see below) */
    int sorted[HP_MAX_VW_GPUS];  /* the VW's GPUs in key order */
    int rc;
    struct hp_vw_plan plan;
};

/* Across the groupings auto tries, a table of the partitions made, by the key and the rank
 * of each member's GPU index in the VW: with those equal, the partitioner sees the same VW
 * up to the names of its GPUs (the orders it tries, fastest first and by node, break ties
 * by GPU and node index, which follow the same order), so a VW found in the table gets the
 * plan its own partitioning would have given. */
struct memo_table {
    struct memo *e; /* count entries of cap */
    int count, cap;
    int *slot; /* nslots (a power of two): entry + 1, 0 empty */
    int nslots;
};

static unsigned memo_hash(int n, const int *key)
{
    unsigned h = 2166136261u ^ (unsigned)n;

    for (int i = 0; i < 3 * n; i++)
        h = (h ^ (unsigned)key[i]) * 16777619u;
    return h;
}

/* The entry of (n, key), or NULL; *at: its slot or the empty slot where it would go */
static struct memo *memo_find(struct memo_table *t, int n, const int *key, int *at)
{
    for (unsigned i = memo_hash(n, key) & (unsigned)(t->nslots - 1);;
         i = (i + 1) & (unsigned)(t->nslots - 1)) {
        *at = (int)i;
        if (!t->slot[i])
            return NULL;
        struct memo *m = &t->e[t->slot[i] - 1];
        if (m->n == n && memcmp(m->key, key, (size_t)n * 3 * sizeof(int)) == 0)
            return m;
    }
}

/* A new entry for (n, key), the table grown to stay at most half full. NULL: no memory. */
static struct memo *memo_add(struct memo_table *t, int n, const int *key)
{
    int at;

    if (2 * (t->count + 1) > t->nslots) {
        const int ns = t->nslots ? 2 * t->nslots : 64;
        int *slot = calloc((size_t)ns, sizeof(int));
        if (!slot)
            return NULL;
        free(t->slot);
        t->slot = slot;
        t->nslots = ns;
        for (int i = 0; i < t->count; i++) {
            memo_find(t, t->e[i].n, t->e[i].key, &at);
            t->slot[at] = i + 1;
        }
    }
    if (t->count == t->cap) {
        const int nc = t->cap ? 2 * t->cap : 32;
        struct memo *e = realloc(t->e, (size_t)nc * sizeof(*e));
        if (!e)
            return NULL;
        t->e = e;
        t->cap = nc;
    }
    memo_find(t, n, key, &at);
    t->slot[at] = t->count + 1;
    struct memo *m = &t->e[t->count++];
    m->n = n;
    memcpy(m->key, key, (size_t)n * 3 * sizeof(int));
    return m;
}

static void memo_release(struct memo_table *t)
{
    free(t->e);
    free(t->slot);
    memset(t, 0, sizeof(*t));
}

static void vw_key(const struct hp_cluster *cl, int *gpus, int n, int *key)
{
    int label[HP_MAX_VW_GPUS], nodes[HP_MAX_VW_GPUS], nl = 0;

    /* sort members by (type, node): insertion sort, n is small */
    for (int i = 1; i < n; i++) {
        int x = gpus[i], j = i - 1;
        while (j >= 0 && (cl->gpus[gpus[j]].type > cl->gpus[x].type ||
                          (cl->gpus[gpus[j]].type == cl->gpus[x].type &&
                           cl->gpus[gpus[j]].node > cl->gpus[x].node))) {
            gpus[j + 1] = gpus[j];
            j--;
        }
        gpus[j + 1] = x;
    }
    for (int i = 0; i < n; i++) {
        int node = cl->gpus[gpus[i]].node, l = -1;
        for (int j = 0; j < nl; j++)
            if (nodes[j] == node)
                l = j;
        if (l < 0) {
            nodes[nl] = node;
            l = nl++;
        }
        label[i] = l;
        key[2 * i] = cl->gpus[gpus[i]].type;
        key[2 * i + 1] = label[i];
    }
}

/* hp_partition_vw of members[0..n) (in key order, vw_key), or the cached plan of the same
 * VW up to the names of its GPUs (see struct memo_table) mapped onto them. */
static int partition_cached(const struct hp_cost *c, const struct hp_cluster *cl,
                            struct memo_table *cache, const int *members, int n, int nm_max,
                            int nm_fixed, struct hp_vw_plan *out)
{
    int key[HP_MAX_VW_GPUS * 3], sorted[HP_MAX_VW_GPUS], at;
    struct memo *hit;

    memcpy(sorted, members, (size_t)n * sizeof(int));
    vw_key(cl, sorted, n, key);
    for (int i = 0; i < n; i++) {
        int rank = 0;
        for (int j = 0; j < n; j++)
            rank += members[j] < members[i];
        key[2 * n + i] = rank;
    }
    hit = cache->nslots ? memo_find(cache, n, key, &at) : NULL;
    if (!hit) {
        hit = memo_add(cache, n, key);
        if (!hit)
            return -HP_ENOMEM;
        memcpy(hit->sorted, members, (size_t)n * sizeof(int));
        hit->rc = hp_partition_vw(c, cl, members, n, nm_max, nm_fixed, &hit->plan);
    }
    if (hit->rc)
        return hit->rc;
    *out = hit->plan;
    for (int s = 0; s < n; s++)
        for (int i = 0; i < n; i++)
            if (hit->plan.stages[s].gpu == hit->sorted[i])
                out->stages[s].gpu = members[i];
    return 0;
}

static int eval_grouping(const struct hp_cost *c, const struct hp_cluster *cl,
                         const struct hp_options *o, const struct grouping *g,
                         struct memo_table *cache, struct hp_vw_plan *vws, double *rate, int quiet)
{
    struct memo *memo = calloc((size_t)g->ngroups, sizeof(*memo));
    int nmemo = 0, rc = 0;
    double slowest = DBL_MAX;

    if (!memo)
        return -HP_ENOMEM;
    for (int v = 0; v < g->ngroups && rc == 0; v++) {
        const int n = g->start[v + 1] - g->start[v];
        int members[HP_MAX_VW_GPUS], key[HP_MAX_VW_GPUS * 2];
        struct memo *hit = NULL;

        if (n > HP_MAX_VW_GPUS || n > c->nunits) {
            if (!quiet)
                hp_error("a virtual worker of %d GPUs cannot be split over %d units", n, c->nunits);
            rc = -HP_EINVAL;
            break;
        }
        memcpy(members, g->gpus + g->start[v], (size_t)n * sizeof(int));
        vw_key(cl, members, n, key);
        for (int i = 0; i < nmemo && !hit; i++)
            if (memo[i].n == n && memcmp(memo[i].key, key, (size_t)n * 2 * sizeof(int)) == 0)
                hit = &memo[i];
        if (!hit) {
            hit = &memo[nmemo++];
            hit->n = n;
            memcpy(hit->key, key, (size_t)n * 2 * sizeof(int));
            memcpy(hit->sorted, members, (size_t)n * sizeof(int));
            const int nm_max = o->nm_max > 0 ? (o->nm_max < n ? (int)o->nm_max : n) : n;
            if (quiet)
                hp_log_set_quiet(1);
            hit->rc = partition_cached(c, cl, cache, members, n, nm_max, (int)o->nm, &hit->plan);
            if (quiet)
                hp_log_set_quiet(0);
        }
        if (hit->rc) {
            rc = hit->rc;
            break;
        }
        /* map the memoised plan's GPUs onto this VW's members (same key order) */
        vws[v] = hit->plan;
        for (int s = 0; s < n; s++)
            for (int i = 0; i < n; i++)
                if (hit->plan.stages[s].gpu == hit->sorted[i])
                    vws[v].stages[s].gpu = members[i];
        if (vws[v].rate < slowest)
            slowest = vws[v].rate;
    }
    free(memo);
    if (!rc)
        *rate = slowest * g->ngroups;
    /* WSP's clocks count waves, so the VWs share one wave of Nm minibatches, the largest any
     * of them needs: with its own shorter wave a VW would be held to Nm_own / Nm_max of the
     * others' minibatch rate. A VW keeps the in-flight counts of its own partition (<= its
     * Nm), so its rate and memory stay as evaluated; only its pushes and pulls are rarer. */
    int wave = 1;
    for (int v = 0; v < g->ngroups && !rc; v++)
        wave = vws[v].nm > wave ? vws[v].nm : wave;
    for (int v = 0; v < g->ngroups && !rc; v++)
        vws[v].nm = wave;
    return rc;
}

/* ring allreduce of all parameters over n GPUs: 2 (n - 1) / n of the bytes over the slowest
 * link, 2 (n - 1) latencies */
static double allreduce_time(const struct hp_cost *c, const struct hp_cluster *cl, const int *gpus,
                             int n)
{
    double gbs = cl->intra_node_gbs, lat = cl->intra_latency_us;
    const double bytes = (double)c->model->nparams * sizeof(float);

    for (int i = 1; i < n; i++)
        if (cl->gpus[gpus[i]].node != cl->gpus[gpus[0]].node) {
            gbs = cl->inter_node_gbs;
            lat = cl->inter_latency_us;
        }
    if (n <= 1)
        return 0.0;
    return 2.0 * (n - 1) / n * bytes / (gbs * 1e9) + 2.0 * (n - 1) * lat * 1e-6;
}

/* The dp workers: every GPU that holds the whole model, recomputing where `allow` lets a GPU
 * join that would not hold it otherwise (see hp_partition_recompute). Fills vws and use,
 * returns their number and the predicted rate in *rate. */
static int dp_workers(const struct hp_cost *c, const struct hp_cluster *cl, int allow,
                      struct hp_vw_plan *vws, int *use, double *rate)
{
    double slowest = 0.0;
    int n = 0;

    for (int i = 0; i < cl->ngpus; i++) {
        const double cap = c->db->types[cl->gpus[i].type].memory_gib * 1073741824.0;
        const int r = allow && hp_partition_recompute(c, 0, c->nunits, 1, 1, cap);
        if (hp_cost_stage_memory(c, 0, c->nunits, 1, 1, r) > cap)
            continue;
        struct hp_vw_plan *vw = &vws[n];
        memset(vw, 0, sizeof(*vw));
        vw->nstages = 1;
        vw->nm = 1;
        vw->stages[0].gpu = i;
        vw->stages[0].u0 = 0;
        vw->stages[0].u1 = c->nunits;
        hp_partition_evaluate(c, cl, vw);
        if (vw->stages[0].compute_s > slowest)
            slowest = vw->stages[0].compute_s;
        use[n++] = i;
    }
    *rate = n ? (double)n * c->batch / (slowest + allreduce_time(c, cl, use, n)) : 0.0;
    return n;
}

/* dp: one VW per GPU that holds the model. With recompute auto, the GPUs that would hold it
 * only by recomputing join when that makes the job faster (every worker waits for the
 * slowest at each allreduce, so a slow recomputing GPU can cost more than it adds). */
static int plan_dp(const struct hp_cost *c, const struct hp_cluster *cl, struct hp_plan *p)
{
    int *use = malloc((size_t)cl->ngpus * sizeof(int)), n, rc = 0;
    struct hp_vw_plan *alt = calloc((size_t)cl->ngpus, sizeof(*alt));
    double rate, alt_rate;

    p->vws = calloc((size_t)cl->ngpus, sizeof(*p->vws));
    if (!use || !alt || !p->vws) {
        rc = -HP_ENOMEM;
        goto out;
    }
    n = dp_workers(c, cl, c->recompute != HP_RECOMPUTE_NEVER, p->vws, use, &rate);
    if (c->recompute == HP_RECOMPUTE_AUTO) {
        const int m = dp_workers(c, cl, 0, alt, use, &alt_rate);
        if (m > 0 && alt_rate >= rate) {
            memcpy(p->vws, alt, (size_t)m * sizeof(*alt));
            n = m;
            rate = alt_rate;
        } else {
            n = dp_workers(c, cl, 1, p->vws, use, &rate);
        }
    }
    for (int i = 0, k = 0; i < cl->ngpus; i++) {
        const double cap = c->db->types[cl->gpus[i].type].memory_gib * 1073741824.0;
        if (k < n && use[k] == i) {
            k++;
            continue;
        }
        hp_info("dp: leaving out GPU %d of node '%s' (%s, %.2f GiB): the model needs %.2f GiB%s",
                cl->gpus[i].index, cl->nodes[cl->gpus[i].node].name,
                c->db->types[cl->gpus[i].type].name, cap / 1073741824.0,
                hp_cost_stage_memory(c, 0, c->nunits, 1, 1, 0) / 1073741824.0,
                c->recompute == HP_RECOMPUTE_AUTO &&
                        hp_cost_stage_memory(c, 0, c->nunits, 1, 1, 1) <= cap
                    ? " (it would fit recomputing, but the job would be slower)"
                    : "");
    }
    if (n == 0) {
        hp_error("dp: model '%s' fits on no GPU of the cluster (it needs %.2f GiB at minibatch "
                 "%d%s)",
                 c->model->name,
                 hp_cost_stage_memory(c, 0, c->nunits, 1, 1, c->recompute != HP_RECOMPUTE_NEVER) /
                     1073741824.0,
                 c->batch, c->recompute != HP_RECOMPUTE_NEVER ? ", recomputing" : "");
        rc = -HP_ERANGE;
    } else {
        p->nvws = n;
        p->allreduce_s = allreduce_time(c, cl, use, n);
        p->rate = rate;
    }
out:
    free(use);
    free(alt);
    return rc;
}

/* The shard of unit u under a placement: default round-robin over the nodes; local the node
 * that runs u in VW 0 (with ed, every VW runs a stage on the same node). */
static int unit_shard(const struct hp_cluster *cl, const struct hp_vw_plan *vw0,
                      enum hp_placement placement, int u)
{
    if (placement == HP_PLACEMENT_LOCAL)
        for (int s = 0; s < vw0->nstages; s++)
            if (u >= vw0->stages[s].u0 && u < vw0->stages[s].u1)
                return cl->gpus[vw0->stages[s].gpu].node;
    return u % cl->nnodes;
}

/* Bytes of a VW's wave synchronisation that cross the network: its units held on another
 * node's shard, pushed and pulled. */
static double offnode_bytes(const struct hp_cost *c, const struct hp_cluster *cl,
                            const struct hp_vw_plan *vw0, enum hp_placement placement,
                            const struct hp_vw_plan *vw)
{
    double bytes = 0.0;

    for (int s = 0; s < vw->nstages; s++) {
        const struct hp_stage_plan *st = &vw->stages[s];
        for (int u = st->u0; u < st->u1; u++)
            if (unit_shard(cl, vw0, placement, u) != cl->gpus[st->gpu].node)
                bytes += 2.0 * (double)c->model->units[u].cost.param_bytes;
    }
    return bytes;
}

static void place(const struct hp_cost *c, const struct hp_cluster *cl, struct hp_plan *p)
{
    p->nshards = cl->nnodes;
    for (int pl = HP_PLACEMENT_DEFAULT; pl <= HP_PLACEMENT_LOCAL; pl++) {
        p->wave_bytes[pl] = 0.0;
        for (int v = 0; v < p->nvws; v++)
            p->wave_bytes[pl] +=
                offnode_bytes(c, cl, &p->vws[0], (enum hp_placement)pl, &p->vws[v]);
    }
    for (int u = 0; u < c->nunits; u++)
        p->unit_shard[u] = unit_shard(cl, &p->vws[0], p->opts.placement, u);
}

/* Charge each VW the parameter synchronisation of a wave under `placement`: the bytes of its
 * units held on another node's shard go out (push) and come back (pull) over that node's
 * link to the network, overlapping the wave's compute; a VW whose wave of Nm minibatches
 * computes faster than that waits for the network. Returns the job's rate. */
static double charge_sync(const struct hp_cost *c, const struct hp_cluster *cl,
                          enum hp_placement placement, struct hp_vw_plan *vws, int n)
{
    double slowest = DBL_MAX;

    for (int v = 0; v < n; v++) {
        const double bytes = offnode_bytes(c, cl, &vws[0], placement, &vws[v]);
        const double net_s = bytes / (cl->inter_node_gbs * 1e9);
        if (net_s > 0.0) {
            const double wave_rate = (double)vws[v].nm * c->batch / net_s;
            if (wave_rate < vws[v].rate)
                vws[v].rate = wave_rate;
        }
        if (vws[v].rate < slowest)
            slowest = vws[v].rate;
    }
    return slowest * n;
}

int hp_plan_compute(const struct hp_cost *c, const struct hp_cluster *cl,
                    const struct hp_options *o, struct hp_plan *p)
{
    struct grouping g = {0}, best_g = {0};
    struct memo_table memo = {0};
    struct hp_vw_plan *vws = NULL;
    int *vw_of = NULL, rc = 0;
    double best = -1.0;

    memset(p, 0, sizeof(*p));
    if (o->staleness < 0 || o->nm < 0 || o->batch < 1) {
        hp_error("invalid planning options: staleness D = %ld (allowed: >= 0), Nm = %ld (allowed: "
                 "auto or >= 1), minibatch %ld (allowed: >= 1)",
                 o->staleness, o->nm, o->batch);
        return -HP_EINVAL;
    }
    p->version = HP_PLAN_VERSION;
    p->opts = *o;
    p->nunits = c->nunits;
    snprintf(p->model, sizeof(p->model), "%s", c->model->name);
    snprintf(p->cluster, sizeof(p->cluster), "%s", cl->name);
    p->unit_shard = calloc((size_t)c->nunits, sizeof(int));
    vw_of = calloc((size_t)cl->ngpus, sizeof(int));
    vws = calloc((size_t)cl->ngpus, sizeof(*vws));
    if (!p->unit_shard || !vw_of || !vws) {
        rc = -HP_ENOMEM;
        goto out;
    }
    if (o->policy == HP_POLICY_DP) {
        rc = plan_dp(c, cl, p);
        p->grouping = HP_POLICY_DP;
        goto placed;
    }
    /* candidates: the policy asked for, or (auto) np, ed, hd and snake groupings into
     * V = ceil(GPUs / k) VWs for every VW size k = 1 .. min(units, AUTO_MAX_VW) */
    int ncand = 1, snake_v[AUTO_MAX_VW + 1], nsnake = 0;
    if (o->policy == HP_POLICY_AUTO) {
        for (int k = 1; k <= AUTO_MAX_VW && k <= c->nunits && k <= cl->ngpus; k++) {
            const int v = (cl->ngpus + k - 1) / k;
            if (nsnake == 0 || snake_v[nsnake - 1] != v)
                snake_v[nsnake++] = v;
        }
        ncand = 3 + nsnake;
    }
    int last_rc = 0;
    for (int k = 0; k < ncand; k++) {
        static const enum hp_policy fixed[3] = {HP_POLICY_NP, HP_POLICY_ED, HP_POLICY_HD};
        enum hp_policy pol =
            o->policy == HP_POLICY_AUTO ? (k < 3 ? fixed[k] : HP_POLICY_AUTO) : o->policy;
        double rate = 0.0;
        if (pol == HP_POLICY_NP)
            rc = group_np(cl, &g, vw_of);
        else if (pol == HP_POLICY_ED)
            rc = group_ed(cl, &g, vw_of);
        else if (pol == HP_POLICY_HD)
            rc = group_hd(c, cl, &g, vw_of);
        else
            rc = group_snake(c, cl, snake_v[k - 3], &g, vw_of);
        if (rc)
            goto out;
        rc = eval_grouping(c, cl, o, &g, &memo, vws, &rate, o->policy == HP_POLICY_AUTO);
        if (rc == 0)
            rate = charge_sync(c, cl, o->placement, vws, g.ngroups);
        if (rc == 0 && rate > best * (1.0 + 1e-12)) {
            best = rate;
            grouping_free(&best_g);
            best_g = g;
            memset(&g, 0, sizeof(g));
            p->grouping = pol;
            free(p->vws);
            p->vws = calloc((size_t)best_g.ngroups, sizeof(*p->vws));
            if (!p->vws) {
                rc = -HP_ENOMEM;
                goto out;
            }
            memcpy(p->vws, vws, (size_t)best_g.ngroups * sizeof(*vws));
            p->nvws = best_g.ngroups;
        } else if (rc == -HP_ENOMEM) {
            goto out;
        }
        last_rc = rc;
        grouping_free(&g);
    }
    if (best < 0.0) {
        if (o->policy == HP_POLICY_AUTO)
            hp_error("model '%s' fits no grouping of cluster '%s' at minibatch %d", c->model->name,
                     cl->name, c->batch);
        rc = last_rc ? last_rc : -HP_ERANGE;
        goto out;
    }
    rc = 0;
    p->rate = best;
placed:
    if (rc)
        goto out;
    place(c, cl, p);
    p->nranks = cl->ngpus + p->nshards;
    if (o->policy == HP_POLICY_DP) {
        p->nranks = p->nvws;
        p->nshards = 0;
        p->wave_bytes[0] = p->wave_bytes[1] = 0.0;
    } else {
        p->nranks = 0;
        for (int v = 0; v < p->nvws; v++)
            p->nranks += p->vws[v].nstages;
        p->nranks += p->nshards;
    }
out:
    grouping_free(&g);
    grouping_free(&best_g);
    memo_release(&memo);
    free(vw_of);
    free(vws);
    if (rc)
        hp_plan_release(p);
    return rc;
}
