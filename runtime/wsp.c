/* wsp.c - Wave Synchronous Parallel on a worker stage (wsp.h). */
#include "wsp.h"

#include "clock.h"
#include "error.h"
#include "log.h"
#include "output.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct hp_wsp {
    struct hp_wsp_config c;
    const struct hp_ps_ops *ops;
    void *ps;                  /* the client (ops's first argument) */
    FILE *trace;               /* --trace (owned) */
    struct hp_ps_client *real; /* the same, when it is ps_client.c's (NULL: a fake) */
    int nvws, nm, D;
    long unpushed;     /* updates since the last push */
    long nupd;         /* updates applied since this run started */
    int64_t *thr;      /* [nvws] a pull's thresholds */
    long *final_waves; /* [nvws] the waves each VW pushes in all */
    float *hsave;      /* host: the local weights while evaluating on the global ones */
    size_t n;          /* the stage's parameters */
};

static void add_comm(struct hp_wsp *w, double t0)
{
    if (w->c.comm_s)
        *w->c.comm_s += hp_now_s() - t0;
}

long hp_wsp_threshold(long C, long D)
{
    return C - 1 - D > 0 ? C - 1 - D : 0;
}

static int wsp_init(struct hp_wsp *w, const struct hp_wsp_config *c)
{
    const struct hp_plan *p = c->plan;
    const size_t n = c->nparams;

    w->c = *c;
    w->nvws = p->nvws;
    w->nm = p->vws[c->v].nm > 0 ? p->vws[c->v].nm : 1;
    w->D = (int)p->opts.staleness;
    w->n = n;
    w->thr = calloc((size_t)w->nvws, sizeof(int64_t));
    w->final_waves = calloc((size_t)w->nvws, sizeof(long));
    w->hsave = w->nvws > 1 ? malloc((n ? n : 1) * sizeof(float)) : NULL;
    if (!w->thr || !w->final_waves || (w->nvws > 1 && !w->hsave))
        return -HP_ENOMEM;
    /* every VW trains run_mb minibatches: VW x pushes ceil(run_mb / Nm_x) waves */
    for (int x = 0; x < w->nvws; x++) {
        const long nm = p->vws[x].nm > 0 ? p->vws[x].nm : 1;
        w->final_waves[x] = (c->run_mb + nm - 1) / nm;
    }
    if (c->trace && !(w->trace = hp_ps_trace_open(c->trace, c->rank)))
        return -HP_EIO;
    return 0;
}

int hp_wsp_create_with(const struct hp_wsp_config *c, const struct hp_ps_ops *ops, void *ps,
                       struct hp_wsp **out)
{
    struct hp_wsp *w = calloc(1, sizeof(*w));
    int rc;

    if (!w)
        return -HP_ENOMEM;
    w->ops = ops;
    w->ps = ps;
    rc = wsp_init(w, c);
    if (rc) {
        hp_wsp_destroy(NULL, w);
        return rc;
    }
    *out = w;
    return 0;
}

int hp_wsp_create(const struct hp_wsp_config *c, const struct hp_model *model, int node,
                  struct hp_comm *comm, const struct hp_weights *wt, int timeout_ms, int wait_ms,
                  struct hp_wsp **out)
{
    const struct hp_plan *p = c->plan;
    struct hp_wsp *w;
    int rc;

    *out = NULL;
    if (!p->nshards || p->grouping == HP_POLICY_DP)
        return 0;
    if (!(w = calloc(1, sizeof(*w))))
        return -HP_ENOMEM;
    rc = wsp_init(w, c);
    if (!rc)
        rc = hp_weights_download(wt);
    if (!rc)
        rc = hp_ps_client_create(p, model, c->v, c->s, node, c->rank, comm, wt->host, timeout_ms,
                                 w->trace, &w->real);
    if (rc) {
        hp_wsp_destroy(comm, w);
        return rc;
    }
    hp_ps_client_set_wait(w->real, wait_ms);
    w->ops = &hp_ps_client_ops;
    w->ps = w->real;
    *out = w;
    return 0;
}

void hp_wsp_destroy(struct hp_comm *comm, struct hp_wsp *w)
{
    if (!w)
        return;
    hp_ps_client_destroy(comm, w->real);
    (void)hp_out_close(w->trace, 1);
    free(w->thr);
    free(w->final_waves);
    free(w->hsave);
    free(w);
}

/* WSP's gate, before the forward pass of the VW's minibatch q when q starts wave C = q / Nm.
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
 * VW's own (the rebase changes nothing) and WSP is plain pipelining. tests/wsp/wsp_check.py checks
 * the traces against these rules and bounds.
 */
int hp_wsp_gate_due(const struct hp_wsp *w, long q)
{
    return w && q % w->nm == 0 && q / w->nm >= 2;
}

int hp_wsp_gate(struct hp_wsp *w, long q, const struct hp_weights *wt)
{
    const long C = q / (w ? w->nm : 1);
    int rc;

    if (!hp_wsp_gate_due(w, q))
        return 0;
    for (int x = 0; x < w->nvws; x++)
        w->thr[x] = hp_wsp_threshold(C, w->D);
    const double t0 = hp_now_s();
    rc = hp_weights_download(wt);
    const double t1 = hp_now_s();
    if (!rc)
        rc = w->ops->pull(w->ps, w->thr, C);
    add_comm(w, t0);
    if (rc)
        return rc;
    /* the pull: until the VWs behind have pushed wave C - 1 - D, and the weights' transfer */
    hp_tl_add(w->c.tl, HP_TL_WSP_WAIT, t1, hp_now_s(), q, -1, 0, C);
    w->ops->rebase(w->ps, wt->host);
    return hp_weights_upload(wt);
}

/* The stage's updates since the last push, as wave `wave`. */
static int push(struct hp_wsp *w, long wave, const struct hp_weights *wt)
{
    const double t0 = hp_now_s();
    int rc = hp_weights_download(wt);

    if (!rc)
        rc = w->ops->push(w->ps, wt->host, wave);
    add_comm(w, t0);
    hp_tl_add(w->c.tl, HP_TL_PUSH, t0, hp_now_s(), -1, -1, (int64_t)(wt->n * sizeof(float)), wave);
    w->unpushed = 0;
    return rc;
}

int hp_wsp_updated(struct hp_wsp *w, long q, const struct hp_weights *wt)
{
    if (!w)
        return 0;
    w->nupd++;
    w->unpushed++;
    return (q + 1) % w->nm == 0 ? push(w, q / w->nm, wt) : 0;
}

long hp_wsp_pushed(const struct hp_wsp *w)
{
    return w ? w->ops->pushed(w->ps) : 0;
}

int hp_wsp_push_rest(struct hp_wsp *w, const struct hp_weights *wt)
{
    return w && w->unpushed > 0 ? push(w, w->ops->pushed(w->ps), wt) : 0;
}

void hp_wsp_trace_minibatch(struct hp_wsp *w, long q)
{
    FILE *f = w ? w->trace : NULL;

    if (!f)
        return;
    const long C = q / w->nm;
    const double t = hp_now_s();
    fprintf(f, "mb,%d,%d,%d,%ld,%ld,%ld,%ld,%" PRId64 ",%ld,%.6f,%.6f,", w->c.rank, w->c.v, w->c.s,
            C, q, C >= 2 ? hp_wsp_threshold(C, w->D) : -1L, w->ops->pushed(w->ps),
            w->ops->global_clock(w->ps), w->nupd, t, t);
    w->ops->trace_incl(w->ps, f);
}

int hp_wsp_eval_begin(struct hp_wsp *w, int final, const struct hp_weights *wt)
{
    const size_t bytes = wt->n * sizeof(float);
    int rc;

    if (!w || w->nvws < 2)
        return 0;
    for (int x = 0; x < w->nvws; x++)
        w->thr[x] = final ? w->final_waves[x] : 0;
    const double t0 = hp_now_s();
    rc = w->ops->pull(w->ps, w->thr, -1);
    hp_tl_add(w->c.tl, HP_TL_PULL, t0, hp_now_s(), -1, -1, (int64_t)bytes, -1);
    if (!rc && wt->n)
        rc = wt->be->ops->download(wt->be, w->hsave, wt->dev, bytes);
    if (!rc && wt->n)
        rc = wt->be->ops->upload(wt->be, wt->dev, w->ops->global(w->ps), bytes);
    return rc;
}

int hp_wsp_eval_end(struct hp_wsp *w, const struct hp_weights *wt)
{
    if (!w || w->nvws < 2 || !wt->n)
        return 0;
    return wt->be->ops->upload(wt->be, wt->dev, w->hsave, wt->n * sizeof(float));
}

int hp_wsp_flush(struct hp_wsp *w)
{
    return w && w->real ? hp_ps_flush(w->real) : 0;
}

void hp_wsp_print_clocks(const struct hp_wsp *w, FILE *f, double elapsed)
{
    double images = 0.0;

    if (!w || w->nvws < 2 || w->ops->global_clock(w->ps) < 0)
        return;
    fprintf(f, " | clocks");
    for (int x = 0; x < w->nvws; x++) {
        int64_t lo, hi;
        w->ops->included(w->ps, x, &lo, &hi);
        if (x == w->c.v)
            hi = w->ops->pushed(w->ps);
        fprintf(f, "%c%" PRId64, x ? ',' : ' ', hi);
        images += (double)hi * w->c.plan->vws[x].nm * w->c.plan->opts.batch;
    }
    fprintf(f, " global %" PRId64 " | job %.0f img/s", w->ops->global_clock(w->ps),
            elapsed > 0 ? images / elapsed : 0.0);
}

void hp_wsp_stats(const struct hp_wsp *w, struct hp_ps_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (w && w->real)
        hp_ps_client_stats(w->real, out);
}

size_t hp_wsp_state_bytes(const struct hp_wsp *w)
{
    return w && w->real ? hp_ps_client_blob_bytes(w->real) : 0;
}

void hp_wsp_save(const struct hp_wsp *w, void *blob, int64_t *unpushed)
{
    if (w && w->real)
        hp_ps_client_save(w->real, blob);
    *unpushed = w ? w->unpushed : 0;
}

int hp_wsp_restore(struct hp_wsp *w, const void *blob, size_t bytes, int64_t unpushed)
{
    int rc = w && w->real ? hp_ps_client_restore(w->real, blob, bytes) : 0;

    if (w)
        w->unpushed = (long)unpushed;
    return rc;
}
