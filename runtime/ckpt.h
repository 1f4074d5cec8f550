/* ckpt.h - checkpoints in a running job: when they are taken, what each rank writes and
 * loads, and how the ranks agree that one is complete. The files themselves (layout, parts,
 * manifest, checks) are common/ckptfile.h; the job points where checkpoints are taken are
 * jobpoint.h. README "Checkpoints and resume" says it for users.
 *
 * When: at job points (jobpoint.h). A checkpoint is due every --checkpoint-every N samples
 * of an epoch (a job point at the first minibatch boundary after each N) and at each epoch's
 * end; or every Nmin / Nh of training, and SIGUSR1 or SIGTERM asks for one and a stop
 * (hp_ckpt_requested): these two make a pause (pause.h), a job point within a wave or two.
 *
 * Taking checkpoint N at a job point: the reporter (stage 0 of VW 0) makes PARENT/ckpt-N
 * (hp_ckpt_begin) and says so in the verdict; every worker tells its PS shards that its pushes
 * are all sent (WSP), writes its part (by unit: parameters, momentum, batch-norm statistics;
 * a WSP worker also its client's state) and tells the reporter its size and CRC-32; each
 * shard, once every worker's mark is in, writes its part (global weights and every VW's clock
 * of its units) and tells the reporter too. The reporter copies the plan in, writes the
 * manifest last and prunes old checkpoints, then tells every worker the outcome. A part that
 * could not be written makes the checkpoint fail (removed; training goes on).
 *
 * Loading (--resume DIR): under the same plan (hp_ckpt_same_layout) every rank restores its
 * own part exactly, so the run goes on bit for bit; under another plan each unit is loaded
 * where the new plan puts it (hp_ckpt_unit_source): the weights from the checkpoint's
 * consensus (its shards' global weights, or VW 0's), momentum and statistics from VW v mod V.
 */
#ifndef HP_CKPT_H
#define HP_CKPT_H

#include "ckptfile.h"
#include "comm.h"
#include "gpudb.h"
#include "model.h"
#include "plan.h"
#include "ps_store.h"
#include "wsp.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* A request to checkpoint and stop (SIGUSR1, SIGTERM), set by the rank's signal handlers. */
extern volatile sig_atomic_t hp_ckpt_requested;

/* With checkpoints on (dir given): SIGUSR1 and SIGTERM set hp_ckpt_requested (a second
 * SIGTERM ends the rank at once); without, SIGUSR1 is ignored and SIGTERM keeps its default. */
void hp_ckpt_signals(const char *dir);

/* When job points come and which checkpoints are due. */
struct hp_ckpt_cadence {
    int on;         /* a checkpoint directory was given */
    long every_mb;  /* a checkpoint every this many of a VW's minibatches (0: none) */
    double every_s; /* or every this many seconds of training (0: none) */
};

/* The cadence for --checkpoint-dir `dir` (NULL: off) and --checkpoint-every (every_samples
 * samples or every_s seconds, both 0 when not given), with per_mb samples in one minibatch of
 * every VW. 0, or -HP_EINVAL (logged) for --checkpoint-every without --checkpoint-dir. */
int hp_ckpt_cadence_init(struct hp_ckpt_cadence *c, const char *dir, long every_samples,
                         double every_s, long per_mb);

/* Whether a checkpoint is due after nb of an epoch's my_mb minibatches, `since` seconds of
 * training after the last one (or the run's start). */
int hp_ckpt_due(const struct hp_ckpt_cadence *c, long nb, long my_mb, double since);

/* A stage's units [u0, u1) of VW vw and their host floats in the stage's layout (net.h:
 * unit after unit): parameters and momentum (the same count), batch-norm statistics; and a WSP
 * worker's client state (has_client: hp_ckpt_units_client). */
struct hp_ckpt_units {
    const struct hp_model *model;
    int u0, u1, vw;
    float *params, *momentum, *state;
    float *moment2; /* AdamW's second moment, parallel to params (NULL under SGD) */
    int has_client;
    void *client; /* hp_wsp_save's blob of client_bytes */
    size_t client_bytes;
    int64_t unpushed;
};

/* A copy of the WSP client's state into u (wsp NULL: none), malloc'd. 0 or -HP_ENOMEM. */
int hp_ckpt_units_client(struct hp_ckpt_units *u, const struct hp_wsp *wsp);

/* Free u's buffers (all malloc'd: a checkpoint's host copies). */
void hp_ckpt_units_free(struct hp_ckpt_units *u);

/* A worker's part of checkpoint directory dir (rank-RANK.part): per unit its parameters,
 * momentum and statistics, and the client state when u has it; its size and CRC-32 in *note.
 * 0, or a negative code (logged; the part file is not left behind). Only reads u: a thread may
 * run it while the worker trains on. */
int hp_ckpt_write_units(const char *dir, int rank, const struct hp_ckpt_units *u,
                        struct hp_ckpt_note *note);

/* What a job's ranks share to take checkpoints. */
struct hp_ckpt_job {
    struct hp_comm *comm;
    const struct hp_plan *plan;
    const struct hp_model *model;
    int rank, v, s;        /* s = -1 for a PS shard */
    int timeout_ms;        /* a send */
    int wait_ms;           /* waiting for every part */
    const char *parent;    /* --checkpoint-dir */
    const char *plan_path; /* --plan: copied into each checkpoint */
    int keep;              /* --checkpoint-keep */
};

/* The reporter, at a job point whose verdict checkpoints: make the next PARENT/ckpt-N after
 * `last` (and after every one there); *seq and its path in dir. 0 or -HP_EIO (logged). */
int hp_ckpt_begin(const struct hp_ckpt_job *c, long last, long *seq, char *dir, size_t n);

/* What the reporter says of a complete checkpoint. */
struct hp_ckpt_written {
    int nfiles;
    uint64_t bytes;
    double seconds;
};

/* A worker's checkpoint under way: its part written by a thread of its own from host copies
 * while the worker trains on (--checkpoint-write background). */
struct hp_ckpt_pending;

/* Start this worker's part of checkpoint `seq` (made by hp_ckpt_begin on the reporter): tell
 * its PS shards that its pushes are all sent (wsp: a WSP worker), take u's buffers (host
 * copies, malloc'd, with the client state: hp_ckpt_units_client; *u is emptied, and freed on
 * failure too) and write the part in a thread. The reporter keeps `where` (the position and
 * the job's settings) for the manifest. 0 and *out, or a negative code (logged). */
int hp_ckpt_start(const struct hp_ckpt_job *c, long seq, struct hp_ckpt_units *u,
                  const struct hp_wsp *wsp, const struct hp_ckpt_info *where,
                  struct hp_ckpt_pending **out);

/* Finish checkpoint pd: with wait, wait for its part and (the reporter) every rank's and
 * shard's note; without, only look (a probe: nothing waits) and finish if all is there. A
 * worker sends its note to the reporter once its part is written; the reporter, every note
 * in, copies the plan, writes the manifest and prunes, or removes the checkpoint when a part
 * failed (naming it; the checkpoints before it stay). tell (the same on every worker): the
 * reporter then says the outcome to every worker, which waits for it. *done = 1 when pd is
 * finished (and freed); then *ok is 1 or 0 on the reporter, and with tell everywhere (else
 * -1), and the reporter's *out says what was written. 0, or a negative code when the protocol
 * broke (the job fails); a part not written is not that. */
int hp_ckpt_finish(const struct hp_ckpt_job *c, struct hp_ckpt_pending *pd, int wait, int tell,
                   int *done, int *ok, struct hp_ckpt_written *out);

/* A checkpoint left unfinished (the job failed): its thread joined, its memory freed. */
void hp_ckpt_abandon(struct hp_ckpt_pending *pd);

/* Start and finish with wait and tell: the whole checkpoint before training goes on. */
int hp_ckpt_take(const struct hp_ckpt_job *c, long seq, struct hp_ckpt_units *u,
                 const struct hp_wsp *wsp, const struct hp_ckpt_info *where, int *ok,
                 struct hp_ckpt_written *out);

/* A PS shard's part of checkpoint directory dir: per unit it holds the global weights and
 * every VW's clock; its size and CRC-32 in *note. 0 or a negative code (logged). */
int hp_ckpt_write_shard(const char *dir, int rank, const struct hp_plan *p,
                        const struct hp_model *model, struct hp_ps_store *st,
                        struct hp_ckpt_note *note);

/* A PS shard's part of checkpoint `seq`: its units copied (global weights and clocks) and
 * written by a thread while it serves on; finish it with hp_ckpt_finish (no tell), which sends
 * the note to the reporter. 0 and *out (a part that cannot be written is a failed note), or
 * -HP_ENOMEM. */
int hp_ckpt_start_shard(const struct hp_ckpt_job *c, long seq, struct hp_ps_store *st,
                        struct hp_ckpt_pending **out);

/* Where a resumed run starts. */
struct hp_ckpt_resume {
    long seq;         /* the checkpoint's number: the next one is numbered after it */
    long epoch0, nb0; /* the epoch, and the VW's minibatches into it */
    long q0;          /* the VW minibatch from which WSP counts waves: 0 under the same plan,
                         else where this run starts (epoch0 x my_mb + nb0) */
    int exact;        /* the same plan: every rank restores its own part */
};

/* Open checkpoint `dir` (--resume; db: the GPU types of its plan) for a job of `model` under
 * plan `now` with my_mb minibatches per VW and epoch and `epochs` epochs: the model, seed and
 * batch must match, and something must be left to train. *src is released by the caller
 * (hp_ckpt_source_release) either way. 0, or a negative code (logged). */
int hp_ckpt_resume_open(const char *dir, const struct hp_gpudb *db, const struct hp_model *model,
                        const struct hp_plan *now, long my_mb, long epochs,
                        struct hp_ckpt_source *src, struct hp_ckpt_resume *where);

/* A worker's units from the checkpoint into u's host buffers (rank: this rank of the new
 * plan). 0 or a negative code (logged, naming the file). */
int hp_ckpt_load_units(struct hp_ckpt_source *src, const struct hp_ckpt_resume *where, int rank,
                       const struct hp_ckpt_units *u);

/* Under the same plan, a WSP worker's state (wsp NULL: nothing). */
int hp_ckpt_load_wsp(struct hp_ckpt_source *src, const struct hp_ckpt_resume *where, int rank,
                     struct hp_wsp *wsp);

/* A PS shard's units: under the same plan its own part (weights and clocks); under another
 * every unit it now holds from the checkpoint's consensus, clocks from 0. */
int hp_ckpt_load_shard(const char *dir, const struct hp_gpudb *db, const struct hp_plan *now,
                       int rank, struct hp_ps_store *st);

#endif
