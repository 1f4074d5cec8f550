/* ckptfile.h - checkpoint files: what a checkpoint of a job is on disk, by unit (README
 * "Checkpoints and resume"). Both sides use it: the ranks write and load checkpoints through
 * runtime/ckpt.h (when, what, the protocol), the launcher resolves --resume and checks one
 * before it plans.
 *
 * A checkpoint is a directory PARENT/ckpt-N (hp_ckpt_dir, the one place that names it) (N = 1, 2,
 * ... over the life of the job, resumed runs continuing the count) holding: rank-R.part  one per
 * rank of the plan it was taken under, written by that rank: a 24-byte file header ("HPCKPART",
 * format version, rank), then records, each a 24-byte header (kind, unit, vw, bytes, CRC-32 of the
 * payload) and its payload. A worker stage writes, per unit of its stage, the parameters, the
 *                momentum and the batch-norm statistics (HP_CK_PARAMS, _MOMENTUM, _STATE); a
 *                WSP worker also its client's state (HP_CK_CLIENT, unit -1: waves pushed, what
 *                its weights hold, its copy of the global weights). A PS shard writes, per unit
 *                it owns, the global weights and every VW's clock of the unit (HP_CK_GLOBAL,
 *                HP_CK_CLOCKS).
 *   plan.ini     the plan (with its options) the checkpoint was taken under.
 *   manifest     written last, by the reporter (stage 0 of VW 0), once every part is on disk:
 *                "key = value" lines (the format, the model and its signature, seed, batch,
 *                training samples, the position: epoch and the VWs' minibatches into it, the
 *                job's samples so far), one "file = NAME BYTES CRC32" line per file, and a
 *                last line "checksum = CRC32" of every byte before it.
 * Every file is written to NAME.tmp, fsync()ed and renamed; the directory is fsync()ed before
 * the manifest is, and after. A directory without a valid manifest is not a checkpoint.
 *
 * The checkpoint is taken at a job point (runtime/jobpoint.h): every pipeline drained, every
 * worker at the same place of its data, every push of the waves so far on its shard. So resuming
 * under the same plan restores every rank exactly (bit for bit with one VW and with dp); under
 * another plan (other GPUs, policy, Nm, number of VWs) each unit is loaded where the new plan
 * puts it (hp_ckpt_unit_source).
 */
#ifndef HP_CKPTFILE_H
#define HP_CKPTFILE_H

#include "gpudb.h"
#include "model.h"
#include "plan.h"

#include <stddef.h>
#include <stdint.h>

#define HP_CKPT_FORMAT 1
#define HP_CKPT_EXIT 75 /* exit status of a job that checkpointed and stopped on request */

enum hp_ck_kind {
    HP_CK_PARAMS = 1,   /* a unit's parameters (floats) */
    HP_CK_MOMENTUM = 2, /* its momentum (floats) */
    HP_CK_STATE = 3,    /* its batch-norm running statistics (floats) */
    HP_CK_CLIENT = 4,   /* a WSP worker's client (unit -1), hp_ps_client_save */
    HP_CK_GLOBAL = 5,   /* a shard's global weights of a unit (floats) */
    HP_CK_CLOCKS = 6,   /* a shard's clock of a unit for every VW (int64) */
    HP_CK_MOMENT2 = 7,  /* a unit's AdamW second moment (floats; its first is HP_CK_MOMENTUM) */
};

/* PARENT/ckpt-SEQ into out (size n): 0, or -HP_EINVAL when it does not fit. */
int hp_ckpt_dir(const char *parent, long seq, char *out, size_t n);

/* The manifest, in memory. */
#define HP_CKPT_MAX_FILES (1 << 18) /* a plan's ranks (65,536 GPUs and their shards) and more */
struct hp_ckpt_info {
    char dir[4096];
    long seq;
    char model[64];
    uint64_t model_sig;
    int nunits;
    uint64_t seed;
    long batch, ntrain, epochs;
    long epoch, minibatch; /* the position: each VW has trained `minibatch` of epoch `epoch` */
    int nvws, nranks;
    long samples; /* training samples of the job before this point (all VWs, all runs) */
    double lr, momentum, weight_decay; /* the training options it was taken with */
    char schedule[16];
    char optimizer[16]; /* "sgd" (also a checkpoint from before the key) or "adamw" */
    char reason[16];
    int nfiles, files_max; /* files_max: room in the arrays (hp_ckpt_check's) */
    char (*names)[64];     /* [nfiles] */
    uint64_t *bytes;
    uint32_t *crc;
};
void hp_ckpt_info_release(struct hp_ckpt_info *ci);

/* Model signature: the units' count, kinds and sizes. */
uint64_t hp_ckpt_model_sig(const struct hp_model *m);

/* Whether the checkpoint of `ci` can continue a job of model m with this seed and batch (they
 * decide the weights' layout and the data order): 0, or -HP_EDATA with why (a sentence naming
 * both sides) in `why` (size n). */
int hp_ckpt_compatible(const struct hp_ckpt_info *ci, const struct hp_model *m, uint64_t seed,
                       long batch, char *why, size_t n);

/* Whether the checkpoint of `ci` continues a run of the same data: the same training samples
 * (ntrain, from --train-limit: it decides the data order and what the position means), else
 * -HP_EDATA with why; and, under the cosine schedule, the same --epochs (the learning rate
 * follows the job's total steps), else 1 with why (a warning: a longer job may go on from a
 * checkpoint). 0 when both hold. */
int hp_ckpt_same_data(const struct hp_ckpt_info *ci, long ntrain, long epochs, int cosine,
                      char *why, size_t n);

/* Check checkpoint directory `dir`: the manifest's syntax and checksum, and every file it
 * lists (size; with `contents`, the CRC-32 of every byte). 0 and *ci filled, or
 * -HP_EDATA / -HP_EIO with why (a sentence naming the file and what is wrong). */
int hp_ckpt_check(const char *dir, int contents, struct hp_ckpt_info *ci, char *why, size_t n);

/* The newest valid checkpoint under `parent` (by N, contents checked; invalid ones are named
 * in a warning and skipped): 0 with *ci, 1 when there is none, or a negative code. */
int hp_ckpt_latest(const char *parent, struct hp_ckpt_info *ci);

/* Create PARENT (if missing, mode 0700) and PARENT/ckpt-N with N after every ckpt-* there and
 * after `after`; its path in out. 0 and *seq, or -HP_EIO (logged). */
int hp_ckpt_new_dir(const char *parent, long after, long *seq, char *out, size_t n);

/* Remove all but the newest `keep` valid checkpoints under parent, and incomplete ones older
 * than the newest valid one (only files named as a checkpoint's are removed). */
void hp_ckpt_prune(const char *parent, int keep);

/* Remove a checkpoint directory (its own files only). */
void hp_ckpt_remove(const char *dir);

/* Write the manifest of `ci` (files listed there must be in ci->dir) atomically. */
int hp_ckpt_manifest_write(const struct hp_ckpt_info *ci);

/* Copy file `src` into dir as `name` (fsync()ed); its size and CRC-32. */
int hp_ckpt_copy_file(const char *src, const char *dir, const char *name, uint64_t *bytes,
                      uint32_t *crc);

/* What a rank tells the reporter of its part (HP_MSG_CHECKPOINT payload): 0 or failed, and the
 * part's size and CRC-32 for the manifest. */
struct hp_ckpt_note {
    int64_t status;
    uint64_t bytes;
    uint32_t crc, pad;
};

/* A part file being written (rank-R.part.tmp until closed). */
struct hp_ckpt_writer;
int hp_ckpt_part_create(const char *dir, int rank, struct hp_ckpt_writer **out);
int hp_ckpt_part_add(struct hp_ckpt_writer *w, int kind, int unit, int vw, const void *data,
                     size_t bytes);
/* Flush, fsync, rename to rank-R.part; its size and CRC-32; frees w (also on failure). */
int hp_ckpt_part_close(struct hp_ckpt_writer *w, uint64_t *bytes, uint32_t *crc);
void hp_ckpt_part_abort(struct hp_ckpt_writer *w);

/* A part file being read: its records indexed. */
struct hp_ckpt_reader;
int hp_ckpt_part_open(const char *dir, int rank, struct hp_ckpt_reader **out);
/* Read record (kind, unit) of exactly `bytes` into out, CRC checked; a missing record, another
 * size or a bad CRC is -HP_EDATA, logged naming the file, unit and kind. */
int hp_ckpt_part_read(struct hp_ckpt_reader *r, int kind, int unit, void *out, size_t bytes);
/* Whether the part has record (kind, unit). */
int hp_ckpt_part_has(const struct hp_ckpt_reader *r, int kind, int unit);
void hp_ckpt_part_close_reader(struct hp_ckpt_reader *r);

/* A checkpoint being resumed from: its manifest, the plan it was taken under (its cluster),
 * and its parts, opened when first asked for. */
struct hp_ckpt_source {
    struct hp_ckpt_info ci;
    struct hp_plan plan;
    struct hp_cluster cl;
    struct hp_ckpt_reader **parts; /* [plan.nranks] */
};
/* Open checkpoint `dir` (the manifest checked, sizes only) with its plan.ini (GPU types from db),
 * which must agree with the manifest and have nunits units. 0, or a negative code logged naming
 * the option '--resume' and what is wrong; *src is released by hp_ckpt_source_release either
 * way. */
int hp_ckpt_source_open(const char *dir, const struct hp_gpudb *db, int nunits,
                        struct hp_ckpt_source *src);
/* Rank `rank`'s part (NULL, logged, when it cannot be read). */
struct hp_ckpt_reader *hp_ckpt_source_part(struct hp_ckpt_source *src, int rank);
void hp_ckpt_source_release(struct hp_ckpt_source *src);

/* Whether plans a (the checkpoint's) and b (now) give every rank the same role and units, so
 * that every rank can restore its own part: same grouping, VWs, stages, units, Nm, shards,
 * unit placement, batch and seed. */
int hp_ckpt_same_layout(const struct hp_plan *a, const struct hp_plan *b);

/* Under another plan: the rank of the checkpoint's plan `old` whose part holds unit u for new
 * VW v (the old VW v mod old->nvws), and the shard rank holding u's global weights (-1 when
 * the old plan has none for u). */
void hp_ckpt_unit_source(const struct hp_plan *old, int v, int u, int *worker, int *shard);

#endif /* HP_CKPTFILE_H */
