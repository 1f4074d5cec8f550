/* rank.c - hetpipe-rank: one process of a job. Reads the plan, finds its role from its rank,
 * bootstraps the transport (PMIx under srun --mpi=pmix, address files under hetpipe run
 * --local), and runs its worker stage (runtime/worker.h) or parameter-server shard
 * (runtime/ps_shard.h).
 *
 *   hetpipe-rank --plan FILE [--rank R --boot-dir DIR] [training options]
 *   hetpipe-rank --self-check
 *
 * The rank comes from PMIx when a PMIx server started the process, else from --rank (or
 * $HETPIPE_RANK). Options and variables come from the table of record (common/options.h);
 * the plan's own (batch, staleness, seed, ...) from the plan file. Exit status 0 on success, 1 on
 * any failure (logged, naming the cause), 2 for a bad command line.
 *
 * --self-check needs no plan: it prints what this program reaches, as "key = value" lines
 * that hetpipe doctor reads (launcher/cmd_doctor.c): UCX (comm.c), PMIx (bootstrap.c) and the
 * CUDA backend module (backend_module.c). Exit 0, or 1 when UCX cannot make a context.
 */
#include "backend.h"
#include "backend_module.h"
#include "binding.h"
#include "bootstrap.h"
#include "ckpt.h"
#include "ckptlock.h"
#include "cli.h"
#include "comm.h"
#include "error.h"
#include "gpudb.h"
#include "log.h"
#include "model.h"
#include "options.h"
#include "emulate.h"
#include "plan.h"
#include "planfile.h"
#include "process.h"
#include "ps_shard.h"
#include "timeline.h"
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static const char synopsis[] =
    "usage: hetpipe-rank --plan FILE [--rank R --boot-dir DIR] [options]\n"
    "       hetpipe-rank --self-check\n"
    "One rank of a job (hetpipe run --local and hetpipe launch start them): a pipeline stage of\n"
    "a virtual worker, or a parameter-server shard, as the plan gives its rank.\n";

/* The shutdown watchdog. Once a rank's work is over (done or failed), closing its connections
 * and PMIx_Finalize must not keep it alive: a rank that lingers holds its job's allocation
 * until Slurm's time limit. Each connection closes within 2 x CLOSE_TIMEOUT_MS (comm.c), so
 * the bound allows 4 s a peer and at least 60 s; past it the rank says which phase did not
 * end and exits with its work's status (under hetpipe launch also as its exit record, so that
 * launch does not take it for a rank killed without one). The messages are built before the
 * alarm is set: the handler only open()s, write()s and _exit()s (async-signal-safe). */
static char wd_msg[2][256], wd_record[32];
static int wd_len[2];
static volatile sig_atomic_t wd_phase, wd_status;
static char exit_path[4200]; /* under hetpipe launch: RUN_DIR/rank-R.exit (record_signals) */

/* Write `text` as this rank's exit record, if none is there (async-signal-safe). */
static void write_record(const char *text)
{
    if (!exit_path[0])
        return;
    const int fd = open(exit_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
        ssize_t n = write(fd, text, strlen(text));
        (void)n;
        close(fd);
    }
}

static void wd_expired(int sig)
{
    ssize_t n = write(STDERR_FILENO, wd_msg[wd_phase], (size_t)wd_len[wd_phase]);
    (void)sig;
    (void)n;
    write_record(wd_record); /* hetpipe launch: it ended, with its work's status */
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
    snprintf(wd_record, sizeof(wd_record), "%d\n", status);
    wd_phase = 0;
    wd_status = status;
    sa.sa_handler = wd_expired;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(s);
}

/* Under hetpipe launch, a rank that a signal kills records it first (process.h: "128+N",
 * "signal N" in RUN_DIR/rank-R.exit), so that launch can tell how it ended: SIGKILL alone (and
 * a lost node) leaves no record. The record's path and texts are made before the handlers are
 * set: the handler only open()s, write()s and raise()s (async-signal-safe). SIGTERM and SIGUSR1
 * stay the checkpoints' when they are on (ckpt.h). */
static const int fatal_sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT,
                                 SIGSEGV, SIGBUS, SIGFPE, SIGILL,  SIGUSR2};
static char exit_text[sizeof(fatal_sigs) / sizeof(fatal_sigs[0])][32];

static void on_fatal(int sig)
{
    for (size_t i = 0; i < sizeof(fatal_sigs) / sizeof(fatal_sigs[0]); i++)
        if (fatal_sigs[i] == sig)
            write_record(exit_text[i]);
    raise(sig); /* SA_RESETHAND: the default action, as if no handler had run */
}

static void record_signals(const struct hp_options *o, long rank)
{
    struct sigaction sa = {0};
    const int w = snprintf(exit_path, sizeof(exit_path), "%s/rank-%ld.exit", o->run_dir, rank);

    if (w < 0 || (size_t)w >= sizeof(exit_path)) {
        exit_path[0] = '\0';
        return;
    }
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(fatal_sigs) / sizeof(fatal_sigs[0]); i++) {
        const int sig = fatal_sigs[i];
        struct sigaction old;
        snprintf(exit_text[i], sizeof(exit_text[i]), "%d\nsignal %d\n", 128 + sig, sig);
        /* a signal the checkpoints handle, or one ignored, keeps its handling */
        if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_DFL)
            sigaction(sig, &sa, NULL);
    }
}

/* Under hetpipe launch: the heartbeat (process.h), rewritten every HP_BEAT_S by a thread of its
 * own with every signal blocked, for as long as the process runs. */
static char beat_path[4200];

static void *heartbeat(void *arg)
{
    (void)arg;
    for (unsigned long n = 1;; n++) {
        const struct timespec ts = {.tv_sec = (time_t)HP_BEAT_S,
                                    .tv_nsec = (long)((HP_BEAT_S - (time_t)HP_BEAT_S) * 1e9)};
        nanosleep(&ts, NULL);
        if (hp_rank_beat(beat_path, n))
            return NULL; /* the run directory is gone: the job is over */
    }
}

static void start_heartbeat(const struct hp_options *o, long rank)
{
    sigset_t all, old;
    pthread_t t;

    if (hp_rank_beat_create(o->run_dir, (int)rank, beat_path, sizeof(beat_path))) {
        hp_warn("rank %ld: no heartbeat in %s (hetpipe launch cannot tell whether it is "
                "silent): %s",
                rank, o->run_dir, strerror(errno));
        return;
    }
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&t, NULL, heartbeat, NULL) == 0)
        pthread_detach(t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Under Slurm: check what the plan gives rank `rank` against what this task has, and bind its
 * GPU. The SPANK plugin binds in slurmstepd (o->bound and o->gpu from HETPIPE_BOUND and
 * HETPIPE_GPU, or HETPIPE_BIND_ERROR with why not); without the plugin the rank binds itself
 * from SLURM_STEP_GPUS. `b` is this task's binding entry (NULL without a binding file). A
 * mismatch is an error naming both sides. */
static int check_placement(const struct hp_plan *p, const struct hp_cluster *cl,
                           const struct hp_gpudb *db, const struct hp_options *o, int rank,
                           const struct hp_binding *b)
{
    const char *here = getenv("SLURMD_NODENAME"), *step = getenv("SLURM_STEP_GPUS");
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
    if (o->bound) {
        if (!o->given[HP_OPT_GPU] || o->gpu != g->index) {
            snprintf(dev, sizeof(dev), "%ld", o->gpu);
            hp_error("rank %d (%s) is planned on GPU %d of %s, but the plugin bound it to GPU "
                     "'%s'",
                     rank, role, g->index, node, o->given[HP_OPT_GPU] ? dev : "(none)");
            return -HP_ECONFIG;
        }
        return 0;
    }
    if (hp_binding_visible_device(step, getenv("CUDA_VISIBLE_DEVICES"), g->index, dev, sizeof(dev),
                                  why, sizeof(why))) {
        hp_error("rank %d (%s) is planned on GPU %d of %s, but %s on %s: the plan does not "
                 "match the allocation (plan inside the allocation with hetpipe launch, or ask "
                 "Slurm for those GPUs)",
                 rank, role, g->index, node, why, here ? here : node);
        return -HP_ECONFIG;
    }
    setenv("CUDA_VISIBLE_DEVICES", dev, 1);
    return 0;
}

/* What one rank holds; released by rank_release. */
struct rank {
    struct hp_options o;
    struct hp_gpudb db;
    struct hp_plan plan;
    struct hp_cluster cl;
    struct hp_model *model;
    struct hp_boot *boot;
    struct hp_comm *comm;
    struct hp_binding *binding; /* by task, NULL without a binding file */
    uint8_t token[HP_MSG_TOKEN_LEN];
    long rank;
    int stopped; /* checkpointed and stopped on request */
    struct hp_rank_exit exit; /* what RUN_DIR/rank-R.exit says under hetpipe launch */
};

/* The site config, the plan (with the cluster it names) and the model; the job token. */
static int load_plan(struct rank *r)
{
    char confpath[4096], hex[33] = {0};
    const char *config = r->o.config;
    int rc = 0;

    if (!config) {
        rc = hp_gpudb_default_path(confpath, sizeof(confpath));
        config = confpath;
    }
    if (rc || (rc = hp_gpudb_load(config, &r->db)) ||
        (rc = hp_planfile_load(r->o.plan, &r->db, &r->plan, &r->cl, hex)) ||
        (rc = hp_model_load(r->plan.model, &r->model)))
        return rc;
    if (r->model->nunits != r->plan.nunits) {
        hp_error("%s: the plan has %d units, but model '%s' has %d: plan and model do not "
                 "match (re-run hetpipe plan)",
                 r->o.plan, r->plan.nunits, r->plan.model, r->model->nunits);
        return -HP_ECONFIG;
    }
    for (int i = 0; i < HP_MSG_TOKEN_LEN; i++) {
        unsigned byte;
        if (sscanf(hex + 2 * i, "%2x", &byte) != 1) {
            hp_error("%s: the token is not 32 hexadecimal digits", r->o.plan);
            return -HP_ECONFIG;
        }
        r->token[i] = (uint8_t)byte;
    }
    return 0;
}

/* PMIx under srun, else the address files of hetpipe run --local (--rank, --boot-dir, or
 * their variables). */
static int bootstrap(struct rank *r)
{
    if (hp_boot_pmix_present())
        return hp_boot_pmix_open(&r->boot);
    if (r->rank < 0 || !r->o.boot_dir) {
        hp_error("not started by a PMIx server (srun --mpi=pmix), so --rank (or $HETPIPE_RANK) "
                 "and --boot-dir (or $HETPIPE_BOOT_DIR) are required");
        return -HP_EINVAL;
    }
    if (r->rank >= r->plan.nranks) {
        hp_error("rank %ld is out of range: the plan has %d ranks", r->rank, r->plan.nranks);
        return -HP_EINVAL;
    }
    return hp_boot_local_open(r->o.boot_dir, (int)r->rank, r->plan.nranks, &r->boot);
}

/* Tasks of a step started by hetpipe launch: the binding file says which rank each task runs
 * (a hetjob groups tasks by component, not in rank order); then this task's placement. */
static int bind_rank(struct rank *r)
{
    const char *path = r->o.binding;
    const struct hp_binding *mine = NULL;
    int *rank_of = NULL, rc;

    if (r->o.bind_error) {
        hp_error("%s", r->o.bind_error);
        return -HP_ECONFIG;
    }
    if (path) {
        if ((rc = hp_plan_binding_load(&r->plan, path, &r->binding, &rank_of)))
            return rc;
        if (hp_boot_size(r->boot) != r->plan.nranks) {
            hp_error("the step has %d tasks but binding file %s has %d", hp_boot_size(r->boot),
                     path, r->plan.nranks);
            free(rank_of);
            return -HP_ECONFIG;
        }
        mine = &r->binding[hp_boot_rank(r->boot)];
        rc = hp_boot_set_ranks(r->boot, rank_of);
        free(rank_of);
        if (rc)
            return rc;
    }
    r->rank = hp_boot_rank(r->boot);
    if (hp_boot_size(r->boot) != r->plan.nranks) {
        hp_error("the job has %d ranks but plan %s has %d", hp_boot_size(r->boot), r->o.plan,
                 r->plan.nranks);
        return -HP_ECONFIG;
    }
    return check_placement(&r->plan, &r->cl, &r->db, &r->o, (int)r->rank, mine);
}

/* The reporter (stage 0 of VW 0), which writes the manifests and prunes: the lock and the
 * job's name on --checkpoint-dir (ckptlock.h), held until this process ends. */
static int own_checkpoints(const struct rank *r)
{
    char why[1200];
    int rc;

    if (!r->o.checkpoint_dir || r->rank != hp_plan_stage_rank(&r->plan, 0, 0))
        return 0;
    rc = hp_ckpt_parent_lock(r->o.checkpoint_dir, (int)(r->o.timeout * 1000.0), why, sizeof(why));
    if (rc)
        hp_error("option '--checkpoint-dir': %s: %s", r->o.checkpoint_dir, why);
    return rc;
}

static int run_role(struct rank *r)
{
    struct hp_worker_result res;
    const int timeout_ms = (int)(r->o.timeout * 1000.0);
    int rc = hp_comm_create((int)r->rank, r->plan.nranks, r->token, &r->comm);

    /* a peer on this host seen stopped (SIGSTOP) fails after HP_STOP_LIMIT_S (process.h), or
     * --timeout when shorter */
    if (!rc)
        hp_comm_set_stop_limit(r->comm, timeout_ms < HP_STOP_LIMIT_S * 1000.0
                                            ? timeout_ms
                                            : (int)(HP_STOP_LIMIT_S * 1000.0));
    if (!rc)
        rc = hp_boot_wireup(r->boot, r->comm, timeout_ms);
    if (r->o.verbose)
        hp_log_set_level(HP_LOG_DEBUG);
    if (!rc && r->o.timeline)
        rc = hp_tl_sync_clock(r->comm, (int)r->rank, r->plan.nranks, timeout_ms);
    if (rc)
        return rc;
    if (r->rank >= hp_plan_first_shard(&r->plan)) {
        return hp_ps_run(&r->plan, &r->cl, &r->db, r->model, (int)r->rank, r->comm, &r->o,
                         hp_plan_wait_ms(&r->plan, &r->o, r->model->nparams + r->model->nstate),
                         &r->stopped);
    }
    rc = hp_worker_run(&r->plan, &r->cl, &r->db, r->model, (int)r->rank, r->comm, &r->o, &res);
    r->stopped = !rc && res.stopped;
    return rc;
}

/* Close the connections and PMIx under the watchdog, free everything, report a failure (and
 * the peer it came from: role, node, GPU, cause). */
static int rank_release(struct rank *r, int rc)
{
    char why[128], me[256], them[256];
    const int blame = rc && r->comm ? hp_comm_blame(r->comm, why, sizeof(why)) : -1;

    r->exit.blame = blame;
    if (blame >= 0)
        snprintf(r->exit.why, sizeof(r->exit.why), "%s", why);
    if (blame >= 0 && r->rank >= 0) {
        hp_plan_describe_rank(&r->plan, &r->cl, &r->db, (int)r->rank, me, sizeof(me));
        hp_plan_describe_rank(&r->plan, &r->cl, &r->db, blame, them, sizeof(them));
        hp_error("rank %ld (%s) stops because rank %d (%s) is %s", r->rank, me, blame, them, why);
    }
    free(r->binding);
    if (r->comm || r->boot)
        wd_arm(r->rank, r->plan.nranks, rc ? 1 : 0);
    hp_comm_destroy(r->comm);
    wd_phase = 1;
    hp_boot_close(r->boot);
    alarm(0);
    hp_model_destroy(r->model);
    hp_plan_release(&r->plan);
    hp_cluster_release(&r->cl);
    hp_gpudb_release(&r->db);
    if (rc && rc != -HP_EINVAL && r->rank >= 0)
        hp_error("rank %ld failed: %s", r->rank, hp_strerror(rc));
    else if (rc && rc != -HP_EINVAL)
        hp_error("hetpipe-rank failed before it knew its rank: %s", hp_strerror(rc));
    return rc ? 1 : r->stopped ? HP_CKPT_EXIT : 0;
}

/* What hetpipe run, hetpipe launch and the plugin tell a rank in its environment, each through
 * its row (HETPIPE_PARENT, HETPIPE_BINDING, HETPIPE_BIND_ERROR, HETPIPE_BOUND, HETPIPE_GPU):
 * into o, checked; 0, or -1 logged naming the variable. */
static int read_variables(struct hp_options *o)
{
    static const enum hp_opt vars[] = {HP_OPT_PARENT, HP_OPT_BINDING, HP_OPT_BIND_ERROR,
                                       HP_OPT_BOUND,  HP_OPT_GPU,     HP_OPT_RUN_DIR};
    char err[1200];

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (hp_opt_env(o, vars[i], err, sizeof(err)) < 0) {
            hp_error("%s", err);
            return -1;
        }
    return 0;
}

/* The command line; 0 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct rank *r)
{
    int rest, rc;

    hp_options_init(&r->o, HP_CMD_RANK);
    rc = hp_cli_parse(HP_CMD_RANK, synopsis, argc, argv, &r->o, &rest);
    if (rc)
        return rc > 0 ? 0 : 2;
    if (hp_cli_from_env(&r->o, HP_CMD_RANK) || read_variables(&r->o))
        return 2;
    if (rest < argc) {
        hp_error("unexpected argument '%s' (see hetpipe-rank --help)", argv[rest]);
        return 2;
    }
    if (r->o.self_check)
        return -1;
    if (!r->o.plan) {
        hp_error("option '--plan' is required (a plan file from hetpipe plan --out or hetpipe "
                 "run)");
        return 2;
    }
    if (r->o.emulate < 0) {
        hp_error("option '--emulate': auto is for hetpipe run, which measures this machine; a "
                 "rank takes the scale itself (a number, or off)");
        return 2;
    }
    if (r->o.resume.automatic) {
        hp_error("option '--resume': auto is for hetpipe run and hetpipe launch, which find the "
                 "newest checkpoint; a rank takes the checkpoint's directory");
        return 2;
    }
    r->rank = r->o.given[HP_OPT_RANK] ? r->o.rank : -1;
    return -1;
}

/* hetpipe-rank --self-check (see the top of this file). */
static int self_check(void)
{
    const int rc = hp_comm_self_check(stdout);

    hp_boot_self_check(stdout);
    hp_backend_module_self_check(stdout);
    return fflush(stdout) == 0 && rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    struct rank r = {.rank = -1, .exit = {.blame = -1}};
    int rc = parse_args(argc, argv, &r);

    if (rc >= 0)
        return rc;
    if (r.o.self_check)
        return self_check();
    if (r.o.threads)
        hp_backend_cpu_set_threads((int)r.o.threads);
    hp_ckpt_signals(r.o.checkpoint_dir);
    /* a file-size limit (ulimit -f) fails the write that passes it, naming the file, instead
     * of killing the rank */
    signal(SIGXFSZ, SIG_IGN);
    /* started by hetpipe run --local: die with the launcher, also when stopped (SIGKILL) */
    if (r.o.given[HP_OPT_PARENT]) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != (pid_t)r.o.parent)
            return 1;
    }
    rc = load_plan(&r);
    if (!rc)
        rc = bootstrap(&r);
    if (!rc)
        rc = bind_rank(&r);
    if (!rc && r.o.run_dir) {
        record_signals(&r.o, r.rank);
        start_heartbeat(&r.o, r.rank);
    }
    if (!rc)
        rc = own_checkpoints(&r);
    if (!rc)
        rc = run_role(&r);
    rc = rank_release(&r, rc);
    /* under hetpipe launch: this rank has ended, whether srun ends or not, and how
     * (cmd_launch.c); a checkpoint and stop on request is no failure to srun: the record says
     * HP_CKPT_EXIT, the process exits 0 (no "error" from srun, no cancelled step) */
    r.exit.status = rc;
    if (r.o.run_dir && r.rank >= 0) {
        if (hp_rank_exit_save(r.o.run_dir, (int)r.rank, &r.exit) == 0)
            return rc == HP_CKPT_EXIT ? 0 : rc;
        hp_warn("rank %ld: cannot write its exit status into %s: %s", r.rank, r.o.run_dir,
                strerror(errno));
    }
    return rc;
}
