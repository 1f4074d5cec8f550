/* jobpoint.c - the job points' messages and the reporter's decision (jobpoint.h). */
#include "jobpoint.h"

#include "clock.h"
#include "error.h"
#include "log.h"

#include <inttypes.h>

int hp_jp_arrive(const struct hp_jobpoint *j, long n, double *t_all, int *req)
{
    const int to = hp_plan_stage_rank(j->plan, 0, 0);
    const int workers = hp_plan_first_shard(j->plan);
    struct hp_msg_header h = {
        .type = HP_MSG_CONTROL, .vw = j->v, .stage = j->s, .minibatch = n, .clock = *req != 0};
    int rc = 0;

    if (j->rank != to) {
        rc = hp_comm_send(j->comm, to, &h, NULL, j->timeout_ms);
    } else {
        /* a slower VW may take long to get here (wait_ms); a dead peer ends the wait */
        for (int r = 0; r < workers && !rc; r++) {
            if (r == to)
                continue;
            rc = hp_comm_recv(j->comm, r, HP_MSG_CONTROL, &h, NULL, 0, j->wait_ms);
            if (!rc && (h.minibatch != n || h.clock < 0 || h.clock > 1)) {
                hp_error("vw %d stage %d: protocol error: expected rank %d at job point %ld, got "
                         "%" PRId64 " (%" PRId64 ")",
                         j->v, j->s, r, n, h.minibatch, h.clock);
                rc = -HP_EPROTOCOL;
            }
            if (!rc)
                *req |= (int)h.clock;
            else if (rc == -HP_ETIMEOUT)
                hp_error("vw %d stage %d: rank %d did not reach job point %ld within %.0f s", j->v,
                         j->s, r, n, j->wait_ms / 1000.0);
        }
        *t_all = hp_now_s();
    }
    if (rc)
        hp_error("vw %d stage %d: at job point %ld: %s", j->v, j->s, n, hp_strerror(rc));
    return rc;
}

int hp_jp_verdict(const struct hp_jobpoint *j, long n, unsigned *flags, long *seq)
{
    const int from = hp_plan_stage_rank(j->plan, 0, 0);
    const int workers = hp_plan_first_shard(j->plan);
    struct hp_msg_header h = {.type = HP_MSG_CONTROL,
                              .vw = j->v,
                              .stage = j->s,
                              .minibatch = n,
                              .clock = -1,
                              .payload_bytes = 2 * sizeof(int64_t)};
    int64_t pay[2] = {(int64_t)*flags, *seq};
    int rc = 0;

    if (j->rank == from) {
        for (int r = 0; r < workers && !rc; r++)
            if (r != from)
                rc = hp_comm_send(j->comm, r, &h, pay, j->timeout_ms);
    } else {
        /* VW 0's evaluation may take long (wait_ms); a dead peer ends the wait */
        rc = hp_comm_recv(j->comm, from, HP_MSG_CONTROL, &h, pay, sizeof(pay), j->wait_ms);
        if (!rc && (h.minibatch != n || h.payload_bytes != sizeof(pay) || pay[0] < 0 ||
                    (pay[0] & ~(int64_t)HP_VERDICT_ALL) || pay[1] < 0)) {
            hp_error("vw %d stage %d: protocol error: expected the verdict of job point %ld from "
                     "rank %d, got %" PRId64 " (%" PRId64 ")",
                     j->v, j->s, n, from, h.minibatch, pay[0]);
            rc = -HP_EPROTOCOL;
        }
        if (!rc) {
            *flags = (unsigned)pay[0];
            *seq = pay[1];
        }
    }
    if (rc)
        hp_error("vw %d stage %d: after job point %ld: %s", j->v, j->s, n, hp_strerror(rc));
    return rc;
}

unsigned hp_jp_decide(int stop, int last, int ckpt_on, int requested, int due)
{
    unsigned flags = stop ? HP_VERDICT_STOP : 0u;

    if (last || stop || !ckpt_on || !(requested || due))
        return flags;
    return flags | HP_VERDICT_CKPT | (requested ? HP_VERDICT_STOP | HP_VERDICT_REQUEST : 0u);
}
