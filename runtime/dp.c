/* dp.c - the dp baseline's gradient averaging (dp.h). */
#include "dp.h"

#include "allreduce.h"
#include "error.h"
#include "log.h"

#include <stdlib.h>

struct hp_dp {
    struct hp_allreduce *ar;
    float *hgrad; /* [n] host */
    size_t n;
    int replicas, me;
};

int hp_dp_create(struct hp_comm *comm, const struct hp_plan *p, int rank, size_t n,
                 struct hp_dp **out)
{
    struct hp_dp *dp;
    int *ranks, rc;

    *out = NULL;
    if (p->grouping != HP_POLICY_DP)
        return 0;
    dp = calloc(1, sizeof(*dp));
    ranks = malloc((size_t)p->nvws * sizeof(int));
    if (!dp || !ranks || !(dp->hgrad = malloc((n ? n : 1) * sizeof(float)))) {
        free(ranks);
        hp_dp_destroy(comm, dp);
        return -HP_ENOMEM;
    }
    dp->n = n;
    dp->replicas = p->nvws;
    for (int x = 0; x < p->nvws; x++) {
        ranks[x] = hp_plan_stage_rank(p, x, 0);
        if (ranks[x] == rank)
            dp->me = x;
    }
    rc = hp_allreduce_create(comm, ranks, p->nvws, rank, n, &dp->ar);
    free(ranks);
    if (rc) {
        hp_dp_destroy(comm, dp);
        return rc;
    }
    *out = dp;
    return 0;
}

void hp_dp_destroy(struct hp_comm *comm, struct hp_dp *dp)
{
    if (!dp)
        return;
    hp_allreduce_destroy(comm, dp->ar);
    free(dp->hgrad);
    free(dp);
}

int hp_dp_average(struct hp_dp *dp, struct hp_backend *be, float *grads, long step, int timeout_ms)
{
    const float inv = 1.0f / (float)dp->replicas;
    const size_t bytes = dp->n * sizeof(float);
    int rc = be->ops->download(be, dp->hgrad, grads, bytes);

    if (!rc)
        rc = hp_allreduce_sum(dp->ar, dp->hgrad, dp->n, step, timeout_ms);
    if (rc) {
        hp_error("replica %d: the allreduce of step %ld failed: %s", dp->me, step, hp_strerror(rc));
        return rc;
    }
    for (size_t i = 0; i < dp->n; i++)
        dp->hgrad[i] *= inv;
    return be->ops->upload(be, grads, dp->hgrad, bytes);
}

size_t hp_dp_bytes(const struct hp_dp *dp)
{
    return dp ? dp->n * sizeof(float) : 0;
}
