/* lrsched.c - warm-up, then constant or cosine (lrsched.h). */
#include "lrsched.h"

#include <math.h>

double hp_lrsched_at(const struct hp_lrsched *s, long step)
{
    const long t = step - s->warmup, span = s->total - s->warmup;

    if (step < s->warmup)
        return s->lr * (double)(step + 1) / (double)s->warmup;
    if (!s->cosine)
        return s->lr;
    if (t >= span)
        return s->floor; /* the run's end, or a warm-up as long as the run */
    /* this order of operations keeps warmup 0, floor 0 equal to 0.5 lr (1 + cos(pi s / T)) */
    return 0.5 * (s->lr - s->floor) * (1.0 + cos(M_PI * (double)t / (double)span)) + s->floor;
}
