/* cmd_run.c - `hetpipe run --local`: plan for a described cluster (planjob.h), then fork one
 * hetpipe-rank per rank of the plan on this machine, CPU ranks emulating the GPU types, and
 * supervise them: the first rank that fails stops the others, naming its role and cause.
 */
#include "ckptfile.h"
#include "cli.h"
#include "clock.h"
#include "commands.h"
#include "error.h"
#include "infile.h"
#include "log.h"
#include "planfile.h"
#include "planjob.h"
#include "proc.h"
#include "process.h"
#include "output.h"
#include "rundir.h"
#include "tlmerge.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ARGS 160
#define KILL_GRACE_S 5.0
/* After the first failure, the other ranks' time to end on their own: those that fail for the
 * same cause (a peer gone silent, say) name it in their logs before they are stopped. Their
 * account must not depend on how fast the failed rank's process exits. */
#define REPORT_GRACE_S 0.5

static const char synopsis[] =
    "usage: hetpipe run --local [options]\n"
    "Plan for the cluster, fork one hetpipe-rank per rank of the plan on this machine (CPU\n"
    "ranks emulating the cluster's GPU types) and wait. The training options are handed on to\n"
    "every rank. --lr is the job's: with V virtual workers each applies lr/V (the PS sums their\n"
    "updates); dp averages its replicas' gradients.\n";

/* A local job: the plan, its private directory, the ranks' command line and processes. */
struct local {
    struct hp_options o;
    struct hp_job job;
    char dir[4096], boot[4200], plan_path[4200], rank_bin[4096], emu[64];
    char tl_prefix[4200], stats[4200], metrics[4200]; /* in the run directory */
    const char *av[MAX_ARGS];
    char store[1 << 17]; /* the strings of av */
    char resume[4200];   /* --resume resolved */

    int resuming;         /* --resume given (auto or a DIR), before hp_job_resume resolved it */
    struct hp_runrec rec; /* this run's record, dir/run.ini */

    pid_t *pids;
    int failed;     /* the first rank that failed, nranks when interrupted, -1 */
    int fail_status; /* the job's exit status for it: 128 + its signal (SIGSTOP: stopped), or
                        its exit status */
    double *stopped_since; /* [nranks]: seen stopped (SIGSTOP) since, 0 */
    double watched_at;     /* the last watch of the ranks' states (watch_stopped) */
    int stopped;    /* ranks that checkpointed and stopped on request */
    double stop_at; /* > 0: when the others get stop_sig (REPORT_GRACE_S after a failure) */
    int stop_sig;   /* SIGKILL when a rank is stopped (it ignores SIGTERM), else SIGTERM */
};

static volatile sig_atomic_t interrupted, requested;

/* With checkpoints on, the first SIGINT, SIGTERM or SIGUSR1 asks the ranks for a checkpoint
 * and a stop (SIGUSR1 to each); a second SIGINT or SIGTERM stops them at once. */
static int ckpt_on;

static void on_signal(int sig)
{
    if (ckpt_on && !requested)
        requested = sig;
    else if (sig != SIGUSR1)
        interrupted = sig;
}

/* Whether --timeline's target can take the merged file (hp_out_open, then discarded), so
 * that it is refused before the training, not after: at the start when its directory exists,
 * else (`made`) once the run directory, which may hold it, has been made. */
static int timeline_target(const char *path, int made)
{
    char dir[4096];
    struct stat st;

    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    if (!made && slash && stat(dir, &st) != 0)
        return 0;
    FILE *f = hp_out_open(path, "timeline", 0666);
    if (!f)
        return -1;
    hp_out_close(f, 0);
    return 0;
}

/* The run directory with the plan and the address-file directory; the ranks' command line. */
static int prepare(struct local *L)
{
    const char *tmp = getenv("TMPDIR");
    int ac = 0;

    /* --resume into the directory of an earlier run of the job: this run is JOB_DIR/run-K */
    const int later = L->resuming && L->o.run_dir && hp_rundir_is_job(L->o.run_dir);

    L->rec = (struct hp_runrec){.status = -1};
    if ((later ? hp_rundir_restart("run", L->o.run_dir, -1, L->dir, sizeof(L->dir), &L->rec.restart)
               : hp_rundir_create("run", L->o.run_dir, tmp && *tmp ? tmp : "/tmp",
                                  "hetpipe-run.XXXXXX", L->dir, sizeof(L->dir))) ||
        hp_rundir_sub("run", L->dir, "boot", L->boot, sizeof(L->boot)))
        return -HP_EIO;
    if (later)
        printf("run: restart %d of the job in %s: this run in %s\n", L->rec.restart, L->o.run_dir,
               L->dir);
    snprintf(L->plan_path, sizeof(L->plan_path), "%s/plan.ini", L->dir);
    L->rec.started = hp_runrec_now();
    L->rec.resumed_seq = L->job.resumed_seq;
    L->rec.resumed_samples = L->job.resumed_samples;
    if (hp_planfile_save(L->plan_path, &L->job.plan, &L->job.cl, &L->job.db, L->job.token) ||
        hp_runrec_write(L->dir, &L->rec))
        return -HP_EIO;
    snprintf(L->emu, sizeof(L->emu), "%.9g", hp_job_emulation(&L->job, L->o.emulate));
    L->av[ac++] = "hetpipe-rank";
    if (hp_cli_rank_args(&L->o, HP_CMD_RUN, L->av, &ac, MAX_ARGS - 16, L->store, sizeof(L->store)))
        return -HP_EINVAL;
    /* what hetpipe report reads, in the run directory unless the user put it elsewhere */
    snprintf(L->stats, sizeof(L->stats), "%s/stats", L->dir);
    snprintf(L->metrics, sizeof(L->metrics), "%s/metrics.csv", L->dir);
    snprintf(L->tl_prefix, sizeof(L->tl_prefix), "%s/timeline", L->dir);
    if (!L->o.stats) {
        L->av[ac++] = "--stats";
        L->av[ac++] = L->stats;
    }
    if (!L->o.metrics) {
        L->av[ac++] = "--metrics";
        L->av[ac++] = L->metrics;
    }
    if (L->o.timeline) {
        if (timeline_target(L->o.timeline, 1))
            return -HP_EINVAL;
        L->av[ac++] = "--timeline";
        L->av[ac++] = L->tl_prefix;
    }
    const char *tail[] = {"--emulate", L->emu,     "--plan",      L->plan_path, "--boot-dir",
                          L->boot,     "--config", L->job.config, NULL};
    for (int i = 0; tail[i]; i++)
        L->av[ac++] = tail[i];
    L->av[ac] = NULL;
    fflush(stdout);
    return 0;
}

/* In the child: rank r's environment and output (rank 0 on the terminal), then exec. */
static void exec_rank(const struct local *L, int r, const char *parent)
{
    char rs[16], logp[4300];
    int fd;

    snprintf(rs, sizeof(rs), "%d", r);
    setenv(hp_opts[HP_OPT_RANK].env, rs, 1);
    setenv(hp_opts[HP_OPT_PARENT].env, parent, 1);
    setenv("OPENBLAS_NUM_THREADS",
           getenv("OPENBLAS_NUM_THREADS") ? getenv("OPENBLAS_NUM_THREADS") : "1", 1);
    /* every rank is on this machine: UCX's network transports use loopback only (and listen
     * on no other interface) unless the user chose devices */
    setenv("UCX_NET_DEVICES", "lo", 0);
    snprintf(logp, sizeof(logp), "%s/rank-%d.log", L->dir, r);
    fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
    if (fd >= 0 && r > 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    if (fd > 2)
        close(fd);
    execv(L->rank_bin, (char *const *)L->av);
    fprintf(stderr, "hetpipe run: cannot execute %s: %s\n", L->rank_bin, strerror(errno));
    _exit(127);
}

static int fork_ranks(struct local *L)
{
    const int n = L->job.plan.nranks;
    struct sigaction sa = {0};
    char parent[32];

    struct hp_options live = {.liveness = HP_LIVENESS_WATCH};
    char err[512];

    if (hp_opt_env(&live, HP_OPT_LIVENESS, err, sizeof(err)) < 0) {
        hp_error("run: %s", err);
        return -HP_EINVAL;
    }
    L->pids = calloc((size_t)n, sizeof(pid_t));
    if (live.liveness != HP_LIVENESS_EXIT) /* watch_stopped */
        L->stopped_since = calloc((size_t)n, sizeof(double));
    if (!L->pids || (live.liveness != HP_LIVENESS_EXIT && !L->stopped_since))
        return -HP_ENOMEM;
    snprintf(parent, sizeof(parent), "%ld", (long)getpid());
    sa.sa_handler = on_signal;
    ckpt_on = L->o.checkpoint_dir != NULL;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            hp_error("run: cannot fork rank %d: %s", r, strerror(errno));
            return -HP_EIO;
        }
        if (pid == 0)
            exec_rank(L, r, parent);
        L->pids[r] = pid;
    }
    return 0;
}

static void signal_all(const struct local *L, int sig)
{
    for (int r = 0; r < L->job.plan.nranks; r++)
        if (L->pids[r] > 0)
            kill(L->pids[r], sig);
}

/* Rank q is stopped (SIGSTOP): the job's first failure (`by`: the rank that gave up waiting
 * for it, or -1: seen by the watch). Its peers end; it is killed (SIGKILL: it ignores SIGTERM
 * while stopped). */
static void rank_stopped(struct local *L, int q, int by)
{
    char role[256];

    hp_plan_describe_rank(&L->job.plan, &L->job.cl, &L->job.db, q, role, sizeof(role));
    L->failed = q;
    L->fail_status = 128 + SIGSTOP;
    if (by >= 0)
        hp_error("run: rank %d (%s) is stopped (SIGSTOP) and does not answer: rank %d gave up "
                 "waiting for it; stopping the job (exit status %d)",
                 q, role, by, L->fail_status);
    else
        hp_error("run: rank %d (%s) is stopped (SIGSTOP) and does not answer: stopped for %.0f "
                 "s; stopping the job (exit status %d)",
                 q, role, HP_STOP_LIMIT_S, L->fail_status);
    L->stop_sig = SIGKILL;
    L->stop_at = hp_now_s() + REPORT_GRACE_S;
}

/* Every 0.1 s: a rank seen stopped (SIGSTOP) for HP_STOP_LIMIT_S (process.h) is the job's
 * failure, before any peer gives up on it; watches further apart than that (run itself was
 * stopped: ^Z) time the stops afresh. Not with HETPIPE_LIVENESS=exit (only exits count, as
 * for ranks on other hosts: the tests of the deadlines). */
static void watch_stopped(struct local *L)
{
    const double now = hp_now_s();

    if (L->failed >= 0 || !L->stopped_since || now - L->watched_at < 0.1)
        return;
    const int fresh = now - L->watched_at > HP_STOP_LIMIT_S;
    L->watched_at = now;
    for (int q = 0; q < L->job.plan.nranks; q++) {
        if (fresh || L->pids[q] <= 0 || !hp_pid_stopped(L->pids[q]))
            L->stopped_since[q] = 0.0;
        else if (L->stopped_since[q] == 0.0)
            L->stopped_since[q] = now;
        else if (now - L->stopped_since[q] >= HP_STOP_LIMIT_S) {
            rank_stopped(L, q, -1);
            return;
        }
    }
}

/* Rank r ended with `status`: a failure is reported once, naming its role and cause. */
static void rank_ended(struct local *L, int r, int status)
{
    char role[256], logp[4300];

    if (WIFEXITED(status) && WEXITSTATUS(status) == HP_CKPT_EXIT) {
        L->stopped++;
        return;
    }
    if ((WIFEXITED(status) && WEXITSTATUS(status) == 0) || L->failed >= 0)
        return;
    for (int q = 0; q < L->job.plan.nranks; q++) /* a stopped rank is the cause */
        if (L->pids[q] > 0 && hp_pid_stopped(L->pids[q])) {
            rank_stopped(L, q, r);
            return;
        }
    L->failed = r;
    hp_plan_describe_rank(&L->job.plan, &L->job.cl, &L->job.db, r, role, sizeof(role));
    if (WIFSIGNALED(status)) {
        char name[32];
        L->fail_status = 128 + WTERMSIG(status);
        hp_error("run: rank %d (%s) was killed by %s (signal %d); stopping the others (exit "
                 "status %d)",
                 r, role, hp_signal_name(WTERMSIG(status), name, sizeof(name)), WTERMSIG(status),
                 L->fail_status);
    } else {
        L->fail_status = WEXITSTATUS(status);
        hp_error("run: rank %d (%s) failed with exit status %d; stopping the others", r, role,
                 WEXITSTATUS(status));
    }
    snprintf(logp, sizeof(logp), "%s/rank-%d.log", L->dir, r);
    if (r > 0 && WIFEXITED(status)) {
        fprintf(stderr, "last lines of %s:\n", logp);
        hp_tail_file(logp, 5, stderr);
    }
    L->stop_sig = SIGTERM;
    L->stop_at = hp_now_s() + REPORT_GRACE_S;
}

/* Wait for every rank; the first that fails (or a signal to us) stops the others: after
 * REPORT_GRACE_S (a failure) SIGTERM, then SIGKILL after KILL_GRACE_S. */
static void supervise(struct local *L)
{
    const int n = L->job.plan.nranks;
    int alive = 0;
    double kill_at = 0.0;

    for (int r = 0; r < n; r++)
        alive += L->pids[r] > 0;
    while (alive > 0) {
        int status, r = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid == 0 || (pid < 0 && errno == EINTR)) {
            if (requested > 0 && L->failed < 0) {
                printf("run: signal %d (%s): the ranks checkpoint at a pause and stop "
                       "(again to stop at once)\n",
                       (int)requested, strsignal((int)requested));
                fflush(stdout);
                signal_all(L, SIGUSR1);
                requested = -1;
            }
            if (interrupted && L->failed < 0) {
                hp_error("run: interrupted (signal %d): stopping the ranks", (int)interrupted);
                L->failed = n;
                signal_all(L, SIGTERM);
                kill_at = hp_now_s() + KILL_GRACE_S;
            }
            if (L->stop_at > 0.0 && hp_now_s() > L->stop_at) {
                signal_all(L, L->stop_sig);
                kill_at = L->stop_sig == SIGTERM ? hp_now_s() + KILL_GRACE_S : 0.0;
                L->stop_at = 0.0;
            }
            if (kill_at > 0.0 && hp_now_s() > kill_at) {
                signal_all(L, SIGKILL);
                kill_at = 0.0;
            }
            watch_stopped(L);
            usleep(20000);
            continue;
        }
        if (pid < 0)
            break;
        while (r < n && L->pids[r] != pid)
            r++;
        if (r == n)
            continue;
        L->pids[r] = 0;
        alive--;
        rank_ended(L, r, status);
    }
}

/* MemAvailable of /proc/meminfo, bytes; 0 when it cannot be read. */
static double mem_available(void)
{
    FILE *f = hp_infile_fopen("/proc/meminfo", 0, NULL, NULL);
    char line[256];
    unsigned long long kib = 0;

    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return (double)kib * 1024.0;
}

/* Whether this machine can hold the plan's ranks (hp_job_local_fits); logged if not. */
static int local_capacity(const struct local *L)
{
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char why[1024];
    const int rc = hp_job_local_fits(&L->job, cores > 0 ? cores : 1, mem_available(), why,
                                     sizeof(why));

    if (rc)
        hp_error("run: %s; plan for a smaller cluster or model, or run the job on Slurm with "
                 "hetpipe launch",
                 why);
    return rc;
}

int hp_cmd_run(int argc, char **argv)
{
    struct local *L = calloc(1, sizeof(*L));
    int rc;

    if (!L) {
        hp_error("run: out of memory");
        return 1;
    }
    L->failed = -1;
    rc = hp_cmd_options(HP_CMD_RUN, synopsis, argc, argv, &L->o, 0, NULL);
    if (rc >= 0)
        goto out_status;
    if (!L->o.local) {
        hp_error("run: only --local is supported: it forks the ranks on this machine (inside a "
                 "Slurm allocation the ranks are started with hetpipe launch, srun --mpi=pmix)");
        rc = 2;
        goto out_status;
    }
    if (hp_job_check_checkpoints(&L->o, "run")) { /* before planning, and any rank */
        rc = 2;
        goto out_status;
    }
    if (L->o.timeline && timeline_target(L->o.timeline, 0)) {
        rc = 1;
        goto out_status;
    }
    rc = hp_rank_binary("run", L->rank_bin, sizeof(L->rank_bin))
             ? -HP_EINVAL
             : hp_job_plan(&L->o, NULL, &L->job);
    L->resuming = L->o.resume.automatic || L->o.resume.path;
    if (!rc)
        rc = local_capacity(L);
    if (!rc)
        rc = hp_job_resume(&L->o, &L->job, "run", L->resume, sizeof(L->resume));
    if (!rc) {
        if (!L->o.quiet)
            hp_job_print(&L->job, stdout);
        rc = prepare(L);
    }
    if (!rc)
        rc = fork_ranks(L);
    if (L->pids) {
        if (rc)
            signal_all(L, SIGTERM);
        supervise(L);
        /* also of a failed job: what each rank did until it ended */
        if (L->o.timeline && hp_tl_merge(L->tl_prefix, L->job.plan.nranks, L->o.timeline) && !rc &&
            L->failed < 0)
            rc = -HP_EIO;
    }
    if (L->failed >= 0 || (rc && L->dir[0])) {
        fprintf(stderr, "hetpipe run: failed; plan, logs and address files kept in %s\n", L->dir);
        rc = rc ? rc : -HP_EIO;
    } else if (!rc && L->stopped) {
        printf("hetpipe run: checkpointed and stopped on request; resume with the same options "
               "and --resume auto (exit status %d); plan and logs in %s\n",
               HP_CKPT_EXIT, L->dir);
    } else if (!rc && !L->o.keep && !L->o.run_dir) {
        if (hp_remove_tree(L->dir))
            hp_warn("run: could not remove %s", L->dir);
    } else if (!rc) {
        printf("hetpipe run: plan and logs in %s\n", L->dir);
    }
    /* interrupted: the shell's convention, 128 + the signal; a failed rank: its status, 128
     * + the signal that killed it, 128 + SIGSTOP for a stopped one */
    rc = interrupted                                       ? 128 + (int)interrupted
         : L->failed >= 0 && L->failed < L->job.plan.nranks ? L->fail_status
         : rc                                              ? 1
         : L->stopped                                      ? HP_CKPT_EXIT
                                                           : 0;
    if (L->rec.started > 0.0 && access(L->dir, F_OK) == 0) { /* the run's directory is kept */
        L->rec.ended = hp_runrec_now();
        L->rec.status = rc;
        (void)hp_runrec_write(L->dir, &L->rec);
    }
out_status:
    free(L->pids);
    free(L->stopped_since);
    hp_job_release(&L->job);
    free(L);
    return rc;
}
