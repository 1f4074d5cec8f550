/* cluster.h - cluster descriptions: nodes and their typed GPUs, for planning without Slurm
 * (etc/clusters/NAME.ini) and, later, built from what Slurm allocated.
 *
 * File format (strict):
 *
 *   [cluster]
 *   name = paper
 *   intra_node_gbs = 12.0   ; optional: overrides the site config's [links]
 *   inter_node_gbs = 6.0    ; optional
 *
 *   [node1]                 ; one section per node, in order; the section name is the node
 *   gpus = titanv:4         ; TYPE:COUNT[, TYPE:COUNT ...]; types from the GPU database
 *   devices = 0,1,2,3       ; optional: the GPUs' device indices (default 0, 1, ...), e.g.
 *                           ; the IDX Slurm allocated (hetpipe launch writes them)
 *   name = "Node 1"         ; optional: the node's name when a section cannot hold it
 *                           ; (iniparser reads section names in lower case)
 *
 * A long "gpus" or "devices" list goes on in gpus.1, gpus.2, ... (joined with ','), as
 * hetpipe launch writes it for nodes with many GPUs.
 *
 * GPUs are numbered in file order (node by node, within a node in the order listed); a
 * GPU's device index is its position within its node unless "devices" says otherwise.
 */
#ifndef HP_CLUSTER_H
#define HP_CLUSTER_H

#include "gpudb.h"

#include <stddef.h>

#define HP_NODE_NAME_MAX 64

struct hp_gpu {
    int node;  /* index into cluster->nodes */
    int index; /* device index within the node (CUDA_VISIBLE_DEVICES order) */
    int type;  /* index into the GPU database */
};

struct hp_node {
    char name[HP_NODE_NAME_MAX];
    int first_gpu, ngpus; /* the node's GPUs are gpus[first_gpu .. first_gpu + ngpus) */
};

struct hp_cluster {
    char name[HP_NODE_NAME_MAX];
    int nnodes, ngpus;
    struct hp_node *nodes;                     /* owned */
    struct hp_gpu *gpus;                       /* owned */
    double intra_node_gbs, inter_node_gbs;     /* from the file, else the database's */
    double intra_latency_us, inter_latency_us; /* the database's */
};

/* Load a cluster file, resolving GPU types in `db`. An unknown type is an error that names
 * the file, node and type, lists the known types, and says how to add one (a [gpu.NAME]
 * section in the site config). 0 or a negative code; *c is caller-owned (release). */
int hp_cluster_load(const char *path, const struct hp_gpudb *db, struct hp_cluster *c);

/* Build a cluster in memory: nnodes nodes named node1.., node i with counts[i] GPUs of type
 * types[i] (tests, synthetic benchmarks). Link speeds from db. */
int hp_cluster_make(const struct hp_gpudb *db, int nnodes, const int *counts, const int *types,
                    struct hp_cluster *c);

/* One node of a cluster built in memory (hetpipe launch: what Slurm allocated): its GPUs'
 * type names and device indices. */
struct hp_cluster_node {
    const char *name;
    int ngpus;
    const char *const *types; /* [ngpus] */
    const int *devices;       /* [ngpus] */
};

/* Build cluster `name` from nodes, resolving GPU types in db; link speeds from db. An unknown
 * type is an error (-HP_ECONFIG, logged) naming `origin` ("Slurm job 42"), the node and the
 * type, the known types and how to add one. */
int hp_cluster_build(const struct hp_gpudb *db, const char *name, const char *origin,
                     const struct hp_cluster_node *nodes, int nnodes, struct hp_cluster *c);

/* Find cluster file NAME (a path containing '/' or ending in .ini is used as is): in
 * $HETPIPE_CLUSTERS, ./etc/clusters, next to the executable (../etc/clusters,
 * ../share/hetpipe/clusters) and HP_DATADIR/clusters. 0, or -HP_ENOTFOUND (logged). */
int hp_cluster_resolve(const char *name, char *buf, size_t n);

void hp_cluster_release(struct hp_cluster *c);

#endif
