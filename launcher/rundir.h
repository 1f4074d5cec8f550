/* rundir.h - a job's private directory (mode 0700): where hetpipe run and hetpipe launch put
 * the plan, the address files, the binding and the logs. The one way both make it.
 *
 * One job, one directory: a job's first run fills JOB_DIR itself; each later run of the same
 * job (a Slurm requeue, or hetpipe run --resume with --run-dir JOB_DIR) gets JOB_DIR/run-K,
 * K = 1, 2, ... Each run directory holds run.ini, the record of that run (struct hp_runrec),
 * from which hetpipe report draws the whole job (jobreport.h).
 */
#ifndef HP_RUNDIR_H
#define HP_RUNDIR_H

#include <stddef.h>

/* Make the run directory and write its path into out (size n):
 * - `given` (--run-dir): created if missing; one that exists must be a directory of this user
 *   and not a symbolic link; its mode is set to 0700;
 * - else a new directory under `base`: `name` with "XXXXXX" in it is made unique by mkdtemp
 *   ("hetpipe-run.XXXXXX"); any other name is tried as name, name.1, name.2, ... and the first
 *   that does not exist is created ("hetpipe-42").
 * `cmd` prefixes the messages. 0, or -1 (logged; out is then ""). */
int hp_rundir_create(const char *cmd, const char *given, const char *base, const char *name,
                     char *out, size_t n);

/* A private subdirectory dir/sub (created, mode 0700; an existing one is kept if it passes the
 * same checks); its path into out (size n). 0, or -1 (logged). */
int hp_rundir_sub(const char *cmd, const char *dir, const char *sub, char *out, size_t n);

/* A directory that holds a job's run: a directory of this user (not a link) with a plan.ini. */
int hp_rundir_is_job(const char *dir);

/* The directory of run `restart` (>= 1) of the job in job_dir: job_dir/run-RESTART (then
 * .1, .2, ... when a run of that number is there already); restart < 0: the first free K from
 * 1 on. Its path into out (size n), the K used into *k (may be NULL). 0, or -1 (logged). */
int hp_rundir_restart(const char *cmd, const char *job_dir, int restart, char *out, size_t n,
                      int *k);

/* The record of one run, RUN_DIR/run.ini ([run] section). */
struct hp_runrec {
    int restart;           /* 0: the job's first run; K for JOB_DIR/run-K */
    double started, ended; /* wall clock, seconds since the epoch; ended 0: not (yet) known */
    int status;            /* exit status; -1: not (yet) known */
    long resumed_seq;      /* the checkpoint the run resumed from, -1: none (a fresh start) */
    long resumed_samples;  /* its position: training samples of the job before it */
};

/* The wall clock, seconds since the epoch. */
double hp_runrec_now(void);

/* Write r as dir/run.ini (through run.ini.tmp and a rename; replaces only that file, which
 * this module writes). 0, or -HP_EIO (logged). */
int hp_runrec_write(const char *dir, const struct hp_runrec *r);

/* Read dir/run.ini into *r: 0; 1 when there is none (*r: restart 0, everything unknown);
 * -HP_ECONFIG when it does not parse (logged, naming the file and key). */
int hp_runrec_read(const char *dir, struct hp_runrec *r);

#endif
