/* pause.c - pauses between job points (pause.h): the reporter's rounds and the notices. */
#include "pause.h"

#include "error.h"
#include "log.h"

#include <inttypes.h>

void hp_pause_init(struct hp_pause *p, struct hp_comm *comm, const struct hp_plan *plan, int rank,
                   int v, int s, int dp, int timeout_ms)
{
    *p = (struct hp_pause){.comm = comm,
                           .plan = plan,
                           .rank = rank,
                           .v = v,
                           .s = s,
                           .dp = dp,
                           .timeout_ms = timeout_ms,
                           .target = -1};
}

long hp_pause_point(long q, long pushed, long D, long nm_max, int nvws, int dp)
{
    if (nvws <= 1)
        return q;
    if (dp)
        return q + 1;
    const long x = (pushed + D + 2) * nm_max;
    return x > q ? x : q;
}

static long nm_max(const struct hp_plan *p)
{
    long m = 1;

    for (int v = 0; v < p->nvws; v++)
        m = p->vws[v].nm > m ? p->vws[v].nm : m;
    return m;
}

/* The reporter: requests waiting from other VWs' stage 0 (taken; any one counts). */
static int take_requests(struct hp_pause *p, int *requested)
{
    struct hp_msg_header h;
    int rc = 0;

    while (!rc && hp_comm_probe(p->comm, HP_COMM_ANY_PEER, HP_MSG_PAUSE)) {
        rc = hp_comm_recv(p->comm, HP_COMM_ANY_PEER, HP_MSG_PAUSE, &h, NULL, 0, p->timeout_ms);
        if (!rc)
            *requested = 1;
    }
    return rc;
}

/* The reporter: start a round at q, telling every other VW's stage 0 its point. */
static int start_round(struct hp_pause *p, long q, long pushed)
{
    const struct hp_plan *pl = p->plan;
    const long x = hp_pause_point(q, pushed, pl->opts.staleness, nm_max(pl), pl->nvws, p->dp);
    struct hp_msg_header h = {
        .type = HP_MSG_PAUSE, .vw = 0, .stage = 0, .minibatch = x, .clock = p->rounds};
    int rc = 0;

    for (int v = 1; v < pl->nvws && !rc; v++)
        rc = hp_comm_send(p->comm, hp_plan_stage_rank(pl, v, 0), &h, NULL, p->timeout_ms);
    if (rc) {
        hp_error("vw 0 stage 0: telling the other VWs of a pause at minibatch %ld failed: %s", x,
                 hp_strerror(rc));
        return rc;
    }
    hp_info("vw 0: every VW pauses at its minibatch %ld (now at %ld)", x, q);
    p->rounds++;
    p->target = x;
    return 0;
}

/* Another VW's stage 0: its request to the reporter (once), and the notices that came. */
static int worker_check(struct hp_pause *p, long q, int requested)
{
    const int rep = hp_plan_stage_rank(p->plan, 0, 0);
    struct hp_msg_header h = {.type = HP_MSG_PAUSE, .vw = p->v, .stage = 0, .minibatch = q};
    int rc = 0;

    if (requested && !p->req_sent) {
        rc = hp_comm_send(p->comm, rep, &h, NULL, p->timeout_ms);
        p->req_sent = 1;
    }
    while (!rc && hp_comm_probe(p->comm, rep, HP_MSG_PAUSE)) {
        rc = hp_comm_recv(p->comm, rep, HP_MSG_PAUSE, &h, NULL, 0, p->timeout_ms);
        if (rc)
            break;
        if (h.minibatch < q || h.clock != p->rounds) {
            hp_error("vw %d stage 0: protocol error: pause %" PRId64 " at minibatch %" PRId64
                     ", but this VW is at %ld after %ld pauses",
                     p->v, h.clock, h.minibatch, q, p->rounds);
            return -HP_EPROTOCOL;
        }
        p->rounds++;
        p->target = h.minibatch;
    }
    if (rc)
        hp_error("vw %d stage 0: a pause's message failed: %s", p->v, hp_strerror(rc));
    return rc;
}

int hp_pause_check(struct hp_pause *p, long q, int requested, int due, long pushed, int *end)
{
    int rc = 0;

    *end = 0;
    if (p->s != 0)
        return 0;
    if (p->v != 0) {
        rc = worker_check(p, q, requested);
    } else {
        rc = take_requests(p, &requested);
        if (!rc && p->target < 0 && (requested || due) && !p->req_sent) {
            rc = start_round(p, q, pushed);
            p->req_sent = requested; /* one round per request: it stops the job */
        }
    }
    *end = !rc && p->target == q;
    return rc;
}

void hp_pause_passed(struct hp_pause *p, long q)
{
    if (p->target >= 0 && q >= p->target)
        p->target = -1;
}
