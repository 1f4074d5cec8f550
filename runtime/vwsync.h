/* vwsync.h - what the stages of a virtual worker settle between them after each minibatch's
 * backward pass, before its update:
 *   - tied embeddings (net.h: a head with tie = true keeps a copy of its embed's token
 *     matrix): when the head and its embed sit on different stages, the head's stage sends
 *     its copy's gradient to the embed's, which adds the two and sends the sum back, so both
 *     copies take the same update and never drift (Megatron-LM's embedding group);
 *   - the global gradient norm for clipping (--clip): every later stage sends its per-unit
 *     sums of squares (hp_net_grad_sumsq_units) to the first stage, which adds all of them in
 *     unit order (the order hetpipe train adds them in: the norm is its norm, bit for bit),
 *     clips its own gradients and sends the norm to every later stage.
 * The first stage runs a minibatch's backward pass last, so it settles at once; a later stage
 * sends its parts after its backward pass and settles before its next pass (its update
 * waits: forward passes still see the weights they would have without the wait). With one
 * stage (dp's replicas) both happen in the net. The messages (HP_MSG_VWSYNC, the minibatch's
 * index, the part in the header's clock) go straight between the first stage and each later
 * one, each part from its own buffer; the waits are on the timeline as "vwsync".
 *
 * Within a VW the copies are thus identical bit for bit (a pipeline, dp's replicas). Under
 * WSP each stage pulls its units' global weights at its own gate: the embed's and the head's
 * copy then hold the other VWs' updates as pulled at different moments (and added by their
 * shards in the order they arrived), so between VWs' pushes they differ by those updates;
 * every VW's own updates to both are the same floats.
 */
#ifndef HP_VWSYNC_H
#define HP_VWSYNC_H

#include "comm.h"
#include "net.h"
#include "plan.h"
#include "timeline.h"

struct hp_vwsync_config {
    struct hp_comm *comm;
    const struct hp_plan *plan;
    int v, s;           /* the stage */
    struct hp_net *net; /* its units */
    struct hp_backend *be;
    double clip; /* --clip (0: none) */
    int wait_ms; /* the longest wait for a peer's part */
    struct hp_timeline *tl;
};

struct hp_vwsync;

/* *out: NULL when there is nothing to settle (no clipping, no tie across the VW's stages or
 * within this one). 0 or -HP_ENOMEM. */
int hp_vwsync_create(const struct hp_vwsync_config *c, struct hp_vwsync **out);
/* Waits (bounded) for sends still in flight, then frees. NULL allowed. */
void hp_vwsync_destroy(struct hp_vwsync *y);

/* After the backward pass of the VW's minibatch j (q: as the timeline counts it): the first
 * stage (or a lone one) settles everything now (*later = 0); a later stage sends its parts
 * and *later = 1 when it must call hp_vwsync_settle(j) before its next pass. NULL y: nothing
 * (*later = 0). 0 or a negative code (logged: a peer silent past the wait, a norm that is not
 * finite). */
int hp_vwsync_backward(struct hp_vwsync *y, long j, long q, int *later);
int hp_vwsync_settle(struct hp_vwsync *y, long j, long q);

#endif
