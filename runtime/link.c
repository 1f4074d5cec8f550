/* link.c - a worker stage's messages to and from its virtual worker's other stages (link.h). */
#include "link.h"

#include "clock.h"
#include "error.h"
#include "log.h"

#include <inttypes.h>
#include <stdlib.h>

struct hp_link_state {
    struct hp_link peers;
    struct hp_comm *comm;
    int v, s, wait_ms;
    double *comm_s;
    struct hp_msg_buf *out[2][2]; /* [dir][pair] */
    int next_out[2];
    struct hp_msg_buf *taken; /* the buffer hp_link_take gave last */
    struct hp_msg_buf *in[2]; /* from the previous stage; from any other */
};

static void add_time(struct hp_link_state *l, double t0)
{
    if (l->comm_s)
        *l->comm_s += hp_now_s() - t0;
}

int hp_link_create(struct hp_comm *comm, const struct hp_plan *p, int v, int s, size_t down_cap,
                   size_t up_cap, int wait_ms, double *comm_s, struct hp_link_state **out)
{
    const int k = p->vws[v].nstages;
    struct hp_link_state *l = calloc(1, sizeof(*l));
    int rc = 0;

    if (!l)
        return -HP_ENOMEM;
    *l = (struct hp_link_state){.comm = comm, .v = v, .s = s, .wait_ms = wait_ms, .comm_s = comm_s};
    l->peers.prev = s > 0 ? hp_plan_stage_rank(p, v, s - 1) : -1;
    l->peers.next = s + 1 < k ? hp_plan_stage_rank(p, v, s + 1) : -1;
    l->peers.first = hp_plan_stage_rank(p, v, 0);
    l->peers.last = hp_plan_stage_rank(p, v, k - 1);
    for (int i = 0; i < 2 && !rc; i++) {
        rc = hp_msg_buf_create(down_cap, &l->out[HP_LINK_DOWN][i]);
        if (!rc)
            rc = hp_msg_buf_create(up_cap, &l->out[HP_LINK_UP][i]);
    }
    if (!rc)
        rc = hp_msg_buf_create(up_cap, &l->in[0]);
    if (!rc)
        rc = hp_msg_buf_create(down_cap, &l->in[1]);
    if (rc) {
        hp_link_destroy(l);
        return rc;
    }
    *out = l;
    return 0;
}

int hp_link_flush(struct hp_link_state *l, int timeout_ms)
{
    int rc = 0;

    for (int i = 0; i < 2 && !rc && l; i++) {
        rc = hp_comm_send_wait(l->comm, l->out[HP_LINK_DOWN][i], timeout_ms);
        if (!rc)
            rc = hp_comm_send_wait(l->comm, l->out[HP_LINK_UP][i], timeout_ms);
    }
    return rc;
}

void hp_link_destroy(struct hp_link_state *l)
{
    if (!l)
        return;
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 2; i++)
            hp_msg_buf_destroy(l->comm, l->out[d][i]);
    hp_msg_buf_destroy(l->comm, l->in[0]);
    hp_msg_buf_destroy(l->comm, l->in[1]);
    free(l);
}

const struct hp_link *hp_link_peers(const struct hp_link_state *l)
{
    return &l->peers;
}

int hp_link_take(struct hp_link_state *l, enum hp_link_dir dir, void **payload)
{
    const double t0 = hp_now_s();
    struct hp_msg_buf *b = l->out[dir][l->next_out[dir]];
    int rc = hp_comm_send_wait(l->comm, b, l->wait_ms);

    add_time(l, t0);
    l->next_out[dir] ^= 1;
    l->taken = b;
    *payload = hp_msg_buf_payload(b);
    return rc;
}

int hp_link_send(struct hp_link_state *l, int peer, int type, long mb, size_t bytes)
{
    const struct hp_msg_header h = {.type = (uint16_t)type,
                                    .vw = l->v,
                                    .stage = l->s,
                                    .minibatch = mb,
                                    .clock = -1,
                                    .payload_bytes = bytes};
    int rc = hp_comm_send_start(l->comm, peer, &h, l->taken);

    if (rc)
        hp_error("vw %d stage %d: sending minibatch %ld to rank %d failed: %s", l->v, l->s, mb,
                 peer, hp_strerror(rc));
    return rc;
}

int hp_link_send_end(struct hp_link_state *l, int peer, long mb)
{
    const struct hp_msg_header h = {.type = HP_MSG_ACTIVATION,
                                    .vw = l->v,
                                    .stage = l->s,
                                    .minibatch = mb,
                                    .clock = mb,
                                    .payload_bytes = 0};
    const double t0 = hp_now_s();
    int rc = hp_comm_send(l->comm, peer, &h, NULL, l->wait_ms);

    add_time(l, t0);
    if (rc)
        hp_error("vw %d stage %d: sending the span's end at minibatch %ld to rank %d failed: %s",
                 l->v, l->s, mb, peer, hp_strerror(rc));
    return rc;
}

int hp_link_recv(struct hp_link_state *l, int peer, int type, long mb, size_t bytes,
                 const char *what, const void **payload)
{
    struct hp_msg_buf *b = l->in[peer == l->peers.prev ? 0 : 1];
    const double t0 = hp_now_s();
    int rc = hp_comm_recv_buf(l->comm, peer, type, b, l->wait_ms);
    const struct hp_msg_header *h = hp_msg_buf_header(b);

    add_time(l, t0);
    if (rc) {
        hp_error("vw %d stage %d: waiting for %s %ld from rank %d failed: %s", l->v, l->s, what, mb,
                 peer, hp_strerror(rc));
        return rc;
    }
    if (type == HP_MSG_ACTIVATION && h->vw == l->v && h->minibatch == mb && h->clock == mb &&
        h->payload_bytes == 0)
        return HP_LINK_END;
    if (h->vw != l->v || h->minibatch != mb || h->payload_bytes != bytes) {
        hp_error("vw %d stage %d: protocol error: expected %s %ld of vw %d (%zu bytes) from rank "
                 "%d, got minibatch %" PRId64 " of vw %d (%" PRIu64 " bytes)",
                 l->v, l->s, what, mb, l->v, bytes, peer, h->minibatch, h->vw, h->payload_bytes);
        return -HP_EPROTOCOL;
    }
    *payload = hp_msg_buf_payload(b);
    return 0;
}
