/* ps.h - a parameter-server shard and its protocol with the workers (DESIGN.md section 6). */
#ifndef HP_PS_H
#define HP_PS_H

#include "cluster.h"
#include "comm.h"
#include "model.h"
#include "pipeline.h"
#include "plan.h"

/* Serve PS shard rank `rank` of `plan` until every worker rank has said it is done. */
int hp_ps_run(const struct hp_plan *plan, const struct hp_cluster *cl,
              const struct hp_model *model, int rank, struct hp_comm *comm,
              const struct hp_worker_opts *o);

/* A worker rank tells every PS shard that it is done (the last message it sends them). */
int hp_ps_worker_done(const struct hp_plan *plan, struct hp_comm *comm, int rank, int vw,
                      int stage, int timeout_ms);

#endif
