/* ps_client.h - the worker's side of Wave Synchronous Parallel: stage (v, s)'s view of the
 * parameter-server shards that own its units (the protocol: ps.h). */
#ifndef HP_PS_CLIENT_H
#define HP_PS_CLIENT_H

#include "comm.h"
#include "model.h"
#include "plan.h"
#include "ps.h"

#include <stdint.h>
#include <stdio.h>

/* A worker rank tells every PS shard that it is done (the last message it sends them);
 * stopped: the job stopped on request after a checkpoint (the shards exit as the workers). */
int hp_ps_worker_done(const struct hp_plan *plan, struct hp_comm *comm, int rank, int vw, int stage,
                      int stopped, int timeout_ms);

struct hp_ps_client;

/* `init` is the stage's initial parameters (host, the stage's floats); `node` the node of
 * the stage's GPU (traffic to the shards of other nodes is counted). trace may be NULL. */
int hp_ps_client_create(const struct hp_plan *plan, const struct hp_model *model, int v, int s,
                        int node, int rank, struct hp_comm *comm, const float *init, int timeout_ms,
                        FILE *trace, struct hp_ps_client **out);
void hp_ps_client_destroy(struct hp_comm *comm, struct hp_ps_client *c);

/* Push wave `wave`: the update since the last push or pull is local - S, where S is the
 * client's copy of the global weights as last pulled plus its own pushes since (kept in the
 * same float operations as the shard, so that with one VW S equals the shard's weights bit
 * for bit). Sends are asynchronous. */
int hp_ps_push(struct hp_ps_client *c, const float *local, long wave);

/* Ask every shard for its units once each VW x has pushed thr[x] waves of them, and wait for
 * the replies (into the client). `wave` is the wave the pull is for, -1 for evaluation.
 * Afterwards hp_ps_global gives the pulled weights and hp_ps_included what they hold. */
int hp_ps_pull(struct hp_ps_client *c, const int64_t *thr, long wave);
const float *hp_ps_global(const struct hp_ps_client *c);
/* Smallest and largest waves of VW x in the last pulled weights (0, 0 before any pull). */
void hp_ps_included(const struct hp_ps_client *c, int x, int64_t *min, int64_t *max);

/* Rebase after hp_ps_pull: local += pulled - S, then S = pulled (local = the global weights
 * plus the own updates not yet pushed; with one VW pulled == S and local is unchanged). */
void hp_ps_rebase(struct hp_ps_client *c, float *local);

/* The client's state for a checkpoint (waves pushed, the last pulls' clocks, its copy of the
 * global weights): hp_ps_client_blob_bytes bytes into blob; restored under the same plan by
 * hp_ps_client_restore (-HP_EDATA when it does not fit this client). */
size_t hp_ps_client_blob_bytes(const struct hp_ps_client *c);
void hp_ps_client_save(const struct hp_ps_client *c, void *blob);
int hp_ps_client_restore(struct hp_ps_client *c, const void *blob, size_t bytes);

/* Tell every PS shard that this worker's pushes for checkpoint `seq` have all been sent. */
int hp_ps_checkpoint_mark(const struct hp_plan *plan, struct hp_comm *comm, int vw, int stage,
                          long seq, int timeout_ms);

/* How long a pull may wait for the other VWs' waves (default: the timeout given at create). */
void hp_ps_client_set_wait(struct hp_ps_client *c, int wait_ms);

/* Waves this client has pushed. */
long hp_ps_pushed(const struct hp_ps_client *c);

/* The global clock of the stage's units in the last pull (-1: no shard holds any). */
int64_t hp_ps_global_clock(const struct hp_ps_client *c);

/* Wait until the pushes and requests in flight have left (before saying done). */
int hp_ps_flush(struct hp_ps_client *c);

/* What crossed to shards on other nodes (payload floats; pull replies counted by their
 * weights), and how often. */
struct hp_ps_stats {
    uint64_t remote_push_bytes, remote_pull_bytes;
    long pushes, pulls, eval_pulls;
    double pull_wait_s; /* in training pulls, from request to reply */
};
void hp_ps_client_stats(const struct hp_ps_client *c, struct hp_ps_stats *out);

/* Write the incl column ("min:max;..." per VW, "-" for a stage no shard holds) of the last
 * training pull to f, and a newline. */
void hp_ps_trace_incl(const struct hp_ps_client *c, FILE *f);

/* The client as Wave Synchronous Parallel uses it (wsp.h): the calls above, behind function
 * pointers so that the unit tests can put a fake parameter server in its place. `c` is the
 * client (struct hp_ps_client *, or the fake's own state). */
struct hp_ps_ops {
    int (*push)(void *c, const float *local, long wave);
    int (*pull)(void *c, const int64_t *thr, long wave);
    void (*rebase)(void *c, float *local);
    const float *(*global)(void *c);
    long (*pushed)(void *c);
    int64_t (*global_clock)(void *c);
    void (*included)(void *c, int x, int64_t *min, int64_t *max);
    void (*trace_incl)(void *c, FILE *f);
};
extern const struct hp_ps_ops hp_ps_client_ops;

#endif
