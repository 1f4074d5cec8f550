/* planner.h - computing the plan (common/plan.h) for a cluster, model and options: grouping
 * GPUs into virtual workers, partitioning each, placing parameters, predicting throughput.
 * hp_plan_compute is a pure function: no I/O.
 *
 * Policies (how GPUs are grouped into virtual workers, VWs):
 * - np: one VW per node, of that node's GPUs.
 * - ed: V = the smallest GPU count of any node; node n's GPU i goes to VW i mod V, so every VW
 *   gets the same mix when counts are equal; uneven counts give some VWs more GPUs.
 * - hd: nodes sorted by per-GPU speed, the fastest paired with the slowest, the second with
 *   the second slowest, ...; a pair (a, b) forms V = min(GPUs of a, GPUs of b, 2) VWs, GPU i of
 *   either node going to VW i mod V (half of a VW's stage-to-stage traffic stays inside a
 *   node). With an odd node count the middle node forms one VW of its own.
 * - auto: the three above and, for every VW size k from 1 to min(16, units), the GPUs sorted
 *   by speed and dealt to V = ceil(GPUs / k) VWs in snake order (1, 2, .., V, V, .., 1, ...);
 *   the grouping with the best predicted job throughput wins (so auto is never predicted
 *   slower than np, ed, hd).
 * - dp: every GPU a one-stage VW holding the whole model, synchronised by ring allreduce every
 *   minibatch (Horovod); GPUs that cannot hold the model are left out.
 * With finite staleness every VW runs at the pace of the slowest, so a job's throughput is
 * (number of VWs) x (the slowest VW's rate). A VW's rate is its pipeline's (partition.h),
 * lowered when its wave's parameter synchronisation over the network (the bytes of its units
 * held on other nodes' shards, pushed and pulled at the inter-node bandwidth, overlapping
 * compute) takes longer than the wave's Nm minibatches of compute.
 *
 * Placement: one PS shard per node. default: units round-robin over the shards, whatever
 * runs them; local: a unit's parameters on the shard of the node that runs it in VW 0 (with
 * ed every VW runs a stage on the same node). Bytes per wave that cross the network: for
 * every VW and unit whose GPU is on another node than the unit's shard, its parameters twice
 * (push of the wave's update, pull of the global weights).
 */
#ifndef HP_PLANNER_H
#define HP_PLANNER_H

#include "cluster.h"
#include "cost.h"
#include "partition.h"
#include "plan.h"

/* Compute the plan from the planning options of o (the rows with a plan key: policy,
 * placement, staleness, nm, nm_max, recompute, batch, seed; it keeps a copy as plan->opts).
 * 0, or a negative code with the reason logged (a model that fits on no
 * grouping, bad options). *plan is caller-owned: release with hp_plan_release. */
int hp_plan_compute(const struct hp_cost *c, const struct hp_cluster *cl,
                    const struct hp_options *o, struct hp_plan *plan);

#endif
