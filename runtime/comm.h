/* comm.h - the ranks' transport: framed messages over the UCP tag API (UCX).
 *
 * Every message is one tagged UCP message: a fixed 64-byte struct hp_msg_header followed by
 * header.payload_bytes bytes of payload. The receiver validates every header field
 * (hp_msg_header_check) before it hands the message out. UCX types and status codes never
 * leave comm.c: functions return 0 or -HP_E* (-HP_EIO for a transport failure, -HP_ETIMEOUT,
 * -HP_EPROTOCOL for a message that fails validation, -HP_ENOMEM, -HP_EINVAL).
 *
 * Tag scheme: tag = (uint64_t)src_rank << 32 | type. A receive names the peer and the type it
 * wants (or HP_COMM_ANY_PEER), so messages of other types or peers wait in UCX's unexpected
 * queue until a matching receive is posted; messages with the same (peer, type) arrive in the
 * order they were sent.
 *
 * Memory: one send staging buffer is allocated at create and grown (realloc) only when a
 * bigger message is sent; receives land in the caller's buffers directly. Steady-state
 * traffic allocates nothing beyond UCX's own request pool. Headers are in host byte order
 * (all ranks of a job run on hosts of one architecture).
 *
 * A struct hp_comm is driven by one thread; all calls are blocking with a timeout, and they
 * make progress only on their own worker.
 */
#ifndef HP_COMM_H
#define HP_COMM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HP_MSG_MAGIC 0x48505045u /* "HPPE" */
#define HP_MSG_VERSION 1
#define HP_MSG_TOKEN_LEN 16
#define HP_COMM_ANY_PEER (-1)

enum hp_msg_type {
    HP_MSG_ACTIVATION = 1, /* forward activations, stage s -> s + 1 */
    HP_MSG_GRADIENT = 2,   /* backward gradients, stage s -> s - 1 */
    HP_MSG_PUSH = 3,       /* a wave's summed updates, worker -> PS shard */
    HP_MSG_PULL = 4,       /* global weights, PS shard -> worker (or the request for them) */
    HP_MSG_CONTROL = 5,    /* bootstrap, barriers, shutdown */
    HP_MSG_EVAL = 6,       /* evaluation: activations forward, results back */
    HP_MSG_ALLREDUCE = 7,  /* dp: a chunk of the ring allreduce */
    HP_MSG_CHECKPOINT = 8, /* checkpoint: marks to the shards, parts written, the outcome */
    HP_MSG_PAUSE = 9,      /* a pause between job points: requests and notices (pause.h) */
    HP_MSG_VWSYNC = 10,    /* a VW's stages settling a minibatch: tied gradient, norm (vwsync.h) */
};
#define HP_MSG_TYPE_LAST HP_MSG_VWSYNC
#define HP_MSG_ANY_TYPE 0 /* hp_comm_recv: the next message of any type (h->type says which) */

/* The fixed header of every message (64 bytes, host byte order). Fields that do not apply to
 * a message (vw, stage, minibatch, clock of a control message) are -1. */
struct hp_msg_header {
    uint32_t magic;                  /* HP_MSG_MAGIC */
    uint16_t version;                /* HP_MSG_VERSION */
    uint16_t type;                   /* enum hp_msg_type */
    uint8_t token[HP_MSG_TOKEN_LEN]; /* the job's token: a message from another job is refused */
    int32_t src;                     /* sending rank, in [0, nranks) */
    int32_t vw;                      /* virtual worker, or -1 */
    int32_t stage;                   /* pipeline stage, or -1 */
    uint32_t reserved;               /* 0 */
    int64_t minibatch;               /* minibatch index, or -1 */
    int64_t clock;                   /* WSP clock (waves pushed), or -1 */
    uint64_t payload_bytes;          /* bytes following the header */
};

_Static_assert(sizeof(struct hp_msg_header) == 64, "hp_msg_header must be 64 bytes");

/* Check every field of `h`: magic, version, type, token (equal to `token`), src in
 * [0, nranks), vw/stage/minibatch/clock either -1 or >= 0, reserved 0, payload_bytes at most
 * max_payload. Returns 0, or -HP_EPROTOCOL after logging one error that names the field and
 * its value. */
int hp_msg_header_check(const struct hp_msg_header *h, const uint8_t token[HP_MSG_TOKEN_LEN],
                        int nranks, size_t max_payload);

struct hp_comm;

/* Create the transport of rank `rank` of `nranks`: a UCP context (tag feature) and one worker.
 * Transports follow UCX's environment (UCX_TLS, UCX_NET_DEVICES, ...), read here. `token` is
 * copied. On success *out owns the comm (free with hp_comm_destroy); on failure *out is
 * untouched. */
int hp_comm_create(int rank, int nranks, const uint8_t token[HP_MSG_TOKEN_LEN],
                   struct hp_comm **out);

/* For hetpipe-rank --self-check (hetpipe doctor): make a context and a worker as a rank does
 * and free them again; "key = value" lines on f:
 *   ucx.version = 1.13.1                 (the library's, ucp_get_version_string)
 *   ucx.transports = UCX_TLS=tcp,self | auto (UCX_TLS unset)
 *   ucx.context = ok | failed: WHY       (the error hp_comm_create logs)
 * 0, or the code of the failure. */
int hp_comm_self_check(FILE *f);

/* This worker's address, to hand to the peers (through PMIx, a file or a pipe): the UCP
 * worker address after a few bytes that say where this rank runs (kernel boot id, pid
 * namespace, pid). *addr points into the comm and stays valid until hp_comm_destroy. */
int hp_comm_address(struct hp_comm *comm, const void **addr, size_t *len);

/* Open the endpoint to `peer` (0 <= peer < nranks, itself included) from the address it
 * published; `addr` is only read during the call. Connecting twice is -HP_EINVAL. A peer on
 * this host (same kernel and pid namespace) is reached over shared memory, without UCX's peer
 * error handling (which UCX 1.13's shared-memory transports lack): its exit is watched through
 * a pidfd instead, with the same effect on hp_comm_send and hp_comm_recv. A peer on this host
 * that has left already is not an error here: using it gives -HP_EIO. */
int hp_comm_connect(struct hp_comm *comm, int peer, const void *addr, size_t len);

/* Send `h` and h->payload_bytes bytes of `payload` (may be NULL when 0) to `peer` as one
 * message. The comm stamps magic, version, token and src into the header it sends; the caller
 * fills type, vw, stage, minibatch, clock and payload_bytes (`h` is not modified). Returns
 * when the buffers are reusable (not necessarily delivered). timeout_ms < 0 waits without a
 * limit. On -HP_ETIMEOUT or a transport error the endpoint is closed (its send cannot be
 * cancelled) and later sends to `peer` return -HP_EIO. */
int hp_comm_send(struct hp_comm *comm, int peer, const struct hp_msg_header *h, const void *payload,
                 int timeout_ms);

/* Receive the next message of `type` from `peer` (or HP_COMM_ANY_PEER) into *h and up to `cap`
 * bytes of `payload`. The header is validated (hp_msg_header_check with max_payload = cap,
 * and src/type must match the tag) before anything is returned. On -HP_ETIMEOUT the posted
 * receive is cancelled, so a later message is left for the next call; a message that fails
 * validation (or is longer than 64 + cap bytes) is consumed and gives -HP_EPROTOCOL. *h is
 * written only on success; UCX scatters the payload straight into `payload`, so its first cap
 * bytes may have changed also when the call fails. timeout_ms < 0 waits without a limit.
 * When the endpoint to `peer` reports a failure (the peer died: UCX's peer error handling,
 * e.g. a TCP reset or a failed keepalive, or the exit of a peer on this host) the receive is
 * cancelled and gives -HP_EIO at once. */
int hp_comm_recv(struct hp_comm *comm, int peer, int type, struct hp_msg_header *h, void *payload,
                 size_t cap, int timeout_ms);
/* With peer = HP_COMM_ANY_PEER (and type = HP_MSG_ANY_TYPE) a receive takes messages in the
 * order they arrive (from one sender: the order it sent them), and fails with -HP_EIO as
 * soon as any connected peer fails, except a retired one. */

/* Whether a message of `type` (or HP_MSG_ANY_TYPE) from `peer` (or HP_COMM_ANY_PEER) has
 * arrived, without taking it (hp_comm_recv does): the worker makes progress once. 1 or 0;
 * never waits, logs nothing. */
int hp_comm_probe(struct hp_comm *comm, int peer, int type);

/* A peer on this host that has been stopped (SIGSTOP) for `ms` fails like one that exited
 * (default 60 s; the ranks set HP_STOP_LIMIT_S of process.h, or --timeout when shorter). The
 * stop must be seen continuously: checks further apart than `ms` (this rank was stopped too)
 * time it afresh. HETPIPE_LIVENESS=exit in the environment turns this off (only exits count),
 * as for a peer on another host: the tests of the deadlines use it. */
void hp_comm_set_stop_limit(struct hp_comm *comm, int ms);

/* After a failed call: the peer to blame (the one a send or receive timed out on, else the
 * first that failed: exited, stopped, its connection lost) and why, or -1. */
int hp_comm_blame(const struct hp_comm *comm, char *why, size_t n);
/* The caller knows better whom a timeout waited for (e.g. a pull waits for a VW's pushes). */
void hp_comm_set_silent(struct hp_comm *comm, int peer);

/* Mark `peer` as gone on purpose (it said goodbye): its exit no longer fails a receive from
 * HP_COMM_ANY_PEER. Receives from it by name still fail. */
int hp_comm_retire(struct hp_comm *comm, int peer);

/* Message buffers: a header and up to `cap` payload bytes in one allocation, so that a send
 * or a receive needs no staging copy, and a send can be in flight while the caller computes
 * (two ranks that send to each other at once must not both block in a send: with UCX's
 * rendezvous protocol a large send completes only once the peer posts its receive). */
struct hp_msg_buf;
int hp_msg_buf_create(size_t cap, struct hp_msg_buf **out);
/* Waits (at most about a second) for a send still in flight, then frees. NULL is allowed. */
void hp_msg_buf_destroy(struct hp_comm *comm, struct hp_msg_buf *b);
void *hp_msg_buf_payload(struct hp_msg_buf *b); /* where the payload goes (cap bytes) */
const struct hp_msg_header *hp_msg_buf_header(const struct hp_msg_buf *b);
size_t hp_msg_buf_cap(const struct hp_msg_buf *b);

/* Start sending `h` and h->payload_bytes bytes of b's payload to `peer` (stamped as by
 * hp_comm_send) and return at once. b is busy until hp_comm_send_wait: neither its payload
 * may be written nor may it be sent or received into again. */
int hp_comm_send_start(struct hp_comm *comm, int peer, const struct hp_msg_header *h,
                       struct hp_msg_buf *b);
/* Wait for b's send to complete (0 at once when none is in flight); on a timeout or an error
 * as hp_comm_send. */
int hp_comm_send_wait(struct hp_comm *comm, struct hp_msg_buf *b, int timeout_ms);

/* hp_comm_recv into b: the header at hp_msg_buf_header(b), the payload (at most b's cap) at
 * hp_msg_buf_payload(b). */
int hp_comm_recv_buf(struct hp_comm *comm, int peer, int type, struct hp_msg_buf *b,
                     int timeout_ms);

/* Flush and close every endpoint (at most about a second each), destroy the worker and the
 * context, free the comm. NULL is allowed. */
void hp_comm_destroy(struct hp_comm *comm);

#endif
