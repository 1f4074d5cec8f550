/* allreduce.c - ring allreduce over hp_comm: reduce-scatter, then allgather.
 *
 * Member at ring position p (0 <= p < n) sends to position p + 1 and receives from p - 1
 * (mod n). Ring step k of a call:
 *   k < n - 1 (reduce-scatter, s = k):  send chunk p - s, receive chunk p - s - 1 and add it;
 *   k >= n - 1 (allgather, s = k - n + 1): send chunk p + 1 - s, receive chunk p - s, copy it.
 * After the reduce-scatter, position p holds the full sum of chunk p + 1, added in the order
 * p + 2, p + 3, ..., p + 1 (each member adds its own value to the running sum it receives);
 * the allgather only copies, so every member ends with the same bits.
 */
#include "allreduce.h"

#include "error.h"
#include "log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct hp_allreduce {
    struct hp_comm *comm;
    int n;          /* members */
    int pos;        /* this member's position in the ring */
    int next, prev; /* comm ranks of positions pos + 1 and pos - 1 */
    size_t max_floats;
    /* Two send buffers alternate, so the send of ring step k may still be in flight while
     * step k + 1 fills the other; one receive buffer. Each holds one chunk of max_floats. */
    struct hp_msg_buf *send[2];
    struct hp_msg_buf *recv;
    size_t sent_bytes; /* payload bytes sent by the last hp_allreduce_sum */
};

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* Chunk c of `count` floats cut into n: the first count % n chunks have one float more. */
static size_t chunk_off(size_t count, int n, int c)
{
    const size_t q = count / (size_t)n, r = count % (size_t)n;

    return (size_t)c * q + ((size_t)c < r ? (size_t)c : r);
}

static size_t chunk_len(size_t count, int n, int c)
{
    return count / (size_t)n + ((size_t)c < count % (size_t)n ? 1 : 0);
}

int hp_allreduce_create(struct hp_comm *comm, const int *ranks, int n, int self, size_t max_floats,
                        struct hp_allreduce **out)
{
    struct hp_allreduce *ar;
    size_t cap;
    int pos = -1, rc;

    if (comm == NULL || ranks == NULL || n < 1 || max_floats > SIZE_MAX / sizeof(float) / 2) {
        hp_error("cannot create an allreduce of %d ranks for %zu floats: invalid arguments", n,
                 max_floats);
        return -HP_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0) {
            hp_error("cannot create an allreduce: member %d is rank %d", i, ranks[i]);
            return -HP_EINVAL;
        }
        for (int j = 0; j < i; j++) {
            if (ranks[j] == ranks[i]) {
                hp_error("cannot create an allreduce: rank %d is member %d and %d", ranks[i], j, i);
                return -HP_EINVAL;
            }
        }
        if (ranks[i] == self)
            pos = i;
    }
    if (pos < 0) {
        hp_error("cannot create an allreduce: rank %d is not among its %d members", self, n);
        return -HP_EINVAL;
    }
    ar = calloc(1, sizeof(*ar));
    if (ar == NULL)
        return -HP_ENOMEM;
    ar->comm = comm;
    ar->n = n;
    ar->pos = pos;
    ar->next = ranks[(pos + 1) % n];
    ar->prev = ranks[(pos + n - 1) % n];
    ar->max_floats = max_floats;
    if (n > 1) {
        cap = chunk_len(max_floats, n, 0) * sizeof(float);
        rc = hp_msg_buf_create(cap, &ar->send[0]);
        if (!rc)
            rc = hp_msg_buf_create(cap, &ar->send[1]);
        if (!rc)
            rc = hp_msg_buf_create(cap, &ar->recv);
        if (rc) {
            hp_allreduce_destroy(comm, ar);
            return rc;
        }
    }
    *out = ar;
    return 0;
}

void hp_allreduce_destroy(struct hp_comm *comm, struct hp_allreduce *ar)
{
    if (ar == NULL)
        return;
    hp_msg_buf_destroy(comm, ar->send[0]);
    hp_msg_buf_destroy(comm, ar->send[1]);
    hp_msg_buf_destroy(comm, ar->recv);
    free(ar);
}

/* Check what arrived at ring step k against what the predecessor must have sent: -1 for vw,
 * the step, the ring step, the chunk and its exact size. */
static int check_header(const struct hp_allreduce *ar, const struct hp_msg_header *h, long step,
                        int k, int chunk, size_t bytes)
{
    const char *field = NULL;
    long long got = 0, want = 0;

    if (h->minibatch != step)
        field = "minibatch (step)", got = h->minibatch, want = step;
    else if (h->clock != k)
        field = "clock (ring step)", got = h->clock, want = k;
    else if (h->stage != chunk)
        field = "stage (chunk)", got = h->stage, want = chunk;
    else if (h->payload_bytes != bytes)
        field = "payload bytes", got = (long long)h->payload_bytes, want = (long long)bytes;
    else if (h->vw != -1)
        field = "vw", got = h->vw, want = -1;
    if (field == NULL)
        return 0;
    hp_error("allreduce of step %ld, ring step %d: the message from rank %d has %s %lld, "
             "expected %lld (the group is out of step)",
             step, k, ar->prev, field, got, want);
    return -HP_EPROTOCOL;
}

int hp_allreduce_sum(struct hp_allreduce *ar, float *buf, size_t count, long step, int timeout_ms)
{
    int rc = 0;

    if (ar == NULL || (buf == NULL && count > 0) || count > ar->max_floats || step < 0) {
        hp_error("cannot allreduce %zu floats at step %ld: invalid arguments (at most %zu "
                 "floats, step >= 0)",
                 count, step, ar ? ar->max_floats : 0);
        return -HP_EINVAL;
    }
    ar->sent_bytes = 0;
    if (ar->n == 1)
        return 0;

    const int n = ar->n, p = ar->pos;
    for (int k = 0; k < 2 * (n - 1); k++) {
        const int reduce = k < n - 1;
        const int s = reduce ? k : k - (n - 1);
        const int out_c = mod(reduce ? p - s : p + 1 - s, n), in_c = mod(out_c - 1, n);
        const size_t out_len = chunk_len(count, n, out_c), in_len = chunk_len(count, n, in_c);
        float *in = in_len > 0 ? buf + chunk_off(count, n, in_c) : NULL;
        struct hp_msg_buf *sb = ar->send[k % 2];
        const struct hp_msg_header h = {
            .type = HP_MSG_ALLREDUCE,
            .vw = -1,
            .stage = out_c,
            .minibatch = step,
            .clock = k,
            .payload_bytes = out_len * sizeof(float),
        };

        /* the send of ring step k - 2 (or one a failed call left in flight) */
        rc = hp_comm_send_wait(ar->comm, sb, timeout_ms);
        if (rc)
            return rc;
        if (out_len > 0)
            memcpy(hp_msg_buf_payload(sb), buf + chunk_off(count, n, out_c),
                   out_len * sizeof(float));
        rc = hp_comm_send_start(ar->comm, ar->next, &h, sb);
        if (rc)
            return rc;
        ar->sent_bytes += out_len * sizeof(float);

        rc = hp_comm_recv_buf(ar->comm, ar->prev, HP_MSG_ALLREDUCE, ar->recv, timeout_ms);
        if (!rc)
            rc = check_header(ar, hp_msg_buf_header(ar->recv), step, k, in_c,
                              in_len * sizeof(float));
        if (rc)
            return rc;
        const float *got = hp_msg_buf_payload(ar->recv);
        if (reduce) {
            for (size_t i = 0; i < in_len; i++)
                in[i] += got[i];
        } else if (in_len > 0) {
            memcpy(in, got, in_len * sizeof(float));
        }
    }
    /* Complete the last two sends, so a peer's failure shows here and the call leaves
     * nothing in flight. */
    rc = hp_comm_send_wait(ar->comm, ar->send[0], timeout_ms);
    if (!rc)
        rc = hp_comm_send_wait(ar->comm, ar->send[1], timeout_ms);
    return rc;
}

size_t hp_allreduce_sent_bytes(const struct hp_allreduce *ar)
{
    return ar->sent_bytes;
}
