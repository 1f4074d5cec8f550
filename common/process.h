/* process.h - facts about other processes on this host, read from /proc (libc only): what the
 * launcher (hetpipe run --local watching its ranks) and the runtime (comm.c watching its
 * peers on this host) both ask.
 */
#ifndef HP_PROCESS_H
#define HP_PROCESS_H

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

#endif
