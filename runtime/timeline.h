/* timeline.h - what every rank did, when: recorded into a fixed buffer while the job runs
 * (no allocation or I/O in the step loop) and written at the rank's end as a part file, whose
 * format (events, kinds, the file) is common/tlpart.h: hetpipe run / launch merge the parts
 * into one Chrome trace-event JSON file (launcher/tlmerge.h), hetpipe report draws them.
 * Also here: measuring each rank's clock offset to rank 0 (over comm.h).
 */
#ifndef HP_TIMELINE_H
#define HP_TIMELINE_H

#include "tlpart.h"

#include <stdint.h>
#include <stdio.h>

/* A rank's recorder: a buffer sized at set-up; full, it counts what it drops. */
struct hp_timeline {
    struct hp_tl_event *ev;
    long n, cap, dropped;
    struct hp_tl_meta meta;
};

/* The offset of this process's clock to rank 0's (measured at start-up; 0 on rank 0). */
extern double hp_tl_clock_offset_s;

struct hp_comm;
/* Measure this rank's clock offset to rank 0 (every rank of the job calls it, right after the
 * wire-up): rank 0 answers pings rank by rank; each other rank keeps the round with the
 * shortest round trip (offset = rank 0's time - the round's midpoint), or 0 on rank 0's host
 * (the same kernel boot id: one CLOCK_MONOTONIC). 0 or a negative code (logged). */
int hp_tl_sync_clock(struct hp_comm *comm, int rank, int nranks, int timeout_ms);

/* A recorder for at most `cap` events (capped at HP_TL_EVENTS_MAX). NULL when out of memory
 * (logged). */
struct hp_timeline *hp_tl_create(long cap, const struct hp_tl_meta *meta);
void hp_tl_destroy(struct hp_timeline *tl);

/* Record one event (tl may be NULL: nothing recorded). No allocation, no I/O. */
static inline void hp_tl_add(struct hp_timeline *tl, enum hp_tl_kind kind, double t0, double t1,
                             int64_t mb, int peer, int64_t bytes, long wave)
{
    if (!tl)
        return;
    if (tl->n == tl->cap) {
        tl->dropped++;
        return;
    }
    tl->ev[tl->n++] = (struct hp_tl_event){.t0 = t0,
                                           .t1 = t1,
                                           .mb = mb,
                                           .bytes = bytes,
                                           .wave = (int32_t)wave,
                                           .peer = peer,
                                           .kind = kind};
}

/* Write the recorder's part file `path` (common/tlpart.h: hp_tl_part_write). 0 or a negative
 * code (logged). */
int hp_tl_write(const struct hp_timeline *tl, const char *path);

#endif
