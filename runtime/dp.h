/* dp.h - the dp baseline (DESIGN.md section 5): every worker rank a full replica, its
 * gradients summed over all replicas by a synchronous ring allreduce after every minibatch
 * (Horovod's algorithm, runtime/allreduce.h), then the same SGD step on every replica. */
#ifndef HP_DP_H
#define HP_DP_H

#include "pipeline.h"

/* Run replica `rank` of a dp plan (plan->grouping == HP_POLICY_DP: every VW one stage, no PS
 * shards) over `comm`, connected to every rank. Options and result as hp_worker_run. */
int hp_dp_run(const struct hp_plan *plan, const struct hp_cluster *cl, const struct hp_gpudb *db,
              const struct hp_model *model, int rank, struct hp_comm *comm,
              const struct hp_worker_opts *o, struct hp_worker_result *res);

#endif
