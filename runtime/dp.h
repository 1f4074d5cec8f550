/* dp.h - the dp baseline's synchronisation (Horovod's algorithm): after every backward pass
 * the replicas' gradients are summed by the ring allreduce (allreduce.h) and divided by their
 * number, so every replica takes the same SGD step: hetpipe train's step at minibatch R x B.
 */
#ifndef HP_DP_H
#define HP_DP_H

#include "backend.h"
#include "comm.h"
#include "plan.h"

#include <stddef.h>

struct hp_dp;

/* The allreduce group of dp plan p's replicas (stage 0 of every VW, in VW order) for a stage
 * of n parameters; `rank` is this process's. *out is NULL (and 0 returned) unless p is dp. */
int hp_dp_create(struct hp_comm *comm, const struct hp_plan *p, int rank, size_t n,
                 struct hp_dp **out);
void hp_dp_destroy(struct hp_comm *comm, struct hp_dp *dp);

/* grads (device, n floats) := the mean over the replicas of everyone's grads, for step
 * `step` (the same on every replica). 0, or a negative code (logged with the replica). */
int hp_dp_average(struct hp_dp *dp, struct hp_backend *be, float *grads, long step, int timeout_ms);

/* The bytes one allreduce carries (the gradient vector). */
size_t hp_dp_bytes(const struct hp_dp *dp);

#endif
