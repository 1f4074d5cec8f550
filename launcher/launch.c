/* launch.c - `hetpipe launch`: inside a Slurm allocation (an sbatch script or salloc), learn
 * from slurmctld which typed GPUs the job holds on which nodes, plan for them, write the plan,
 * the cluster description, a binding file (task -> rank, node, GPU) and a host file into a
 * job-private directory, and exec `srun --mpi=pmix` with one task per planned GPU on its node
 * plus the parameter-server shards.
 *
 * Task layout. Tasks are numbered node by node in the allocation's order (hetjob component by
 * component); on a node, its GPU stages (in rank order), then its PS shard. A job that is not
 * a hetjob gets one step with `-m arbitrary` and SLURM_HOSTFILE (task i on line i's node),
 * which allows any number of tasks per node. A hetjob gets one step component per job
 * component (`srun A : B`), each with -w its nodes and --ntasks-per-node, block layout, so
 * every node of a component must carry the same number of tasks (Slurm cannot place tasks
 * unevenly inside a het step component). Either way the binding file says which rank each
 * task runs; hetpipe-rank and the SPANK plugin check it against what the task really got.
 */
#include "cli.h"

#include "binding.h"
#include "cluster.h"
#include "error.h"
#include "gpudb.h"
#include "jobopts.h"
#include "log.h"
#include "planner.h"
#include "planfile.h"
#include "slurm.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ARGS 256

static void launch_usage(FILE *f)
{
    fprintf(f,
            "usage: hetpipe launch [options] [training options]\n"
            "Inside a Slurm allocation (sbatch script or salloc): discover the job's typed GPUs,\n"
            "plan, and run the ranks with srun --mpi=pmix. Each option defaults to the\n"
            "environment the --hetpipe-* options of sbatch/salloc/srun set (in brackets).\n"
            "  --policy P          auto (default), np, ed, hd, dp          [HETPIPE_POLICY]\n"
            "  --placement P       default (default) or local              [HETPIPE_PLACEMENT]\n"
            "  --staleness D       WSP staleness bound, waves (default 0)  [HETPIPE_STALENESS]\n"
            "  --nm N|auto         minibatches in flight per VW (auto)     [HETPIPE_NM]\n"
            "  --model NAME|PATH   model (default cnn)                     [HETPIPE_MODEL]\n"
            "  --batch N           minibatch (default 64)                  [HETPIPE_BATCH]\n"
            "  --epochs N          epochs (default 1)                      [HETPIPE_EPOCHS]\n"
            "  --dry-run           print the plan and predicted throughput, start no rank\n"
            "                                                              [HETPIPE_DRY_RUN]\n"
            "  --plan FILE         run this plan instead of planning (checked against the job)\n"
            "  --run-dir DIR       where plan, binding and host file go (default\n"
            "                      $SLURM_SUBMIT_DIR/hetpipe-JOBID, mode 0700; must be visible\n"
            "                      on every node of the job)\n"
            "  --config FILE       site config (default $HETPIPE_CONF, ..., /etc/hetpipe)\n"
            "  --seed N  --nm-max N  --profile FILE   as for hetpipe plan\n"
            "  --srun PATH         the srun to run (default srun from PATH, or $HETPIPE_SRUN)\n"
            "training options, passed to every rank: --lr X --momentum X --weight-decay X\n"
            "  --schedule S --train-limit N --test-limit N --log-every N --data DIR\n"
            "  --metrics FILE --step-log FILE --weight-log PREFIX --stats PREFIX --trace PREFIX\n"
            "  --save-params PREFIX --eval-every N --stop-at P --timeout SEC --device D\n"
            "  --threads N --no-stash\n");
}

/* The job options: command line first, else HETPIPE_* from the plugin, else the default. */
struct launch_opts {
    const char *v[HP_JOBOPT_COUNT];
    int from_env[HP_JOBOPT_COUNT];
    const char *plan, *run_dir, *config, *seed, *nm_max, *profile, *srun;
    const char *rargv[MAX_ARGS];
    int rargc;
};

static const char *const rank_opts[] = {
    "lr",    "momentum", "weight-decay", "schedule",   "train-limit", "test-limit", "log-every",
    "data",  "metrics",  "step-log",     "weight-log", "timeout",     "device",     "threads",
    "stats", "trace",    "save-params",  "eval-every", "stop-at", NULL,
};

static int parse_args(int argc, char **argv, struct launch_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            launch_usage(stdout);
            return 1;
        }
        if (strcmp(a, "--dry-run") == 0) {
            o->v[HP_JOBOPT_DRY_RUN] = "1";
            continue;
        }
        if (strcmp(a, "--no-stash") == 0) {
            o->rargv[o->rargc++] = a;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            hp_error("launch: '%s' is not an option (see hetpipe launch --help)", a);
            return -1;
        }
        /* --name=value or --name value */
        char name[64];
        const char *val, *eq = strchr(a, '=');
        if (eq) {
            snprintf(name, sizeof(name), "%.*s", (int)(eq - a - 2), a + 2);
            val = eq + 1;
        } else {
            snprintf(name, sizeof(name), "%s", a + 2);
            if (i + 1 >= argc) {
                hp_error("launch: option '%s' needs a value (see hetpipe launch --help)", a);
                return -1;
            }
            val = argv[++i];
        }
        int known = 0;
        for (int k = 0; k < HP_JOBOPT_COUNT && !known; k++)
            if (k != HP_JOBOPT_DRY_RUN && strcmp(name, hp_jobopts[k].name) == 0) {
                o->v[k] = val;
                known = 1;
            }
        const struct {
            const char *name;
            const char **dst;
        } own[] = {{"plan", &o->plan}, {"run-dir", &o->run_dir}, {"config", &o->config},
                   {"seed", &o->seed}, {"nm-max", &o->nm_max},   {"profile", &o->profile},
                   {"srun", &o->srun}};
        for (size_t k = 0; k < sizeof(own) / sizeof(own[0]) && !known; k++)
            if (strcmp(name, own[k].name) == 0) {
                *own[k].dst = val;
                known = 1;
            }
        for (int k = 0; rank_opts[k] && !known; k++)
            if (strcmp(name, rank_opts[k]) == 0) {
                if (o->rargc + 2 >= MAX_ARGS - 16)
                    return -1;
                o->rargv[o->rargc++] = argv[i - (eq ? 0 : 1)];
                if (!eq)
                    o->rargv[o->rargc++] = val;
                known = 1;
            }
        if (!known) {
            hp_error("launch: unknown option '--%s' (see hetpipe launch --help)", name);
            return -1;
        }
    }
    return 0;
}

/* Fill unset options from HETPIPE_* and check every value; the message names the option or
 * the variable it came from. */
static int resolve_opts(struct launch_opts *o)
{
    static const char *const defaults[HP_JOBOPT_COUNT] = {
        [HP_JOBOPT_POLICY] = "auto", [HP_JOBOPT_PLACEMENT] = "default", [HP_JOBOPT_STALENESS] = "0",
        [HP_JOBOPT_NM] = "auto",     [HP_JOBOPT_MODEL] = "cnn",         [HP_JOBOPT_BATCH] = "64",
        [HP_JOBOPT_EPOCHS] = "1",    [HP_JOBOPT_DRY_RUN] = NULL,
    };
    struct hp_joblimits lim;
    char err[1200], what[64];

    hp_joblimits_init(&lim);
    /* the site's limits are the plugin's, enforced at submit time; here the hard ones */
    lim.max_staleness = HP_JOBOPT_STALENESS_LIMIT;
    lim.max_nm = HP_JOBOPT_NM_LIMIT;
    lim.max_batch = HP_JOBOPT_BATCH_LIMIT;
    lim.max_epochs = HP_JOBOPT_EPOCHS_LIMIT;
    for (int k = 0; k < HP_JOBOPT_COUNT; k++) {
        if (!o->v[k] && getenv(hp_jobopts[k].env)) {
            o->v[k] = getenv(hp_jobopts[k].env);
            o->from_env[k] = 1;
        }
        if (!o->v[k]) {
            o->v[k] = defaults[k];
            continue;
        }
        if (o->from_env[k])
            snprintf(what, sizeof(what), "%s", hp_jobopts[k].env);
        else
            snprintf(what, sizeof(what), "--%s", hp_jobopts[k].name);
        if (hp_jobopt_check((enum hp_jobopt)k, what, o->v[k], &lim, 0, err, sizeof(err))) {
            hp_error("launch: %s", err);
            return -1;
        }
    }
    if (o->v[HP_JOBOPT_DRY_RUN] && strcmp(o->v[HP_JOBOPT_DRY_RUN], "") == 0)
        o->v[HP_JOBOPT_DRY_RUN] = NULL;
    return 0;
}

/* The job-private directory: DIR given, else $SLURM_SUBMIT_DIR/hetpipe-JOBID (then .1, .2, ...
 * for later launches in the same job). Created 0700. */
static int make_run_dir(const struct launch_opts *o, unsigned long jobid, char *dir, size_t n)
{
    if (o->run_dir) {
        snprintf(dir, n, "%s", o->run_dir);
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            hp_error("launch: cannot create run directory '%s': %s", dir, strerror(errno));
            return -1;
        }
        if (chmod(dir, 0700) != 0) {
            hp_error("launch: run directory '%s': %s", dir, strerror(errno));
            return -1;
        }
        return 0;
    }
    const char *base = getenv("SLURM_SUBMIT_DIR");
    char cwd[4096];
    if (!base || !*base)
        base = getcwd(cwd, sizeof(cwd)) ? cwd : ".";
    for (int k = 0; k < 1000; k++) {
        const int len = k == 0 ? snprintf(dir, n, "%s/hetpipe-%lu", base, jobid)
                               : snprintf(dir, n, "%s/hetpipe-%lu.%d", base, jobid, k);
        if (len < 0 || (size_t)len >= n) {
            hp_error("launch: the run directory's path under '%s' is too long", base);
            return -1;
        }
        if (mkdir(dir, 0700) == 0)
            return 0;
        if (errno != EEXIST) {
            hp_error("launch: cannot create run directory '%s': %s (give one with --run-dir)", dir,
                     strerror(errno));
            return -1;
        }
    }
    hp_error("launch: too many run directories %s/hetpipe-%lu.*", base, jobid);
    return -1;
}

/* Node names compare case-insensitively: a plan's come through cluster.ini, whose section
 * names iniparser lower-cases ("Node1" -> "node1"); the binding keeps Slurm's spelling. */
static const struct hp_alloc_node *alloc_node(const struct hp_alloc *a, const char *name)
{
    for (int i = 0; i < a->nnodes; i++)
        if (strcasecmp(a->nodes[i].name, name) == 0)
            return &a->nodes[i];
    return NULL;
}

/* Every GPU and PS shard of the plan must be where the allocation has it: node in the job,
 * device among the node's allocated GPUs, the same type. The message names both sides. */
static int check_plan(const char *plan_path, const struct hp_plan *p, const struct hp_cluster *cl,
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

struct layout {
    struct hp_binding *b; /* [nranks], task order */
    int ntasks;
    int *node_tasks; /* [a->nnodes] tasks on each allocation node */
};

/* Number tasks node by node: on each node its GPU stages in rank order, then its PS shard. */
static int make_layout(const struct hp_plan *p, const struct hp_cluster *cl,
                       const struct hp_alloc *a, struct layout *L)
{
    L->b = calloc((size_t)p->nranks, sizeof(*L->b));
    L->node_tasks = calloc((size_t)a->nnodes, sizeof(int));
    L->ntasks = 0;
    if (!L->b || !L->node_tasks)
        return -HP_ENOMEM;
    for (int i = 0; i < a->nnodes; i++) {
        const char *node = a->nodes[i].name;
        for (int v = 0, r = 0; v < p->nvws; v++)
            for (int s = 0; s < p->vws[v].nstages; s++, r++) {
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

static int write_hostfile(const char *path, const struct layout *L)
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

/* A string that lives until exec (the argument vectors point at these). */
static const char *keep(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *keep(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s ? s : "";
}

/* The srun component options for a hetjob: one per job component, -w its task nodes, -N,
 * -n, --ntasks-per-node. -1 (logged) when a component's nodes carry unequal task counts. */
static int het_components(const struct hp_alloc *a, const struct layout *L, const char **av,
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
        av[(*ac)++] = keep("--nodelist=%s", nodes);
        av[(*ac)++] = keep("--nodes=%d", k);
        av[(*ac)++] = keep("--ntasks=%d", tasks);
        av[(*ac)++] = keep("--ntasks-per-node=%d", per);
        av[(*ac)++] = "--distribution=block";
    }
    return 0;
}

int hp_cmd_launch(int argc, char **argv)
{
    struct launch_opts o = {0};
    struct hp_alloc a = {0};
    struct hp_gpudb db = {0};
    struct hp_plan plan = {0};
    struct hp_cluster cl = {0};
    struct layout L = {0};
    char dir[4096], path[4200], plan_path[4200], bind_path[4200], host_path[4200];
    char confpath[4096], rank_bin[4096], token[33], *abs_conf = NULL;
    const char *av[MAX_ARGS];
    int ac = 0, rc;
    unsigned long jobid;
    char *end;

    rc = parse_args(argc, argv, &o);
    if (rc)
        return rc > 0 ? 0 : 2;
    if (resolve_opts(&o))
        return 2;
    const char *job = getenv("SLURM_JOB_ID");
    if (!job || !*job) {
        hp_error("launch: SLURM_JOB_ID is not set: hetpipe launch runs inside a Slurm "
                 "allocation (an sbatch script, or salloc); without Slurm use hetpipe run "
                 "--local");
        return 2;
    }
    errno = 0;
    jobid = strtoul(job, &end, 10);
    if (errno || *end || jobid == 0) {
        hp_error("launch: SLURM_JOB_ID='%s' is not a job id", job);
        return 2;
    }
    if (!o.config) {
        if (hp_gpudb_default_path(confpath, sizeof(confpath)))
            return 1;
        o.config = confpath;
    }
    abs_conf = realpath(o.config, NULL);
    if (!abs_conf) {
        hp_error("launch: config '%s': %s", o.config, strerror(errno));
        return 1;
    }
    if (hp_rank_binary("launch", rank_bin, sizeof(rank_bin)) || hp_slurm_discover(jobid, &a) ||
        make_run_dir(&o, jobid, dir, sizeof(dir))) {
        rc = 1;
        goto out;
    }
    printf("launch: job %lu%s: ", jobid, a.hetjob ? " (hetjob)" : "");
    for (int i = 0; i < a.nnodes; i++) {
        printf("%s%s", i ? ", " : "", a.nodes[i].name);
        for (int g = 0; g < a.nodes[i].ngpus; g++)
            printf("%s%s:%d", g ? "," : " ", a.nodes[i].gpus[g].type, a.nodes[i].gpus[g].index);
    }
    printf("\n");
    if (a.nskipped)
        printf("launch: %d node(s) of the job have no GPU and take no rank\n", a.nskipped);
    snprintf(plan_path, sizeof(plan_path), "%s/plan.ini", dir);
    snprintf(bind_path, sizeof(bind_path), "%s/binding", dir);
    snprintf(host_path, sizeof(host_path), "%s/hostfile", dir);
    snprintf(path, sizeof(path), "%s/cluster.ini", dir);
    if (hp_alloc_write_cluster(&a, keep("slurm-job-%lu", jobid), path)) {
        rc = 1;
        goto out;
    }
    fflush(stdout);
    if (!o.plan) {
        const char *pav[40];
        int pac = 0;
        pav[pac++] = "plan";
        pav[pac++] = "--cluster";
        pav[pac++] = path;
        pav[pac++] = "--config";
        pav[pac++] = abs_conf;
        pav[pac++] = "--out";
        pav[pac++] = plan_path;
        pav[pac++] = "--model";
        pav[pac++] = o.v[HP_JOBOPT_MODEL];
        pav[pac++] = "--policy";
        pav[pac++] = o.v[HP_JOBOPT_POLICY];
        pav[pac++] = "--placement";
        pav[pac++] = o.v[HP_JOBOPT_PLACEMENT];
        pav[pac++] = "--staleness";
        pav[pac++] = o.v[HP_JOBOPT_STALENESS];
        pav[pac++] = "--nm";
        pav[pac++] = o.v[HP_JOBOPT_NM];
        pav[pac++] = "--batch";
        pav[pac++] = o.v[HP_JOBOPT_BATCH];
        if (o.seed) {
            pav[pac++] = "--seed";
            pav[pac++] = o.seed;
        }
        if (o.nm_max) {
            pav[pac++] = "--nm-max";
            pav[pac++] = o.nm_max;
        }
        if (o.profile) {
            pav[pac++] = "--profile";
            pav[pac++] = o.profile;
        }
        pav[pac] = NULL;
        if (hp_cmd_plan(pac, (char **)pav) != 0) {
            rc = 1;
            goto out;
        }
    }
    fflush(stdout);
    /* a plan made elsewhere (--plan) is checked against the allocation, then written into the
     * run directory with the rest of the job's files */
    if ((rc = hp_gpudb_load(abs_conf, &db)) ||
        (rc = hp_planfile_load(o.plan ? o.plan : plan_path, &db, &plan, &cl, token)) ||
        (rc = check_plan(o.plan ? o.plan : plan_path, &plan, &cl, &db, &a)) ||
        (rc = make_layout(&plan, &cl, &a, &L)) ||
        (o.plan && (rc = hp_planfile_save(plan_path, &plan, &cl, &db, token)))) {
        rc = 1;
        goto out;
    }
    if (o.v[HP_JOBOPT_DRY_RUN]) {
        printf("dry run: %d ranks planned (%d GPU stages, %d PS shards); no rank started. Plan "
               "in %s\n",
               plan.nranks, plan.nranks - plan.nshards, plan.nshards, plan_path);
        rc = 0;
        goto out;
    }
    {
        char err[1200];
        if (hp_binding_write(bind_path, L.b, L.ntasks, err, sizeof(err))) {
            hp_error("launch: %s", err);
            rc = 1;
            goto out;
        }
    }
    if (write_hostfile(host_path, &L)) {
        rc = 1;
        goto out;
    }

    /* the step */
    const char *srun = o.srun ? o.srun : getenv("HETPIPE_SRUN");
    av[ac++] = srun && *srun ? srun : "srun";
    av[ac++] = "--mpi=pmix";
    av[ac++] = "--kill-on-bad-exit=1";
    av[ac++] = keep("--job-name=hetpipe-%lu", jobid);
    if (a.hetjob) {
        if (het_components(&a, &L, av, &ac)) {
            rc = 1;
            goto out;
        }
    } else {
        av[ac++] = "--overcommit";
        av[ac++] = "--distribution=arbitrary";
        av[ac++] = keep("--ntasks=%d", L.ntasks);
        setenv("SLURM_HOSTFILE", host_path, 1);
    }
    av[ac++] = rank_bin;
    av[ac++] = "--plan";
    av[ac++] = plan_path;
    av[ac++] = "--config";
    av[ac++] = abs_conf;
    av[ac++] = "--epochs";
    av[ac++] = o.v[HP_JOBOPT_EPOCHS];
    for (int i = 0; i < o.rargc && ac < MAX_ARGS - 1; i++)
        av[ac++] = o.rargv[i];
    av[ac] = NULL;
    setenv("HETPIPE_BINDING", bind_path, 1);
    setenv("HETPIPE_RUN_DIR", dir, 1);
    if (!getenv("OPENBLAS_NUM_THREADS"))
        setenv("OPENBLAS_NUM_THREADS", "1", 1); /* CPU ranks share the node's cores */
    printf("launch: %d tasks on %d nodes; binding in %s\nlaunch:", L.ntasks, a.nnodes, bind_path);
    for (int i = 0; i < ac; i++)
        printf(" %s", av[i]);
    printf("\n");
    fflush(stdout);
    fflush(stderr);
    execvp(av[0], (char **)av);
    hp_error("launch: cannot execute '%s': %s (is Slurm's srun on PATH? or give --srun)", av[0],
             strerror(errno));
    rc = 1;
out:
    free(L.b);
    free(L.node_tasks);
    hp_plan_release(&plan);
    if (cl.nodes)
        hp_cluster_release(&cl);
    hp_gpudb_release(&db);
    hp_alloc_release(&a);
    free(abs_conf);
    return rc ? 1 : 0;
}
