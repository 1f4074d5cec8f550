/* worker.h - one worker rank: stage s of virtual worker v, trained by pipelined model
 * parallelism, in step with the other VWs by Wave Synchronous Parallel (HetPipe).
 *
 * The loop (worker.c) reads like the algorithm: for each span of minibatches between two job
 * points, the one-forward-one-backward order of its passes (schedule.h), WSP's gate before the
 * first minibatch of a wave and its push after the last (wsp.h), dp's gradient average after
 * every backward pass (dp.h), then the job point: evaluation, checkpoint, stop (jobpoint.h,
 * evaluate.h, ckpt.h). The forward and backward passes are the net's (net.h); weight stashing
 * (stash.h), the stage's data (feed.h), its messages (link.h), emulation (emulate.h), the
 * timeline (timeline.h) and what it reports (report.h) are modules the loop calls, each with
 * its own state.
 *
 * Data: stage 0 reads the data set (feed.h); VW v of N takes minibatches v, v + N, v + 2N, ...
 * of a seeded per-epoch permutation (the same permutation as hetpipe train), the last partial
 * one dropped, and every VW the same number of them (floor(minibatches / N): the last
 * minibatches % N are left out). Labels travel with the activations, so only stage 0 reads
 * the data set.
 *
 * Messages (runtime/comm.h), between the ranks of neighbouring stages:
 *   ACTIVATION s -> s+1: the stage's output [batch, ...] floats, then batch int32 labels;
 *   GRADIENT s+1 -> s:   the gradient of s+1's input, then the minibatch's loss sum and
 *                        correct count (two doubles) from the last stage, for stage 0's
 *                        progress line;
 *   EVAL s -> s+1:       test activations and labels, then the number of samples that count;
 *   EVAL last -> stage 0: the test set's loss sum, correct count and samples.
 * Each header carries vw, stage and the minibatch index the receiver expects; any other is a
 * protocol error. Sends are asynchronous (two buffers per direction), receives block with the
 * peer timeout: a peer that dies or stops gives an error, never a hang.
 *
 * Schedule, fixed so that runs are reproducible: stage s keeps at most w_s = the plan's
 * in_flight (max(1, min(Nm, k) - s)) minibatches between forward and backward; it runs a forward
 * when fewer are outstanding and minibatches remain, else the backward of the oldest. That is w_s
 * forwards, then one-backward-one-forward, then the remaining backwards (1F1B). Since w_s >=
 * w_{s+1} the schedule cannot deadlock. The pipeline drains at the end of each epoch, then the test
 * set runs forward through it.
 *
 * Updates and weight stashing: after each minibatch's backward pass the stage applies its
 * SGD step (momentum, weight decay, the learning-rate schedule of hetpipe train, by the
 * minibatch's global step). A minibatch's backward pass uses exactly the weights its forward
 * pass used: before an update, the current weights are copied into a stash buffer if an
 * outstanding minibatch ran forward on them, and that minibatch's backward reads the stash
 * (at most w_s - 1 stashed versions, as the memory model counts).
 *
 * With Nm = 1 every stage sees the same weights, data, dropout seeds and float operations as
 * hetpipe train with the same seed: the per-step losses and the final parameters are equal
 * bit for bit.
 *
 * Across VWs, with PS shards in the plan: Wave Synchronous Parallel (runtime/ps.h, the rules
 * and the staleness bound at hp_wsp_gate in wsp.c): each stage pushes the sum of its
 * updates after the backward pass of a wave's last minibatch, and before the forward pass of
 * the first minibatch of wave C >= 2 waits until every VW has pushed wave C - 2 - D of its
 * units, pulls them and rebases. VW 0 evaluates on the global weights.
 *
 * Evaluation (at each epoch's end, and every --eval-every samples): every worker stops at the
 * same point of its share and tells stage 0 of VW 0, which waits for all of them (the slower
 * VWs too); VW 0 runs the test set; every other worker waits for stage 0 of VW 0's verdict
 * (go on, or stop: --stop-at). So nothing trains during an evaluation, and the job's training
 * time (hp_worker_result.job_s) is rank 0's wall clock less exactly those pauses.
 *
 * The dp baseline (plan->grouping == HP_POLICY_DP, no PS shards): every VW is one stage with
 * the whole model, a replica. Replica r of R takes minibatch j R + r (size B) of the epoch's
 * permutation, j < floor(floor(N / B) / R); after each backward pass the gradients are summed
 * by the ring allreduce (runtime/allreduce.h) and divided by R, and every replica takes the
 * SGD step of hetpipe train's step j at minibatch R B. So the replicas stay identical, and
 * without batch norm or dropout they follow hetpipe train --batch R·B up to the reassociation
 * of the gradient sums. Emulation pads each allreduce to S x the plan's allreduce time.
 *
 * Emulated GPU types (emulate = S > 0): each forward (and backward) pass of the stage's units
 * is padded by sleeping to S x the plan's seconds for it (fwd_s, bwd_s: the planner's cost
 * model or the profile it was given, for the stage's GPU type), and each send to S x the
 * plan's transfer time (send_s, send_back_s; the planner's model: transfers do not overlap
 * compute), so a CPU rank runs like its GPU type, S times slower. S must be large enough that
 * padding dominates; the time not padded is reported.
 */
#ifndef HP_WORKER_H
#define HP_WORKER_H

#include "cluster.h"
#include "comm.h"
#include "gpudb.h"
#include "model.h"
#include "options.h"
#include "plan.h"

#include <stdint.h>

/* What a worker measured. */
struct hp_worker_result {
    long minibatches;
    double train_s;                           /* this stage's training seconds: from the job's
                                                 start to its last minibatch, less its time at
                                                 evaluation points (drained, waiting) */
    double job_s;                             /* stage 0 of VW 0: the job's training seconds,
                                                 wall clock from the start of every VW to the
                                                 end of the last, less the evaluation pauses
                                                 (every worker paused); 0 elsewhere */
    double compute_s, pad_s, comm_s, other_s; /* time in: net ops, emulation sleeps, waiting for
                                               peers (send/recv), everything else */
    double images_per_s;                      /* the VW's rate (stage 0) */
    double job_images_per_s;                  /* stage 0 of VW 0: every VW's images over job_s */
    double test_loss, test_acc;               /* stage 0 */
    uint64_t param_hash;                      /* FNV-1a over the VW's parameters, stage by stage
                                                 (the last stage has the whole chain) */
    size_t mem_peak;                          /* device bytes, measured */
    double mem_predicted;                     /* the plan's */
    size_t mem_real_base, mem_real_peak;      /* memory really in use (backend ops->memory_used)
                                                 before the net was created, and at its peak */
    int stopped; /* checkpointed and stopped on request (SIGUSR1, SIGTERM): exit HP_CKPT_EXIT */
};

/* Run worker rank `rank` of `plan` (model loaded, cluster as in the plan) over `comm`,
 * already connected to every rank, with hetpipe-rank's options (device, data, epochs, lr,
 * momentum, weight_decay, schedule, limits, log_every, emulate, timeout, the output files,
 * eval_every, stop_at, no_stash). 0 or a negative code (logged). */
int hp_worker_run(const struct hp_plan *plan, const struct hp_cluster *cl,
                  const struct hp_gpudb *db, const struct hp_model *model, int rank,
                  struct hp_comm *comm, const struct hp_options *o, struct hp_worker_result *res);

#endif
