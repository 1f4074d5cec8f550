/* schedule.h - the order of a pipeline stage's passes: one forward, one backward (1F1B).
 *
 * Stage s of a virtual worker keeps at most w = the plan's in-flight count
 * (max(1, min(Nm, k) - s)) minibatches between their forward and backward passes. Over a
 * span of minibatches [from, to) it runs a forward pass while fewer than w are outstanding
 * and minibatches of the span remain, else the backward pass of the oldest: w forwards, then
 * a backward and a forward in turn, then the last backwards. A span ends drained (every
 * minibatch of it has run backward): the worker's loop (worker.c) runs one span between two
 * job points. Since w_s >= w_{s+1} along the pipeline, the stages of a VW cannot deadlock
 * (tests/unit/test_worker.c runs every stage's order against the others').
 *
 * Minibatch j uses activation slot j mod w. Pure: no weights, no messages, no clock.
 */
#ifndef HP_SCHEDULE_H
#define HP_SCHEDULE_H

enum hp_pass_kind { HP_PASS_FORWARD, HP_PASS_BACKWARD };

/* The next pass: minibatch j (an index of the epoch) in `slot`; the minibatches
 * [out0, out1) are the others between forward and backward while it runs (weight stashing
 * must keep what they ran on). */
struct hp_pass {
    enum hp_pass_kind kind;
    long j;
    int slot;
    long out0, out1;
};

struct hp_sched {
    long nf, nb; /* forward passes and backward passes handed out: minibatches [from, nf) and
                    [from, nb) */
    long to;
    int w;
};

/* A span [from, to) (from <= to) with w >= 1 minibatches in flight. */
void hp_sched_init(struct hp_sched *s, long from, long to, int w);

/* The span ends at minibatch x instead (from <= x <= to, and no forward pass of x or later
 * handed out except x's own, just now): only the backward passes of those in flight are
 * left. A pause (pause.h) ends spans this way. */
void hp_sched_end(struct hp_sched *s, long x);

/* The next pass into *p: 1, or 0 once the span is drained. */
int hp_sched_next(struct hp_sched *s, struct hp_pass *p);

#endif
