/* test_worker.c - the worker's rules without a job: the one-forward-one-backward order of a
 * stage's passes (runtime/schedule.h) and that a VW's stages run it without deadlock; weight
 * stashing's versions (stash.h); WSP's gate and push against a fake parameter server (wsp.h),
 * alone and in a simulated job of several VWs whose traces must keep the staleness bound; the
 * job point's verdict and the checkpoint cadence (jobpoint.h, ckpt.h); a VW's share of the
 * data (feed.h). Each runs in milliseconds. */
#include "suites.h"
#include "util.h"

#include "backend.h"
#include "ckpt.h"
#include "error.h"
#include "feed.h"
#include "jobpoint.h"
#include "pause.h"
#include "schedule.h"
#include "stash.h"
#include "wsp.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* ---- the 1F1B order ---- */

/* The in-flight count of stage s of a VW of k stages at Nm, as the planner sets it. */
static int in_flight(int k, int nm, int s)
{
    const int f = (nm < k ? nm : k) - s;
    return f > 1 ? f : 1;
}

START_TEST(order_of_passes)
{
    for (int w = 1; w <= 5; w++)
        for (long n = 0; n <= 12; n++) {
            struct hp_sched sc;
            struct hp_pass p;
            long f = 0, b = 0, i = 0;
            char seq[64] = "";
            hp_sched_init(&sc, 3, 3 + n, w);
            while (hp_sched_next(&sc, &p)) {
                ck_assert_int_lt(i, 2 * n);
                seq[i++] = p.kind == HP_PASS_FORWARD ? 'F' : 'B';
                ck_assert_int_eq(p.slot, (int)(p.j % w));
                if (p.kind == HP_PASS_FORWARD) {
                    ck_assert_int_eq(p.j, 3 + f++);
                    ck_assert_int_eq(p.out0, 3 + b); /* the others in flight: [nb, nf) */
                    ck_assert_int_eq(p.out1, p.j);
                } else {
                    ck_assert_int_eq(p.j, 3 + b++);
                    ck_assert_int_eq(p.out0, p.j + 1); /* after it: (j, nf) */
                    ck_assert_int_eq(p.out1, 3 + f);
                }
                ck_assert_int_le(f - b, w);
                ck_assert_int_ge(f, b);
            }
            ck_assert_int_eq(f, n);
            ck_assert_int_eq(b, n);
            /* w forwards, then a backward and a forward in turn, then the last backwards */
            char want[64] = "";
            long m = 0, wf = w < n ? w : n;
            for (long k = 0; k < wf; k++)
                want[m++] = 'F';
            for (long k = wf; k < n; k++) {
                want[m++] = 'B';
                want[m++] = 'F';
            }
            for (long k = 0; k < wf; k++)
                want[m++] = 'B';
            ck_assert_str_eq(seq, want);
        }
}
END_TEST

/* Run every stage's order of a VW of k stages (in-flight counts inf[s]) over n minibatches
 * as a pipeline would: stage s runs forward j once stage s - 1 has, and backward j once
 * stage s + 1 has (the last stage: once it ran forward j). Returns whether every pass ran. */
static int pipeline_completes(int k, const int *inf, long n)
{
    struct hp_sched sc[8];
    struct hp_pass next[8];
    int has[8];
    long fwd[8] = {0}, bwd[8] = {0};

    for (int s = 0; s < k; s++) {
        hp_sched_init(&sc[s], 0, n, inf[s]);
        has[s] = hp_sched_next(&sc[s], &next[s]);
    }
    for (int progress = 1; progress;) {
        progress = 0;
        for (int s = 0; s < k; s++) {
            if (!has[s])
                continue;
            const struct hp_pass *p = &next[s];
            const int ready = p->kind == HP_PASS_FORWARD ? (s == 0 || fwd[s - 1] > p->j)
                                                         : (s == k - 1 || bwd[s + 1] > p->j);
            if (!ready)
                continue;
            if (p->kind == HP_PASS_FORWARD)
                fwd[s]++;
            else
                bwd[s]++;
            has[s] = hp_sched_next(&sc[s], &next[s]);
            progress = 1;
        }
    }
    for (int s = 0; s < k; s++)
        if (has[s] || fwd[s] != n || bwd[s] != n)
            return 0;
    return 1;
}

START_TEST(pipelines_never_deadlock)
{
    for (int k = 1; k <= 6; k++)
        for (int nm = 1; nm <= 7; nm++)
            for (long n = 1; n <= 20; n += 3) {
                int inf[8];
                for (int s = 0; s < k; s++)
                    inf[s] = in_flight(k, nm, s);
                ck_assert_msg(pipeline_completes(k, inf, n), "k %d Nm %d n %ld deadlocks", k, nm,
                              n);
            }
    /* the rule the plan must keep (in-flight counts do not grow along the pipeline) matters:
     * a later stage that keeps more than an earlier one waits for it */
    const int grows[2] = {1, 2};
    ck_assert(!pipeline_completes(2, grows, 4));
}
END_TEST

/* ---- weight stashing ---- */

static void set_weights(struct hp_backend *be, float *dev, float v)
{
    float h[4] = {v, v, v, v};
    ck_assert_int_eq(be->ops->upload(be, dev, h, sizeof(h)), 0);
}

static float weight0(struct hp_backend *be, const float *dev)
{
    float h[4];
    ck_assert_int_eq(be->ops->download(be, h, dev, sizeof(h)), 0);
    return h[0];
}

START_TEST(stash_versions)
{
    struct hp_backend *be;
    struct hp_stash *st;
    float *w;
    long v;

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(be->ops->alloc(be, 4 * sizeof(float), (void **)&w), 0);
    ck_assert_int_eq(hp_stash_create(be, 4, 3, 0, &st), 0);
    /* minibatches 0, 1, 2 run forward on version 0 (weights 10) */
    set_weights(be, w, 10.0f);
    for (int j = 0; j < 3; j++)
        hp_stash_forward(st, j % 3);
    ck_assert_ptr_null(hp_stash_weights(st, 0, &v));
    ck_assert_int_eq(v, 0);
    /* 0's backward on the current weights, then the update: 1 and 2 keep version 0 */
    ck_assert_int_eq(hp_stash_change(st, w, 1, 3), 0);
    set_weights(be, w, 11.0f);
    ck_assert_int_eq(hp_stash_version(st), 1);
    /* 3 runs forward on version 1 */
    hp_stash_forward(st, 3 % 3);
    ck_assert_int_eq(hp_stash_forward_version(st, 0), 1);
    const float *s1 = hp_stash_weights(st, 1, &v);
    ck_assert_ptr_nonnull(s1);
    ck_assert_int_eq(v, 0);
    ck_assert(weight0(be, s1) == 10.0f);
    ck_assert_ptr_eq(hp_stash_weights(st, 2, &v), s1); /* one copy shared */
    /* 1's backward, the update: 2 keeps version 0, 3 gets version 1 in the other buffer */
    ck_assert_int_eq(hp_stash_change(st, w, 2, 4), 0);
    set_weights(be, w, 12.0f);
    const float *s3 = hp_stash_weights(st, 0, &v);
    ck_assert_int_eq(v, 1);
    ck_assert_ptr_nonnull(s3);
    ck_assert_ptr_ne(s3, s1);
    ck_assert(weight0(be, s3) == 11.0f);
    ck_assert(weight0(be, hp_stash_weights(st, 2, &v)) == 10.0f);
    ck_assert_int_eq(v, 0);
    /* 2 (version 0) and 3 (version 1) stashed, 4 on the current weights: a third version to
     * keep with two buffers (more in flight than the slots allow) is an error, not a crash */
    hp_stash_forward(st, 4 % 3);
    test_capture_begin();
    ck_assert_int_eq(hp_stash_change(st, w, 2, 5), -HP_EINVAL);
    ck_assert(strstr(test_capture_end(), "no free buffer") != NULL);
    hp_stash_destroy(st);
    /* --no-stash: versions advance, nothing is stashed */
    ck_assert_int_eq(hp_stash_create(be, 4, 3, 1, &st), 0);
    hp_stash_forward(st, 0);
    ck_assert_int_eq(hp_stash_change(st, w, 0, 1), 0);
    ck_assert_ptr_null(hp_stash_weights(st, 0, &v));
    ck_assert_int_eq(v, 1);
    hp_stash_destroy(st);
    be->ops->free(be, w);
    hp_backend_destroy(be);
}
END_TEST

/* ---- WSP against a fake parameter server ---- */

#define MAXV 4

/* One parameter server for every VW of a simulated job: its clocks are the waves each VW has
 * pushed; a pull whose thresholds are not met is refused (the VW waits and tries again). */
struct fake_server {
    int nvws;
    long pushed[MAXV];
    long pulls, refused;
    int check_own; /* a pull for wave C must follow the puller's push of wave C - 2 */
    int bad_order;
};

struct fake_ps {
    struct fake_server *srv;
    int v;
    long last_pull_wave;
    int64_t last_thr[MAXV];
    float global[4], last_push[4];
    long pushes[64];
    long npushes;
};

static int f_push(void *c, const float *local, long wave)
{
    struct fake_ps *f = c;
    if (wave != f->srv->pushed[f->v])
        f->srv->bad_order = 1;
    f->srv->pushed[f->v] = wave + 1;
    if (f->npushes < 64)
        f->pushes[f->npushes++] = wave;
    memcpy(f->last_push, local, sizeof(f->last_push));
    return 0;
}

static int f_pull(void *c, const int64_t *thr, long wave)
{
    struct fake_ps *f = c;
    f->last_pull_wave = wave;
    memcpy(f->last_thr, thr, (size_t)f->srv->nvws * sizeof(int64_t));
    if (f->srv->check_own && wave >= 2 && f->srv->pushed[f->v] < wave - 1)
        f->srv->bad_order = 1;
    for (int x = 0; x < f->srv->nvws; x++)
        if (f->srv->pushed[x] < thr[x]) {
            f->srv->refused++;
            return -HP_ETIMEOUT;
        }
    f->srv->pulls++;
    return 0;
}

static void f_rebase(void *c, float *local)
{
    const struct fake_ps *f = c;
    memcpy(local, f->global, sizeof(f->global));
}

static const float *f_global(void *c)
{
    return ((struct fake_ps *)c)->global;
}

static long f_pushed(void *c)
{
    const struct fake_ps *f = c;
    return f->srv->pushed[f->v];
}

static int64_t f_global_clock(void *c)
{
    const struct fake_ps *f = c;
    long g = f->srv->pushed[0];
    for (int x = 1; x < f->srv->nvws; x++)
        g = f->srv->pushed[x] < g ? f->srv->pushed[x] : g;
    return g;
}

static void f_included(void *c, int x, int64_t *lo, int64_t *hi)
{
    const struct fake_ps *f = c;
    *lo = *hi = f->srv->pushed[x];
}

static void f_trace_incl(void *c, FILE *out)
{
    (void)c;
    fputs("-\n", out);
}

static const struct hp_ps_ops fake_ops = {.push = f_push,
                                          .pull = f_pull,
                                          .rebase = f_rebase,
                                          .global = f_global,
                                          .pushed = f_pushed,
                                          .global_clock = f_global_clock,
                                          .included = f_included,
                                          .trace_incl = f_trace_incl};

/* A plan of nvws one-stage VWs with their Nm, staleness D and shards (what WSP reads). */
struct fake_plan {
    struct hp_plan p;
    struct hp_vw_plan vws[MAXV];
};

static void fake_plan_init(struct fake_plan *fp, int nvws, const int *nm, int D)
{
    memset(fp, 0, sizeof(*fp));
    fp->p.nvws = nvws;
    fp->p.vws = fp->vws;
    fp->p.nshards = 1;
    fp->p.opts.staleness = D;
    fp->p.opts.batch = 8;
    for (int x = 0; x < nvws; x++) {
        fp->vws[x].nstages = 1;
        fp->vws[x].nm = nm[x];
    }
}

/* A stage's weights on the CPU backend. */
struct stage_weights {
    struct hp_backend *be;
    struct hp_weights wt;
    float host[4];
};

static void weights_init(struct stage_weights *sw)
{
    ck_assert_int_eq(hp_backend_cpu_create(&sw->be), 0);
    sw->wt = (struct hp_weights){.be = sw->be, .host = sw->host, .n = 4};
    ck_assert_int_eq(sw->be->ops->alloc(sw->be, 4 * sizeof(float), (void **)&sw->wt.dev), 0);
}

static void weights_release(struct stage_weights *sw)
{
    sw->be->ops->free(sw->be, sw->wt.dev);
    hp_backend_destroy(sw->be);
}

START_TEST(wsp_gate_and_push_rules)
{
    const int nm[2] = {3, 2};
    struct fake_server srv = {.nvws = 2};
    struct fake_ps ps = {.srv = &srv, .v = 0, .global = {7, 7, 7, 7}};
    struct fake_plan fp;
    struct stage_weights sw;
    struct hp_wsp *w;
    double comm = 0.0;

    for (int D = 0; D <= 2; D++) {
        fake_plan_init(&fp, 2, nm, D);
        weights_init(&sw);
        memset(srv.pushed, 0, sizeof(srv.pushed));
        ps.npushes = 0;
        const struct hp_wsp_config c = {
            .plan = &fp.p, .v = 0, .nparams = 4, .run_mb = 14, .comm_s = &comm};
        ck_assert_int_eq(hp_wsp_create_with(&c, &fake_ops, &ps, &w), 0);
        for (long q = 0; q < 14; q++) {
            const long C = q / 3;
            ck_assert_int_eq(hp_wsp_gate_due(w, q), q % 3 == 0 && C >= 2);
            if (hp_wsp_gate_due(w, q)) {
                srv.pushed[1] = C - 1 - D > 0 ? C - 1 - D : 0; /* just at the threshold */
                if (C - 1 - D > 0) {
                    srv.pushed[1] = C - 2 - D; /* one wave short: the gate waits */
                    ck_assert_int_eq(hp_wsp_gate(w, q, &sw.wt), -HP_ETIMEOUT);
                    srv.pushed[1] = C - 1 - D;
                }
                set_weights(sw.be, sw.wt.dev, 1.0f);
                ck_assert_int_eq(hp_wsp_gate(w, q, &sw.wt), 0);
                ck_assert_int_eq(ps.last_pull_wave, C);
                for (int x = 0; x < 2; x++)
                    ck_assert_int_eq(ps.last_thr[x], C - 1 - D > 0 ? C - 1 - D : 0);
                /* the rebased weights are the stage's now */
                ck_assert(weight0(sw.be, sw.wt.dev) == 7.0f);
            } else {
                ck_assert_int_eq(hp_wsp_gate(w, q, &sw.wt), 0); /* nothing to do */
            }
            set_weights(sw.be, sw.wt.dev, (float)q);
            ck_assert_int_eq(hp_wsp_updated(w, q, &sw.wt), 0);
            /* pushed after the last minibatch of each wave, the weights as they are then */
            ck_assert_int_eq(ps.npushes, (q + 1) / 3);
            if ((q + 1) % 3 == 0)
                ck_assert(ps.last_push[0] == (float)q);
        }
        /* the last wave is cut short by the data: pushed as it is, once */
        ck_assert_int_eq(hp_wsp_push_rest(w, &sw.wt), 0);
        ck_assert_int_eq(hp_wsp_push_rest(w, &sw.wt), 0);
        ck_assert_int_eq(ps.npushes, 5);
        for (long i = 0; i < ps.npushes; i++)
            ck_assert_int_eq(ps.pushes[i], i);
        ck_assert(!srv.bad_order);
        /* the final evaluation waits for every VW's last wave: ceil(14 / Nm) */
        srv.pushed[1] = 7;
        set_weights(sw.be, sw.wt.dev, 3.0f);
        ck_assert_int_eq(hp_wsp_eval_begin(w, 1, &sw.wt), 0);
        ck_assert_int_eq(ps.last_pull_wave, -1);
        ck_assert_int_eq(ps.last_thr[0], 5);
        ck_assert_int_eq(ps.last_thr[1], 7);
        ck_assert(weight0(sw.be, sw.wt.dev) == 7.0f); /* on the global weights */
        ck_assert_int_eq(hp_wsp_eval_end(w, &sw.wt), 0);
        ck_assert(weight0(sw.be, sw.wt.dev) == 3.0f); /* back on its own */
        ck_assert_int_eq(hp_wsp_eval_begin(w, 0, &sw.wt), 0);
        ck_assert_int_eq(ps.last_thr[0], 0); /* within the job: what the shards hold */
        ck_assert_int_eq(hp_wsp_eval_end(w, &sw.wt), 0);
        hp_wsp_destroy(NULL, w);
        weights_release(&sw);
    }
    /* without shards there is no WSP: every call does nothing */
    ck_assert(!hp_wsp_gate_due(NULL, 6));
    ck_assert_int_eq(hp_wsp_updated(NULL, 2, NULL), 0);
}
END_TEST

/* A job of nvws VWs through the real WSP module and one fake server: VW x is the first stage
 * of a pipeline that keeps w[x] <= Nm minibatches in flight (the VWs share the wave, Nm, as
 * plans do), makes a pass every speed[x] ticks and waits at a gate the server refuses. At
 * every forward pass the other VWs must have pushed the waves the bound promises, and no VW's
 * clock may run more than D + 2 ahead of the global one. Returns whether every VW trained n
 * minibatches. */
static int simulate(int nvws, int nm, const int *w_in, int D, const int *speed, long n)
{
    struct fake_server srv = {.nvws = nvws, .check_own = 1};
    struct fake_ps ps[MAXV];
    struct stage_weights sw[MAXV];
    struct hp_wsp *w[MAXV];
    struct hp_sched sc[MAXV];
    struct hp_pass next[MAXV];
    int has[MAXV], nms[MAXV];
    struct fake_plan fp;
    double comm = 0.0;

    for (int x = 0; x < nvws; x++)
        nms[x] = nm;
    fake_plan_init(&fp, nvws, nms, D);
    for (int x = 0; x < nvws; x++) {
        const struct hp_wsp_config c = {
            .plan = &fp.p, .v = x, .nparams = 4, .run_mb = n, .comm_s = &comm};
        ps[x] = (struct fake_ps){.srv = &srv, .v = x};
        weights_init(&sw[x]);
        ck_assert_int_eq(hp_wsp_create_with(&c, &fake_ops, &ps[x], &w[x]), 0);
        hp_sched_init(&sc[x], 0, n, w_in[x] < nm ? w_in[x] : nm);
        has[x] = hp_sched_next(&sc[x], &next[x]);
    }
    for (long tick = 1; tick < 100000; tick++) {
        int busy = 0;
        for (int x = 0; x < nvws; x++) {
            busy |= has[x];
            if (!has[x] || tick % speed[x])
                continue;
            const long q = next[x].j, C = q / nm;
            if (next[x].kind == HP_PASS_FORWARD) {
                if (hp_wsp_gate(w[x], q, &sw[x].wt))
                    continue; /* waits for the VWs behind */
                for (int y = 0; y < nvws && C >= 2; y++)
                    ck_assert_int_ge(srv.pushed[y], C - 1 - D);
            } else {
                ck_assert_int_eq(hp_wsp_updated(w[x], q, &sw[x].wt), 0);
            }
            has[x] = hp_sched_next(&sc[x], &next[x]);
            const int64_t g = f_global_clock(&ps[x]);
            for (int y = 0; y < nvws; y++)
                ck_assert_int_le(srv.pushed[y] - g, D + 2);
        }
        if (!busy)
            break;
    }
    int done = 1;
    for (int x = 0; x < nvws; x++) {
        hp_wsp_push_rest(w[x], &sw[x].wt);
        done &= !has[x];
        hp_wsp_destroy(NULL, w[x]);
        weights_release(&sw[x]);
    }
    ck_assert(!srv.bad_order);
    return done;
}

START_TEST(wsp_job_keeps_the_bound)
{
    static const int ws[][3] = {{1, 1, 1}, {4, 4, 4}, {4, 2, 1}, {1, 3, 2}};
    static const int speeds[][3] = {{1, 1, 1}, {1, 3, 7}, {5, 1, 2}};

    for (int nm = 1; nm <= 4; nm++)
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 3; b++)
                for (int D = 0; D <= 3; D++)
                    for (int nvws = 1; nvws <= 3; nvws++)
                        ck_assert_msg(simulate(nvws, nm, ws[a], D, speeds[b], 30),
                                      "WSP job of %d VWs (Nm %d; in flight %d,%d,%d; speeds "
                                      "%d,%d,%d; D %d) did not finish",
                                      nvws, nm, ws[a][0], ws[a][1], ws[a][2], speeds[b][0],
                                      speeds[b][1], speeds[b][2], D);
    ck_assert_int_eq(hp_wsp_threshold(1, 0), 0);
    ck_assert_int_eq(hp_wsp_threshold(5, 0), 4);
    ck_assert_int_eq(hp_wsp_threshold(5, 2), 2);
    ck_assert_int_eq(hp_wsp_threshold(2, 3), 0);
}
END_TEST

/* ---- job points ---- */

START_TEST(job_point_verdict)
{
    const unsigned CK = HP_VERDICT_CKPT, ST = HP_VERDICT_STOP, RQ = HP_VERDICT_REQUEST;

    /* stop, last, checkpoints on, requested, due */
    ck_assert_uint_eq(hp_jp_decide(0, 0, 0, 0, 0), 0);
    ck_assert_uint_eq(hp_jp_decide(1, 0, 1, 1, 1), ST); /* --stop-at wins: no checkpoint */
    ck_assert_uint_eq(hp_jp_decide(0, 1, 1, 1, 1), 0);  /* the job's end: nothing to keep */
    ck_assert_uint_eq(hp_jp_decide(0, 0, 0, 1, 1), 0);  /* checkpoints off */
    ck_assert_uint_eq(hp_jp_decide(0, 0, 1, 0, 0), 0);
    ck_assert_uint_eq(hp_jp_decide(0, 0, 1, 0, 1), CK);
    ck_assert_uint_eq(hp_jp_decide(0, 0, 1, 1, 0), CK | ST | RQ);
    ck_assert_uint_eq(hp_jp_decide(0, 0, 1, 1, 1), CK | ST | RQ);
    ck_assert_uint_eq(hp_jp_decide(1, 0, 0, 0, 0), ST);
}
END_TEST

START_TEST(checkpoint_cadence)
{
    struct hp_ckpt_cadence c;

    /* off: no job points for checkpoints */
    ck_assert_int_eq(hp_ckpt_cadence_init(&c, NULL, 0, 0.0, 64), 0);
    ck_assert(!c.on && c.every_mb == 0);
    ck_assert(!hp_ckpt_due(&c, 100, 100, 1e9));
    /* on without an interval: none due by itself (requests make pauses, pause.h) */
    ck_assert_int_eq(hp_ckpt_cadence_init(&c, "d", 0, 0.0, 64), 0);
    ck_assert(c.on && c.every_mb == 0);
    ck_assert(!hp_ckpt_due(&c, 100, 100, 1e9));
    /* every 640 samples at 64 per minibatch of every VW: every 10 minibatches, and the end */
    ck_assert_int_eq(hp_ckpt_cadence_init(&c, "d", 640, 0.0, 64), 0);
    ck_assert_int_eq(c.every_mb, 10);
    ck_assert(hp_ckpt_due(&c, 10, 95, 0.0) && hp_ckpt_due(&c, 90, 95, 0.0));
    ck_assert(hp_ckpt_due(&c, 95, 95, 0.0) && !hp_ckpt_due(&c, 9, 95, 0.0));
    /* not a whole number of minibatches: the first minibatch boundary after it */
    ck_assert_int_eq(hp_ckpt_cadence_init(&c, "d", 6000, 0.0, 256), 0);
    ck_assert_int_eq(c.every_mb, 24); /* 6144 samples */
    ck_assert_int_eq(hp_ckpt_cadence_init(&c, "d", 1, 0.0, 64), 0);
    ck_assert_int_eq(c.every_mb, 1);
    /* by time */
    ck_assert_int_eq(hp_ckpt_cadence_init(&c, "d", 0, 30.0, 64), 0);
    ck_assert(!hp_ckpt_due(&c, 10, 100, 29.9) && hp_ckpt_due(&c, 10, 100, 30.0));
    /* an interval without a directory is refused, naming both options */
    test_capture_begin();
    ck_assert_int_eq(hp_ckpt_cadence_init(&c, NULL, 640, 0.0, 64), -HP_EINVAL);
    ck_assert(strstr(test_capture_end(), "'--checkpoint-dir DIR'") != NULL);
}
END_TEST

/* A pause's point: no VW can have started it when the reporter names it (pause.h). */
START_TEST(pause_point)
{
    /* one VW: at once */
    ck_assert_int_eq(hp_pause_point(37, 9, 0, 4, 1, 0), 37);
    /* dp: the replicas cannot pass the reporter's next allreduce */
    ck_assert_int_eq(hp_pause_point(37, 0, 0, 1, 4, 1), 38);
    /* WSP: pushed + D + 2 waves of the largest Nm */
    ck_assert_int_eq(hp_pause_point(36, 8, 0, 4, 4, 0), 40);
    ck_assert_int_eq(hp_pause_point(36, 8, 2, 4, 4, 0), 48);
    ck_assert_int_eq(hp_pause_point(36, 8, 0, 6, 4, 0), 60);
    /* never behind the reporter itself */
    ck_assert_int_eq(hp_pause_point(100, 1, 0, 4, 2, 0), 100);
    /* the bound: a VW at wave C needs every VW's clock >= C - 1 - D (hp_wsp_threshold), so with
     * the reporter's clock `pushed` no VW starts a wave whose first minibatch is >= the point */
    for (long pushed = 0; pushed < 6; pushed++)
        for (long D = 0; D < 3; D++)
            for (long nm = 1; nm <= 4; nm++) {
                const long x = hp_pause_point(pushed * nm, pushed, D, nm, 3, 0);
                long c = 0;
                while (hp_wsp_threshold(c + 1, D) <= pushed)
                    c++; /* the last wave any VW may start */
                ck_assert_msg((c + 1) * nm <= x, "pushed %ld D %ld nm %ld: wave %ld, point %ld",
                              pushed, D, nm, c, x);
            }
}
END_TEST

/* A span ended by a pause hands out only the backward passes of those in flight. */
START_TEST(schedule_end)
{
    struct hp_sched s;
    struct hp_pass p;
    long nf = 0, nb = 0;

    hp_sched_init(&s, 0, 100, 3);
    for (int i = 0; i < 7; i++) /* F0 F1 F2 B0 F3 B1 F4 */
        ck_assert(hp_sched_next(&s, &p));
    ck_assert(hp_sched_next(&s, &p) && p.kind == HP_PASS_BACKWARD && p.j == 2);
    ck_assert(hp_sched_next(&s, &p) && p.kind == HP_PASS_FORWARD && p.j == 5);
    hp_sched_end(&s, 5); /* 5's forward was handed out just now: it is not run */
    while (hp_sched_next(&s, &p)) {
        ck_assert_int_eq(p.kind, HP_PASS_BACKWARD);
        ck_assert_int_eq(p.j, 3 + nb++);
    }
    ck_assert_int_eq(nb, 2);
    /* a later end changes nothing; an end at the start leaves nothing */
    hp_sched_init(&s, 10, 20, 2);
    hp_sched_end(&s, 30);
    while (hp_sched_next(&s, &p))
        nf += p.kind == HP_PASS_FORWARD;
    ck_assert_int_eq(nf, 10);
    hp_sched_init(&s, 10, 20, 2);
    ck_assert(hp_sched_next(&s, &p) && p.j == 10);
    hp_sched_end(&s, 10);
    ck_assert(!hp_sched_next(&s, &p));
}
END_TEST

START_TEST(feed_counts)
{
    struct hp_feed_counts n;

    ck_assert_int_eq(hp_feed_counts(60000, 10000, 0, 0, 64, 3, &n), 0);
    ck_assert_int_eq(n.ntrain, 60000);
    ck_assert_int_eq(n.total_mb, 937);
    ck_assert_int_eq(n.my_mb, 312); /* every VW the same share; 937 % 3 left out */
    ck_assert_int_eq(n.ntest, 10000);
    ck_assert_int_eq(n.test_batches, 157);
    ck_assert_int_eq(hp_feed_counts(60000, 10000, 1000, 100, 64, 2, &n), 0);
    ck_assert_int_eq(n.my_mb, 7);
    ck_assert_int_eq(n.test_batches, 2);
    test_capture_begin();
    ck_assert_int_eq(hp_feed_counts(60000, 10000, 100, 0, 64, 2, &n), -HP_EINVAL);
    ck_assert(strstr(test_capture_end(), "more than the 100 training samples") != NULL);
}
END_TEST

Suite *suite_worker(void)
{
    Suite *s = suite_create("worker");
    TCase *tc = tcase_create("rules");

    tcase_add_test(tc, order_of_passes);
    tcase_add_test(tc, pipelines_never_deadlock);
    tcase_add_test(tc, stash_versions);
    tcase_add_test(tc, wsp_gate_and_push_rules);
    tcase_add_test(tc, wsp_job_keeps_the_bound);
    tcase_add_test(tc, job_point_verdict);
    tcase_add_test(tc, checkpoint_cadence);
    tcase_add_test(tc, pause_point);
    tcase_add_test(tc, schedule_end);
    tcase_add_test(tc, feed_counts);
    suite_add_tcase(s, tc);
    return s;
}
