/* lrsched.h - the learning-rate schedule: a pure function of the step.
 *
 * Linear warm-up over the first `warmup` steps (step s < warmup: lr (s + 1) / warmup, the
 * form of karpathy/llm.c, which reaches lr at the warm-up's last step), then over the other
 * steps either a constant lr or a cosine decay from lr to `floor`,
 *     floor + 0.5 (lr - floor) (1 + cos(pi (s - warmup) / (total - warmup))),
 * which is floor at s = total and stays there after. With warmup 0 and floor 0 these are
 * exactly (bit for bit) the schedules hetpipe train and the ranks have always used: the
 * constant lr, and 0.5 lr (1 + cos(pi s / total)).
 */
#ifndef HP_LRSCHED_H
#define HP_LRSCHED_H

struct hp_lrsched {
    double lr;    /* the peak learning rate */
    double floor; /* where the cosine ends (0: decays to zero) */
    long warmup;  /* steps of linear warm-up (0: none) */
    long total;   /* steps of the whole run, warm-up included (> 0 for the cosine) */
    int cosine;   /* 1: cosine decay after the warm-up; 0: constant */
};

/* The learning rate of step `step` (from 0). */
double hp_lrsched_at(const struct hp_lrsched *s, long step);

#endif
