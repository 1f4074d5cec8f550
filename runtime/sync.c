/* sync.c - a stage's synchronisation across virtual workers: Wave Synchronous Parallel through
 * the parameter-server shards (ps.h), or the dp baseline's ring allreduce (allreduce.h). */
#include "stage.h"

#include "clock.h"
#include "error.h"
#include "log.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* WSP's gate (DESIGN.md section 6), before the forward pass of the VW's minibatch p when p
 * starts wave C = p / Nm, with the stage's minibatches [first, end) between forward and
 * backward.
 *
 * The rule: having pushed wave c = C - 2, a stage admits wave C once the global clock of its
 * units (the fewest waves any VW has pushed of them) is >= c + 1 - D = C - 1 - D, then pulls
 * them and rebases (local = pulled + own updates not yet pushed). Its own push of wave C - 2
 * has been sent already: the forward of C Nm follows the backward of C Nm - w >= (C - 1) Nm
 * - 1 (w <= Nm), and a shard sees one worker's messages in order. So the pipeline does not
 * drain here: wave C - 1 is in flight.
 *
 * The staleness bound that follows, for minibatch p = C Nm + i (0 <= i < Nm) of wave C:
 * - its own VW: the weights hold all the stage's own updates up to p - w (backward passes
 *   complete in order), so at most w - 1 <= Nm - 1 are missing: those in flight;
 * - another VW x: the pulled weights hold at least x's waves 0 .. C - 2 - D (x's clock >=
 *   C - 1 - D), and they are the weights of all of wave C (the next pull is at wave C + 1).
 *   Of x's minibatches before p in the sequential order (0 .. p - 1, equal Nm), at most those
 *   from (C - 1 - D) Nm to p - 1 are missing: (D + 1) Nm + i <= (D + 1) Nm + Nm - 1;
 * - clocks: admitting wave C' needs the global clock >= C' - 1 - D and pushing it makes the
 *   VW's clock C' + 1, so no VW's clock exceeds the global clock by more than D + 2.
 * Every VW trains the same number of minibatches, so every VW pushes F waves in all and the
 * last pull (wave F - 1) waits for F - 2 - D: no pull waits for a wave that never comes.
 * D = 0 is wave-level lock-step (clock - global <= 2); with one VW the pulled weights are the
 * VW's own (the rebase changes nothing) and WSP is plain pipelining. tests/wsp_check.py checks
 * the traces against these rules and bounds.
 */
/* The waves of every VW that wave C (>= 2) waits for. */
long hp_wsp_threshold(const struct stage *g, long C)
{
    return C - 1 - g->wsp.D > 0 ? C - 1 - g->wsp.D : 0;
}

int hp_wsp_gate(struct stage *g, long q, long first, long end)
{
    const long C = q / g->wsp.nm;
    int rc;

    if (!g->wsp.ps || q % g->wsp.nm != 0 || C < 2)
        return 0;
    for (int x = 0; x < g->nvws; x++)
        g->wsp.thr[x] = hp_wsp_threshold(g, C);
    rc = hp_stage_stash(g, first, end);
    const double t0 = hp_now_s();
    if (!rc && g->nparams)
        rc = g->be->ops->download(g->be, g->hparams, hp_net_params(g->net),
                                  g->nparams * sizeof(float));
    const double t1 = hp_now_s();
    if (!rc)
        rc = hp_ps_pull(g->wsp.ps, g->wsp.thr, C);
    g->time.comm_s += hp_now_s() - t0;
    if (rc)
        return rc;
    /* the pull: until the VWs behind have pushed wave C - 1 - D, and the weights' transfer */
    hp_tl_add(g->tl, HP_TL_WSP_WAIT, t1, hp_now_s(), q, -1, 0, C);
    hp_ps_rebase(g->wsp.ps, g->hparams);
    if (g->nparams)
        rc = g->be->ops->upload(g->be, hp_net_params(g->net), g->hparams,
                                g->nparams * sizeof(float));
    g->sched.wver++;
    return rc;
}

/* The stage's updates since the last push, as wave `wave`. */
int hp_wsp_push(struct stage *g, long wave)
{
    const double t0 = hp_now_s();
    int rc = 0;

    if (g->nparams)
        rc = g->be->ops->download(g->be, g->hparams, hp_net_params(g->net),
                                  g->nparams * sizeof(float));
    if (!rc)
        rc = hp_ps_push(g->wsp.ps, g->hparams, wave);
    g->time.comm_s += hp_now_s() - t0;
    hp_tl_add(g->tl, HP_TL_PUSH, t0, hp_now_s(), -1, -1, (int64_t)(g->nparams * sizeof(float)),
              wave);
    g->wsp.unpushed = 0;
    return rc;
}

/* dp: the gradients summed over the replicas by the ring allreduce, then divided by their
 * number (the mean over R x B samples, as one step of hetpipe train at minibatch R x B). */
int hp_dp_allreduce(struct stage *g, long step)
{
    const double t0 = hp_now_s();
    const float inv = 1.0f / (float)g->nvws;
    const size_t bytes = g->nparams * sizeof(float);
    int rc = g->be->ops->download(g->be, g->dpar.hgrad, hp_net_grads(g->net), bytes);

    if (!rc)
        rc = hp_allreduce_sum(g->dpar.ar, g->dpar.hgrad, g->nparams, step, g->timeout_ms);
    if (rc) {
        hp_error("replica %d: the allreduce of step %ld failed: %s", g->v, step, hp_strerror(rc));
        return rc;
    }
    for (size_t i = 0; i < g->nparams; i++)
        g->dpar.hgrad[i] *= inv;
    rc = g->be->ops->upload(g->be, hp_net_grads(g->net), g->dpar.hgrad, bytes);
    g->time.comm_s += hp_now_s() - t0;
    hp_stage_pad(g, t0, g->dpar.ar_cost);
    hp_tl_add(g->tl, HP_TL_ALLREDUCE, t0, hp_now_s(), step, -1, (int64_t)bytes, -1);
    return rc;
}

/* The synchronisation across VWs: the PS client (WSP) or, for dp, the allreduce group of the
 * replicas. my_mb: each VW's minibatches per epoch. */
int hp_sync_setup(struct stage *g, long my_mb)
{
    const struct hp_plan *p = g->plan;
    const size_t n = g->nparams ? g->nparams : 1;
    int rc = 0;

    g->wsp.thr = calloc((size_t)g->nvws, sizeof(int64_t));
    g->wsp.final_waves = calloc((size_t)g->nvws, sizeof(long));
    g->wsp.hsave = malloc(n * sizeof(float));
    if (!g->wsp.thr || !g->wsp.final_waves || !g->wsp.hsave)
        return -HP_ENOMEM;
    if (g->dp) {
        int *ranks = malloc((size_t)g->nvws * sizeof(int));
        if (!ranks || !(g->dpar.hgrad = malloc(n * sizeof(float)))) {
            free(ranks);
            return -HP_ENOMEM;
        }
        for (int x = 0; x < g->nvws; x++)
            ranks[x] = hp_plan_stage_rank(p, x, 0);
        rc = hp_allreduce_create(g->comm, ranks, g->nvws, g->rank, g->nparams, &g->dpar.ar);
        free(ranks);
        g->dpar.ar_cost = g->o->emulate > 0 ? g->o->emulate * p->allreduce_s : 0.0;
        return rc;
    }
    if (!p->nshards)
        return 0;
    for (int x = 0; x < g->nvws; x++) {
        const long nm = p->vws[x].nm > 0 ? p->vws[x].nm : 1;
        g->wsp.final_waves[x] = (g->o->epochs * my_mb - g->ck.q0 + nm - 1) / nm;
    }
    if (g->o->trace && !(g->wsp.trace = hp_ps_trace_open(g->o->trace, g->rank)))
        return -HP_EIO;
    if (g->nparams)
        rc = g->be->ops->download(g->be, g->hparams, hp_net_params(g->net),
                                  g->nparams * sizeof(float));
    if (!rc)
        rc = hp_ps_client_create(p, g->model, g->v, g->s, g->cl->gpus[g->st->gpu].node, g->rank,
                                 g->comm, g->hparams, g->timeout_ms, g->wsp.trace, &g->wsp.ps);
    if (!rc)
        hp_ps_client_set_wait(g->wsp.ps, g->long_wait_ms);
    return rc;
}

/* The progress line's WSP part: every VW's clock as of this stage's last pull, the global
 * clock, and the job's rate from those clocks. */
void hp_wsp_print_clocks(const struct stage *g, double elapsed)
{
    double images = 0.0;

    if (!g->wsp.ps || g->nvws < 2 || hp_ps_global_clock(g->wsp.ps) < 0)
        return;
    printf(" | clocks");
    for (int x = 0; x < g->nvws; x++) {
        int64_t lo, hi;
        hp_ps_included(g->wsp.ps, x, &lo, &hi);
        if (x == g->v)
            hi = hp_ps_pushed(g->wsp.ps);
        printf("%c%" PRId64, x ? ',' : ' ', hi);
        images += (double)hi * g->plan->vws[x].nm * g->batch;
    }
    printf(" global %" PRId64 " | job %.0f img/s", hp_ps_global_clock(g->wsp.ps),
           elapsed > 0 ? images / elapsed : 0.0);
}
