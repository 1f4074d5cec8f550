/* ps_shard.h - a parameter-server shard rank (the protocol: ps.h). */
#ifndef HP_PS_SHARD_H
#define HP_PS_SHARD_H

#include "cluster.h"
#include "gpudb.h"
#include "comm.h"
#include "model.h"
#include "options.h"
#include "plan.h"
#include "ps.h"

/* Serve PS shard rank `rank` of `plan` until every worker rank has said it is done; resumed
 * from o->resume (db: the GPU types of the checkpoint's plan); a silence of every worker longer
 * than wait_ms is an error; *stopped set when the workers stopped on request after a
 * checkpoint. Checkpoints: ckpt.h. */
int hp_ps_run(const struct hp_plan *plan, const struct hp_cluster *cl, const struct hp_gpudb *db,
              const struct hp_model *model, int rank, struct hp_comm *comm,
              const struct hp_options *o, int wait_ms, int *stopped);

#endif
