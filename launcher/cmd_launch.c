/* cmd_launch.c - `hetpipe launch`: inside a Slurm allocation (an sbatch script or salloc), learn
 * from slurmctld which typed GPUs the job holds on which nodes (slurm.h), plan for them in
 * process (planjob.h), write the plan, the cluster description, a binding file (task -> role,
 * node, GPU) and a host file into a job-private directory, and run `srun --mpi=pmix` with
 * one task per planned GPU on its node plus the parameter-server shards (layout.h); at its
 * end the merged timeline and the report (jobreport.h) into that directory.
 *
 * Options: the command line, else the HETPIPE_* variables the --hetpipe-* options of
 * sbatch/salloc/srun set, else the table's defaults (common/options.h).
 */
#include "ckptfile.h"
#include "cli.h"
#include "clock.h"
#include "commands.h"
#include "error.h"
#include "infile.h"
#include "jobreport.h"
#include "layout.h"
#include "log.h"
#include "outcome.h"
#include "parse.h"
#include "planfile.h"
#include "planjob.h"
#include "proc.h"
#include "process.h"
#include "rundir.h"
#include "slurm.h"
#include "tlmerge.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 256

static const char synopsis[] =
    "usage: hetpipe launch [options]\n"
    "Inside a Slurm allocation (an sbatch script or salloc): discover the job's typed GPUs,\n"
    "plan, and run the ranks with srun --mpi=pmix. Job options default to the environment the\n"
    "--hetpipe-* options of sbatch, salloc and srun set (in brackets); the training options are\n"
    "handed on to every rank.\n";

/* A launch: the job's allocation, plan, directory and files, srun's command line. */
struct launch {
    struct hp_options o;
    struct hp_alloc a;
    struct hp_job job;
    struct hp_layout L;
    unsigned long jobid;
    char dir[4096], plan_path[4200], bind_path[4200], host_path[4200], rank_bin[4096];
    char ckpt_dir[4200], resume[4200], emu[64];
    char job_dir[4200];   /* the job's directory: dir itself, or dir's parent for a restart */
    struct hp_runrec rec; /* this run's record, dir/run.ini */
    const char *av[MAX_ARGS];
    int ac;
    char store[1 << 17]; /* the ranks' option strings */
    struct hp_watch watch; /* the ranks' heartbeats (outcome.h) */
    int silent;            /* the rank found silent, -1 */
    double silent_s;       /* for how long */
};

static int job_id(unsigned long *out)
{
    const char *job = getenv("SLURM_JOB_ID");
    char *end;

    if (!job || !*job) {
        hp_error("launch: SLURM_JOB_ID is not set: hetpipe launch runs inside a Slurm "
                 "allocation (an sbatch script, or salloc); without Slurm use hetpipe run "
                 "--local");
        return -1;
    }
    errno = 0;
    *out = strtoul(job, &end, 10);
    if (errno || *end || *out == 0 || *job < '0' || *job > '9') {
        hp_error("launch: SLURM_JOB_ID='%s' is not a job id", job);
        return -1;
    }
    return 0;
}

static void print_alloc(const struct hp_alloc *a)
{
    printf("launch: job %lu%s: ", a->jobid, a->hetjob ? " (hetjob)" : "");
    for (int i = 0; i < a->nnodes; i++) {
        printf("%s%s", i ? ", " : "", a->nodes[i].name);
        for (int g = 0; g < a->nodes[i].ngpus; g++)
            printf("%s%s:%d", g ? "," : " ", a->nodes[i].gpus[g].type, a->nodes[i].gpus[g].index);
    }
    printf("\n");
    if (a->nskipped)
        printf("launch: %d node(s) of the job have no GPU and take no rank\n", a->nskipped);
}

/* The run directory: --run-dir, else $SLURM_SUBMIT_DIR/hetpipe-JOBID (then .1, .2, ... for
 * later launches in the same job); it must be visible on every node of the job. A requeued
 * job (SLURM_RESTART_COUNT K >= 1) whose directory holds an earlier run's plan runs in
 * JOB_DIR/run-K: one directory per job (rundir.h). */
static int make_dir(struct launch *l)
{
    const char *base = getenv("SLURM_SUBMIT_DIR"), *restarts = getenv("SLURM_RESTART_COUNT");
    char cwd[4096], name[64];
    long k = 0;

    if (!base || !*base)
        base = getcwd(cwd, sizeof(cwd)) ? cwd : ".";
    snprintf(name, sizeof(name), "hetpipe-%lu", l->jobid);
    if (!restarts || hp_parse_long(restarts, 1, 1L << 30, &k))
        k = 0;
    if (l->o.run_dir)
        snprintf(l->job_dir, sizeof(l->job_dir), "%s", l->o.run_dir);
    else
        snprintf(l->job_dir, sizeof(l->job_dir), "%s/%s", base, name);
    l->rec = (struct hp_runrec){.status = -1, .resumed_seq = -1, .resumed_samples = -1};
    if (k >= 1 && hp_rundir_is_job(l->job_dir)) {
        if (hp_rundir_restart("launch", l->job_dir, (int)k, l->dir, sizeof(l->dir),
                              &l->rec.restart))
            return -1;
        printf("launch: restart %ld of job %lu: this run in %s\n", k, l->jobid, l->dir);
    } else {
        if (hp_rundir_create("launch", l->o.run_dir, base, name, l->dir, sizeof(l->dir)))
            return -1;
        snprintf(l->job_dir, sizeof(l->job_dir), "%s", l->dir);
    }
    snprintf(l->plan_path, sizeof(l->plan_path), "%s/plan.ini", l->dir);
    snprintf(l->bind_path, sizeof(l->bind_path), "%s/binding", l->dir);
    snprintf(l->host_path, sizeof(l->host_path), "%s/hostfile", l->dir);
    return 0;
}

/* The plan: made here for the allocation, or --plan FILE checked against it; written into the
 * run directory with the cluster description (for the record) and laid out as tasks. */
static int plan(struct launch *l)
{
    char path[4300];
    int rc;

    snprintf(path, sizeof(path), "%s/cluster.ini", l->dir);
    if (hp_alloc_write_cluster(&l->a, hp_keep("slurm-job-%lu", l->jobid), path))
        return -HP_EIO;
    fflush(stdout);
    if (l->o.plan) {
        if ((rc = hp_job_load(&l->o, l->o.plan, &l->job)) ||
            (rc = hp_layout_check(l->o.plan, &l->job.plan, &l->job.cl, &l->job.db, &l->a)))
            return rc;
    } else {
        if ((rc = hp_job_plan(&l->o, &l->a, &l->job)))
            return rc;
        hp_job_print(&l->job, stdout);
    }
    if ((rc = hp_layout_make(&l->job.plan, &l->job.cl, &l->a, &l->L)))
        return rc;
    return hp_planfile_save(l->plan_path, &l->job.plan, &l->job.cl, &l->job.db, l->job.token);
}

static int write_files(struct launch *l)
{
    char err[1200];

    if (hp_binding_write(l->bind_path, l->L.b, l->L.ntasks, err, sizeof(err))) {
        hp_error("launch: %s", err);
        return -1;
    }
    return hp_layout_write_hostfile(l->host_path, &l->L);
}

/* srun --mpi=pmix ... hetpipe-rank --plan FILE --config FILE [the ranks' options] */
static int srun_args(struct launch *l)
{
    /* --srun, else HETPIPE_SRUN (hp_cli_from_env), else srun from PATH */
    l->av[l->ac++] = l->o.srun ? l->o.srun : "srun";
    l->av[l->ac++] = "--mpi=pmix";
    l->av[l->ac++] = "--kill-on-bad-exit=1";
    l->av[l->ac++] = hp_keep("--job-name=hetpipe-%lu", l->jobid);
    if (l->a.hetjob) {
        if (hp_layout_het_args(&l->a, &l->L, l->av, &l->ac))
            return -1;
    } else {
        l->av[l->ac++] = "--overcommit";
        l->av[l->ac++] = "--distribution=arbitrary";
        l->av[l->ac++] = hp_keep("--ntasks=%d", l->L.ntasks);
        setenv("SLURM_HOSTFILE", l->host_path, 1);
    }
    l->av[l->ac++] = l->rank_bin;
    l->av[l->ac++] = "--plan";
    l->av[l->ac++] = l->plan_path;
    l->av[l->ac++] = "--config";
    l->av[l->ac++] = l->job.config;
    /* what hetpipe report and hetpipe timeline read, in the job directory */
    if (!l->o.stats) {
        l->av[l->ac++] = "--stats";
        l->av[l->ac++] = hp_keep("%s/stats", l->dir);
    }
    if (!l->o.metrics) {
        l->av[l->ac++] = "--metrics";
        l->av[l->ac++] = hp_keep("%s/metrics.csv", l->dir);
    }
    /* --emulate (auto measured here): CPU ranks padded to the planned GPUs' times x S, for
     * clusters whose GRES are not real GPUs */
    if (l->o.emulate != 0.0) {
        snprintf(l->emu, sizeof(l->emu), "%.9g", hp_job_emulation(&l->job, l->o.emulate));
        l->av[l->ac++] = "--emulate";
        l->av[l->ac++] = l->emu;
    }
    if (l->o.timeline) {
        l->av[l->ac++] = "--timeline";
        l->av[l->ac++] = hp_keep("%s/timeline", l->dir);
        printf("launch: the ranks' timelines go to %s/timeline.RANK, merged into %s when the "
               "job ends\n",
               l->dir, l->o.timeline);
    }
    return hp_cli_rank_args(&l->o, HP_CMD_LAUNCH, l->av, &l->ac, MAX_ARGS - 1, l->store,
                            sizeof(l->store));
}

/* srun's pid while it runs, and a signal to pass on to it (see forward). */
static volatile pid_t srun_pid;
static volatile sig_atomic_t pending_sig, pending_from;

static void on_signal(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    /* from the terminal (the whole foreground process group, srun included) or the kernel:
     * srun has it already */
    if (si->si_code != SI_USER && si->si_code != SI_QUEUE)
        return;
    pending_from = si->si_pid;
    pending_sig = sig;
}

/* A signal sent to hetpipe launch by a process: passed on to srun unless it came from
 * slurmstepd or slurmd, which signal every process of the step (srun too), or from srun. */
static void forward(void)
{
    char path[64], comm[32] = "";
    const int sig = pending_sig;
    const pid_t from = pending_from;
    FILE *f;

    pending_sig = 0;
    snprintf(path, sizeof(path), "/proc/%ld/comm", (long)from);
    if ((f = hp_infile_fopen(path, 0, NULL, NULL))) {
        if (!fgets(comm, sizeof(comm), f))
            comm[0] = '\0';
        fclose(f);
    }
    comm[strcspn(comm, "\n")] = '\0';
    if (from == srun_pid || strcmp(comm, "slurmstepd") == 0 || strcmp(comm, "slurmd") == 0)
        return;
    printf("launch: signal %d (%s) from process %ld: passed on to srun\n", sig, strsignal(sig),
           (long)from);
    fflush(stdout);
    kill(srun_pid, sig);
}

/* How many of the job's ranks have ended (each writes RUN_DIR/rank-R.exit as the last thing it
 * does, process.h); *worst: the largest exit status among them; *failed: whether one failed
 * (a status other than 0 and HP_CKPT_EXIT). */
static int ranks_ended(const struct launch *l, int *worst, int *failed)
{
    int n = 0, st;

    *worst = 0;
    *failed = 0;
    for (int r = 0; r < l->job.plan.nranks; r++)
        if (hp_rank_exit_read(l->dir, r, &st) == 0) {
            n++;
            *worst = st > *worst ? st : *worst;
            *failed |= st != 0 && st != HP_CKPT_EXIT;
        }
    return n;
}

/* Before any rank has failed or ended: is one silent (no heartbeat for HP_SILENT_S: stopped,
 * or its node hangs or is lost, on whatever host; its peers would wait out their --timeout)?
 * Then every task of the job's steps gets SIGKILL (a stopped one ignores the SIGTERM srun
 * would send), and the job's status is HP_EXIT_SILENT (job_status). */
static int silent(struct launch *l, double now)
{
    char role[256];
    const int r = hp_watch_silent(&l->watch, l->dir, now, &l->silent_s);

    if (r < 0)
        return 0;
    l->silent = r;
    hp_plan_describe_rank(&l->job.plan, &l->job.cl, &l->job.db, r, role, sizeof(role));
    hp_error("launch: rank %d (%s) is silent: no heartbeat for %.0f s (stopped, or its node "
             "hangs or is lost); killing the job's tasks",
             r, role, l->silent_s);
    fflush(stderr);
    hp_slurm_kill_steps(l->jobid, SIGKILL);
    return 1;
}

/* Wait for srun (signals to us passed on), every 0.2 s. srun may not end when its tasks have
 * (Slurm 22.05's mpi/pmix plugin: two components of a heterogeneous step join its abort agent's
 * thread at once, README "For admins"): once every rank has ended, srun gets --timeout seconds
 * to end, then SIGKILL (it has nothing left to do; a hung srun does not end on SIGTERM, it only
 * adds its "forcing job termination" to the one line said here); the job's status is then the
 * ranks' (the largest). Nor may it end when a node was lost with its tasks (their exits never
 * reach it): once a rank has failed, srun gets FAIL_GRACE_S to end (it stops the others at
 * once: --kill-on-bad-exit), then SIGTERM and, 5 s later, SIGKILL. *status: srun's, or the
 * ranks' as a wait status. */
#define FAIL_GRACE_S 20.0
static int wait_srun(struct launch *l, pid_t pid, int *status)
{
    const double grace = l->o.timeout;
    double ended_at = 0.0, term_at = 0.0, failed_at = 0.0;
    int worst = 0, killed = 0, hard = 0, failed = 0;

    for (;;) {
        if (pending_sig)
            forward();
        const pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            hp_error("launch: waiting for srun: %s", strerror(errno));
            return -1;
        }
        const double now = hp_now_s();
        if (ended_at == 0.0 && ranks_ended(l, &worst, &failed) == l->job.plan.nranks)
            ended_at = now;
        if (failed && failed_at == 0.0)
            failed_at = now;
        if (ended_at > 0.0 && !hard && now - ended_at > grace) {
            hp_warn("launch: srun had not ended %.0f s after every rank had: stopped it (Slurm's "
                    "mpi/pmix hang at the end of a heterogeneous step); the job's result is the "
                    "ranks': status %d",
                    now - ended_at, worst);
            kill(pid, SIGKILL);
            killed = hard = 1;
        }
        if (failed_at == 0.0 && ended_at == 0.0 && term_at == 0.0 && silent(l, now)) {
            term_at = now;
            killed = 1;
        }
        if (failed_at > 0.0 && term_at == 0.0 && now - failed_at > FAIL_GRACE_S) {
            hp_warn("launch: a rank failed %.0f s ago, but srun has not ended: stopping it (the "
                    "exits of a lost node's tasks never reach it)",
                    now - failed_at);
            kill(pid, SIGTERM);
            term_at = now;
            killed = 1;
        }
        if (killed && !hard && term_at > 0.0 && now - term_at > 5.0) {
            kill(pid, SIGKILL);
            hard = 1;
        }
        nanosleep(&(struct timespec){.tv_nsec = 200 * 1000 * 1000}, NULL);
    }
    /* srun killed by a signal after every rank had ended (a glibc abort at the end of a
     * heterogeneous step was seen once in hetjob_loop's 300 jobs): the training is done */
    if (!killed && WIFSIGNALED(*status) && ranks_ended(l, &worst, &failed) == l->job.plan.nranks) {
        hp_warn("launch: srun died of signal %d (%s) after every rank had ended; the job's result "
                "is the ranks': status %d",
                WTERMSIG(*status), strsignal(WTERMSIG(*status)), worst);
        killed = 1;
    }
    if (killed) /* the job's outcome is the ranks', not srun's */
        *status = (worst & 0xff) << 8;
    return 0;
}

/* The job's exit status, from the ranks' exit records (outcome.h), else srun's: a failure's
 * names its first rank and how (the batch script exits with it: Slurm's ExitCode); a checkpoint
 * and stop on request, whose ranks exit 0 (srun and slurmstepd then report no error), is
 * HP_CKPT_EXIT (75), what a resumable job script requeues on. */
static int job_status(struct launch *l, int status)
{
    const int srun_rc = WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                        : WIFEXITED(status) ? WEXITSTATUS(status)
                                            : 1;
    struct hp_outcome out;
    char role[256];

    if (l->silent >= 0) {
        hp_plan_describe_rank(&l->job.plan, &l->job.cl, &l->job.db, l->silent, role,
                              sizeof(role));
        hp_error("launch: the job failed: rank %d (%s) was silent: no heartbeat for %.0f s; exit "
                 "status %d",
                 l->silent, role, l->silent_s, HP_EXIT_SILENT);
        return HP_EXIT_SILENT;
    }
    if (hp_outcome_read(l->dir, l->job.plan.nranks, &out) || out.kind == HP_OUTCOME_NONE)
        return srun_rc;
    if (out.kind == HP_OUTCOME_STOPPED) {
        printf("launch: every rank checkpointed and stopped on request: exit status %d (resume "
               "with --resume auto; a requeued job resumes by itself)\n",
               out.status);
        return out.status;
    }
    if (out.kind == HP_OUTCOME_DONE)
        return srun_rc;
    hp_plan_describe_rank(&l->job.plan, &l->job.cl, &l->job.db, out.rank, role, sizeof(role));
    hp_error("launch: the job failed: rank %d (%s) %s; %d other rank(s) failed or were "
             "stopped after it; exit status %d",
             out.rank, role, out.cause, out.failed - 1, out.status);
    return out.status;
}

/* Run srun and wait for it (wait_srun); at its end the timeline and the report of the job
 * into its directory. The exit status: job_status. */
static int run_srun(struct launch *l)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT};
    struct sigaction sa = {0};
    int status = 0;

    l->silent = -1;
    if (hp_watch_init(&l->watch, l->job.plan.nranks)) {
        hp_watch_release(&l->watch);
        hp_error("launch: out of memory");
        return 1;
    }
    l->rec.started = hp_runrec_now();
    l->rec.resumed_seq = l->job.resumed_seq;
    l->rec.resumed_samples = l->job.resumed_samples;
    if (hp_runrec_write(l->dir, &l->rec))
        return 1;
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &sa, NULL);
    pid_t pid = fork();
    if (pid < 0) {
        hp_error("launch: cannot fork srun: %s", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        sa.sa_handler = SIG_DFL;
        sa.sa_flags = 0;
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
            sigaction(sigs[i], &sa, NULL);
        execvp(l->av[0], (char *const *)l->av);
        hp_error("launch: cannot execute '%s': %s (is Slurm's srun on PATH? or give --srun)",
                 l->av[0], strerror(errno));
        _exit(127);
    }
    srun_pid = pid;
    if (wait_srun(l, pid, &status))
        return 1;
    srun_pid = 0;
    fflush(stdout);
    const int rc = job_status(l, status); /* the first failure's cause, 75, or srun's */
    l->rec.ended = hp_runrec_now();
    l->rec.status = rc;
    (void)hp_runrec_write(l->dir, &l->rec);
    if (l->o.timeline)
        hp_tl_merge(hp_keep("%s/timeline", l->dir), l->job.plan.nranks, l->o.timeline);
    if (hp_report_write(l->job_dir, NULL, 0, NULL, l->job.config) == 0)
        printf("launch: the job's report: %s/report.html\n", l->job_dir);
    fflush(stdout);
    return rc;
}

static void print_srun(struct launch *l)
{
    setenv(hp_opts[HP_OPT_BINDING].env, l->bind_path, 1);
    setenv(hp_opts[HP_OPT_RUN_DIR].env, l->dir, 1);
    if (!getenv("OPENBLAS_NUM_THREADS"))
        setenv("OPENBLAS_NUM_THREADS", "1", 1); /* CPU ranks share the node's cores */
    printf("launch: %d tasks on %d nodes; binding in %s\nlaunch:", l->L.ntasks, l->a.nnodes,
           l->bind_path);
    for (int i = 0; i < l->ac; i++)
        printf(" %s", l->av[i]);
    printf("\n");
    fflush(stdout);
    fflush(stderr);
}

/* Checkpoints: --checkpoint-every without --checkpoint-dir writes them to
 * SUBMIT_DIR/hetpipe-JOBID.ckpt (the same for every run of a requeued job); a requeued job
 * (SLURM_RESTART_COUNT >= 1) resumes from the newest valid one there by itself. */
static int checkpoints(struct launch *l)
{
    const char *base = getenv("SLURM_SUBMIT_DIR"), *restarts = getenv("SLURM_RESTART_COUNT");
    char cwd[4096];
    long n = 0;

    if (!l->o.checkpoint_dir &&
        (l->o.checkpoint_every.samples || l->o.checkpoint_every.seconds > 0.0 ||
         l->o.resume.automatic || l->o.resume.path)) {
        if (!base || !*base)
            base = getcwd(cwd, sizeof(cwd)) ? cwd : ".";
        snprintf(l->ckpt_dir, sizeof(l->ckpt_dir), "%s/hetpipe-%lu.ckpt", base, l->jobid);
        l->o.checkpoint_dir = l->ckpt_dir;
        l->o.given[HP_OPT_CHECKPOINT_DIR] = 1;
    }
    if (restarts && !hp_parse_long(restarts, 1, 1L << 30, &n) && l->o.checkpoint_dir &&
        !l->o.resume.path && !l->o.resume.automatic) {
        printf("launch: job %lu was requeued (restart %ld): resuming from its newest checkpoint\n",
               l->jobid, n);
        l->o.resume = (struct hp_opt_autopath){.path = NULL, .automatic = 1};
        l->o.given[HP_OPT_RESUME] = 1;
    }
    if (l->o.checkpoint_dir)
        printf("launch: checkpoints in %s (SIGUSR1 or SIGTERM to the ranks: a checkpoint, then "
               "exit status %d)\n",
               l->o.checkpoint_dir, HP_CKPT_EXIT);
    return hp_job_resume(&l->o, &l->job, "launch", l->resume, sizeof(l->resume)) ? -1 : 0;
}

static int launch(struct launch *l)
{
    if (hp_cli_from_env(&l->o, HP_CMD_LAUNCH))
        return 2;
    if (job_id(&l->jobid))
        return 2;
    if (hp_rank_binary("launch", l->rank_bin, sizeof(l->rank_bin)) ||
        hp_slurm_discover(l->jobid, &l->a) || make_dir(l))
        return 1;
    print_alloc(&l->a);
    fflush(stdout);
    if (plan(l))
        return 1;
    fflush(stdout);
    if (l->o.dry_run) {
        printf("dry run: %d ranks planned (%d GPU stages, %d PS shards); no rank started. Plan "
               "in %s\n",
               l->job.plan.nranks, hp_plan_first_shard(&l->job.plan), l->job.plan.nshards,
               l->plan_path);
        return 0;
    }
    if (checkpoints(l) || write_files(l) || srun_args(l))
        return 1;
    print_srun(l);
    return run_srun(l);
}

int hp_cmd_launch(int argc, char **argv)
{
    struct launch *l = calloc(1, sizeof(*l));
    int rc;

    if (!l) {
        hp_error("launch: out of memory");
        return 1;
    }
    rc = hp_cmd_options(HP_CMD_LAUNCH, synopsis, argc, argv, &l->o, 0, NULL);
    if (rc < 0)
        rc = launch(l);
    hp_watch_release(&l->watch);
    hp_layout_release(&l->L);
    hp_job_release(&l->job);
    hp_alloc_release(&l->a);
    free(l);
    return rc;
}
