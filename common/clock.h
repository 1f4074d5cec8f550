/* clock.h - the monotonic clock that every timing in hetpipe reads. */
#ifndef HP_CLOCK_H
#define HP_CLOCK_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC (only differences mean anything). */
static inline double hp_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
