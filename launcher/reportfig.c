/* reportfig.c - the pictures of the report page (reportfig.h). */
#include "reportfig.h"

#include "svg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FIG_W 1200.0

/* Light colours per minibatch (black text reads on them), and strong ones per run. */
static const char *const mb_colours[] = {"#8dd3c7", "#ffed6f", "#bebada", "#fb8072", "#80b1d3",
                                         "#fdb462", "#b3de69", "#fccde5", "#ccebc5", "#bc80bd"};
static const char *const run_colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                          "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

static const char *mb_colour(long i)
{
    return mb_colours[(i < 0 ? -i : i) % 10];
}

/* An SVG that says what is missing and how to get it. */
static void placeholder(FILE *f, const char *label, const char *why)
{
    hp_svg_open(f, FIG_W, 70, label);
    hp_svg_rect(f, 1, 1, FIG_W - 2, 68, "#fafafa", "stroke=\"#bbb\" stroke-dasharray=\"4 3\"",
                NULL);
    hp_svg_text(f, FIG_W / 2, 40, "text-anchor=\"middle\" font-size=\"14\" fill=\"#555\"", "%s",
                why);
    hp_svg_close(f);
}

/* ---- the pipeline ------------------------------------------------------------------------ */

struct window {
    double t0, t1, origin; /* on rank 0's clock; origin: the first event of any rank */
};

static const struct hp_tl_event *find_event(const struct hp_tl_part *p, int kind, long mb)
{
    for (long i = 0; p->have && i < p->n; i++)
        if (p->ev[i].kind == kind && p->ev[i].mb == mb)
            return &p->ev[i];
    return NULL;
}

static long last_mb(const struct hp_tl_part *p, int kind)
{
    long top = -1;

    for (long i = 0; p->have && i < p->n; i++)
        if (p->ev[i].kind == kind && p->ev[i].mb > top)
            top = p->ev[i].mb;
    return top;
}

/* VW v's window: from its stage 0's forward pass of the first minibatch of wave 1 to the end
 * of the last backward pass (on any of its stages) of about 3 waves later, at least twice its
 * stages in minibatches. */
static void vw_window(const struct hp_jobdata *d, int v, struct window *w)
{
    const struct hp_plan *p = &d->job.plan;
    const int k = p->vws[v].nstages, nm = p->vws[v].nm > 0 ? p->vws[v].nm : 1;
    const struct hp_tl_part *first = &d->tl[hp_plan_stage_rank(p, v, 0)];
    const long top = last_mb(first, HP_TL_FWD);
    long m = 3L * nm > 2L * k ? 3L * nm : 2L * k;
    const struct hp_tl_event *e;

    if (top < 0)
        return;
    m = m < 4 ? 4 : m > 64 ? 64 : m;
    const long a = top >= nm + m / 2 ? nm : 0;
    const long b = a + m <= top + 1 ? a + m : top + 1;
    if ((e = find_event(first, HP_TL_FWD, a)))
        w->t0 = fmin(w->t0, e->t0);
    for (int s = 0; s < k; s++)
        if ((e = find_event(&d->tl[hp_plan_stage_rank(p, v, s)], HP_TL_BWD, b - 1)))
            w->t1 = fmax(w->t1, e->t1);
}

static int pick_window(const struct hp_jobdata *d, struct window *w)
{
    const struct hp_plan *p = &d->job.plan;

    *w = (struct window){INFINITY, -INFINITY, INFINITY};
    for (int r = 0; r < p->nranks; r++)
        for (long i = 0; d->tl[r].have && i < d->tl[r].n; i++)
            w->origin = fmin(w->origin, d->tl[r].ev[i].t0);
    for (int v = 0; v < p->nvws; v++)
        vw_window(d, v, w);
    return isfinite(w->t0) && isfinite(w->t1) && w->t1 > w->t0 && isfinite(w->origin);
}

/* A band across a part of the row: y offset and height within a row of height h. */
static void band(FILE *f, double x, double wd, double y, double h, const char *fill,
                 const char *tip)
{
    hp_svg_rect(f, x, y + h / 2 - 4, wd, 8, fill, NULL, tip);
}

static void draw_event(FILE *f, const struct hp_tl_event *e, const struct hp_svg_scale *sx,
                       const struct window *w, double y, double h)
{
    const double a = fmax(e->t0, w->t0), b = fmin(e->t1, w->t1);
    const int fwd = e->kind == HP_TL_FWD, bwd = e->kind == HP_TL_BWD;
    char tip[200];

    if (!(b > a) || e->kind < 0 || e->kind >= HP_TL_KINDS)
        return;
    const double x = hp_svg_map(sx, a - w->origin);
    const double wd = fmax(hp_svg_map(sx, b - w->origin) - x, 0.6);
    snprintf(tip, sizeof(tip), "%s%s%lld: %.4f-%.4f s (%.3f ms)%s", hp_tl_kind_names[e->kind],
             e->mb >= 0 ? " minibatch " : "", e->mb >= 0 ? (long long)e->mb : 0LL,
             e->t0 - w->origin, e->t1 - w->origin, 1e3 * (e->t1 - e->t0),
             e->peer >= 0 ? " (peer rank)" : "");
    if (e->mb < 0)
        snprintf(tip, sizeof(tip), "%s: %.4f-%.4f s (%.3f ms)", hp_tl_kind_names[e->kind],
                 e->t0 - w->origin, e->t1 - w->origin, 1e3 * (e->t1 - e->t0));
    if (fwd || bwd) {
        hp_svg_rect(f, x, y + 2, wd, h - 4, mb_colour(e->mb),
                    "stroke=\"#fff\" stroke-width=\"0.6\"", fwd ? tip : NULL);
        if (bwd)
            hp_svg_rect(f, x, y + 2, wd, h - 4, "url(#hp-hatch)", NULL, tip);
        if (wd >= 26)
            hp_svg_text(f, x + wd / 2, y + h / 2 + 4, "text-anchor=\"middle\" font-size=\"10\"",
                        "%c%lld", fwd ? 'F' : 'B', (long long)e->mb);
        else if (wd >= 9)
            hp_svg_text(f, x + wd / 2, y + h / 2 + 4, "text-anchor=\"middle\" font-size=\"9\"",
                        "%c", fwd ? 'F' : 'B');
    } else if (e->kind == HP_TL_RECV_ACT || e->kind == HP_TL_RECV_GRAD) {
        band(f, x, wd, y, h, "#a9a9a9", tip);
    } else if (e->kind == HP_TL_WSP_WAIT) {
        band(f, x, wd, y, h, "#d62728", tip);
    } else if (e->kind == HP_TL_DATA) {
        band(f, x, wd, y, h, "#2ca02c", tip);
    } else if (e->kind == HP_TL_PUSH || e->kind == HP_TL_PULL) {
        band(f, x, wd, y, h, "#9467bd", tip);
    } else if (e->kind == HP_TL_ALLREDUCE) {
        band(f, x, wd, y, h, "#ff7f0e", tip);
    } else if (e->kind == HP_TL_VWSYNC) {
        band(f, x, wd, y, h, "#17becf", tip);
    } else if (e->kind == HP_TL_SEND_ACT || e->kind == HP_TL_SEND_GRAD) {
        hp_svg_rect(f, x, y + h - 5, wd, 3, "#5b7fa6", NULL, tip);
    } else if (e->kind == HP_TL_EVAL || e->kind == HP_TL_CKPT) {
        hp_svg_rect(f, x, y + 2, wd, h - 4, "#f0e6a0", NULL, tip);
    }
}

static void pipeline_legend(FILE *f, double y)
{
    static const struct {
        const char *fill, *text;
        int kind; /* 0 block, 1 hatched block, 2 band, 3 thin band */
    } items[] = {
        {"#80b1d3", "forward (colour: minibatch)", 0},
        {"#80b1d3", "backward", 1},
        {"#a9a9a9", "waiting to receive", 2},
        {"#d62728", "WSP wait (for slower VWs)", 2},
        {"#2ca02c", "waiting for data", 2},
        {"#9467bd", "push / pull", 2},
        {"#ff7f0e", "allreduce", 2},
        {"#5b7fa6", "send", 3},
        {"#f0e6a0", "evaluation / checkpoint", 0},
    };
    double x = 10;

    for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
        const int k = items[i].kind;
        hp_svg_rect(f, x, k >= 2 ? y + (k == 2 ? 4 : 9) : y, 22,
                    k == 2   ? 8
                    : k == 3 ? 3
                             : 16,
                    items[i].fill, NULL, NULL);
        if (k == 1)
            hp_svg_rect(f, x, y, 22, 16, "url(#hp-hatch)", NULL, NULL);
        hp_svg_text(f, x + 27, y + 12, NULL, "%s", items[i].text);
        x += 44 + 7.0 * (double)strlen(items[i].text);
    }
}

static void pipeline_row(FILE *f, const struct hp_jobdata *d, int r, double y, double h,
                         const struct hp_svg_scale *sx, const struct window *w)
{
    const struct hp_plan *p = &d->job.plan;
    const struct hp_tl_part *t = &d->tl[r];
    int v = 0, s = 0;

    hp_plan_rank_stage(p, r, &v, &s);
    const struct hp_gpu *g = &d->job.cl.gpus[p->vws[v].stages[s].gpu];
    hp_svg_rect(f, sx->r0, y, sx->r1 - sx->r0, h, "#fff", "stroke=\"#ccc\"", NULL);
    hp_svg_text(f, 8, y + h / 2 - 2, "font-size=\"11\"", "rank %d: VW %d stage %d", r, v, s);
    hp_svg_text(f, 8, y + h / 2 + 11, "font-size=\"10\" fill=\"#555\"", "%s on %s",
                d->job.db.types[g->type].name, d->job.cl.nodes[g->node].name);
    if (!t->have) {
        hp_svg_text(f, sx->r0 + 8, y + h / 2 + 4, "font-size=\"11\" fill=\"#888\"",
                    "no timeline.%d", r);
        return;
    }
    for (long i = 0; i < t->n; i++)
        if (t->ev[i].t1 > w->t0 && t->ev[i].t0 < w->t1)
            draw_event(f, &t->ev[i], sx, w, y, h);
}

void hp_fig_pipeline(FILE *f, const struct hp_jobdata *d)
{
    const struct hp_plan *p = &d->job.plan;
    const int workers = hp_plan_first_shard(p);
    const double row = 30, gap = 8, top = 40, left = 200;
    struct window w;

    if (d->ntl == 0 || !pick_window(d, &w)) {
        placeholder(f, "pipeline (no timeline)",
                    d->ntl ? "the timeline holds no forward and backward passes to draw"
                           : "no timeline: run the job with --timeline FILE to see its pipeline");
        return;
    }
    const double h = top + workers * row + (p->nvws - 1) * gap + 50;
    const struct hp_svg_scale sx = {w.t0 - w.origin, w.t1 - w.origin, left, FIG_W - 20};
    double y = top;

    hp_svg_open(f, FIG_W, h, "the pipeline: one row per GPU, time to the right");
    pipeline_legend(f, 8);
    for (int v = 0; v < p->nvws; v++) {
        for (int s = 0; s < p->vws[v].nstages; s++, y += row)
            pipeline_row(f, d, hp_plan_stage_rank(p, v, s), y, row, &sx, &w);
        y += gap;
    }
    hp_svg_axis_x(f, &sx, y - gap + 4, "seconds since the job started", 1.0);
    hp_svg_close(f);
}

/* ---- loss and accuracy ------------------------------------------------------------------- */

struct panel {
    double x, y, w, h;
    int by_samples, accuracy;
    const char *title;
};

static double metric_x(const struct hp_jobdata *r, const struct hp_metric *m, int by_samples)
{
    return by_samples ? (double)m->step * r->job.plan.opts.batch : m->seconds;
}

static void panel_range(const struct hp_jobdata *const *runs, int n, const struct panel *pn,
                        double *xmax, double *ymax)
{
    *xmax = 0.0;
    *ymax = pn->accuracy ? 1.0 : 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < runs[i]->nmetrics; j++) {
            const struct hp_metric *m = &runs[i]->metrics[j];
            *xmax = fmax(*xmax, metric_x(runs[i], m, pn->by_samples));
            if (!pn->accuracy && isfinite(m->loss))
                *ymax = fmax(*ymax, m->loss * 1.05);
        }
    if (!(*xmax > 0.0))
        *xmax = 1.0;
    if (!(*ymax > 0.0))
        *ymax = 1.0;
}

/* Run i's train line and test points in panel pn. */
static void panel_run(FILE *f, const struct hp_jobdata *r, int i, const struct panel *pn,
                      const struct hp_svg_scale *sx, const struct hp_svg_scale *sy)
{
    const char *c = run_colours[i % 10];
    double *x = malloc(2 * (size_t)(r->nmetrics + 1) * sizeof(*x)), *y;
    char tip[256];

    if (!x)
        return;
    y = x + r->nmetrics + 1;
    for (int test = 0; test < 2; test++) {
        int n = 0, part = r->nmetrics ? r->metrics[0].part : 0;
        for (int j = 0; j < r->nmetrics; j++) {
            const struct hp_metric *m = &r->metrics[j];
            const double v = pn->accuracy ? m->accuracy : m->loss;
            if (m->test != test || !isfinite(v))
                continue;
            if (m->part != part) { /* another run of the job: a new line */
                hp_svg_polyline(f, x, y, n, c, test ? "stroke-dasharray=\"5 4\"" : NULL);
                n = 0;
                part = m->part;
            }
            x[n] = hp_svg_map(sx, metric_x(r, m, pn->by_samples));
            y[n++] = hp_svg_map(sy, v);
        }
        hp_svg_polyline(f, x, y, n, c, test ? "stroke-dasharray=\"5 4\"" : NULL);
        if (test) /* the points, from the start again */
            for (int j = 0, k = 0; j < r->nmetrics; j++) {
                const struct hp_metric *m = &r->metrics[j];
                if (!m->test || !isfinite(pn->accuracy ? m->accuracy : m->loss))
                    continue;
                x[k] = hp_svg_map(sx, metric_x(r, m, pn->by_samples));
                y[k++] = hp_svg_map(sy, pn->accuracy ? m->accuracy : m->loss);
            }
        for (int j = 0, k = 0; test && j < r->nmetrics; j++) {
            const struct hp_metric *m = &r->metrics[j];
            if (!m->test || !isfinite(pn->accuracy ? m->accuracy : m->loss))
                continue;
            snprintf(tip, sizeof(tip),
                     "%.120s: test loss %.4f, accuracy %.2f%% (epoch %d, step %ld, "
                     "%.1f s)",
                     r->name, m->loss, 100.0 * m->accuracy, m->epoch, m->step, m->seconds);
            hp_svg_circle(f, x[k], y[k], 3.5, c, tip);
            k++;
        }
    }
    free(x);
}

/* The restarts: a dashed grey line across the panel at each mark, labelled at its top. */
static void panel_marks(FILE *f, const struct panel *pn, const struct hp_svg_scale *sx,
                        const struct hp_fig_mark *marks, int nmarks)
{
    for (int i = 0; i < nmarks; i++) {
        const double x = hp_svg_map(sx, pn->by_samples ? marks[i].samples : marks[i].seconds);
        hp_svg_line(f, x, pn->y, x, pn->y + pn->h, "#555", 1.2,
                    "stroke-dasharray=\"3 3\" class=\"restart\"");
        hp_svg_text(f, x + 3, pn->y + 12 + 12 * (i % 3), "font-size=\"10\" fill=\"#555\"", "%s",
                    marks[i].label);
    }
}

static void curve_panel(FILE *f, const struct hp_jobdata *const *runs, int n,
                        const struct panel *pn, const struct hp_fig_mark *marks, int nmarks)
{
    double xmax, ymax;

    panel_range(runs, n, pn, &xmax, &ymax);
    const struct hp_svg_scale sx = {0.0, xmax, pn->x, pn->x + pn->w};
    const struct hp_svg_scale sy = {0.0, ymax, pn->y + pn->h, pn->y};
    hp_svg_text(f, pn->x, pn->y - 10, "font-weight=\"bold\"", "%s", pn->title);
    hp_svg_axis_y(f, &sy, pn->x, pn->x + pn->w, pn->accuracy ? "accuracy (%)" : "loss",
                  pn->accuracy ? 100.0 : 1.0);
    hp_svg_axis_x(f, &sx, pn->y + pn->h,
                  pn->by_samples ? "samples (step x batch, all VWs)" : "seconds", 1.0);
    for (int i = 0; i < n; i++)
        panel_run(f, runs[i], i, pn, &sx, &sy);
    panel_marks(f, pn, &sx, marks, nmarks);
}

void hp_fig_curves(FILE *f, const struct hp_jobdata *const *runs, int nruns,
                   const struct hp_fig_mark *marks, int nmarks)
{
    const double pw = 480, ph = 200;
    const struct panel panels[4] = {
        {90, 80, pw, ph, 0, 0, "loss against time"},
        {690, 80, pw, ph, 0, 1, "accuracy against time"},
        {90, 360, pw, ph, 1, 0, "loss against samples"},
        {690, 360, pw, ph, 1, 1, "accuracy against samples"},
    };
    int any = 0;
    double x = 10;

    for (int i = 0; i < nruns; i++)
        any |= runs[i]->nmetrics > 0;
    if (!any) {
        placeholder(f, "loss and accuracy (no metrics)",
                    "no metrics.csv: run the job with --metrics DIR/metrics.csv for these curves");
        return;
    }
    hp_svg_open(f, FIG_W, 610, "loss and accuracy against time and samples");
    for (int i = 0; i < nruns; i++) {
        char label[400];
        snprintf(label, sizeof(label), "%s (%s%s)", runs[i]->name,
                 hp_policy_name(runs[i]->job.plan.opts.policy),
                 runs[i]->nmetrics ? "" : ", no metrics");
        hp_svg_line(f, x, 16, x + 24, 16, run_colours[i % 10], 3, NULL);
        hp_svg_text(f, x + 30, 20, NULL, "%s", label);
        x += 50 + 6.5 * (double)strlen(label);
    }
    hp_svg_line(f, x + 10, 16, x + 34, 16, "#333", 1.8, NULL);
    hp_svg_text(f, x + 40, 20, NULL, "train (running, per log line)");
    hp_svg_line(f, x + 250, 16, x + 274, 16, "#333", 1.8, "stroke-dasharray=\"5 4\"");
    hp_svg_circle(f, x + 262, 16, 3.5, "#333", NULL);
    hp_svg_text(f, x + 280, 20, NULL, "test");
    for (int i = 0; i < 4; i++)
        curve_panel(f, runs, nruns, &panels[i], marks, nmarks);
    hp_svg_close(f);
}

/* ---- the plan ---------------------------------------------------------------------------- */

#define PLAN_STAGE_H 90.0
#define PLAN_HEAD_H 26.0
#define PLAN_MAX_VWS 24
#define PLAN_MAX_SHARDS 32

/* "units 4-5: fc1, fc2" cut to about `chars` characters. */
static void unit_list(const struct hp_jobdata *d, int u0, int u1, int chars, char *buf, size_t n)
{
    const struct hp_model *m = d->job.model;
    size_t len = (size_t)snprintf(buf, n, "units %d-%d%s", u0, u1 - 1, m ? ":" : "");

    if (chars > (int)n - 8)
        chars = (int)n - 8;
    for (int u = u0; m && u < u1 && len < n; u++) {
        const size_t need = strlen(m->units[u].name) + 2;
        if ((int)(len + need) > chars) {
            snprintf(buf + len, n - len, " ... (%d units)", u1 - u0);
            return;
        }
        len += (size_t)snprintf(buf + len, n - len, "%s %s", u > u0 ? "," : "", m->units[u].name);
    }
}

static double type_capacity(const struct hp_jobdata *d, const struct hp_stage_plan *st)
{
    const struct hp_gpu *g = &d->job.cl.gpus[st->gpu];
    const double mem = d->job.db.types[g->type].memory_gib * 1073741824.0;

    return mem > 0.0 ? mem : st->capacity;
}

static void memory_bar(FILE *f, const struct hp_jobdata *d, int r, const struct hp_stage_plan *st,
                       double x, double y, double w)
{
    const struct hp_stats *s = hp_jobdata_stats(d, r);
    const double cap = type_capacity(d, st);
    const double frac = cap > 0.0 ? st->memory / cap : 0.0;
    const char *fill = frac < 0.7 ? "#59a14f" : frac < 0.9 ? "#f28e2b" : "#e15759";
    char tip[160];

    snprintf(tip, sizeof(tip), "memory: %.3f GiB predicted of the GPU's %.2f GiB (%.1f%%)",
             st->memory / 1073741824.0, cap / 1073741824.0, 100.0 * frac);
    hp_svg_rect(f, x, y, w, 10, "#eee", "stroke=\"#bbb\"", tip);
    hp_svg_rect(f, x, y, w * fmin(frac, 1.0), 10, fill, NULL, tip);
    if (s && s->mem_peak > 0.0 && cap > 0.0) {
        const double px = x + w * fmin(s->mem_peak / cap, 1.0);
        hp_svg_line(f, px, y - 2, px, y + 12, "#000", 1.5, NULL);
    }
    hp_svg_text(f, x + w + 6, y + 9, "font-size=\"11\"", "%.2f / %.1f GiB (%.0f%%)",
                st->memory / 1073741824.0, cap / 1073741824.0, 100.0 * frac);
}

static void plan_stage(FILE *f, const struct hp_jobdata *d, int v, int s, double x, double y,
                       double w)
{
    const struct hp_plan *p = &d->job.plan;
    const struct hp_stage_plan *st = &p->vws[v].stages[s];
    const struct hp_gpu *g = &d->job.cl.gpus[st->gpu];
    const struct hp_gpu_type *t = &d->job.db.types[g->type];
    const int r = hp_plan_stage_rank(p, v, s);
    char units[512];

    hp_svg_rect(f, x, y, w, PLAN_STAGE_H - 6, "#fff", "stroke=\"#999\" rx=\"3\"", NULL);
    hp_svg_text(f, x + 8, y + 16, "font-weight=\"bold\"", "stage %d: %s", s, t->name);
    hp_svg_text(f, x + w - 8, y + 16, "text-anchor=\"end\" font-size=\"11\" fill=\"#555\"",
                "rank %d", r);
    hp_svg_text(f, x + 8, y + 31, "font-size=\"11\"", "%s, node %s, device %d", t->label,
                d->job.cl.nodes[g->node].name, g->index);
    hp_svg_text(f, x + 8, y + 45, "font-size=\"11\"",
                "fwd %.2f + bwd %.2f ms planned, %d in flight", 1e3 * st->fwd_s, 1e3 * st->bwd_s,
                st->in_flight);
    unit_list(d, st->u0, st->u1, (int)((w - 16) / 6.2), units, sizeof(units));
    hp_svg_text(f, x + 8, y + 59, "font-size=\"11\"", "%s", units);
    memory_bar(f, d, r, st, x + 8, y + 67, fmin(w - 170, 420));
}

static double vw_box_h(const struct hp_plan *p, int v)
{
    return PLAN_HEAD_H + p->vws[v].nstages * PLAN_STAGE_H + 4;
}

static void plan_vw(FILE *f, const struct hp_jobdata *d, int v, double x, double y, double w)
{
    const struct hp_vw_plan *vw = &d->job.plan.vws[v];

    hp_svg_rect(f, x, y, w, vw_box_h(&d->job.plan, v), "#f3f6fa", "stroke=\"#4e79a7\" rx=\"5\"",
                NULL);
    hp_svg_text(f, x + 8, y + 18, "font-weight=\"bold\"",
                "VW %d: %d GPU%s, Nm %d, %.0f images/s "
                "planned",
                v, vw->nstages, vw->nstages == 1 ? "" : "s", vw->nm, vw->rate);
    for (int s = 0; s < vw->nstages; s++)
        plan_stage(f, d, v, s, x + 6, y + PLAN_HEAD_H + s * PLAN_STAGE_H, w - 12);
}

static void plan_shard(FILE *f, const struct hp_jobdata *d, int sh, double y)
{
    const struct hp_plan *p = &d->job.plan;
    const struct hp_model *m = d->job.model;
    const double x0 = 330, cw = fmin(28.0, (FIG_W - 20 - x0) / (p->nunits > 0 ? p->nunits : 1));
    char names[512] = "", tip[160];
    size_t len = 0;
    int n = 0;

    for (int u = 0; u < p->nunits; u++) {
        const int mine = p->unit_shard[u] == sh;
        snprintf(tip, sizeof(tip), "unit %d%s%s%s: on shard %d", u, m ? " (" : "",
                 m ? m->units[u].name : "", m ? ")" : "", p->unit_shard[u]);
        hp_svg_rect(f, x0 + u * cw, y, cw, 14, mine ? run_colours[sh % 10] : "#eee",
                    "stroke=\"#fff\" stroke-width=\"0.5\"", tip);
        if (mine && len < 90)
            len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", n ? ", " : "",
                                    m ? m->units[u].name : "");
        if (mine && !m && len < 90)
            len += (size_t)snprintf(names + len, sizeof(names) - len, "%d", u);
        n += mine;
    }
    hp_svg_text(f, 10, y + 11, "font-size=\"11\"", "PS shard %d: rank %d on %s, %d unit%s", sh,
                hp_plan_first_shard(p) + sh, d->job.cl.nodes[sh].name, n, n == 1 ? "" : "s");
    hp_svg_text(f, x0, y + 27, "font-size=\"10\" fill=\"#555\"", "%s%s", names,
                len >= 90 ? ", ..." : "");
}

void hp_fig_plan(FILE *f, const struct hp_jobdata *d)
{
    const struct hp_plan *p = &d->job.plan;
    const int shown = p->nvws < PLAN_MAX_VWS ? p->nvws : PLAN_MAX_VWS;
    const int cols = shown >= 3 ? 3 : shown > 0 ? shown : 1;
    const double bw = (FIG_W - 20 - (cols - 1) * 16) / cols;
    const int shards = p->nshards < PLAN_MAX_SHARDS ? p->nshards : PLAN_MAX_SHARDS;
    double h = 10, y = 10;

    for (int v = 0; v < shown; v += cols) {
        double rh = 0;
        for (int c = 0; c < cols && v + c < shown; c++)
            rh = fmax(rh, vw_box_h(p, v + c));
        h += rh + 14;
    }
    h += (shown < p->nvws ? 20 : 0) + 34 + (shards ? shards * 36 : 10) + 20;
    hp_svg_open(f, FIG_W, h, "the plan: virtual workers, their GPUs and stages, and the shards");
    for (int v = 0; v < shown; v += cols) {
        double rh = 0;
        for (int c = 0; c < cols && v + c < shown; c++) {
            plan_vw(f, d, v + c, 10 + c * (bw + 16), y, bw);
            rh = fmax(rh, vw_box_h(p, v + c));
        }
        y += rh + 14;
    }
    if (shown < p->nvws)
        hp_svg_text(f, 10, (y += 20) - 6, NULL, "... and %d more VWs (see the table)",
                    p->nvws - shown);
    if (!p->nshards) {
        hp_svg_text(f, 10, y + 20, NULL, "no parameter-server shards: %s",
                    p->opts.policy == HP_POLICY_DP
                        ? "dp replicas allreduce their gradients every minibatch"
                        : "one VW keeps its weights itself");
        hp_svg_close(f);
        return;
    }
    hp_svg_text(f, 10, y + 18, "font-weight=\"bold\"",
                "parameter-server shards, placement %s: "
                "the units each holds",
                hp_placement_name(p->opts.placement));
    y += 30;
    for (int s = 0; s < shards; s++, y += 36)
        plan_shard(f, d, s, y);
    if (shards < p->nshards)
        hp_svg_text(f, 10, y + 4, NULL, "... and %d more shards", p->nshards - shards);
    hp_svg_close(f);
}
