/* link.h - a worker stage's messages to and from the other stages of its virtual worker
 * (comm.h): the previous and next stage, and between the first and the last (evaluation
 * results, the parameter hash). What the messages hold is the worker's (worker.h); here the
 * buffers, the waits and their checks.
 *
 * Sends are asynchronous, from two buffers per direction (toward later stages: "down"; toward
 * earlier ones: "up"), so that two stages sending to each other never both block; a receive
 * blocks, with the wait given at create: a peer that dies or stays silent gives an error
 * naming it, never a hang. Every message's header carries the VW, the stage and the index
 * the receiver expects; another is a protocol error.
 */
#ifndef HP_LINK_H
#define HP_LINK_H

#include "comm.h"
#include "plan.h"

#include <stddef.h>

enum hp_link_dir {
    HP_LINK_DOWN, /* toward later stages (activations) */
    HP_LINK_UP    /* toward earlier stages (gradients) */
};

struct hp_link {
    int prev, next, first, last; /* ranks of the VW's stages (-1 when none) */
};

struct hp_link_state;

/* The link of stage (v, s) of p over comm, for payloads of up to down_cap bytes toward the
 * next stage and up_cap bytes toward the previous one (receives are sized to match). wait_ms
 * bounds every wait; comm_s (may be NULL) gets the time spent waiting. 0 or a negative code. */
int hp_link_create(struct hp_comm *comm, const struct hp_plan *p, int v, int s, size_t down_cap,
                   size_t up_cap, int wait_ms, double *comm_s, struct hp_link_state **out);
/* Every send delivered (each wait bounded by timeout_ms), then freed; NULL allowed. */
int hp_link_flush(struct hp_link_state *l, int timeout_ms);
void hp_link_destroy(struct hp_link_state *l);

/* The neighbours' ranks. */
const struct hp_link *hp_link_peers(const struct hp_link_state *l);

/* Take the next free send buffer of `dir` (waiting for its previous send): its payload in
 * *payload (at least the capacity given at create). */
int hp_link_take(struct hp_link_state *l, enum hp_link_dir dir, void **payload);

/* Send the buffer taken last (bytes of its payload) to `peer` as message `type` for index
 * `mb` (a minibatch, a test batch, a tag). 0 or a negative code (logged). */
int hp_link_send(struct hp_link_state *l, int peer, int type, long mb, size_t bytes);

/* Instead of minibatch mb's activation, the end of the span at mb (a pause, pause.h): a
 * message of no payload whose clock is mb, down to `peer`. 0 or a negative code (logged). */
int hp_link_send_end(struct hp_link_state *l, int peer, long mb);

/* Receive message `type` for index `mb` from `peer` (the previous stage's into one buffer,
 * any other peer's into another): exactly `bytes` of payload, at *payload until the next
 * receive from that side. `what` names it in errors ("activation"). 0, HP_LINK_END when an
 * activation's place holds the span's end at mb (hp_link_send_end), or a negative code
 * (logged: the wait failed, or a protocol error). */
#define HP_LINK_END 1
int hp_link_recv(struct hp_link_state *l, int peer, int type, long mb, size_t bytes,
                 const char *what, const void **payload);

#endif
