/* ps.h - parameter-server shards and the worker's side of Wave Synchronous Parallel
 * (the rules: wsp.h).
 *
 * The shard is ps_shard.h (ps_shard.c), the worker's side ps_client.h (ps_client.c); this
 * header is what both share: the protocol below and the trace files.
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

#include <stdint.h>
#include <stdio.h>

#define HP_TRACE_HEADER "event,rank,vw,stage,wave,minibatch,threshold,clock,global,own,t0,t1,incl\n"

/* Open PREFIX.<rank> for writing and put HP_TRACE_HEADER in it (NULL and logged on failure). */
FILE *hp_ps_trace_open(const char *prefix, int rank);

/* Write the incl column: per VW x "min:max" of mm[2x], mm[2x + 1], ';'-separated, and a
 * newline. */
void hp_ps_trace_clocks(FILE *f, const int64_t *mm, int nvws);

#endif
