/* ps.c - a parameter-server shard (being written): for now it keeps its endpoints open until
 * every worker rank has said it is done. */
#include "ps.h"
#include "error.h"
#include "log.h"

int hp_ps_run(const struct hp_plan *plan, const struct hp_cluster *cl,
              const struct hp_model *model, int rank, struct hp_comm *comm,
              const struct hp_worker_opts *o)
{
    (void)cl, (void)model, (void)o;
    for (int left = plan->nranks - plan->nshards; left > 0; left--) {
        struct hp_msg_header h;
        int rc = hp_comm_recv(comm, HP_COMM_ANY_PEER, HP_MSG_CONTROL, &h, NULL, 0, -1);
        if (rc) {
            hp_error("PS shard rank %d: waiting for %d worker rank%s to finish: %s", rank, left,
                     left == 1 ? "" : "s", hp_strerror(rc));
            return rc;
        }
        hp_comm_retire(comm, h.src);
    }
    return 0;
}

int hp_ps_worker_done(const struct hp_plan *plan, struct hp_comm *comm, int rank, int vw,
                      int stage, int timeout_ms)
{
    for (int r = plan->nranks - plan->nshards; r < plan->nranks; r++) {
        struct hp_msg_header h = {.type = HP_MSG_CONTROL, .vw = vw, .stage = stage,
                                  .minibatch = -1, .clock = -1, .payload_bytes = 0};
        int rc = hp_comm_send(comm, r, &h, NULL, timeout_ms);
        if (rc) {
            hp_error("rank %d: telling PS shard rank %d that it is done: %s", rank, r,
                     hp_strerror(rc));
            return rc;
        }
    }
    return 0;
}
