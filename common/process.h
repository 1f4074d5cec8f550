/* process.h - facts about other processes on this host, read from /proc (libc only): what the
 * launcher (hetpipe run --local watching its ranks) and the runtime (comm.c watching its
 * peers on this host) both ask.
 */
#ifndef HP_PROCESS_H
#define HP_PROCESS_H

#include <stddef.h>

/* Whether process pid (on this host) is stopped by a signal: SIGSTOP or SIGTSTP, state T in
 * /proc/PID/stat. Not a tracing stop (t): a debugger's, or LeakSanitizer's brief one at the exit
 * of a sanitizer build, which freezes every thread of a rank that is ending anyway (hetpipe
 * run took such a rank for the cause of a failure). 0 also when there is no such process or
 * its state cannot be read. */
int hp_pid_stopped(long pid);

/* A rank's exit status as a file of the job's run directory, DIR/rank-R.exit: written by the
 * rank as the last thing it does (hetpipe-rank under hetpipe launch), read by hetpipe launch to
 * know that every rank has ended even while srun has not (it can hang at a step's end). The
 * write is 0 or -1 (errno); the read 0 with *status, or -1 (no such file yet, or not one a
 * rank wrote: not a regular file, not a number). */
int hp_rank_exit_write(const char *dir, int rank, int status);
int hp_rank_exit_read(const char *dir, int rank, int *status);

/* The whole record: the status on the first line (what hp_rank_exit_read reads; 75,
 * HP_CKPT_EXIT: checkpointed and stopped on request, while under hetpipe launch the process
 * itself exits 0, so that srun sees no failure), then optional lines "signal N" (the rank's
 * handler wrote the record as signal N killed it; status 128 + N) and "blame R WHY" (it failed
 * because of peer R, which is WHY: comm.h's words, e.g. "exited", "stopped (SIGSTOP) for more
 * than 2 s", "silent (...)"). */
struct hp_rank_exit {
    int status;   /* 0..255 */
    int signal;   /* 0, or the signal that killed the rank */
    int blame;    /* -1, or the peer the rank blames for its failure */
    char why[160]; /* with blame: why, one line */
};
/* Write (a new file, never a replaced one) or read rank `rank`'s record: 0, or -1 as above. */
int hp_rank_exit_save(const char *dir, int rank, const struct hp_rank_exit *e);
int hp_rank_exit_load(const char *dir, int rank, struct hp_rank_exit *e);

/* A rank's heartbeat under hetpipe launch, DIR/rank-R.alive: a count that a thread of the rank
 * rewrites every HP_BEAT_S (it goes on while the rank computes or waits, and stops when the
 * process is stopped or its node hangs or is lost); hetpipe launch finds a rank whose count
 * has not moved for HP_SILENT_S silent. Each write opens, writes and closes the file (what a
 * shared file system's close-to-open consistency shows the reader). create: a new file, 0 or
 * -1 (errno; it exists: a file this rank did not create, so no heartbeat); beat: rewrite it
 * with `count`; read: 0 with *count, or -1 (none yet, or not a heartbeat). */
#define HP_BEAT_S 1.0
#define HP_SILENT_S 10.0
int hp_rank_beat_create(const char *dir, int rank, char *path, size_t n);
int hp_rank_beat(const char *path, unsigned long count);
int hp_rank_beat_read(const char *dir, int rank, unsigned long *count);

/* "SIGKILL" for 9, ...; "signal N" for one without a name here (buf, n bytes). */
const char *hp_signal_name(int sig, char *buf, size_t n);

/* A process seen stopped (SIGSTOP) this long, continuously, by a watcher that was itself
 * running all along, has failed: hetpipe run --local's watch of its ranks and a rank's of its
 * peers on the same host (comm.c). A stopped process never answers; the bound is short, and a
 * watcher whose own checks paused longer (it was stopped too: a suspended job) starts over. */
#define HP_STOP_LIMIT_S 2.0

#endif
