/* plan.h - the plan of a job: its virtual workers (VWs), their stages, Nm and in-flight counts,
 * the parameter-server shards and the placement of every unit, what the planner predicted,
 * and the mapping between ranks and roles. The planner (launcher/planner.h) computes it, the
 * plan file (planfile.h) carries it, the ranks (runtime/) run it; nothing here plans.
 *
 * Ranks: the workers VW by VW, stage by stage, then the PS shards (shard i on node i).
 */
#ifndef HP_PLAN_H
#define HP_PLAN_H

#include "cluster.h"
#include "options.h"

#include <stddef.h>
#include <stdint.h>

#define HP_PLAN_VERSION 2
#define HP_MAX_VW_GPUS 64

/* In the order of their words in the options table (options.h), which parses them. */
enum hp_policy { HP_POLICY_AUTO, HP_POLICY_NP, HP_POLICY_ED, HP_POLICY_HD, HP_POLICY_DP };
enum hp_placement { HP_PLACEMENT_DEFAULT, HP_PLACEMENT_LOCAL };
enum hp_recompute { HP_RECOMPUTE_AUTO, HP_RECOMPUTE_NEVER, HP_RECOMPUTE_ALWAYS };

/* One stage: units [u0, u1) on cluster GPU `gpu`, with the planner's figures for one
 * minibatch on that GPU's type (from the cost model or a measured profile). The ranks pace
 * their emulation by these, so they never rebuild a cost model. */
struct hp_stage_plan {
    int gpu;            /* index into the cluster's gpus */
    int u0, u1;         /* units [u0, u1) */
    int in_flight;      /* minibatches (and weight versions) kept */
    int recompute;      /* the stage recomputes its activations in backward (runtime/net.h) */
    double fwd_s;       /* forward pass of the stage's units */
    double bwd_s;       /* backward pass (with the recomputed forward pass, if recompute) */
    double send_s;      /* its output activation to the next stage (0 for the last) */
    double send_back_s; /* the gradient of its input to the previous stage (0 for the first) */
    double compute_s;   /* fwd_s + bwd_s */
    double transfer_s;  /* send_s + send_back_s */
    double memory;      /* bytes, by the memory model */
    double capacity;    /* bytes of the GPU */
};

struct hp_vw_plan {
    int nstages;
    struct hp_stage_plan stages[HP_MAX_VW_GPUS];
    int nm;
    double bottleneck_s, round_s;
    double rate; /* images per second */
};

struct hp_plan {
    int version;
    char model[4096]; /* the model's name, or the absolute path of its .ini */
    char cluster[HP_NODE_NAME_MAX];
    /* The options it was planned with. The plan file carries the rows with a plan key (the
     * table's: policy, placement, staleness, nm, recompute, batch, nm_max, seed; the model
     * as `model` above, opts.model is not kept); the others are their defaults after a load.
     * policy, placement and recompute as enum hp_policy, hp_placement and hp_recompute;
     * nm 0: auto; nm_max 0: the VW's stage count. */
    struct hp_options opts;
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

/* "auto", "np", ... / "default", "local"; "?" for a value out of range. Parsing is the
 * options table's (options.h). */
const char *hp_policy_name(enum hp_policy p);
const char *hp_placement_name(enum hp_placement p);
const char *hp_recompute_name(enum hp_recompute r);

void hp_plan_release(struct hp_plan *plan);

/* The rank of stage s of VW v; and the VW and stage of rank r: 0, or -1 when r is not a
 * worker (a PS shard, or out of range). */
int hp_plan_stage_rank(const struct hp_plan *p, int v, int s);
int hp_plan_rank_stage(const struct hp_plan *p, int r, int *v, int *s);

/* The first PS shard's rank (= the number of workers). */
int hp_plan_first_shard(const struct hp_plan *p);

/* What rank r does, for messages: "vw 1 stage 0, titanv on node2" or "PS shard 1 on node2"
 * (db names the GPU types of cl). Written into buf (size n). */
void hp_plan_describe_rank(const struct hp_plan *p, const struct hp_cluster *cl,
                           const struct hp_gpudb *db, int r, char *buf, size_t n);

/* The rank of a binding role ("vw1.stage0", "ps2"), or -1 when p has no such role. */
int hp_plan_role_rank(const struct hp_plan *p, const char *role);

struct hp_binding;

/* Read the binding file at path for plan p (binding.h's rules, and exactly p->nranks tasks,
 * every role one of p's, each once). *out (indexed by task) and *rank_of (the rank of each
 * task) are caller-owned (free). 0, or -HP_ECONFIG with the file and the problem logged. */
int hp_plan_binding_load(const struct hp_plan *p, const char *path, struct hp_binding **out,
                         int **rank_of);

#endif
