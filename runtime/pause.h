/* pause.h - pauses: every worker's span ends at one VW minibatch X between two job points,
 * so that the job can stop or checkpoint soon after it is asked to, not at its next job point
 * (which may be an epoch away).
 *
 * Who asks: a signal (SIGUSR1, SIGTERM: ckpt.h's request), on any rank; or the reporter, when
 * --checkpoint-every in time says a checkpoint is due. A worker of stage 0 that got the signal
 * tells the reporter (stage 0 of VW 0); the reporter, before any forward pass of its own,
 * starts a round: it picks X (hp_pause_point) and tells every other VW's stage 0. Each stage 0
 * runs on to X, ends its span there (hp_link_send_end: the next stage learns of it where the
 * activation of X would be, and passes it on), drains its pipeline and pushes its updates;
 * then every worker meets at a job point at X (jobpoint.h), where the reporter decides:
 * checkpoint, and stop on a request.
 *
 * X needs no answer from anyone, so no VW ever waits for the round: it is a minibatch that no
 * VW can have started yet when the reporter sends it. The reporter is before the forward pass
 * of its minibatch q and has pushed `pushed` waves of its stage (which holds unit 0, as every
 * VW's stage 0 does). Under WSP a VW admits its wave C only when every VW has pushed C - 1 - D
 * waves of its units (wsp.c), so no VW can start a wave beyond pushed + 1 + D until the
 * reporter pushes again, which it does only after the notice has gone out: X = (pushed + D +
 * 2) x the largest Nm. dp's replicas cannot start minibatch q + 1 before the reporter's
 * allreduce of q: X = q + 1. One VW: X = q. Between the notice and the reporter's next push
 * lies at least a forward and a backward pass, far longer than the notice's flight; a stage 0
 * that finds X behind it nevertheless fails the job with a protocol error rather than hang.
 *
 * Rounds are one at a time: a new one starts only after the job point that ended the last.
 * Stage 0 of every VW checks before each forward pass (a probe: no wait). Only with
 * checkpoints on (requests and time intervals exist only then).
 */
#ifndef HP_PAUSE_H
#define HP_PAUSE_H

#include "comm.h"
#include "plan.h"

struct hp_pause {
    struct hp_comm *comm;
    const struct hp_plan *plan;
    int rank, v, s, dp, timeout_ms;
    long target;  /* the VW minibatch q where this round's spans end (-1: no round) */
    int req_sent; /* stage 0 of VW v > 0: its own request has gone to the reporter */
    long rounds;  /* rounds started (the reporter) or notices received */
};

/* For the worker (v, s) of plan p with rank `rank`; dp: p is dp. */
void hp_pause_init(struct hp_pause *p, struct hp_comm *comm, const struct hp_plan *plan, int rank,
                   int v, int s, int dp, int timeout_ms);

/* The round's point X for a reporter before the forward pass of minibatch q, having pushed
 * `pushed` waves, with staleness D, the largest Nm nm_max, nvws VWs (dp: a dp plan). Pure. */
long hp_pause_point(long q, long pushed, long D, long nm_max, int nvws, int dp);

/* Stage 0, before the forward pass of the VW's minibatch q: requested (this rank got a
 * request), due (the reporter: a checkpoint is due in time), pushed (the reporter: the
 * waves its stage pushed). Sends or takes the round's messages; *end = 1 when the span ends
 * at q (send the end down, drain). 0 or a negative code (logged). */
int hp_pause_check(struct hp_pause *p, long q, int requested, int due, long pushed, int *end);

/* At a job point at the VW's minibatch q: a round whose point that is (or is behind) is over. */
void hp_pause_passed(struct hp_pause *p, long q);

#endif
