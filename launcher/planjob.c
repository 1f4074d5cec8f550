/* planjob.c - the one in-process planning call (planjob.h). */
#include "planjob.h"

#include "backend.h"
#include "ckptfile.h"
#include "ckptlock.h"
#include "clock.h"
#include "error.h"
#include "feed.h"
#include "log.h"
#include "net.h"
#include "paths.h"
#include "planfile.h"
#include "planner.h"
#include "profile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* 16 random bytes as 32 hex digits; the kernel's random source or nothing. */
static int random_token(char *tok)
{
    unsigned char b[16];
    ssize_t got = getrandom(b, sizeof(b), 0);

    if (got != (ssize_t)sizeof(b)) {
        hp_error("cannot make a job token: getrandom: %s",
                 got < 0 ? strerror(errno) : "short read");
        return -HP_EIO;
    }
    for (int i = 0; i < 16; i++)
        snprintf(tok + 2 * i, 3, "%02x", b[i]);
    return 0;
}

/* The site config: o->config or the default place; remembered by its absolute path. */
static int load_config(const struct hp_options *o, struct hp_job *job)
{
    char path[4096], *abs;
    int rc = 0;

    if (o->config)
        snprintf(path, sizeof(path), "%s", o->config);
    else if ((rc = hp_gpudb_default_path(path, sizeof(path))))
        return rc;
    if ((rc = hp_gpudb_load(path, &job->db)))
        return rc;
    abs = realpath(path, NULL);
    if (!abs || strlen(abs) >= sizeof(job->config)) {
        hp_error("config '%s': cannot resolve its absolute path", path);
        free(abs);
        return -HP_EINVAL;
    }
    snprintf(job->config, sizeof(job->config), "%s", abs);
    free(abs);
    return 0;
}

static int load_cluster(const struct hp_options *o, const struct hp_alloc *alloc,
                        struct hp_job *job)
{
    char path[4096], name[64];

    if (alloc) {
        snprintf(name, sizeof(name), "slurm-job-%lu", alloc->jobid);
        return hp_alloc_cluster(alloc, &job->db, name, &job->cl);
    }
    if (!o->cluster) {
        hp_error("no cluster to plan for: give --cluster FILE|NAME (see etc/clusters/)");
        return -HP_EINVAL;
    }
    if (hp_cluster_resolve(o->cluster, path, sizeof(path)))
        return -HP_ENOTFOUND;
    return hp_cluster_load(path, &job->db, &job->cl);
}

/* A model given as a file: the ranks load it by its absolute path, whatever their cwd. */
static int record_model(const char *model, struct hp_plan *plan)
{
    char *abs;

    if (!hp_path_is_file(model))
        return 0;
    abs = realpath(model, NULL);
    if (abs == NULL || strlen(abs) >= sizeof(plan->model)) {
        hp_error("model '%s': cannot resolve its absolute path", model);
        free(abs);
        return -HP_EINVAL;
    }
    snprintf(plan->model, sizeof(plan->model), "%s", abs);
    free(abs);
    return 0;
}

int hp_job_plan(const struct hp_options *o, const struct hp_alloc *alloc, struct hp_job *job)
{
    int rc;

    memset(job, 0, sizeof(*job));
    if ((rc = load_config(o, job)) || (rc = load_cluster(o, alloc, job)) ||
        (rc = hp_model_load(o->model, &job->model)) ||
        (rc = hp_cost_init(&job->cost, job->model, &job->db, (int)o->batch)))
        return rc;
    job->cost.recompute = (enum hp_recompute)o->recompute;
    job->cost.optimizer = (int)o->optimizer;
    if (o->profile && (rc = hp_profile_apply(o->profile, &job->cost, &job->profiled)))
        return rc;
    if ((rc = hp_plan_compute(&job->cost, &job->cl, o, &job->plan)) ||
        (rc = record_model(o->model, &job->plan)))
        return rc;
    return random_token(job->token);
}

int hp_job_load(const struct hp_options *o, const char *path, struct hp_job *job)
{
    int rc;

    memset(job, 0, sizeof(*job));
    if ((rc = load_config(o, job)) ||
        (rc = hp_planfile_load(path, &job->db, &job->plan, &job->cl, job->token)))
        return rc;
    return hp_model_load(job->plan.model, &job->model);
}

/* A rate of samples per second as the model counts them: "12.5 images/s", or for a text
 * model "3.1 samples/s (3174 tokens/s)" (samples of hp_model_positions tokens). */
static void rate_text(const struct hp_model *m, double rate, char *buf, size_t n)
{
    if (hp_model_positions(m) > 1)
        snprintf(buf, n, "%.1f samples/s (%.0f tokens/s)", rate, rate * hp_model_positions(m));
    else
        snprintf(buf, n, "%.1f images/s", rate);
}

static void print_vw(const struct hp_job *job, int v, FILE *f)
{
    const struct hp_vw_plan *vw = &job->plan.vws[v];
    const struct hp_cluster *cl = &job->cl;
    const struct hp_model *m = job->model;
    char rate[96];

    rate_text(m, vw->rate, rate, sizeof(rate));
    fprintf(f, "\nVW %d: %d GPUs, Nm %d, %s (slowest stage %.2f ms)\n", v, vw->nstages, vw->nm,
            rate, 1e3 * vw->bottleneck_s);
    fprintf(f, "  %-5s %-12s %-4s %-10s %-28s %10s %11s %16s  %s\n", "stage", "node", "gpu", "type",
            "units", "compute ms", "transfer ms", "memory GiB used/has", "recompute");
    for (int s = 0; s < vw->nstages; s++) {
        const struct hp_stage_plan *st = &vw->stages[s];
        const struct hp_gpu *g = &cl->gpus[st->gpu];
        char units[64];
        snprintf(units, sizeof(units), "%d-%d %.11s..%.11s", st->u0, st->u1 - 1,
                 m->units[st->u0].name, m->units[st->u1 - 1].name);
        fprintf(f, "  %-5d %-12s %-4d %-10s %-28s %10.2f %11.2f %8.2f / %-6.2f  %s\n", s,
                cl->nodes[g->node].name, g->index, job->db.types[g->type].name, units,
                1e3 * st->compute_s, 1e3 * st->transfer_s, st->memory / 1073741824.0,
                st->capacity / 1073741824.0, st->recompute ? "yes" : "-");
    }
}

void hp_job_print(const struct hp_job *job, FILE *f)
{
    const struct hp_plan *p = &job->plan;
    const struct hp_cluster *cl = &job->cl;

    fprintf(f, "plan: model %s (%d units), cluster %s (%d nodes, %d GPUs), policy %s", p->model,
            job->model->nunits, cl->name, cl->nnodes, cl->ngpus, hp_policy_name(p->opts.policy));
    if (p->opts.policy == HP_POLICY_AUTO)
        fprintf(f, " (chose %s)",
                p->grouping == HP_POLICY_AUTO ? "a speed-balanced grouping"
                                              : hp_policy_name(p->grouping));
    fprintf(f, ", placement %s, staleness %ld, minibatch %ld, recompute %s\n",
            hp_placement_name(p->opts.placement), p->opts.staleness, p->opts.batch,
            hp_recompute_name(p->opts.recompute));
    for (int v = 0; v < p->nvws; v++)
        print_vw(job, v, f);
    if (p->nshards) {
        fprintf(f, "\nPS shards (one per node):");
        for (int s = 0; s < p->nshards; s++) {
            int n = 0;
            for (int u = 0; u < p->nunits; u++)
                n += p->unit_shard[u] == s;
            fprintf(f, "%s %s: %d units", s ? "," : "", cl->nodes[s].name, n);
        }
        fprintf(f,
                "\nnetwork bytes per wave: %.1f MB under default placement, %.1f MB under "
                "local\n",
                p->wave_bytes[0] / 1e6, p->wave_bytes[1] / 1e6);
    } else {
        fprintf(f, "\nallreduce per minibatch: %.2f ms\n", 1e3 * p->allreduce_s);
    }
    char rate[96];
    rate_text(job->model, p->rate, rate, sizeof(rate));
    fprintf(f, "predicted: %s for the job (%d virtual workers, %d ranks)\n", rate, p->nvws,
            p->nranks);
}

void hp_job_release(struct hp_job *job)
{
    hp_plan_release(&job->plan);
    if (job->cost.model)
        hp_cost_release(&job->cost);
    hp_model_destroy(job->model);
    hp_cluster_release(&job->cl);
    hp_gpudb_release(&job->db);
    memset(job, 0, sizeof(*job));
}

/* path, made absolute against the working directory, into out. */
static int absolute(const char *path, char *out, size_t n)
{
    char cwd[4096];

    if (path[0] == '/')
        return snprintf(out, n, "%s", path) >= (int)n ? -1 : 0;
    if (!getcwd(cwd, sizeof(cwd)))
        return -1;
    return snprintf(out, n, "%s/%s", cwd, path) >= (int)n ? -1 : 0;
}

int hp_job_check_checkpoints(const struct hp_options *o, const char *cmd)
{
    if (o->checkpoint_dir)
        return 0;
    if (o->checkpoint_every.samples || o->checkpoint_every.seconds > 0.0) {
        hp_error("%s: option '--checkpoint-every' needs '--checkpoint-dir DIR': where to write "
                 "the checkpoints",
                 cmd);
        return -HP_EINVAL;
    }
    if (o->resume.automatic) {
        hp_error("%s: option '--resume auto' needs '--checkpoint-dir DIR': where to look", cmd);
        return -HP_EINVAL;
    }
    return 0;
}

/* The job's data set, checked against the model before any rank starts (the index only: file
 * names, shard headers); its training samples into *ntrain. */
static int check_data(const struct hp_options *o, const struct hp_job *job, const char *cmd,
                      int *ntrain)
{
    const struct hp_feed_config fc = {.dir = o->data,
                                      .model = job->model,
                                      .mode = HP_FEED_COUNTS | HP_FEED_TEST,
                                      .batch = (int)job->plan.opts.batch,
                                      .nvws = job->plan.nvws,
                                      .train_limit = o->train_limit,
                                      .test_limit = o->test_limit};
    struct hp_feed *f;
    int rc = hp_feed_open(&fc, &f);

    if (rc) {
        hp_error("%s: the job's data set cannot be used (above)", cmd);
        return rc;
    }
    *ntrain = hp_feed_n(f)->ntrain;
    hp_feed_close(f);
    return 0;
}

int hp_job_resume(struct hp_options *o, struct hp_job *job, const char *cmd, char *buf, size_t n)
{
    struct hp_ckpt_info ci;
    char why[1200];
    int ntrain;

    job->resumed_seq = job->resumed_samples = -1;
    if (check_data(o, job, cmd, &ntrain))
        return -HP_EDATA;
    if (hp_job_check_checkpoints(o, cmd))
        return -HP_EINVAL;
    if (o->checkpoint_dir) {
        if (absolute(o->checkpoint_dir, job->ckpt_dir, sizeof(job->ckpt_dir))) {
            hp_error("%s: option '--checkpoint-dir': the path is too long", cmd);
            return -HP_EINVAL;
        }
        o->checkpoint_dir = job->ckpt_dir;
        /* not a file, not another running job's (the reporter rank takes the lock) */
        const int rc = hp_ckpt_parent_check(o->checkpoint_dir, why, sizeof(why));
        if (rc) {
            hp_error("%s: option '--checkpoint-dir': %s: %s", cmd, o->checkpoint_dir, why);
            return rc;
        }
    }
    if (o->resume.automatic) {
        const int rc = hp_ckpt_latest(o->checkpoint_dir, &ci);
        if (rc < 0)
            return rc;
        if (rc > 0) {
            printf("%s: no checkpoint in %s: starting from the beginning\n", cmd,
                   o->checkpoint_dir);
            o->resume = (struct hp_opt_autopath){.path = NULL, .automatic = 0};
            o->given[HP_OPT_RESUME] = 0;
            return 0;
        }
    } else if (!o->resume.path) {
        return 0;
    } else if (hp_ckpt_check(o->resume.path, 1, &ci, why, sizeof(why))) {
        hp_error("%s: option '--resume': %s is not a valid checkpoint: %s", cmd, o->resume.path,
                 why);
        return -HP_EDATA;
    }
    const struct hp_plan *p = &job->plan;
    if (hp_ckpt_compatible(&ci, job->model, (uint64_t)p->opts.seed, p->opts.batch, why,
                           sizeof(why))) {
        hp_error("%s: option '--resume': %s: %s", cmd, ci.dir, why);
        hp_ckpt_info_release(&ci);
        return -HP_EDATA;
    }
    const int same = hp_ckpt_same_data(&ci, ntrain, o->epochs,
                                       !strcmp(hp_opt_word(HP_OPT_SCHEDULE, o->schedule), "cosine"),
                                       why, sizeof(why));
    if (same < 0) {
        hp_error("%s: option '--resume': %s: %s", cmd, ci.dir, why);
        hp_ckpt_info_release(&ci);
        return -HP_EDATA;
    }
    if (same > 0)
        hp_warn("%s: option '--resume': %s: %s", cmd, ci.dir, why);
    if (ci.lr != o->lr || ci.momentum != o->momentum || ci.weight_decay != o->weight_decay ||
        strcmp(ci.schedule, hp_opt_word(HP_OPT_SCHEDULE, o->schedule)))
        hp_warn("%s: %s was taken with --lr %g --momentum %g --weight-decay %g --schedule %s; "
                "this run goes on with --lr %g --momentum %g --weight-decay %g --schedule %s",
                cmd, ci.dir, ci.lr, ci.momentum, ci.weight_decay, ci.schedule, o->lr, o->momentum,
                o->weight_decay, hp_opt_word(HP_OPT_SCHEDULE, o->schedule));
    if (absolute(ci.dir, buf, n)) {
        hp_error("%s: option '--resume': the path is too long", cmd);
        hp_ckpt_info_release(&ci);
        return -HP_EINVAL;
    }
    o->resume = (struct hp_opt_autopath){.path = buf, .automatic = 0};
    job->resumed_seq = ci.seq;
    job->resumed_samples = ci.samples;
    printf("%s: resuming from checkpoint %ld in %s (epoch %ld, %ld samples trained, taken under "
           "%d VWs, %d ranks)\n",
           cmd, ci.seq, ci.dir, ci.epoch + 1, ci.samples, ci.nvws, ci.nranks);
    hp_ckpt_info_release(&ci);
    return 0;
}

int hp_job_local_fits(const struct hp_job *job, long cores, double mem_available, char *why,
                      size_t n)
{
    const struct hp_plan *p = &job->plan;
    const long most = HP_LOCAL_RANKS_PER_CORE * cores > HP_LOCAL_RANKS_MIN
                          ? HP_LOCAL_RANKS_PER_CORE * cores
                          : HP_LOCAL_RANKS_MIN;
    double need = p->nranks * HP_LOCAL_RANK_BYTES + p->nvws * HP_LOCAL_DATA_BYTES;

    if (p->nranks > most) {
        snprintf(why, n,
                 "the plan has %d ranks, more than this machine can hold: at most %ld (max(%d, "
                 "%d x %ld cores): every rank of a local job is a process on this machine's cores)",
                 p->nranks, most, HP_LOCAL_RANKS_MIN, HP_LOCAL_RANKS_PER_CORE, cores);
        return -HP_EINVAL;
    }
    for (int v = 0; v < p->nvws; v++)
        for (int s = 0; s < p->vws[v].nstages; s++)
            need += p->vws[v].stages[s].memory;
    if (p->nshards > 0)
        need += 4.0 * (double)job->model->nparams; /* the shards' global weights */
    if (mem_available > 0 && need > mem_available) {
        snprintf(why, n,
                 "the plan's %d ranks need about %.1f GiB (%.0f MiB of each rank's own, %.0f MiB "
                 "of data per VW, each stage's planned memory), more than the %.1f GiB this "
                 "machine has available (MemAvailable)",
                 p->nranks, need / 1073741824.0, HP_LOCAL_RANK_BYTES / 1048576.0,
                 HP_LOCAL_DATA_BYTES / 1048576.0, mem_available / 1073741824.0);
        return -HP_ENOMEM;
    }
    return 0;
}

/* Whole-model forward + backward seconds per minibatch on this CPU: the fastest of 5 steps
 * after a warm-up (the fastest is the least disturbed by other load on a shared machine). */
static double cpu_step_seconds(const struct hp_model *m, int batch)
{
    struct hp_backend *be = NULL;
    struct hp_net *net = NULL;
    const struct hp_net_config cfg = {.batch = batch, .nslots = 1, .need_input_grad = 0};
    double best = 0.0;

    if (hp_backend_cpu_create(&be) || hp_net_create(be, m, 0, m->nunits, &cfg, &net) ||
        hp_net_init_params(net, 1)) {
        hp_net_destroy(net);
        hp_backend_destroy(be);
        return 0.0;
    }
    for (int s = 0; s < 6; s++) {
        const double t0 = hp_now_s();
        hp_net_forward(net, 0, 1, (uint64_t)s);
        hp_net_backward(net, 0);
        const double t = hp_now_s() - t0;
        if (s > 0 && (best == 0.0 || t < best))
            best = t;
    }
    hp_net_destroy(net);
    hp_backend_destroy(be);
    return best;
}

double hp_job_emulation(const struct hp_job *job, double emulate)
{
    const struct hp_plan *p = &job->plan;
    const int workers = hp_plan_first_shard(p);
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double gpu = 0.0;

    if (emulate >= 0.0)
        return emulate;
    for (int s = 0; s < p->vws[0].nstages; s++)
        gpu += p->vws[0].stages[s].compute_s;
    const double cpu = cpu_step_seconds(job->model, p->opts.batch);
    const double margin = 2.0 * (workers > ncpu && ncpu > 0 ? (double)workers / ncpu : 1.0);
    const double S = gpu > 0.0 && cpu > 0.0 ? margin * cpu / gpu : 0.0;
    printf("emulation: whole model %.2f ms per minibatch on this CPU, %.3f ms on the planned "
           "GPUs: scale %.0f (emulated time = %.0f x the GPUs')\n",
           1e3 * cpu, 1e3 * gpu, S, S);
    return S;
}
