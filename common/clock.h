/* clock.h - the monotonic clock that every timing in hetpipe reads. */
#ifndef HP_CLOCK_H
#define HP_CLOCK_H

#include <errno.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC (only differences mean anything). */
static inline double hp_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sleep until hp_now_s() >= t (at once when it is already past); signals do not cut it short. */
static inline void hp_sleep_until(double t)
{
    struct timespec ts;

    if (t <= hp_now_s())
        return;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* The time ms milliseconds from now on CLOCK_MONOTONIC, as a deadline for
 * pthread_cond_timedwait on a condition variable set to that clock. */
static inline struct timespec hp_deadline_in_ms(long ms)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

#endif
