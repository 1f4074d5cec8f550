/* timeline.c - a rank's timeline: the recorder, its part, the clock offset (timeline.h). */
#include "timeline.h"

#include "clock.h"
#include "comm.h"
#include "error.h"
#include "infile.h"
#include "log.h"
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double hp_tl_clock_offset_s;

/* Rank 0 answers SYNC_ROUNDS pings of every other rank in turn, with its clock in the
 * header's `clock` (ns) and its host's boot id as payload; a rank keeps the round with the
 * shortest round trip. */
#define SYNC_ROUNDS 8
#define BOOT_ID_LEN 40

/* The kernel's boot id: CLOCK_MONOTONIC is one clock for every process with the same one. */
static void boot_id(char out[BOOT_ID_LEN])
{
    FILE *f = hp_infile_fopen("/proc/sys/kernel/random/boot_id", 0, NULL, NULL);

    memset(out, 0, BOOT_ID_LEN);
    if (!f || !fgets(out, BOOT_ID_LEN, f))
        snprintf(out, BOOT_ID_LEN, "unknown");
    if (f)
        fclose(f);
}

int hp_tl_sync_clock(struct hp_comm *comm, int rank, int nranks, int timeout_ms)
{
    struct hp_msg_header h = {.type = HP_MSG_CONTROL, .vw = -1, .stage = -1, .minibatch = -1};
    char mine[BOOT_ID_LEN], theirs[BOOT_ID_LEN];
    double best = -1.0;
    int rc = 0;

    boot_id(mine);
    hp_tl_clock_offset_s = 0.0;
    for (int r = 1; rank == 0 && r < nranks && !rc; r++)
        for (int k = 0; k < SYNC_ROUNDS && !rc; k++) {
            struct hp_msg_header in;
            rc = hp_comm_recv(comm, r, HP_MSG_CONTROL, &in, NULL, 0, timeout_ms);
            h.clock = (int64_t)(hp_now_s() * 1e9);
            h.payload_bytes = BOOT_ID_LEN;
            if (!rc)
                rc = hp_comm_send(comm, r, &h, mine, timeout_ms);
        }
    for (int k = 0; rank > 0 && k < SYNC_ROUNDS && !rc; k++) {
        struct hp_msg_header in;
        const double ta = hp_now_s();
        rc = hp_comm_send(comm, 0, &h, NULL, timeout_ms);
        if (!rc)
            rc = hp_comm_recv(comm, 0, HP_MSG_CONTROL, &in, theirs, BOOT_ID_LEN, timeout_ms);
        const double tb = hp_now_s();
        if (!rc && (best < 0.0 || tb - ta < best)) {
            best = tb - ta;
            hp_tl_clock_offset_s = (double)in.clock * 1e-9 - 0.5 * (ta + tb);
        }
    }
    /* on rank 0's host the clocks are one: a measured offset would only be noise
     * (HETPIPE_CLOCK_SYNC=measure keeps it: the tests of the measurement) */
    struct hp_options how = {.clock_sync = HP_CLOCK_SYNC_AUTO};
    char err[512];
    if (!rc && hp_opt_env(&how, HP_OPT_CLOCK_SYNC, err, sizeof(err)) < 0) {
        hp_error("timeline: %s", err);
        return -HP_EINVAL;
    }
    if (!rc && rank > 0 && how.clock_sync != HP_CLOCK_SYNC_MEASURE &&
        memcmp(theirs, mine, BOOT_ID_LEN) == 0 && strcmp(mine, "unknown") != 0)
        hp_tl_clock_offset_s = 0.0;
    if (rc)
        hp_error("timeline: measuring the clock offset to rank 0 failed: %s", hp_strerror(rc));
    return rc;
}

struct hp_timeline *hp_tl_create(long cap, const struct hp_tl_meta *meta)
{
    struct hp_timeline *tl = calloc(1, sizeof(*tl));

    if (cap < 64)
        cap = 64;
    if (cap > HP_TL_EVENTS_MAX)
        cap = HP_TL_EVENTS_MAX;
    /* calloc: pages are committed as events fill them, not up front */
    if (!tl || !(tl->ev = calloc((size_t)cap, sizeof(*tl->ev)))) {
        hp_error("timeline: cannot allocate %ld events", cap);
        free(tl);
        return NULL;
    }
    tl->cap = cap;
    tl->meta = *meta;
    return tl;
}

void hp_tl_destroy(struct hp_timeline *tl)
{
    if (!tl)
        return;
    free(tl->ev);
    free(tl);
}

int hp_tl_write(const struct hp_timeline *tl, const char *path)
{
    return hp_tl_part_write(path, &tl->meta, tl->ev, tl->n, tl->dropped);
}
