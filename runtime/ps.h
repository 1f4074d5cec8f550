/* ps.h - parameter-server shards and the worker's side of Wave Synchronous Parallel
 * (DESIGN.md section 6).
 *
 * Shards. PS shard i (rank nranks - nshards + i) holds the global weights of the units the
 * plan gives it (plan->unit_shard), initialised from the job's seed exactly as every worker
 * initialises its stage, so all VWs and the PS start from identical weights. For every VW v
 * and owned unit u it keeps clock[v][u] = the waves VW v has pushed for u (a unit is pushed by
 * the one stage of v that runs it; VWs may partition differently). The optimizer state
 * (momentum) stays on the workers; the PS only adds.
 *
 * Messages (runtime/comm.h), between worker stage (v, s) and each shard that owns some of its
 * units, the payload always in the stage's unit order restricted to the shard's units:
 *   PUSH  worker -> shard: clock = the wave c, payload = the sum of the stage's updates over
 *         wave c (floats). The shard checks clock[v][u] == c for each unit, adds, and sets
 *         clock[v][u] = c + 1.
 *   PULL  worker -> shard (request): minibatch = the wave it is for (or -1: evaluation),
 *         clock = the largest threshold, payload = nvws int64 thresholds t[x]. The shard
 *         answers once clock[x][u] >= t[x] for every VW x and unit u of the stage it owns
 *         (requests that must wait are kept and answered after later pushes).
 *   PULL  shard -> worker (reply): clock = the global clock of those units (the minimum over
 *         VWs and units), payload = the floats of the global weights, then for every VW x the
 *         smallest and largest clock[x][u] over the units (2 x nvws int64): which of each
 *         VW's waves the weights hold.
 *   CONTROL worker -> shard: the worker is done; the shard serves until all are.
 * From one worker the shard sees its messages in the order they were sent (one receive of any
 * type from any peer), so a pull that follows a push is answered with that push included.
 * Replies are sent asynchronously (a shard never blocks on a worker).
 *
 * Trace (--trace PREFIX, in PREFIX.<rank>, CSV with the header below): shards write `push`
 * (after applying) and `serve` (when a reply leaves); workers write `push`, `pull` (the wait
 * from t0 to t1), `evalpull`, and per forward pass `mb` (what the weights held). The columns:
 *   event,rank,vw,stage,wave,minibatch,threshold,clock,global,own,t0,t1,incl
 * clock: the VW's clock after the event (shard) or the waves it has pushed (worker); global:
 * the global clock of the stage's units on that shard (-1 when not known); own: for `mb`, the
 * count of the VW's own minibatch updates in the weights; incl: "min:max" per VW, separated
 * by ';' (the waves of each VW that the weights or the shard hold). Times are CLOCK_MONOTONIC
 * seconds (comparable between the ranks of one host).
 */
#ifndef HP_PS_H
#define HP_PS_H

#include "cluster.h"
#include "comm.h"
#include "model.h"
#include "options.h"
#include "plan.h"

#include <stdint.h>
#include <stdio.h>

#define HP_TRACE_HEADER "event,rank,vw,stage,wave,minibatch,threshold,clock,global,own,t0,t1,incl\n"

/* Serve PS shard rank `rank` of `plan` until every worker rank has said it is done. */
int hp_ps_run(const struct hp_plan *plan, const struct hp_cluster *cl, const struct hp_model *model,
              int rank, struct hp_comm *comm, const struct hp_options *o);

/* A worker rank tells every PS shard that it is done (the last message it sends them). */
int hp_ps_worker_done(const struct hp_plan *plan, struct hp_comm *comm, int rank, int vw, int stage,
                      int timeout_ms);

/* The worker side: stage (v, s)'s view of the shards that own its units. */
struct hp_ps_client;

/* `init` is the stage's initial parameters (host, the stage's floats); `node` the node of
 * the stage's GPU (traffic to the shards of other nodes is counted). trace may be NULL. */
int hp_ps_client_create(const struct hp_plan *plan, const struct hp_model *model, int v, int s,
                        int node, int rank, struct hp_comm *comm, const float *init, int timeout_ms,
                        FILE *trace, struct hp_ps_client **out);
void hp_ps_client_destroy(struct hp_comm *comm, struct hp_ps_client *c);

/* Push wave `wave`: the update since the last push or pull is local - S, where S is the
 * client's copy of the global weights as last pulled plus its own pushes since (kept in the
 * same float operations as the shard, so that with one VW S equals the shard's weights bit
 * for bit). Sends are asynchronous. */
int hp_ps_push(struct hp_ps_client *c, const float *local, long wave);

/* Ask every shard for its units once each VW x has pushed thr[x] waves of them, and wait for
 * the replies (into the client). `wave` is the wave the pull is for, -1 for evaluation.
 * Afterwards hp_ps_global gives the pulled weights and hp_ps_included what they hold. */
int hp_ps_pull(struct hp_ps_client *c, const int64_t *thr, long wave);
const float *hp_ps_global(const struct hp_ps_client *c);
/* Smallest and largest waves of VW x in the last pulled weights (0, 0 before any pull). */
void hp_ps_included(const struct hp_ps_client *c, int x, int64_t *min, int64_t *max);

/* Rebase after hp_ps_pull: local += pulled - S, then S = pulled (local = the global weights
 * plus the own updates not yet pushed; with one VW pulled == S and local is unchanged). */
void hp_ps_rebase(struct hp_ps_client *c, float *local);

/* Waves this client has pushed. */
long hp_ps_pushed(const struct hp_ps_client *c);

/* The global clock of the stage's units in the last pull (-1: no shard holds any). */
int64_t hp_ps_global_clock(const struct hp_ps_client *c);

/* Wait until the pushes and requests in flight have left (before saying done). */
int hp_ps_flush(struct hp_ps_client *c);

/* What crossed to shards on other nodes (payload floats; pull replies counted by their
 * weights), and how often. */
struct hp_ps_stats {
    uint64_t remote_push_bytes, remote_pull_bytes;
    long pushes, pulls, eval_pulls;
    double pull_wait_s; /* in training pulls, from request to reply */
};
void hp_ps_client_stats(const struct hp_ps_client *c, struct hp_ps_stats *out);

/* Open PREFIX.<rank> for writing and put HP_TRACE_HEADER in it (NULL and logged on failure). */
FILE *hp_ps_trace_open(const char *prefix, int rank);

/* Write the incl column ("min:max;..." per VW, "-" for a stage no shard holds) of the last
 * training pull to f, and a newline. */
void hp_ps_trace_incl(const struct hp_ps_client *c, FILE *f);

#endif
