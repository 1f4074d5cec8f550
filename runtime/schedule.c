/* schedule.c - the one-forward-one-backward order of a stage's passes (schedule.h). */
#include "schedule.h"

void hp_sched_init(struct hp_sched *s, long from, long to, int w)
{
    *s = (struct hp_sched){.nf = from, .nb = from, .to = to, .w = w > 0 ? w : 1};
}

int hp_sched_next(struct hp_sched *s, struct hp_pass *p)
{
    if (s->nb >= s->to)
        return 0;
    if (s->nf < s->to && s->nf - s->nb < s->w) {
        *p = (struct hp_pass){.kind = HP_PASS_FORWARD,
                              .j = s->nf,
                              .slot = (int)(s->nf % s->w),
                              .out0 = s->nb,
                              .out1 = s->nf};
        s->nf++;
    } else {
        *p = (struct hp_pass){.kind = HP_PASS_BACKWARD,
                              .j = s->nb,
                              .slot = (int)(s->nb % s->w),
                              .out0 = s->nb + 1,
                              .out1 = s->nf};
        s->nb++;
    }
    return 1;
}

void hp_sched_end(struct hp_sched *s, long x)
{
    if (x < s->to)
        s->to = x;
    if (s->nf > s->to)
        s->nf = s->to;
}
