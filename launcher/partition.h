/* partition.h - splitting a model over the GPUs of one virtual worker (VW).
 *
 * A VW of k GPUs runs k stages; stage s holds the contiguous units [u0, u1) on the s-th GPU
 * of the VW's order. The cost of a stage is its compute time (forward + backward of one
 * minibatch) plus the time to send its output activation forward and its input gradient
 * back (transfers are not assumed to overlap compute, a conservative choice). With Nm
 * minibatches in flight and one-forward-one-backward, stage s keeps max(1, min(Nm, k) - s) of them
 * (and as many weight versions); the VW's rate is
 *     min(Nm / round_trip, 1 / bottleneck)  minibatches per second,
 * where bottleneck is the slowest stage's cost and round_trip the sum of all compute and
 * twice the sum of all transfers (one minibatch's way through the pipeline and back).
 *
 * For one GPU order the best split (smallest bottleneck within every GPU's memory) is a
 * dynamic programme over (stage, last unit), O(k U^2) cells x starts at worst; each cell's
 * start is searched from the previous cell's and stops where the stage alone, or the
 * stages before it, can no longer beat what it has (bounds that cannot change the cell's
 * choice, ties going to the later start as in a scan from the end), so it costs about the
 * starts near the best in practice. An order is split once with the most minibatches in
 * flight, and again for a smaller Nm only where memory decided something. Orders: all distinct (type, node)
 * orders for VWs of up to HP_PARTITION_EXHAUSTIVE GPUs; beyond that a heuristic tries four
 * orders (fastest first, slowest first, and both with each node's GPUs kept together).
 * A stage that would not fit its GPU keeping its activations may recompute them (cost.h),
 * paying one more forward pass; with c->recompute auto the DP weighs that like any other
 * cost, so a slower stage that fits may win over a recomputing one, and a larger Nm may
 * become possible.
 * Nm is the smallest value in 1..nm_max whose rate is within the site's nm_tolerance
 * (c->db->nm_tolerance, [planner] in hetpipe.conf) of the best Nm's (less staleness for about
 * the same speed; 0: the smallest that reaches the best), or the fixed value asked for.
 */
#ifndef HP_PARTITION_H
#define HP_PARTITION_H

#include "cluster.h"
#include "cost.h"
#include "plan.h"

#define HP_PARTITION_EXHAUSTIVE 5

/* Plan one VW made of gpus[0..n) (cluster indices). nm_fixed > 0 forces Nm; otherwise Nm is
 * searched in 1..nm_max. Returns 0, -HP_EINVAL (more GPUs than units, n or Nm out of range;
 * logged) or -HP_ERANGE when no split fits in memory (logged, naming the GPU and the memory
 * the smallest stage needs). */
int hp_partition_vw(const struct hp_cost *c, const struct hp_cluster *cl, const int *gpus, int n,
                    int nm_max, int nm_fixed, struct hp_vw_plan *out);

/* The cost of stage s of an order (for tests and the exhaustive reference): compute of units
 * [u0, u1) on order[s] plus its transfers. */
double hp_partition_stage_cost(const struct hp_cost *c, const struct hp_cluster *cl,
                               const int *order, int k, int s, int u0, int u1);

/* Whether a stage of units [u0, u1) with `in_flight` minibatches recomputes on a GPU of
 * `capacity` bytes under c->recompute: always, never, or (auto) when it would not fit
 * otherwise. Its backward pass then costs one more forward pass (hp_cost_recompute_s). */
int hp_partition_recompute(const struct hp_cost *c, int u0, int u1, int in_flight, int first,
                           double capacity);

/* Fill rate, bottleneck, round trip, in-flight counts and recomputation of a VW whose stages
 * (gpu, u0, u1) and nm are set; returns 1 if every stage fits its GPU's memory, else 0. */
int hp_partition_evaluate(const struct hp_cost *c, const struct hp_cluster *cl,
                          struct hp_vw_plan *vw);

#endif
