/* plan.c - the plan's names, rank mapping and release (plan.h). */
#include "plan.h"

#include "binding.h"
#include "error.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>

const char *hp_policy_name(enum hp_policy p)
{
    return hp_opt_word(HP_OPT_POLICY, p);
}

const char *hp_placement_name(enum hp_placement p)
{
    return hp_opt_word(HP_OPT_PLACEMENT, p);
}

const char *hp_recompute_name(enum hp_recompute r)
{
    return hp_opt_word(HP_OPT_RECOMPUTE, r);
}

void hp_plan_release(struct hp_plan *plan)
{
    free(plan->vws);
    free(plan->unit_shard);
    plan->vws = NULL;
    plan->unit_shard = NULL;
}

int hp_plan_stage_rank(const struct hp_plan *p, int v, int s)
{
    int r = 0;

    for (int i = 0; i < v; i++)
        r += p->vws[i].nstages;
    return r + s;
}

int hp_plan_rank_stage(const struct hp_plan *p, int r, int *v, int *s)
{
    for (int i = 0, base = 0; i < p->nvws; base += p->vws[i++].nstages)
        if (r >= base && r < base + p->vws[i].nstages) {
            *v = i;
            *s = r - base;
            return 0;
        }
    return -1;
}

int hp_plan_first_shard(const struct hp_plan *p)
{
    return p->nranks - p->nshards;
}

void hp_plan_describe_rank(const struct hp_plan *p, const struct hp_cluster *cl,
                           const struct hp_gpudb *db, int r, char *buf, size_t n)
{
    int v, s;

    if (hp_plan_rank_stage(p, r, &v, &s) == 0) {
        const struct hp_gpu *g = &cl->gpus[p->vws[v].stages[s].gpu];
        snprintf(buf, n, "vw %d stage %d, %s on %s", v, s, db->types[g->type].name,
                 cl->nodes[g->node].name);
        return;
    }
    s = r - hp_plan_first_shard(p);
    if (s >= 0 && s < p->nshards && s < cl->nnodes)
        snprintf(buf, n, "PS shard %d on %s", s, cl->nodes[s].name);
    else
        snprintf(buf, n, "rank %d (not in the plan)", r);
}

int hp_plan_role_rank(const struct hp_plan *p, const char *role)
{
    int v, s;

    if (hp_binding_role_parse(role, &v, &s))
        return -1;
    if (s < 0)
        return v < p->nshards ? hp_plan_first_shard(p) + v : -1;
    if (v >= p->nvws || s >= p->vws[v].nstages)
        return -1;
    return hp_plan_stage_rank(p, v, s);
}

int hp_plan_binding_load(const struct hp_plan *p, const char *path, struct hp_binding **out,
                         int **rank_of)
{
    struct hp_binding *b = NULL;
    int *of = NULL, *used = NULL, n = 0;
    char err[1024];

    if (hp_binding_read(path, &b, &n, err, sizeof(err))) {
        hp_error("binding file %s: %s", path, err);
        return -HP_ECONFIG;
    }
    if (n != p->nranks) {
        hp_error("binding file %s: %d tasks, but the plan has %d ranks", path, n, p->nranks);
        goto bad;
    }
    of = malloc((size_t)n * sizeof(int));
    used = calloc((size_t)n, sizeof(int));
    if (!of || !used) {
        hp_error("binding file %s: out of memory", path);
        goto bad;
    }
    for (int t = 0; t < n; t++) {
        const int r = hp_plan_role_rank(p, b[t].role);
        if (r < 0 || used[r]++) {
            hp_error("binding file %s: task %d: role '%s' is %s", path, t, b[t].role,
                     r < 0 ? "not in the plan" : "given twice");
            goto bad;
        }
        of[t] = r;
    }
    free(used);
    *out = b;
    *rank_of = of;
    return 0;
bad:
    free(b);
    free(of);
    free(used);
    return -HP_ECONFIG;
}
