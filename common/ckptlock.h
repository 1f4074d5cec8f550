/* ckptlock.h - who writes a checkpoint directory (README "Checkpoints and resume").
 *
 * A job writing checkpoints into PARENT holds a lock on PARENT/hetpipe.lock (an open file
 * description lock, F_OFD_SETLK: released when the process ends, however it ends) and names
 * itself in PARENT/hetpipe.job ("key = value" lines: a random job id made at its start, host,
 * pid, start time, SLURM_JOB_ID), so that a second job given the same directory is refused at
 * its start, naming the first, instead of pruning its checkpoints. A finished (or killed) job
 * holds no lock: its directory can be resumed from and written again. */

#ifndef HP_CKPTLOCK_H
#define HP_CKPTLOCK_H

#include <stddef.h>

/* Whether PARENT can be a checkpoint directory now: missing (made at the first checkpoint) or a
 * directory, and not locked by another job. 0; -HP_EINVAL (not a directory) or -HP_EBUSY with
 * why (a sentence naming the other job; not for a job of this same Slurm job, which the lock
 * waits for). The launcher's check before it starts the ranks. */
int hp_ckpt_parent_check(const char *parent, char *why, size_t n);

/* Take PARENT's lock (PARENT made if missing, mode 0700) and name this process's job in
 * PARENT/hetpipe.job; held until hp_ckpt_parent_unlock or the process's end. A lock held by
 * an earlier run of this same Slurm job (same SLURM_JOB_ID: a requeued job while its first run
 * is being torn down) is waited for, at most wait_ms. 0; -HP_EBUSY or another code with why. */
int hp_ckpt_parent_lock(const char *parent, int wait_ms, char *why, size_t n);
void hp_ckpt_parent_unlock(void);

#endif /* HP_CKPTLOCK_H */
