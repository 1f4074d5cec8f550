/* outcome.h - how a launched job's ranks ended, from the exit records they leave in the run
 * directory (RUN_DIR/rank-R.exit, common/process.h): finished, checkpointed and stopped on
 * request, or failed; and then which rank failed first and how, as words and as the exit
 * status hetpipe launch ends with (what the batch script, and Slurm's ExitCode, then show).
 *
 * The first failure is the rank the failed ranks blame (each names the peer it stopped for,
 * following a chain to its end), else a rank that left no record (only SIGKILL, or its node's
 * loss, can end a rank so), else one that failed on its own (an exit status, a signal other than
 * the SIGTERM that srun sends the others). Its status: 128 + N when signal N killed it (137 for
 * a rank without a record), 128 + SIGSTOP (147) for a stopped one, HP_EXIT_SILENT for one its
 * peers found silent past their deadline, else its own exit status.
 */
#ifndef HP_OUTCOME_H
#define HP_OUTCOME_H

#define HP_EXIT_SILENT 124 /* a rank silent past its peers' deadline (as timeout(1) exits) */

enum hp_outcome_kind {
    HP_OUTCOME_NONE,    /* no rank left a record (none started, or none knew its rank) */
    HP_OUTCOME_DONE,    /* every rank recorded status 0 */
    HP_OUTCOME_STOPPED, /* no failure, and ranks checkpointed and stopped on request */
    HP_OUTCOME_FAILED,
};

struct hp_outcome {
    enum hp_outcome_kind kind;
    int ended;      /* ranks with a record */
    int failed;     /* ranks that failed, or left no record */
    int rank;       /* HP_OUTCOME_FAILED: the first that failed */
    int status;     /* the job's exit status: 0, HP_CKPT_EXIT, or the first failure's */
    char cause[512]; /* HP_OUTCOME_FAILED: how, e.g. "was killed by SIGKILL (signal 9)" */
};

/* Read the records of ranks 0..nranks-1 in `dir` into *out (caller-owned); 0, or -HP_ENOMEM. */
int hp_outcome_read(const char *dir, int nranks, struct hp_outcome *out);

/* The ranks' heartbeats (process.h), watched while srun runs: a rank whose heartbeat file was
 * written in this launch (or, a file an earlier run left, has moved since) and has then not
 * moved for HP_SILENT_S, and that has not ended (no exit record), is silent: stopped, or on a
 * node that hangs or is lost, whichever host it is on. Checks further apart than 3 x HP_BEAT_S (launch
 * itself was stopped: a suspended job) time every rank afresh. */
struct hp_watch {
    int nranks;
    unsigned long *count; /* [nranks], the last count read */
    double *moved;        /* [nranks], when it last moved; 0: never read, -1: not moved yet */
    double checked;       /* the last check */
    double since;         /* wall clock when the watch began */
};
/* 0, or -HP_ENOMEM; hp_watch_release frees it (also after a failed init). */
int hp_watch_init(struct hp_watch *w, int nranks);
/* At most every HP_BEAT_S: the first silent rank (*quiet: for how long), else -1. */
int hp_watch_silent(struct hp_watch *w, const char *dir, double now, double *quiet);
void hp_watch_release(struct hp_watch *w);

#endif
