/* plan.h - the plan: virtual workers, their stages and Nm, parameter-server shards, predicted
 * throughput; computed by hp_plan_compute (a pure function) for a cluster, model and options.
 *
 * Policies (how GPUs are grouped into virtual workers, VWs):
 * - np: one VW per node, of that node's GPUs.
 * - ed: V = the smallest GPU count of any node; node n's GPU i goes to VW i mod V, so every VW
 *   gets the same mix when counts are equal; uneven counts give some VWs more GPUs.
 * - hd: nodes sorted by per-GPU speed, the fastest paired with the slowest, the second with
 *   the second slowest, ...; a pair (a, b) forms V = min(GPUs of a, GPUs of b, 2) VWs, GPU i of
 *   either node going to VW i mod V (half of a VW's stage-to-stage traffic stays inside a
 *   node). With an odd node count the middle node forms one VW of its own.
 * - auto: the three above and, for every VW size k from 1 to min(16, units), the GPUs sorted
 *   by speed and dealt to V = ceil(GPUs / k) VWs in snake order (1, 2, .., V, V, .., 1, ...);
 *   the grouping with the best predicted job throughput wins (so auto is never predicted
 *   slower than np, ed, hd).
 * - dp: every GPU a one-stage VW holding the whole model, synchronised by ring allreduce every
 *   minibatch (Horovod); GPUs that cannot hold the model are left out.
 * With finite staleness every VW runs at the pace of the slowest, so a job's throughput is
 * (number of VWs) x (the slowest VW's rate). A VW's rate is its pipeline's (partition.h),
 * lowered when its wave's parameter synchronisation over the network (the bytes of its units
 * held on other nodes' shards, pushed and pulled at the inter-node bandwidth, overlapping
 * compute) takes longer than the wave's Nm minibatches of compute.
 *
 * Placement: one PS shard per node. default: units round-robin over the shards, whatever
 * runs them; local: a unit's parameters on the shard of the node that runs it in VW 0 (with
 * ed every VW runs a stage on the same node). Bytes per wave that cross the network: for
 * every VW and unit whose GPU is on another node than the unit's shard, its parameters twice
 * (push of the wave's update, pull of the global weights).
 */
#ifndef HP_PLAN_H
#define HP_PLAN_H

#include "cluster.h"
#include "cost.h"
#include "partition.h"

#include <stdint.h>

#define HP_PLAN_VERSION 1

enum hp_policy { HP_POLICY_NP, HP_POLICY_ED, HP_POLICY_HD, HP_POLICY_AUTO, HP_POLICY_DP };
enum hp_placement { HP_PLACEMENT_DEFAULT, HP_PLACEMENT_LOCAL };

struct hp_plan_opts {
    enum hp_policy policy;
    enum hp_placement placement;
    int batch;     /* minibatch per VW step */
    int staleness; /* D >= 0 */
    int nm_max;    /* upper bound of the Nm search */
    int nm_fixed;  /* > 0: use this Nm */
    uint64_t seed;
};

struct hp_plan {
    int version;
    char model[4096]; /* the model's name, or the absolute path of its .ini */
    char cluster[HP_NODE_NAME_MAX];
    struct hp_plan_opts opts;
    enum hp_policy grouping; /* what auto chose (np, ed, hd, or auto for a snake grouping) */
    int nvws;
    struct hp_vw_plan *vws; /* owned */
    int nshards;            /* PS shards: one per node, shard i on node i */
    int *unit_shard;        /* owned, [nunits] */
    int nunits;
    double rate;          /* predicted images/s of the job */
    double allreduce_s;   /* dp: per minibatch */
    double wave_bytes[2]; /* predicted network bytes per wave under default and local */
    int nranks;           /* workers then PS shards */
};

/* Parse "np", "ed", "hd", "auto", "dp" / "default", "local"; -HP_EINVAL otherwise. */
int hp_policy_parse(const char *s, enum hp_policy *out);
int hp_placement_parse(const char *s, enum hp_placement *out);
const char *hp_policy_name(enum hp_policy p);
const char *hp_placement_name(enum hp_placement p);

/* Compute the plan. 0, or a negative code with the reason logged (a model that fits on no
 * grouping, bad options). *plan is caller-owned: release with hp_plan_release. */
int hp_plan_compute(const struct hp_cost *c, const struct hp_cluster *cl,
                    const struct hp_plan_opts *o, struct hp_plan *plan);
void hp_plan_release(struct hp_plan *plan);

/* Ranks: the workers VW by VW, stage by stage, then the PS shards. The rank of stage s of VW
 * v; and the VW and stage of rank r: 0, or -1 when r is not a worker (a PS shard). */
int hp_plan_stage_rank(const struct hp_plan *p, int v, int s);
int hp_plan_rank_stage(const struct hp_plan *p, int r, int *v, int *s);

#endif
