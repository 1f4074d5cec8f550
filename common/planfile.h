/* planfile.h - the plan file: an INI file that the launcher writes and reads and the ranks
 * read (the plugin reads the binding file, binding.h, not the plan).
 *
 *   [plan]            version (= HP_PLAN_VERSION; others are refused), cluster, grouping,
 *                     token, units, vws, shards, ranks, rate, allreduce_s, wave_bytes_default,
 *                     wave_bytes_local, unit_shard (comma-separated shard of every unit), and
 *                     the plan key of every row of the options table that has one
 *                     (common/options.def: policy, placement, staleness, nm, recompute,
 *                     model, batch, nm_max, seed), written and read through the table
 *   [node.N]          name, gpus (TYPE list in device order, comma-separated)
 *   [vw.V]            nm, stages, rate, bottleneck_s, round_s
 *   [vw.V.stage.S]    rank, node (index), device, type, first_unit, end_unit (exclusive),
 *                     in_flight, fwd_s, bwd_s, send_s, send_back_s (the planner's seconds per
 *                     minibatch: the ranks' emulation is paced by them), memory, capacity
 *   [ps.P]            rank, node (index)
 * Worker ranks are numbered VW by VW, stage by stage; PS shards follow. Numbers are written
 * with 17 significant digits, so that write -> read -> write is byte-identical.
 */
#ifndef HP_PLANFILE_H
#define HP_PLANFILE_H

#include "plan.h"

#include <stdio.h>

/* Write plan (computed for cluster cl, whose GPU types come from db) to f. token: 32 hex
 * characters identifying the job (messages carry it). 0 or -errno. */
int hp_planfile_write(FILE *f, const struct hp_plan *p, const struct hp_cluster *cl,
                      const struct hp_gpudb *db, const char *token);

/* Write to `path` atomically (temp file in the same directory, fsync, rename), mode 0600. */
int hp_planfile_save(const char *path, const struct hp_plan *p, const struct hp_cluster *cl,
                     const struct hp_gpudb *db, const char *token);

/* Read and check a plan file: the version, every unit in exactly one stage of each VW in
 * order, ranks 0..ranks-1 each used once, no GPU (node, device) used twice, shard and node
 * indices in range, GPU types known to db. Fills *p, *cl (caller-owned; release both) and
 * token (33 bytes). 0, or -HP_ECONFIG with the file and the problem logged. */
int hp_planfile_load(const char *path, const struct hp_gpudb *db, struct hp_plan *p,
                     struct hp_cluster *cl, char *token);

#endif
