/* tlpart.h - the timeline part file: what a rank recorded (runtime/timeline.h), as it writes
 * it at its end and as hetpipe run / launch (launcher/tlmerge.h) and hetpipe report
 * (launcher/jobdata.h) read it back. The format only: libc and common/ (output.h, parse.h).
 *
 * A part file, RUN_DIR/timeline.R for rank R (text; written with hp_out_open):
 *   # hetpipe timeline 1
 *   rank = R
 *   role = worker | shard | replica     (a pipeline stage, a PS shard, a dp replica)
 *   vw = V                              (-1 for a shard)
 *   stage = S                           (the shard's index P for a shard)
 *   stages = K                          (stages of its VW; 0 for a shard)
 *   nm = NM                             (minibatches per wave; 0 for a shard)
 *   node = NAME
 *   gpu = TYPE                          (- for a shard)
 *   device = D                          (-1 for a shard)
 *   clock_offset_s = X                  (add to t0/t1 to get rank 0's clock)
 *   events = N
 *   dropped = N                         (events not kept: the buffer was full)
 *   kind,t0,t1,mb,peer,bytes,wave
 *   fwd,12.345678,12.350000,7,-1,0,1
 *   ...
 * t0 and t1 are seconds on the rank's CLOCK_MONOTONIC (hp_now_s), mb the VW's minibatch index
 * since its start (-1 when none), peer a rank (-1), bytes a message's payload, wave a WSP wave
 * (clock), a checkpoint's number or an epoch (-1). Kinds (enum hp_tl_kind, hp_tl_kind_names):
 *   fwd, bwd          a stage's forward / backward pass of minibatch mb (compute and the
 *                     emulation's padding), wave = mb / Nm
 *   update            the SGD step after a backward pass
 *   send_act, send_grad   an activation / a gradient to `peer` (posting and the emulated
 *                     transfer time); recv_act, recv_grad: the wait for one from `peer`
 *   push, pull        a worker's push of wave `wave`; its pull of the global weights to
 *                     evaluate on (VW 0)
 *   wsp_wait          the WSP gate: waiting for the VWs behind before minibatch mb
 *   allreduce         dp: the ring allreduce after minibatch mb
 *   eval              an evaluation pass (wave = the epoch)
 *   ckpt              taking checkpoint `wave`
 *   serve_push, serve_pull   a shard: a push of wave `wave` from `peer` applied; a pull
 *                     answered
 *   data              a first stage waiting for minibatch mb's input from its data feed
 */
#ifndef HP_TLPART_H
#define HP_TLPART_H

#include <stdint.h>

#define HP_TL_VERSION 1
#define HP_TL_EVENTS_MAX (1L << 22) /* per rank: 4 Mi events, 160 MiB at most */

enum hp_tl_kind {
    HP_TL_FWD,
    HP_TL_BWD,
    HP_TL_UPDATE,
    HP_TL_SEND_ACT,
    HP_TL_SEND_GRAD,
    HP_TL_RECV_ACT,
    HP_TL_RECV_GRAD,
    HP_TL_PUSH,
    HP_TL_PULL,
    HP_TL_WSP_WAIT,
    HP_TL_ALLREDUCE,
    HP_TL_EVAL,
    HP_TL_CKPT,
    HP_TL_SERVE_PUSH,
    HP_TL_SERVE_PULL,
    HP_TL_DATA,   /* the first stage waiting for its input (runtime/feed.h) */
    HP_TL_VWSYNC, /* a stage waiting for its VW's tied gradient or norm (runtime/vwsync.h) */
    HP_TL_KINDS
};
extern const char *const hp_tl_kind_names[HP_TL_KINDS];

struct hp_tl_event {
    double t0, t1;
    int64_t mb, bytes;
    int32_t wave, peer;
    int32_t kind;
};

/* What a part file says of its rank. */
struct hp_tl_meta {
    int rank, vw, stage, stages, nm, device;
    char role[16], node[64], gpu[32];
    double clock_offset_s;
    long dropped;
};

/* Write the part file `path` (format above): meta, the n events ev[0..n-1], and `dropped`
 * (events the recorder could not keep; meta->dropped is not used). 0 or a negative code
 * (logged). */
int hp_tl_part_write(const char *path, const struct hp_tl_meta *meta, const struct hp_tl_event *ev,
                     long n, long dropped);

/* Read part file `path`: its meta and events (*ev: a new array of *n, free it). 0, or
 * -HP_EDATA / -HP_EIO with an error naming the file, the line and what is wrong. */
int hp_tl_part_read(const char *path, struct hp_tl_meta *meta, struct hp_tl_event **ev, long *n);

#endif
