/* dp.c - the dp baseline: replicas and ring allreduce (being written). */
#include "dp.h"
#include "error.h"
#include "log.h"

int hp_dp_run(const struct hp_plan *plan, const struct hp_cluster *cl, const struct hp_gpudb *db,
              const struct hp_model *model, int rank, struct hp_comm *comm,
              const struct hp_worker_opts *o, struct hp_worker_result *res)
{
    (void)plan, (void)cl, (void)db, (void)model, (void)rank, (void)comm, (void)o, (void)res;
    hp_error("the dp baseline is not in this version");
    return -HP_EUNSUPPORTED;
}
