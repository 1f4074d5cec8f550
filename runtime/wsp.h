/* wsp.h - Wave Synchronous Parallel on a worker stage: when it waits for the other virtual
 * workers, pulls the global weights and rebases on them; when it pushes its updates; what its
 * weights hold (the trace); evaluation on the global weights. The rules and the staleness
 * bound they give are at hp_wsp_gate (wsp.c); tests/wsp/wsp_check.py checks a job's traces
 * against them.
 *
 * The state is this module's: the parameter-server client it talks through (ps_client.h, or
 * a fake in the unit tests), the waves pushed, the updates not yet pushed, the thresholds.
 * The worker's loop (worker.c) calls it at the edges of waves; the passes know nothing of it.
 * A NULL struct hp_wsp * (no PS shards: one VW without shards, or dp) is allowed everywhere
 * and does nothing.
 *
 * Minibatch q below is the VW's index since this run started counting waves (0 at the job's
 * start, or at a resume under another plan): wave C = q / Nm.
 */
#ifndef HP_WSP_H
#define HP_WSP_H

#include "comm.h"
#include "model.h"
#include "plan.h"
#include "ps_client.h"
#include "timeline.h"
#include "weights.h"

#include <stdint.h>
#include <stdio.h>

struct hp_wsp_config {
    const struct hp_plan *plan; /* the VWs' Nm, the staleness threshold D, the batch */
    int rank, v, s;
    size_t nparams;         /* the stage's */
    long run_mb;            /* the VW's minibatches from q = 0 to the job's end (every VW
                               trains as many) */
    const char *trace;      /* --trace PREFIX: this rank's records in PREFIX.<rank> (ps.h;
                               NULL: none) */
    struct hp_timeline *tl; /* --timeline: pushes, the gate's waits, evaluation pulls */
    double *comm_s;         /* where the time of pulls and pushes is added */
};

struct hp_wsp;

/* WSP for stage (v, s) of c->plan through a new client of its PS shards (ps_client.h): the
 * stage's units of `model`, its GPU on `node`, its weights now on wt->dev (the client's first
 * view of the global weights; wt->host is overwritten). timeout_ms: a shard's silence; wait_ms: how
 * long a pull may wait for the other VWs. *out is NULL (and 0 returned) when the plan has no shards
 * or is dp. 0, or a negative code (logged). */
int hp_wsp_create(const struct hp_wsp_config *c, const struct hp_model *model, int node,
                  struct hp_comm *comm, const struct hp_weights *wt, int timeout_ms, int wait_ms,
                  struct hp_wsp **out);

/* WSP through `ops` on `ps` (a fake parameter server: tests). 0 or -HP_ENOMEM. */
int hp_wsp_create_with(const struct hp_wsp_config *c, const struct hp_ps_ops *ops, void *ps,
                       struct hp_wsp **out);

void hp_wsp_destroy(struct hp_comm *comm, struct hp_wsp *w);

/* The waves of every VW that wave C (>= 2) waits for: max(0, C - 1 - D). */
long hp_wsp_threshold(long C, long D);

/* Whether minibatch q starts a wave that has to pass the gate (wave C >= 2). The weights
 * change there: stash them first (stash.h). */
int hp_wsp_gate_due(const struct hp_wsp *w, long q);

/* The gate, before the forward pass of minibatch q (hp_wsp_gate_due): wait until every VW
 * has pushed waves 0 .. C - 2 - D of the stage's units, pull them, and rebase the weights
 * (wt->dev) on them: local = pulled + the own updates not yet pushed. 0 or a negative code. */
int hp_wsp_gate(struct hp_wsp *w, long q, const struct hp_weights *wt);

/* After the update of minibatch q: counted; at the last minibatch of a wave, the sum of the
 * stage's updates over the wave is pushed. */
int hp_wsp_updated(struct hp_wsp *w, long q, const struct hp_weights *wt);

/* The waves this stage has pushed (0 for NULL). */
long hp_wsp_pushed(const struct hp_wsp *w);

/* The job's end: a last wave cut short by the end of the data is pushed as it is. */
int hp_wsp_push_rest(struct hp_wsp *w, const struct hp_weights *wt);

/* The trace's record of minibatch q's forward pass (after the gate): its wave, the threshold,
 * the waves pushed, the global clock, the own updates in the weights, what they hold of
 * every VW. Nothing without --trace. */
void hp_wsp_trace_minibatch(struct hp_wsp *w, long q);

/* Evaluation on the global weights (VW 0 with other VWs): pull them (final: once every VW
 * has pushed all its waves, else what the shards hold), keep the local weights aside and put
 * the global ones in their place; hp_wsp_eval_end puts the local ones back. With one VW (or
 * no shards) both do nothing: the VW evaluates its own weights. */
int hp_wsp_eval_begin(struct hp_wsp *w, int final, const struct hp_weights *wt);
int hp_wsp_eval_end(struct hp_wsp *w, const struct hp_weights *wt);

/* The end of the stage's work: every push and request has left. */
int hp_wsp_flush(struct hp_wsp *w);

/* The progress line's part: every VW's clock as of this stage's last pull, the global clock,
 * the job's images/s from those clocks over `elapsed` seconds (" | clocks 3,2 global 2 | job
 * 1234 img/s"); nothing with one VW or before the first pull. */
void hp_wsp_print_clocks(const struct hp_wsp *w, FILE *f, double elapsed);

/* What went to and came from the shards (the stats file); zero without shards. */
void hp_wsp_stats(const struct hp_wsp *w, struct hp_ps_stats *out);

/* The stage's WSP state for a checkpoint: the client's blob (hp_wsp_state_bytes bytes) and
 * the updates not yet pushed; restored under the same plan. */
size_t hp_wsp_state_bytes(const struct hp_wsp *w);
void hp_wsp_save(const struct hp_wsp *w, void *blob, int64_t *unpushed);
int hp_wsp_restore(struct hp_wsp *w, const void *blob, size_t bytes, int64_t unpushed);

#endif
