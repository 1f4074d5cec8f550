/* rank.c - hetpipe-rank: one process of a job. Reads the plan, finds its role from its rank,
 * bootstraps the transport (PMIx under srun --mpi=pmix, address files under hetpipe run
 * --local), and runs its pipeline stage (runtime/pipeline.h).
 *
 *   hetpipe-rank --plan FILE [--rank R --boot-dir DIR] [training options]
 *
 * The rank comes from PMIx when a PMIx server started the process, else from --rank (or
 * $HETPIPE_RANK). Exit status 0 on success, 1 on any failure (logged, naming the cause).
 */
#include "binding.h"
#include "bootstrap.h"
#include "backend.h"
#include "comm.h"
#include "error.h"
#include "gpudb.h"
#include "ini.h"
#include "log.h"
#include "parse.h"
#include "model.h"
#include "pipeline.h"
#include "plan.h"
#include "planfile.h"
#include "ps.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: hetpipe-rank --plan FILE [--rank R --boot-dir DIR] [options]\n"
        "  --plan FILE        the job's plan file (hetpipe plan --out, hetpipe run)\n"
        "  --rank R           this process's rank (default $HETPIPE_RANK; from PMIx under srun)\n"
        "  --boot-dir DIR     private directory (mode 0700) for the address files\n"
        "  --config FILE      site config with the GPU database\n"
        "  --device D         cpu (default), cuda or auto\n"
        "  --epochs N --lr X --momentum X --weight-decay X --schedule cosine|constant\n"
        "  --train-limit N --test-limit N --log-every N --data DIR --threads N\n"
        "  --emulate S        pad compute and transfers to S x the cost model's time (0: off)\n"
        "  --timeout SEC      how long to wait for a peer (default 60)\n"
        "  --metrics FILE --step-log FILE --weight-log PREFIX --stats FILE --trace PREFIX\n"
        "  --save-params PREFIX  write this rank's parameters (float32) to PREFIX.<rank>\n"
        "  --eval-every N     also evaluate about every N training samples of the job\n"
        "  --stop-at P        stop after the first evaluation with test accuracy >= P %%\n"
        "  --no-stash         debug: backward passes use the current weights\n");
}

/* The shutdown watchdog. Once a rank's work is over (done or failed), closing its connections
 * and PMIx_Finalize must not keep it alive: a rank that lingers holds its job's allocation
 * until Slurm's time limit. Each connection closes within 2 x CLOSE_TIMEOUT_MS (comm.c), so
 * the bound allows 4 s a peer and at least 60 s; past it the rank says which phase did not
 * end and exits with its work's status. The messages are built before the alarm is set: the
 * handler only write()s and _exit()s (async-signal-safe). */
static char wd_msg[2][256];
static int wd_len[2];
static volatile sig_atomic_t wd_phase, wd_status;

static void wd_expired(int sig)
{
    ssize_t n = write(STDERR_FILENO, wd_msg[wd_phase], (size_t)wd_len[wd_phase]);
    (void)sig;
    (void)n;
    _exit(wd_status);
}

static void wd_arm(long rank, int nranks, int status)
{
    static const char *const phase[2] = {"closing its connections", "PMIx_Finalize"};
    const unsigned s = nranks * 4 > 60 ? (unsigned)nranks * 4 : 60;
    struct sigaction sa = {0};

    for (int i = 0; i < 2; i++) {
        int n = snprintf(wd_msg[i], sizeof(wd_msg[i]),
                         "hetpipe-rank: error: rank %ld: shutdown stuck in %s for %u s; exiting "
                         "(status %d)\n",
                         rank, phase[i], s, status);
        wd_len[i] = n < 0 ? 0 : n >= (int)sizeof(wd_msg[i]) ? (int)sizeof(wd_msg[i]) - 1 : n;
    }
    wd_phase = 0;
    wd_status = status;
    sa.sa_handler = wd_expired;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(s);
}

static int num(const char *opt, const char *v, double min, double max, double *out)
{
    if (hp_parse_double(v, min, max, out)) {
        hp_error("option '--%s': '%s' is not a number in %g..%g", opt, v, min, max);
        return -HP_EINVAL;
    }
    return 0;
}

/* Under Slurm: check what the plan gives rank `rank` against what this task has, and bind its
 * GPU. The SPANK plugin binds in slurmstepd (HETPIPE_BOUND, or HETPIPE_BIND_ERROR with why
 * not); without the plugin the rank binds itself from SLURM_STEP_GPUS. `b` is this task's
 * binding entry (NULL without a binding file). A mismatch is an error naming both sides. */
static int check_placement(const struct hp_plan *p, const struct hp_cluster *cl,
                           const struct hp_gpudb *db, int rank, const struct hp_binding *b)
{
    const char *here = getenv("SLURMD_NODENAME"), *step = getenv("SLURM_STEP_GPUS");
    const char *bound = getenv("HETPIPE_BOUND");
    const struct hp_gpu *g = NULL;
    char role[160], dev[64], why[1200];
    int v, s;

    hp_plan_describe_rank(p, cl, db, rank, role, sizeof(role));
    if (hp_plan_rank_stage(p, rank, &v, &s) == 0)
        g = &cl->gpus[p->vws[v].stages[s].gpu];
    if (b && g && (strcasecmp(b->node, cl->nodes[g->node].name) != 0 || b->device != g->index)) {
        hp_error("rank %d (%s): the binding file puts it on GPU %d of %s, but the plan on GPU %d "
                 "of %s: plan and binding are from different launches",
                 rank, role, b->device, b->node, g->index, cl->nodes[g->node].name);
        return -HP_ECONFIG;
    }
    if (b && here && strcmp(b->node, here) != 0) {
        hp_error("rank %d (%s) is planned on node %s, but Slurm started it on %s: the step's "
                 "task layout does not match the plan",
                 rank, role, b->node, here);
        return -HP_ECONFIG;
    }
    if (!g || !getenv("SLURM_STEP_ID"))
        return 0; /* a PS shard, or not under Slurm (hetpipe run --local emulates GPUs) */
    const char *node = cl->nodes[g->node].name;
    if (bound && strcmp(bound, "1") == 0) {
        const char *gpu = getenv("HETPIPE_GPU");
        if (!gpu || hp_list_find(gpu, g->index) != 0) {
            hp_error("rank %d (%s) is planned on GPU %d of %s, but the plugin bound it to GPU "
                     "'%s'",
                     rank, role, g->index, node, gpu ? gpu : "(none)");
            return -HP_ECONFIG;
        }
        return 0;
    }
    if (hp_binding_visible_device(step, getenv("CUDA_VISIBLE_DEVICES"), g->index, dev,
                                  sizeof(dev), why, sizeof(why))) {
        hp_error("rank %d (%s) is planned on GPU %d of %s, but %s on %s: the plan does not "
                 "match the allocation (plan inside the allocation with hetpipe launch, or ask "
                 "Slurm for those GPUs)",
                 rank, role, g->index, node, why, here ? here : node);
        return -HP_ECONFIG;
    }
    setenv("CUDA_VISIBLE_DEVICES", dev, 1);
    return 0;
}

int main(int argc, char **argv)
{
    enum {
        O_PLAN = 256,
        O_RANK,
        O_BOOT,
        O_CONFIG,
        O_DEVICE,
        O_EPOCHS,
        O_LR,
        O_MOM,
        O_WD,
        O_SCHED,
        O_TRL,
        O_TEL,
        O_LOG,
        O_DATA,
        O_THREADS,
        O_EMU,
        O_TIMEOUT,
        O_METRICS,
        O_STEPLOG,
        O_WLOG,
        O_STATS,
        O_TRACE,
        O_SAVE,
        O_EVERY,
        O_STOPAT,
        O_NOSTASH
    };
    static const struct option opts[] = {
        {"plan", required_argument, 0, O_PLAN},
        {"rank", required_argument, 0, O_RANK},
        {"boot-dir", required_argument, 0, O_BOOT},
        {"config", required_argument, 0, O_CONFIG},
        {"device", required_argument, 0, O_DEVICE},
        {"epochs", required_argument, 0, O_EPOCHS},
        {"lr", required_argument, 0, O_LR},
        {"momentum", required_argument, 0, O_MOM},
        {"weight-decay", required_argument, 0, O_WD},
        {"schedule", required_argument, 0, O_SCHED},
        {"train-limit", required_argument, 0, O_TRL},
        {"test-limit", required_argument, 0, O_TEL},
        {"log-every", required_argument, 0, O_LOG},
        {"data", required_argument, 0, O_DATA},
        {"threads", required_argument, 0, O_THREADS},
        {"emulate", required_argument, 0, O_EMU},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"metrics", required_argument, 0, O_METRICS},
        {"step-log", required_argument, 0, O_STEPLOG},
        {"weight-log", required_argument, 0, O_WLOG},
        {"stats", required_argument, 0, O_STATS},
        {"trace", required_argument, 0, O_TRACE},
        {"save-params", required_argument, 0, O_SAVE},
        {"eval-every", required_argument, 0, O_EVERY},
        {"stop-at", required_argument, 0, O_STOPAT},
        {"no-stash", no_argument, 0, O_NOSTASH},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    struct hp_worker_opts o;
    const char *plan_path = NULL, *boot_dir = getenv("HETPIPE_BOOT_DIR"), *config = NULL;
    const char *rank_env = getenv("HETPIPE_RANK");
    long rank = -1;
    double x;
    int c, rc = 0;

    hp_worker_opts_init(&o);
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1 && !rc) {
        switch (c) {
        case O_PLAN:
            plan_path = optarg;
            break;
        case O_RANK:
            if (hp_parse_long(optarg, 0, 1 << 20, &rank)) {
                hp_error("option '--rank': '%s' is not a rank 0..%d", optarg, 1 << 20);
                rc = -HP_EINVAL;
            }
            break;
        case O_BOOT:
            boot_dir = optarg;
            break;
        case O_CONFIG:
            config = optarg;
            break;
        case O_DEVICE:
            if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda") && strcmp(optarg, "auto")) {
                hp_error("option '--device': unknown device '%s' (allowed: cpu, cuda, auto)",
                         optarg);
                rc = -HP_EINVAL;
            }
            o.device = optarg;
            break;
        case O_EPOCHS:
            if (!(rc = num("epochs", optarg, 1, 10000, &x)))
                o.epochs = (int)x;
            break;
        case O_LR:
            if (!(rc = num("lr", optarg, 1e-8, 10, &x)))
                o.lr = (float)x;
            break;
        case O_MOM:
            if (!(rc = num("momentum", optarg, 0, 0.999, &x)))
                o.momentum = (float)x;
            break;
        case O_WD:
            if (!(rc = num("weight-decay", optarg, 0, 1, &x)))
                o.weight_decay = (float)x;
            break;
        case O_SCHED:
            if (strcmp(optarg, "cosine") == 0 || strcmp(optarg, "constant") == 0)
                o.cosine = strcmp(optarg, "cosine") == 0;
            else {
                hp_error("option '--schedule': unknown schedule '%s' (allowed: cosine, constant)",
                         optarg);
                rc = -HP_EINVAL;
            }
            break;
        case O_TRL:
            if (!(rc = num("train-limit", optarg, 0, 60000, &x)))
                o.train_limit = (int)x;
            break;
        case O_TEL:
            if (!(rc = num("test-limit", optarg, 0, 10000, &x)))
                o.test_limit = (int)x;
            break;
        case O_LOG:
            if (!(rc = num("log-every", optarg, 0, 1e9, &x)))
                o.log_every = (int)x;
            break;
        case O_DATA:
            o.data_dir = optarg;
            break;
        case O_THREADS:
            if (!(rc = num("threads", optarg, 1, 1024, &x)))
                hp_backend_cpu_set_threads((int)x);
            break;
        case O_EMU:
            if (!(rc = num("emulate", optarg, 0, 1e9, &x)))
                o.emulate = x;
            break;
        case O_TIMEOUT:
            if (!(rc = num("timeout", optarg, 0.1, 86400, &x)))
                o.timeout_ms = (int)(x * 1000.0);
            break;
        case O_METRICS:
            o.metrics = optarg;
            break;
        case O_STEPLOG:
            o.step_log = optarg;
            break;
        case O_WLOG:
            o.weight_log = optarg;
            break;
        case O_STATS:
            o.stats = optarg;
            break;
        case O_TRACE:
            o.trace = optarg;
            break;
        case O_SAVE:
            o.save_params = optarg;
            break;
        case O_EVERY:
            if (!(rc = num("eval-every", optarg, 0, 1e9, &x)))
                o.eval_every = (long)x;
            break;
        case O_STOPAT:
            rc = num("stop-at", optarg, 0, 100, &o.stop_at);
            break;
        case O_NOSTASH:
            o.no_stash = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (rc)
        return 2;
    if (optind < argc) {
        hp_error("unexpected argument '%s' (see hetpipe-rank --help)", argv[optind]);
        return 2;
    }
    if (!plan_path) {
        hp_error(
            "option '--plan' is required (a plan file from hetpipe plan --out or hetpipe run)");
        return 2;
    }
    /* started by hetpipe run --local: die with the launcher */
    if (getenv("HETPIPE_PARENT")) {
        long parent;
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (!hp_parse_long(getenv("HETPIPE_PARENT"), 1, 1L << 30, &parent) &&
            getppid() != (pid_t)parent)
            return 1;
    }

    struct hp_gpudb db = {0};
    struct hp_plan plan = {0};
    struct hp_cluster cl = {0};
    struct hp_model *model = NULL;
    struct hp_boot *boot = NULL;
    struct hp_comm *comm = NULL;
    struct hp_worker_result res;
    struct hp_binding *binding = NULL, *mine = NULL;
    const char *binding_path = getenv("HETPIPE_BINDING");
    char token_hex[33] = {0};
    uint8_t token[HP_MSG_TOKEN_LEN];

    char confpath[4096];
    if (!config) {
        rc = hp_gpudb_default_path(confpath, sizeof(confpath));
        config = confpath;
    }
    if (!rc)
        rc = hp_gpudb_load(config, &db);
    if (!rc)
        rc = hp_planfile_load(plan_path, &db, &plan, &cl, token_hex);
    if (!rc)
        rc = hp_model_load(plan.model, &model);
    if (rc)
        goto out;
    for (int i = 0; i < HP_MSG_TOKEN_LEN; i++) {
        unsigned byte;
        if (sscanf(token_hex + 2 * i, "%2x", &byte) != 1) {
            hp_error("%s: the token is not 32 hexadecimal digits", plan_path);
            rc = -HP_ECONFIG;
            goto out;
        }
        token[i] = (uint8_t)byte;
    }
    if (hp_boot_pmix_present()) {
        rc = hp_boot_pmix_open(&boot);
    } else {
        if (rank < 0 && rank_env && hp_parse_long(rank_env, 0, 1 << 20, &rank)) {
            hp_error("HETPIPE_RANK='%s' is not a rank", rank_env);
            rc = -HP_EINVAL;
        } else if (rank < 0 || !boot_dir) {
            hp_error("not started by a PMIx server (srun --mpi=pmix), so --rank (or "
                     "$HETPIPE_RANK) and --boot-dir (or $HETPIPE_BOOT_DIR) are required");
            rc = -HP_EINVAL;
        } else if (rank >= plan.nranks) {
            hp_error("rank %ld is out of range: the plan has %d ranks", rank, plan.nranks);
            rc = -HP_EINVAL;
        } else {
            rc = hp_boot_local_open(boot_dir, (int)rank, plan.nranks, &boot);
        }
    }
    if (rc)
        goto out;
    if (getenv("HETPIPE_BIND_ERROR")) {
        hp_error("%s", getenv("HETPIPE_BIND_ERROR"));
        rc = -HP_ECONFIG;
        goto out;
    }
    if (binding_path) {
        /* tasks of a step started by hetpipe launch: the binding file says which rank each
         * task runs (a hetjob groups tasks by component, not in rank order) */
        int *rank_of = NULL;
        if ((rc = hp_plan_binding_load(&plan, binding_path, &binding, &rank_of)))
            goto out;
        if (hp_boot_size(boot) != plan.nranks) {
            hp_error("the step has %d tasks but binding file %s has %d", hp_boot_size(boot),
                     binding_path, plan.nranks);
            free(rank_of);
            rc = -HP_ECONFIG;
            goto out;
        }
        mine = &binding[hp_boot_rank(boot)];
        rc = hp_boot_set_ranks(boot, rank_of);
        free(rank_of);
        if (rc)
            goto out;
    }
    rank = hp_boot_rank(boot);
    if (hp_boot_size(boot) != plan.nranks) {
        hp_error("the job has %d ranks but plan %s has %d", hp_boot_size(boot), plan_path,
                 plan.nranks);
        rc = -HP_ECONFIG;
        goto out;
    }
    if ((rc = check_placement(&plan, &cl, &db, (int)rank, mine)))
        goto out;
    rc = hp_comm_create((int)rank, plan.nranks, token, &comm);
    if (!rc)
        rc = hp_boot_wireup(boot, comm, o.timeout_ms);
    if (rc)
        goto out;
    if (rank >= plan.nranks - plan.nshards)
        rc = hp_ps_run(&plan, &cl, model, (int)rank, comm, &o);
    else
        rc = hp_worker_run(&plan, &cl, &db, model, (int)rank, comm, &o, &res);
out:
    free(binding);
    if (comm || boot)
        wd_arm(rank, plan.nranks, rc ? 1 : 0);
    hp_comm_destroy(comm);
    wd_phase = 1;
    hp_boot_close(boot);
    alarm(0);
    hp_model_destroy(model);
    hp_plan_release(&plan);
    hp_cluster_release(&cl);
    hp_gpudb_release(&db);
    if (rc && rc != -HP_EINVAL && rank >= 0)
        hp_error("rank %ld failed: %s", rank, hp_strerror(rc));
    else if (rc && rc != -HP_EINVAL)
        hp_error("hetpipe-rank failed before it knew its rank: %s", hp_strerror(rc));
    return rc ? 1 : 0;
}
