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

#endif
