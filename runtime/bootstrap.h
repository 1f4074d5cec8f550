/* bootstrap.h - how the ranks of a job find each other: every rank publishes one blob (its
 * UCX worker address) and collects everybody's.
 *
 * Two ways:
 * - local (hetpipe run --local): through files in a private directory (mode 0700, owned by
 *   the caller; anything else is refused). Rank r writes "addr.<r>" by write-then-rename
 *   (a temporary name, fsync, rename), so a reader sees a whole file or none. A file holds a
 *   small validated header (magic, version, rank, nranks, blob length, checksum) and the blob.
 * - pmix (srun --mpi=pmix): PMIx_Init gives rank and job size; PMIx_Put (global scope) +
 *   PMIx_Commit + PMIx_Fence (collecting data, with a timeout) + PMIx_Get per peer.
 *
 * A peer that does not show up within the timeout gives -HP_ETIMEOUT and one error that names
 * the missing ranks (at most a few, then a count; under PMIx, whose fence does not say who is
 * missing, the error says the fence timed out); a malformed file gives -HP_EPROTOCOL naming
 * the file and the field. Never a hang. PMIx status codes never leave bootstrap.c.
 */
#ifndef HP_BOOTSTRAP_H
#define HP_BOOTSTRAP_H

#include <stddef.h>
#include <stdio.h>

struct hp_comm;
struct hp_boot;

/* Local bootstrap of rank `rank` of `nranks` through directory `dir` (which must exist, be a
 * directory owned by the caller with mode 0700). */
int hp_boot_local_open(const char *dir, int rank, int nranks, struct hp_boot **out);

/* Read and validate address file DIR/addr.<r> of a job of nranks ranks, as the local bootstrap
 * does (tests/fuzz). 1 with *blob (malloc'ed: the caller frees it) and *len; 0 when there is
 * no such file (*blob NULL); -HP_EPROTOCOL (logged, naming the file and the field) for a
 * malformed one, or another negative code. */
int hp_boot_addr_read(const char *dir, int r, int nranks, void **blob, size_t *len);

/* PMIx bootstrap: PMIx_Init; rank and size come from PMIx. -HP_EUNSUPPORTED when the
 * process was not started by a PMIx server (say so and suggest srun --mpi=pmix). */
int hp_boot_pmix_open(struct hp_boot **out);

/* 1 when the environment says a PMIx server started us (PMIX_NAMESPACE / PMIX_RANK set). */
int hp_boot_pmix_present(void);

/* For hetpipe-rank --self-check (hetpipe doctor): "pmix.version = VERSION" (the library's,
 * PMIx_Get_version; empty when it reports none) on f. */
void hp_boot_self_check(FILE *f);

int hp_boot_rank(const struct hp_boot *b);

/* When the launcher's task order is not the job's rank order (hetpipe launch groups tasks by
 * node and hetjob component): rank_of_task[t] is the rank of task t (t = the PMIx rank), a
 * permutation of 0..size-1 (copied). Afterwards hp_boot_rank() returns this task's rank and
 * hp_boot_wireup() connects rank rank_of_task[t] to task t's address; hp_boot_blob() stays
 * indexed by task. 0, -HP_EINVAL (not a permutation, logged) or -HP_ENOMEM. */
int hp_boot_set_ranks(struct hp_boot *b, const int *rank_of_task);
int hp_boot_size(const struct hp_boot *b);
const char *hp_boot_kind(const struct hp_boot *b); /* "local" or "pmix" */

/* Publish `blob` (len bytes, 1 <= len <= 64 KiB) for this rank and collect every rank's.
 * Call once (a call refused for its arguments does not count). timeout_ms >= 0 bounds the
 * whole wait (PMIx rounds it up to whole seconds); a negative one is -HP_EINVAL, as there is
 * no waiting without a limit. Local: a file already there that fails validation is
 * -HP_EPROTOCOL at once, not retried (files appear whole, by rename). */
int hp_boot_allgather(struct hp_boot *b, const void *blob, size_t len, int timeout_ms);

/* After a successful hp_boot_allgather: rank r's blob (owned by b, valid until
 * hp_boot_close); NULL before, or for r outside [0, size). */
const void *hp_boot_blob(const struct hp_boot *b, int r, size_t *len);

/* Exchange comm's worker address through b (hp_boot_allgather, so once per b) and connect to
 * every rank, itself included. comm must have been created for b's rank and size. */
int hp_boot_wireup(struct hp_boot *b, struct hp_comm *comm, int timeout_ms);

/* Free; PMIx_Finalize under pmix. Local files stay (peers may still be reading them); the
 * launcher removes the directory. NULL is allowed. */
void hp_boot_close(struct hp_boot *b);

#endif
