/* allreduce.h - sum a float vector over a group of ranks with the ring algorithm (Baidu's,
 * as Horovod runs it): the vector is cut into P nearly equal chunks; P - 1 reduce-scatter
 * steps (each rank sends one chunk to its successor and adds the chunk it receives from its
 * predecessor) leave chunk i fully summed on one rank; P - 1 allgather steps pass the summed
 * chunks around the ring. Each rank sends and receives 2 (P - 1) / P of the vector.
 *
 * Every chunk is summed once, in one fixed order, and then copied, so all participants end
 * with bit-identical vectors. The order differs from a single process's sum over the whole
 * batch, so results agree with it only up to floating-point reassociation.
 *
 * Messages: HP_MSG_ALLREDUCE, header minibatch = the caller's step, clock = the ring step
 * (0 .. 2P - 3), stage = the chunk index; a message with another step, ring step or chunk is
 * a protocol error (the group is out of step). Sends are asynchronous (two buffers), so a
 * ring of any size cannot deadlock on UCX's rendezvous protocol.
 */
#ifndef HP_ALLREDUCE_H
#define HP_ALLREDUCE_H

#include "comm.h"

#include <stddef.h>

struct hp_allreduce;

/* A group of `n` ranks in ring order (ranks[], this rank among them, every one connected in
 * `comm`), for vectors of up to max_floats floats. `self` is this process's comm rank (not its
 * index in ranks[]); ranks[] must be distinct and is only read during the call. The three
 * message buffers (two sends, one receive, of one chunk each) are allocated here, so that
 * hp_allreduce_sum allocates nothing; none for n = 1. On success *out owns them (free with
 * hp_allreduce_destroy, which takes NULL); -HP_EINVAL or -HP_ENOMEM, *out untouched. */
int hp_allreduce_create(struct hp_comm *comm, const int *ranks, int n, int self, size_t max_floats,
                        struct hp_allreduce **out);
void hp_allreduce_destroy(struct hp_comm *comm, struct hp_allreduce *ar);

/* buf[0 .. count) := the sum of every member's buf (count <= max_floats, the same on every
 * member), for step `step` (>= 0, the same on every member, to catch a group out of step). A
 * peer that fails or stays silent for timeout_ms (each wait, not the whole call) gives an
 * error (-HP_EIO, -HP_ETIMEOUT, -HP_EPROTOCOL naming the header field and both values), never
 * a hang. count < n and count = 0 are allowed (empty chunks still travel, so the step is
 * checked all the same). Returns once its own sends have completed; after a failure buf is
 * partly summed and the group is unusable. With n = 1 it returns at once. */
int hp_allreduce_sum(struct hp_allreduce *ar, float *buf, size_t count, long step, int timeout_ms);

/* Bytes this member sent in the last hp_allreduce_sum (payload only). */
size_t hp_allreduce_sent_bytes(const struct hp_allreduce *ar);

#endif
