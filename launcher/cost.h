/* cost.h - the planner's cost and memory model of a model's units on GPU types.
 *
 * Time of unit u on type t at minibatch B (forward and backward separately), by default a
 * roofline estimate: max(FLOPs B / (peak x efficiency), bytes B / memory bandwidth), with the
 * per-sample FLOPs and bytes of layers.h; a measured profile (hetpipe profile, later) can
 * override any entry. Transfer time of b bytes over a link: b / bandwidth + latency.
 *
 * Memory of a stage holding units [u0, u1) with m minibatches in flight at it: what the
 * runtime's hp_net allocates (net.h), to the byte on the CPU backend, plus m - 1 stashed
 * versions of the parameters:
 *   parameters + gradients + momentum (+ AdamW's second moment) + batch norm state
 *   + m x (the stage's input + the op outputs that are not written in place and not
 *     transient + dropout masks and batch norm saves) + the largest transient tensor
 *   + activation gradients: the input's (unless the stage is first), and the region that
 *     hp_grad_place leaves of the units' output and inner gradients (hp_unit_layout) where
 *     they do not fit into the dead activations of the slot running backward
 *   + the largest workspace (one image's im2col on the CPU, at most 256 MiB of cuDNN
 *     workspace on a GPU, where cuDNN's choice makes it a prediction) + a scratch buffer
 *     for second gradient contributions (hp_unit_cost.scratch_bytes)
 *   + the labels
 * every buffer rounded up to HP_ALIGN bytes.
 * A stage that recomputes (net.h) keeps per minibatch only its input and the outputs of the
 * units ending a segment (and its last unit's), and once the largest segment's other
 * activations and extras; its backward pass takes one more forward pass of its units. A transient
 * tensor's batch norm and ReLU run again before the backward of the convolution reading it: their
 * forward cost is in the unit's backward. All pure functions: no I/O.
 */
#ifndef HP_COST_H
#define HP_COST_H

#include "gpudb.h"
#include "model.h"
#include "options.h"
#include "plan.h"

#include <stdint.h>

struct hp_cost {
    const struct hp_model *model;
    const struct hp_gpudb *db;
    int batch;
    enum hp_recompute recompute; /* for the partitioner: auto (hp_cost_init's), never, always */
    int tie_embed, tie_head;     /* a tied head's unit and its embed's (-1: none) */
    double tie_bytes;            /* the stage holding the embed but not the head keeps one more
                                    token matrix on its device: the head's gradient received
                                    (runtime/vwsync.c) */
    int optimizer; /* enum hp_optimizer (options.h): hp_cost_init sets HP_OPTIMIZER_SGD; a
                      caller sets HP_OPTIMIZER_ADAMW for its second moment buffer (net.h) */
    int nunits, ntypes;
    double *fwd_s, *bwd_s; /* [ntypes x nunits], seconds per minibatch */
    double *prefix_fwd;    /* [ntypes x (nunits + 1)]: prefix sums of fwd_s */
    double *prefix_bwd;    /* and of bwd_s */
    /* for the stage memory in O(1) (O(log) for the gradients), at `batch` (see above): prefix
     * sums of a minibatch's activations and extras, of the parameter and state bytes, each
     * unit's input (aligned), and range maxima (sparse tables, [levels x nunits], entry
     * [l][u] the largest over units u .. u + 2^l - 1) of the workspace, scratch and
     * transient bytes; no table over unit ranges, so a model of thousands of units stays
     * small */
    double *p_slot, *in_bytes, *p_params, *p_state;
    double *max_ws, *max_scratch, *max_temp;
    int levels;
    /* without [0] and with [1] recomputation: the activation gradient region but the input's
     * gradient (hp_grad_place) of every range [u0, v], in units of HP_ALIGN bytes. It only
     * grows as u0 goes down, so column v keeps the starts where it changes: entries
     * grad_col[v] .. grad_col[v + 1] - 1 of grad_at (decreasing) and grad_val, the value
     * holding from grad_at down to the next entry's */
    size_t *grad_col[2];
    int *grad_at[2];
    uint32_t *grad_val[2];
    /* recomputation, segments of `seg` units (hp_model_recompute_segment): prefix sums of
     * a minibatch's outputs of the units ending a segment (aligned), each unit's output
     * where it does not end one (kept when it ends a range); for the work area (the largest
     * segment's activations and extras, its last output excluded): prefix sums of each
     * unit's activations and extras, each unit's output (aligned), and the range maxima
     * (levels over segments) of every whole segment's */
    int seg, nseg, seg_levels;
    double *p_bound, *last_out, *p_own, *out_bytes, *max_seg;
};

/* Fill in roofline estimates for every (type, unit) at minibatch `batch`. Caller-owned struct;
 * release with hp_cost_release. 0 or -HP_ENOMEM. */
int hp_cost_init(struct hp_cost *c, const struct hp_model *m, const struct hp_gpudb *db, int batch);
void hp_cost_release(struct hp_cost *c);

/* Replace the estimate of (type, unit) by a measurement, and refresh the prefix sums. */
void hp_cost_set(struct hp_cost *c, int type, int unit, double fwd_s, double bwd_s);

/* Forward, backward, and forward + backward seconds of units [u0, u1) on `type`, for one
 * minibatch (the sum of the first two, exactly). */
double hp_cost_stage_fwd(const struct hp_cost *c, int type, int u0, int u1);
double hp_cost_stage_bwd(const struct hp_cost *c, int type, int u0, int u1);
double hp_cost_stage_time(const struct hp_cost *c, int type, int u0, int u1);

/* Bytes that cross the boundary after unit u (its output activation for the minibatch; the
 * gradient going back has the same size). */
double hp_cost_boundary_bytes(const struct hp_cost *c, int u);

/* Seconds to move `bytes` over a link of `gbs` GB/s with latency `lat_us`. */
double hp_cost_transfer(double bytes, double gbs, double lat_us);

/* Bytes a stage of units [u0, u1) needs with `in_flight` minibatches, as above. first: the
 * stage is a VW's first (its input gradient is not kept); recompute: the stage recomputes. */
double hp_cost_stage_memory(const struct hp_cost *c, int u0, int u1, int in_flight, int first,
                            int recompute);

/* hp_cost_stage_memory(c, u0, u1, in_flight, first, recompute) <= capacity, the same
 * comparison of the same bytes, but without the rest of the sum where the activations alone
 * exceed the capacity (the planner's partitioner asks this most of all). */
int hp_cost_stage_fits(const struct hp_cost *c, int u0, int u1, int in_flight, int first,
                       int recompute, double capacity);

/* The extra seconds per minibatch of recomputation on `type`: the units' forward pass again
 * (0 when recompute is 0). */
double hp_cost_recompute_s(const struct hp_cost *c, int type, int u0, int u1, int recompute);

/* The bytes of the one allocation of a net of units [u0, u1) with `nslots` minibatches of
 * activations (hp_net_memory's total; the stage memory less the stashed parameters).
 * input_grad: the net keeps its input's gradient (need_input_grad); recompute as in
 * hp_net_config. */
double hp_cost_net_memory(const struct hp_cost *c, int u0, int u1, int nslots, int input_grad,
                          int recompute);

#endif
