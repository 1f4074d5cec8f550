/* layout.c - a plan's ranks as the tasks of one Slurm step (layout.h). */
#include "layout.h"

#include "error.h"
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Node names compare case-insensitively: a plan's come through a cluster file, whose section
 * names iniparser lower-cases ("Node1" -> "node1"); the binding keeps Slurm's spelling. */
static const struct hp_alloc_node *alloc_node(const struct hp_alloc *a, const char *name)
{
    for (int i = 0; i < a->nnodes; i++)
        if (strcasecmp(a->nodes[i].name, name) == 0)
            return &a->nodes[i];
    return NULL;
}

int hp_layout_check(const char *plan_path, const struct hp_plan *p, const struct hp_cluster *cl,
                    const struct hp_gpudb *db, const struct hp_alloc *a)
{
    char have[1024];

    for (int v = 0, r = 0; v < p->nvws; v++)
        for (int s = 0; s < p->vws[v].nstages; s++, r++) {
            const struct hp_gpu *g = &cl->gpus[p->vws[v].stages[s].gpu];
            const char *node = cl->nodes[g->node].name, *type = db->types[g->type].name;
            const struct hp_alloc_node *an = alloc_node(a, node);
            int ok = 0;
            if (!an) {
                have[0] = 0;
                for (int i = 0; i < a->nnodes; i++)
                    snprintf(have + strlen(have), sizeof(have) - strlen(have), "%s%s",
                             i ? ", " : "", a->nodes[i].name);
                hp_error("launch: plan %s puts vw %d stage %d (rank %d) on node %s, which is not "
                         "a GPU node of job %lu (it has %s): plan inside this allocation, or "
                         "ask Slurm for that node",
                         plan_path, v, s, r, node, a->jobid, have);
                return -HP_ECONFIG;
            }
            have[0] = 0;
            for (int i = 0; i < an->ngpus; i++) {
                ok |= an->gpus[i].index == g->index && strcmp(an->gpus[i].type, type) == 0;
                snprintf(have + strlen(have), sizeof(have) - strlen(have), "%s%d (%s)",
                         i ? ", " : "", an->gpus[i].index, an->gpus[i].type);
            }
            if (!ok) {
                hp_error("launch: plan %s puts vw %d stage %d (rank %d) on GPU %d (%s) of %s, "
                         "but job %lu has on %s GPU %s: the plan does not match the allocation",
                         plan_path, v, s, r, g->index, type, node, a->jobid, node, have);
                return -HP_ECONFIG;
            }
        }
    for (int s = 0; s < p->nshards; s++)
        if (!alloc_node(a, cl->nodes[s].name)) {
            hp_error("launch: plan %s puts PS shard %d on node %s, which is not a GPU node of "
                     "job %lu",
                     plan_path, s, cl->nodes[s].name, a->jobid);
            return -HP_ECONFIG;
        }
    return 0;
}

int hp_layout_make(const struct hp_plan *p, const struct hp_cluster *cl, const struct hp_alloc *a,
                   struct hp_layout *L)
{
    L->b = calloc((size_t)p->nranks, sizeof(*L->b));
    L->node_tasks = calloc((size_t)a->nnodes, sizeof(int));
    L->ntasks = 0;
    if (!L->b || !L->node_tasks)
        return -HP_ENOMEM;
    for (int i = 0; i < a->nnodes; i++) {
        const char *node = a->nodes[i].name;
        for (int v = 0; v < p->nvws; v++)
            for (int s = 0; s < p->vws[v].nstages; s++) {
                const struct hp_gpu *g = &cl->gpus[p->vws[v].stages[s].gpu];
                if (strcasecmp(cl->nodes[g->node].name, node) != 0)
                    continue;
                struct hp_binding *e = &L->b[L->ntasks];
                *e = (struct hp_binding){.task = L->ntasks, .device = g->index};
                snprintf(e->node, sizeof(e->node), "%s", node);
                snprintf(e->role, sizeof(e->role), "vw%d.stage%d", v, s);
                L->ntasks++;
                L->node_tasks[i]++;
            }
        for (int s = 0; s < p->nshards; s++) {
            if (strcasecmp(cl->nodes[s].name, node) != 0)
                continue;
            struct hp_binding *e = &L->b[L->ntasks];
            *e = (struct hp_binding){.task = L->ntasks, .device = -1};
            snprintf(e->node, sizeof(e->node), "%s", node);
            snprintf(e->role, sizeof(e->role), "ps%d", s);
            L->ntasks++;
            L->node_tasks[i]++;
        }
    }
    if (L->ntasks != p->nranks) {
        hp_error("launch: %d of the plan's %d ranks are on nodes of this job", L->ntasks,
                 p->nranks);
        return -HP_ECONFIG;
    }
    return 0;
}

void hp_layout_release(struct hp_layout *L)
{
    free(L->b);
    free(L->node_tasks);
    L->b = NULL;
    L->node_tasks = NULL;
}

int hp_layout_write_hostfile(const char *path, const struct hp_layout *L)
{
    FILE *f = fopen(path, "w");
    int ok;

    if (!f) {
        hp_error("launch: cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    for (int t = 0; t < L->ntasks; t++)
        fprintf(f, "%s\n", L->b[t].node);
    ok = fflush(f) == 0;
    ok &= fclose(f) == 0;
    if (!ok) {
        hp_error("launch: cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

const char *hp_keep(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s ? s : "";
}

int hp_layout_het_args(const struct hp_alloc *a, const struct hp_layout *L, const char **av,
                       int *ac)
{
    for (int c = 0; c < a->ncomponents; c++) {
        char nodes[4096] = "";
        int k = 0, per = -1, tasks = 0;
        for (int i = 0; i < a->nnodes; i++) {
            if (a->nodes[i].component != c || L->node_tasks[i] == 0)
                continue;
            if (per >= 0 && L->node_tasks[i] != per) {
                hp_error("launch: hetjob component %d: the plan puts %d tasks on %s but %d on "
                         "%s; srun places tasks evenly within a component, so every node of a "
                         "component needs the same number of planned GPUs (ask for the same "
                         "GPU count on each node of a component)",
                         c, per, a->nodes[i - 1].name, L->node_tasks[i], a->nodes[i].name);
                return -1;
            }
            per = L->node_tasks[i];
            snprintf(nodes + strlen(nodes), sizeof(nodes) - strlen(nodes), "%s%s", k ? "," : "",
                     a->nodes[i].name);
            k++;
            tasks += L->node_tasks[i];
        }
        if (k == 0) {
            hp_error("launch: hetjob component %d has no planned GPU: every component of a "
                     "hetjob must carry ranks (plan with a policy that uses its GPUs, or drop "
                     "the component)",
                     c);
            return -1;
        }
        if (c > 0)
            av[(*ac)++] = ":";
        av[(*ac)++] = "--overcommit";
        av[(*ac)++] = hp_keep("--nodelist=%s", nodes);
        av[(*ac)++] = hp_keep("--nodes=%d", k);
        av[(*ac)++] = hp_keep("--ntasks=%d", tasks);
        av[(*ac)++] = hp_keep("--ntasks-per-node=%d", per);
        av[(*ac)++] = "--distribution=block";
    }
    return 0;
}
