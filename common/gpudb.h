/* gpudb.h - the site configuration's GPU type database and link speeds (etc/hetpipe.conf).
 *
 * Format (strict: unknown sections and keys are errors naming file, section and key):
 *
 *   [links]
 *   intra_node_gbs   = 12.0    ; GB/s between two GPUs of one node (PCIe 3.0 x16 measured)
 *   inter_node_gbs   = 6.0     ; GB/s between nodes (56 Gb/s InfiniBand FDR, measured)
 *   intra_latency_us = 10      ; per message
 *   inter_latency_us = 20
 *
 *   [planner]
 *   efficiency = 0.5           ; fraction of peak FLOPS a unit reaches (roofline default)
 *   nm_tolerance = 0.05        ; a VW's Nm: the smallest whose rate is within this fraction of
 *                              ;   its best (fewer minibatches in flight: less staleness)
 *
 *   [gpu.titanv]               ; one section per GPU type; the type name is the part after
 *   label     = NVIDIA TITAN V ;   "gpu.", as Slurm's GRES type (lower case)
 *   memory_gib = 12
 *   tflops     = 14.9          ; fp32 peak
 *   bandwidth_gbs = 652.8      ; memory bandwidth
 *   compute_capability = 7.0
 *
 * Code here is dependency-free apart from iniparser, so the SPANK plugin can link it.
 */
#ifndef HP_GPUDB_H
#define HP_GPUDB_H

#define HP_GPU_NAME_MAX 32

struct hp_gpu_type {
    char name[HP_GPU_NAME_MAX]; /* "titanv" */
    char label[64];             /* "NVIDIA TITAN V" */
    double memory_gib;
    double tflops;          /* fp32 peak */
    double bandwidth_gbs;   /* memory bandwidth, GB/s (10^9 bytes) */
    int cc_major, cc_minor; /* compute capability */
};

struct hp_gpudb {
    int ntypes;
    struct hp_gpu_type *types;                 /* owned */
    double intra_node_gbs, inter_node_gbs;     /* link bandwidths, GB/s */
    double intra_latency_us, inter_latency_us; /* per message */
    double efficiency;                         /* fraction of peak FLOPS, (0, 1] */
    double nm_tolerance; /* Nm: smallest with rate >= (1 - this) x the best, [0, 1) */
};

/* Load `path` into *db (caller-owned struct; free with hp_gpudb_release). 0 or a negative
 * code; errors are logged with file, section and key. On error *db is left zeroed. */
int hp_gpudb_load(const char *path, struct hp_gpudb *db);
void hp_gpudb_release(struct hp_gpudb *db);

/* The type called `name` (case-insensitive), or -1. */
int hp_gpudb_find(const struct hp_gpudb *db, const char *name);

/* The path of the site config: $HETPIPE_CONF, else ./etc/hetpipe.conf if it exists, else the
 * one next to the executable (../etc/hetpipe.conf), else HP_SYSCONFDIR/hetpipe.conf.
 * Written into buf (size n); 0, or -HP_ENOTFOUND (logged with the places tried). */
int hp_gpudb_default_path(char *buf, unsigned long n);

#endif
