/* jobpoint.h - job points: places where every worker of the job stops at the same point of
 * its data, its pipeline drained and every push on its shard, so that the job can be looked
 * at whole: at the job's start, at each evaluation, where checkpoints may be taken (ckpt.h),
 * and at the end.
 *
 * Every VW (and dp replica) trains the same number of minibatches per epoch, so all come to
 * the same points. At point n each worker tells stage 0 of VW 0, the reporter, that it is
 * there (hp_jp_arrive, with its stop request: a signal asked it to checkpoint and stop); the
 * reporter waits for every one, so on it *t_all is when the last arrived: from then on nothing
 * trains anywhere. Then VW 0 evaluates (when the point is an evaluation), the reporter decides
 * (hp_jp_decide) and tells every other worker (hp_jp_verdict): go on, checkpoint, stop. The
 * job's training time is its wall clock less exactly these pauses (from the last arrival to
 * the verdict and the checkpoint). No deadlock under WSP: at point P every VW has pushed
 * waves 0 .. P / Nm - 1, and reaching P needs at most waves (P - 1) / Nm - 1 - D of the others
 * (wsp.c); dp's replicas are in step anyway.
 */
#ifndef HP_JOBPOINT_H
#define HP_JOBPOINT_H

#include "comm.h"
#include "plan.h"

/* The verdict's flags. */
#define HP_VERDICT_STOP 1u    /* every worker stops here */
#define HP_VERDICT_CKPT 2u    /* every rank writes its part of a checkpoint */
#define HP_VERDICT_REQUEST 4u /* on request (a signal): the job stops after its checkpoint */
#define HP_VERDICT_ALL (HP_VERDICT_STOP | HP_VERDICT_CKPT | HP_VERDICT_REQUEST)

struct hp_jobpoint {
    struct hp_comm *comm;
    const struct hp_plan *plan;
    int rank, v, s;
    int timeout_ms; /* a send */
    int wait_ms;    /* waiting for the slowest VW, or for VW 0's evaluation */
};

/* Arrive at point n (-1: the job's start; then 0, 1, ...): *req in is this worker's stop
 * request; on the reporter, *req out is anyone's and *t_all the time the last arrived. 0, or a
 * negative code (logged: a worker that does not arrive within wait_ms is named). */
int hp_jp_arrive(const struct hp_jobpoint *j, long n, double *t_all, int *req);

/* The reporter's verdict at point n (flags and the checkpoint's number) to every other
 * worker, which waits for it. 0 or a negative code (logged). */
int hp_jp_verdict(const struct hp_jobpoint *j, long n, unsigned *flags, long *seq);

/* The reporter's decision: stop when --stop-at was reached (stop); with checkpoints on
 * (ckpt_on) and not at the job's end (last) or a stop: checkpoint when one is due (due) or a
 * stop was requested (requested), and then also stop on request. Pure. */
unsigned hp_jp_decide(int stop, int last, int ckpt_on, int requested, int due);

#endif
