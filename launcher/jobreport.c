/* jobreport.c - the report page of a finished job (jobreport.h). */
#include "jobreport.h"

#include "error.h"
#include "jobdata.h"
#include "log.h"
#include "output.h"
#include "reportfig.h"
#include "svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GIB 1073741824.0

static const char css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#222;"
    "max-width:1240px;margin:0 auto;padding:12px 20px 40px}\n"
    "h1{font-size:22px;margin:10px 0 6px}h2{font-size:17px;margin:26px 0 8px;"
    "border-bottom:1px solid #ddd;padding-bottom:3px}\n"
    "dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:8px 0}\n"
    "dl.facts dt{color:#555}dl.facts dd{margin:0}\n"
    "ul.warnings li{margin:3px 0}ul.warnings li.warn::marker{content:'\\26A0  ';color:#c60}\n"
    "ul.warnings li.note{color:#555}ul.warnings li.ok{color:#2a7}\n"
    "table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ddd;padding:3px 7px;"
    "text-align:right}td{white-space:nowrap}th{background:#f4f4f4}td.l,th.l{text-align:left}\n"
    "tr.job td{background:#eef3fb;font-weight:600}tr.vw td{background:#f7f9fc;font-weight:600}\n"
    "td.bad{color:#c00;font-weight:600}\n"
    "figure{margin:18px 0}figcaption{color:#444;margin:4px 0 8px;font-size:13px}\n"
    "svg.fig{max-width:100%;height:auto;display:block}\n"
    "footer{margin-top:30px;color:#555;font-size:12px}code{font-size:12px}\n";

/* Catches script errors from the start, for the check at the end. */
static const char error_catcher[] =
    "<script>window.hpErrors=[];window.addEventListener('error',function(e){"
    "window.hpErrors.push(e.message||'error')});</script>\n";

/* Every figure must hold an <svg> with a nonzero box, and no script may have failed. */
static const char check_script[] =
    "<script>window.addEventListener('load',function(){var bad=[];"
    "document.querySelectorAll('figure').forEach(function(f){var s=f.querySelector('svg'),b=null,"
    "r=null;try{b=s&&s.getBBox();r=s&&s.getBoundingClientRect();}catch(e){}"
    "if(!b||!(b.width>0&&b.height>0)||!r||!(r.width>0&&r.height>0))bad.push(f.id||'figure');});"
    "var c=window.hpErrors.length?'error: '+window.hpErrors.join('; '):"
    "bad.length?'missing: '+bad.join(' '):'ok';document.body.dataset.check=c;});</script>\n";

static void tag(FILE *f, const char *open, const char *close, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* open, the formatted text escaped, close. */
static void tag(FILE *f, const char *open, const char *close, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fputs(open, f);
    hp_xml_escape(f, buf);
    fputs(close, f);
}

/* The job's measured images/s (the reporter's job figure; else the VWs' sum), or -1. */
static double job_measured(const struct hp_jobdata *d)
{
    const struct hp_plan *p = &d->job.plan;
    double sum = 0.0;
    int n = 0;

    for (int r = 0; r < hp_plan_first_shard(p); r++) {
        const struct hp_stats *s = hp_jobdata_stats(d, r);
        if (s && s->has_job)
            return s->job_images_per_s;
    }
    for (int v = 0; v < p->nvws; v++) {
        const struct hp_stats *s = hp_jobdata_stats(d, hp_plan_stage_rank(p, v, 0));
        if (s) {
            sum += s->images_per_s;
            n++;
        }
    }
    return n == p->nvws && n > 0 ? sum : -1.0;
}

static const struct hp_metric *last_test(const struct hp_jobdata *d)
{
    for (int i = d->nmetrics - 1; i >= 0; i--)
        if (d->metrics[i].test)
            return &d->metrics[i];
    return NULL;
}

/* "4 GPUs: 2 x titanv (NVIDIA TITAN V), 2 x p4000 (...)" over the plan's stages; without
 * `labels` the types' names only. */
static void gpu_summary(const struct hp_jobdata *d, int labels, char *buf, size_t n)
{
    const struct hp_plan *p = &d->job.plan;
    int total = 0, *count = calloc((size_t)d->job.db.ntypes + 1, sizeof(int));
    size_t len;

    for (int v = 0; v < p->nvws; v++)
        for (int s = 0; s < p->vws[v].nstages; s++, total++)
            if (count)
                count[d->job.cl.gpus[p->vws[v].stages[s].gpu].type]++;
    len = (size_t)snprintf(buf, n, "%d GPU%s", total, total == 1 ? "" : "s");
    for (int t = 0, k = 0; count && t < d->job.db.ntypes && len < n; t++)
        if (count[t])
            len += (size_t)snprintf(buf + len, n - len, "%s%d x %s%s%s%s", k++ ? ", " : ": ",
                                    count[t], d->job.db.types[t].name, labels ? " (" : "",
                                    labels ? d->job.db.types[t].label : "", labels ? ")" : "");
    free(count);
}

static void header_rates(FILE *f, const struct hp_jobdata *d)
{
    const double S = hp_jobdata_scale(d), meas = job_measured(d), pred = d->job.plan.rate;
    const struct hp_metric *t = last_test(d);
    char bpb[64] = "";

    if (t && isfinite(t->bits_per_byte))
        snprintf(bpb, sizeof(bpb), ", %.3f bits per byte", t->bits_per_byte);
    if (t && d->text)
        tag(f, "<dt>validation reached</dt><dd>", "</dd>\n",
            "loss %.4f per token, perplexity %.2f%s after epoch %d, %ld sequences, %.1f s", t->loss,
            t->perplexity, bpb, t->epoch, t->step * (long)d->job.plan.opts.batch, t->seconds);
    else if (t)
        tag(f, "<dt>accuracy reached</dt><dd>", "</dd>\n",
            "%.2f%% test accuracy (loss %.4f) after epoch %d, %ld samples, %.1f s",
            100 * t->accuracy, t->loss, t->epoch, t->step * (long)d->job.plan.opts.batch,
            t->seconds);
    else
        tag(f, "<dt>accuracy reached</dt><dd>", "</dd>\n", "%s",
            d->have_metrics ? "no test line in metrics.csv" : "unknown (no metrics.csv)");
    if (meas < 0.0)
        tag(f, "<dt>job images/s</dt><dd>", "</dd>\n", "%.0f predicted; not measured (no stats)",
            pred);
    else if (d->emulated)
        tag(f, "<dt>job images/s</dt><dd>", "</dd>\n",
            "%.0f measured x %.4g (emulation scale) = %.0f at the planned GPUs' speed, against "
            "%.0f predicted: ratio %.2f",
            meas, S, meas * S, pred, pred > 0 ? meas * S / pred : 0.0);
    else
        tag(f, "<dt>job images/s</dt><dd>", "</dd>\n",
            "%.0f measured against %.0f predicted: ratio %.2f (no emulation: the ranks ran at "
            "their device's own speed)",
            meas, pred, pred > 0 ? meas / pred : 0.0);
}

static void page_header(FILE *f, const struct hp_jobdata *d)
{
    const struct hp_plan *p = &d->job.plan;
    char buf[1024];
    size_t len = 0;
    int epochs = 0;

    tag(f, "<header><h1>", "</h1>\n", "hetpipe report: %s", d->name);
    fputs("<dl class=\"facts\">\n", f);
    tag(f, "<dt>model</dt><dd>", "</dd>\n", "%s%s", p->model,
        d->job.model ? "" : " (its units are shown by number)");
    tag(f, "<dt>policy</dt><dd>", "</dd>\n", "%s%s%s, placement %s", hp_policy_name(p->opts.policy),
        p->opts.policy == HP_POLICY_AUTO ? ", chose " : "",
        p->opts.policy == HP_POLICY_AUTO ? hp_policy_name(p->grouping) : "",
        hp_placement_name(p->opts.placement));
    tag(f, "<dt>cluster</dt><dd>", "</dd>\n", "%s: %d node%s, %d GPUs", d->job.cl.name,
        d->job.cl.nnodes, d->job.cl.nnodes == 1 ? "" : "s", d->job.cl.ngpus);
    gpu_summary(d, 1, buf, sizeof(buf));
    tag(f, "<dt>GPUs in the plan</dt><dd>", "</dd>\n", "%s", buf);
    if (p->opts.policy == HP_POLICY_DP)
        tag(f, "<dt>virtual workers</dt><dd>", "</dd>\n",
            "%d dp replicas (a ring allreduce every minibatch, %.2f ms predicted)", p->nvws,
            1e3 * p->allreduce_s);
    else
        tag(f, "<dt>virtual workers</dt><dd>", "</dd>\n", "%d%s%d PS shard%s", p->nvws,
            p->nvws > 1 ? " (WSP), " : ", ", p->nshards, p->nshards == 1 ? "" : "s");
    for (int v = 0; v < p->nvws && len < 200; v++)
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%d", v ? ", " : "", p->vws[v].nm);
    tag(f, "<dt>Nm</dt><dd>", "</dd>\n", "%s%s", buf, p->nvws > 1 ? " (per VW)" : "");
    tag(f, "<dt>staleness D</dt><dd>", "</dd>\n", "%ld", p->opts.staleness);
    tag(f, "<dt>batch</dt><dd>", "</dd>\n", "%ld per VW step", p->opts.batch);
    for (int i = 0; i < d->nmetrics; i++)
        epochs = d->metrics[i].epoch > epochs ? d->metrics[i].epoch : epochs;
    tag(f, "<dt>epochs</dt><dd>", "</dd>\n", "%s%d", epochs ? "" : "unknown ", epochs);
    header_rates(f, d);
    if (d->emulated)
        tag(f, "<dt>emulation</dt><dd>", "</dd>\n",
            "scale S = %.4g: every rank padded its GPU type's planned times x S; measured rates "
            "below are multiplied by S (times divided by it) to compare with the plan",
            hp_jobdata_scale(d));
    fputs("</dl></header>\n", f);
}

/* ---- warnings ---------------------------------------------------------------------------- */

struct wlist {
    FILE *f;
    int n;
};

static void warn(struct wlist *w, const char *cls, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void warn(struct wlist *w, const char *cls, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(w->f, "<li class=\"%s\">", cls);
    hp_xml_escape(w->f, buf);
    fputs("</li>\n", w->f);
    w->n += strcmp(cls, "warn") == 0;
}

/* "rank 3 (VW 1 stage 0, p4000 on node2)" */
static void who(const struct hp_jobdata *d, int r, char *buf, size_t n)
{
    const struct hp_plan *p = &d->job.plan;
    int v = 0, s = 0;

    hp_plan_rank_stage(p, r, &v, &s);
    const struct hp_gpu *g = &d->job.cl.gpus[p->vws[v].stages[s].gpu];
    snprintf(buf, n, "rank %d (VW %d stage %d, %s on %s)", r, v, s, d->job.db.types[g->type].name,
             d->job.cl.nodes[g->node].name);
}

/* A stage's forward and backward time per minibatch, measured at the plan's scale (ms). */
static double stage_busy_ms(const struct hp_jobdata *d, const struct hp_stats *s)
{
    return s && s->minibatches > 0
               ? 1e3 * (s->compute_s + s->pad_s) / s->minibatches / hp_jobdata_scale(d)
               : -1.0;
}

/* What stage_busy_ms measures, as planned (ms): the passes, and under emulation also the
 * sends, whose padding the ranks count with the passes'. */
static double stage_planned_ms(const struct hp_jobdata *d, const struct hp_stage_plan *st)
{
    return 1e3 * (st->compute_s + (d->emulated ? st->transfer_s : 0.0));
}

static int stage_slow(const struct hp_jobdata *d, int r)
{
    const struct hp_plan *p = &d->job.plan;
    int v = 0, s = 0;

    hp_plan_rank_stage(p, r, &v, &s);
    const double planned = stage_planned_ms(d, &p->vws[v].stages[s]);
    const double busy = stage_busy_ms(d, hp_jobdata_stats(d, r));
    return busy > 0.0 && planned > 0.0 && planned / busy < 0.8;
}

static void warn_slow(struct wlist *w, const struct hp_jobdata *d)
{
    const struct hp_plan *p = &d->job.plan;
    const int workers = hp_plan_first_shard(p);
    const double S = hp_jobdata_scale(d);
    int slow = 0, measured = 0;
    char name[256];

    for (int r = 0; r < workers; r++) {
        measured += stage_busy_ms(d, hp_jobdata_stats(d, r)) > 0.0;
        slow += stage_slow(d, r);
    }
    if (!d->emulated && slow == measured && slow > 1) {
        warn(w, "warn",
             "all %d stages ran slower than planned (below 0.8 x the plan's images/s) "
             "without emulation (emulate = 0): the ranks ran at this machine's own speed, not at "
             "the planned GPUs' (a CPU run with --emulate off does); ratios in the table",
             slow);
        return;
    }
    for (int r = 0; r < workers; r++) {
        if (!stage_slow(d, r))
            continue;
        int v = 0, s = 0;
        hp_plan_rank_stage(p, r, &v, &s);
        const double planned = stage_planned_ms(d, &p->vws[v].stages[s]);
        const double busy = stage_busy_ms(d, hp_jobdata_stats(d, r));
        who(d, r, name, sizeof(name));
        warn(w, "warn",
             "%s is slower than planned: its forward and backward passes%s took %.3f ms per "
             "minibatch%s against %.3f ms planned, %.0f images/s against %.0f (ratio %.2f)",
             name, d->emulated ? " and sends" : "", busy, d->emulated ? " (measured / S)" : "",
             planned, p->opts.batch / (busy / 1e3), p->opts.batch / (planned / 1e3),
             planned / busy);
    }
    for (int v = 0; v < p->nvws; v++) {
        const struct hp_stats *s = hp_jobdata_stats(d, hp_plan_stage_rank(p, v, 0));
        const double pace = hp_jobdata_vw_pace(d, v);
        if (s && s->minibatches > 0 && s->images_per_s * S < 0.8 * pace && (d->emulated || !slow))
            warn(w, "warn",
                 "VW %d ran slower than planned: %.0f images/s%s against %.0f "
                 "predicted%s (ratio %.2f)",
                 v, s->images_per_s * S, d->emulated ? " (measured x S)" : "", pace,
                 pace < p->vws[v].rate ? " at the pace of the slowest VW" : "",
                 s->images_per_s * S / pace);
    }
}

/* VW v's waits and compute from its timeline parts (1), else its stats (2), else 0. */
static int vw_waits(const struct hp_jobdata *d, int v, double *wsp, double *recv, double *comp)
{
    const struct hp_plan *p = &d->job.plan;
    int tl = 1, st = 1;

    *wsp = *recv = *comp = 0.0;
    for (int s = 0; s < p->vws[v].nstages; s++) {
        const int r = hp_plan_stage_rank(p, v, s);
        tl &= d->tl[r].have;
        st &= hp_jobdata_stats(d, r) != NULL;
    }
    for (int s = 0; (tl || st) && s < p->vws[v].nstages; s++) {
        const int r = hp_plan_stage_rank(p, v, s);
        const struct hp_stats *x = hp_jobdata_stats(d, r);
        *wsp += tl ? d->tl[r].sums.wsp : 0.0;
        *recv += tl ? d->tl[r].sums.recv : x->comm_s;
        *comp += tl ? d->tl[r].sums.compute : x->compute_s + x->pad_s;
    }
    return tl ? 1 : st ? 2 : 0;
}

static void warn_waits(struct wlist *w, const struct hp_jobdata *d)
{
    const struct hp_plan *p = &d->job.plan;
    double wsp, recv, comp;

    for (int v = 0; v < p->nvws; v++) {
        const int from = vw_waits(d, v, &wsp, &recv, &comp);
        if (from == 1 && wsp + recv > comp)
            warn(w, "warn",
                 "VW %d waits more than it computes: %.2f s waiting (WSP gate %.2f s, "
                 "receives %.2f s) against %.2f s of forward and backward passes over its %d "
                 "stage%s (timeline)",
                 v, wsp + recv, wsp, recv, comp, p->vws[v].nstages,
                 p->vws[v].nstages == 1 ? "" : "s");
        else if (from == 2 && recv > comp)
            warn(w, "warn",
                 "VW %d waits more than it computes: %.2f s in communication and waits "
                 "against %.2f s of compute and emulation padding over its %d stage%s (stats: "
                 "comm_s against compute_s + pad_s)",
                 v, recv, comp, p->vws[v].nstages, p->vws[v].nstages == 1 ? "" : "s");
    }
}

/* Each first stage's data input: how fast it decoded, how full its queue was; a warning when
 * the pipeline waited for data more than 2% of its training time in the steady state (the
 * waits for an epoch's first minibatch, while the queue fills, left out), with the threads that
 * would have kept up (the images/s it trained at without the waits, over one thread's rate). */
static void warn_data(struct wlist *w, const struct hp_jobdata *d)
{
    const struct hp_plan *p = &d->job.plan;

    for (int r = 0; r < p->nranks; r++) {
        const struct hp_stats *x = hp_jobdata_stats(d, r);
        if (!x || !x->has_data || x->train_s <= 0)
            continue;
        int v, st;
        if (hp_plan_rank_stage(p, r, &v, &st))
            continue;
        const double wait = x->data_wait_s - x->data_wait_start_s;
        const double share = wait / x->train_s;
        const double per_thread = x->data_decode_s > 0 ? x->data_decoded / x->data_decode_s : 0;
        const double busy = x->train_s - wait;
        const double need = busy > 0 ? (double)x->minibatches * p->opts.batch / busy : 0;
        if (x->data_skipped > 0)
            warn(w, "warn",
                 "VW %d (rank %d): %.0f samples could not be decoded and were skipped "
                 "(--data-on-error skip; rank-%d.log names them)",
                 v, r, x->data_skipped, r);
        /* the threads that keep up: the rate it trains at without the waits over one thread's
         * (CPU time), or, where the threads did not get their CPU (a loaded machine), the
         * threads it had scaled by the time it would have taken without the waits */
        const double by_rate = per_thread > 0 ? ceil(need / per_thread) : 0;
        const double by_time = busy > 0 ? ceil(x->data_threads * x->train_s / busy) : 0;
        const double threads = by_rate > by_time ? by_rate : by_time;
        if (share > 0.02 && per_thread > 0)
            warn(w, "warn",
                 "VW %d (rank %d) waited %.2f s for data, %.1f%% of its training time (the "
                 "first minibatch of each epoch left out): %.0f "
                 "decoding %s %.1f images/s each, and it trains %.1f images/s; "
                 "about %.0f thread%s would keep up (--data-threads, on as many cores)",
                 v, r, wait, 100 * share, x->data_threads,
                 x->data_threads == 1 ? "thread prepares" : "threads prepare", per_thread, need,
                 threads, threads == 1 ? "" : "s");
        else if (x->data_threads > 0)
            warn(w, "note",
                 "VW %d (rank %d) data input: %.0f decoding thread%s at %.1f images/s each, "
                 "queue %.1f of %.0f minibatches ready on average, waited %.1f%% of its "
                 "training time",
                 v, r, x->data_threads, x->data_threads == 1 ? "" : "s", per_thread,
                 x->data_depth_mean, x->data_queue, 100 * share);
        else
            warn(w, "note",
                 "VW %d (rank %d) data input: samples held in memory, copied at %.0f a second "
                 "in the rank's own thread, waited %.1f%% of its training time",
                 v, r, per_thread, 100 * share);
    }
}

static void warn_memory(struct wlist *w, const struct hp_jobdata *d)
{
    const struct hp_plan *p = &d->job.plan;
    char name[256];

    for (int r = 0; r < hp_plan_first_shard(p); r++) {
        int v = 0, s = 0;
        hp_plan_rank_stage(p, r, &v, &s);
        const struct hp_stage_plan *st = &p->vws[v].stages[s];
        const struct hp_gpu_type *t = &d->job.db.types[d->job.cl.gpus[st->gpu].type];
        const double cap = t->memory_gib * GIB;
        const struct hp_stats *x = hp_jobdata_stats(d, r);
        const double peak = x ? x->mem_peak : 0.0;
        who(d, r, name, sizeof(name));
        if (cap > 0.0 && (st->memory > 0.9 * cap || peak > 0.9 * cap))
            warn(w, "warn",
                 "%s is near its GPU's memory: %.2f GiB %s, %.0f%% of the %s's %.1f "
                 "GiB (above 90%% leaves little room for the CUDA context and fragmentation)",
                 name, fmax(st->memory, peak) / GIB,
                 st->memory >= peak ? "predicted" : "measured at its peak",
                 100.0 * fmax(st->memory, peak) / cap, t->name, t->memory_gib);
    }
}

static void page_warnings(FILE *f, const struct hp_jobdata *d, const struct hp_jobdata *const *more,
                          int nmore)
{
    struct wlist w = {f, 0};

    fputs("<section id=\"warnings\"><h2>Warnings</h2>\n<ul class=\"warnings\">\n", f);
    warn_slow(&w, d);
    warn_waits(&w, d);
    warn_data(&w, d);
    warn_memory(&w, d);
    for (int r = 0; r < d->job.plan.nranks; r++) {
        const struct hp_log_note *l = &d->logs[r];
        if (l->errors || l->warnings)
            warn(&w, "warn", "rank-%d.log: %d error%s, %d warning%s; first: %s", r, l->errors,
                 l->errors == 1 ? "" : "s", l->warnings, l->warnings == 1 ? "" : "s",
                 l->errors ? l->first_error : l->first_warning);
    }
    if (w.n == 0)
        warn(&w, "ok",
             "none: every stage within 0.8 x its plan, no VW waiting more than it "
             "computes, every GPU below 90%% of its memory, no errors in the rank logs");
    for (int i = 0; i < d->nnotes; i++)
        warn(&w, "note", "%s", d->notes[i]);
    for (int i = 0; i < nmore; i++)
        if (!more[i]->nmetrics)
            warn(&w, "note", "%s: no metrics to compare (no metrics.csv, or no lines in it)",
                 more[i]->dir);
    fputs("</ul></section>\n", f);
}

/* ---- throughput table -------------------------------------------------------------------- */

static void td_ratio(FILE *f, double meas, double pred)
{
    if (meas > 0.0 && pred > 0.0 && isfinite(meas) && isfinite(pred))
        fprintf(f, "<td%s>%.2f</td>", meas / pred < 0.8 ? " class=\"bad\"" : "", meas / pred);
    else
        fputs("<td>-</td>", f);
}

static void td_num(FILE *f, const char *fmt, double x)
{
    if (x >= 0.0 && isfinite(x)) {
        fputs("<td>", f);
        fprintf(f, fmt, x);
        fputs("</td>", f);
    } else {
        fputs("<td>-</td>", f);
    }
}

static void table_stage(FILE *f, const struct hp_jobdata *d, int v, int s)
{
    const struct hp_plan *p = &d->job.plan;
    const struct hp_stage_plan *st = &p->vws[v].stages[s];
    const struct hp_gpu *g = &d->job.cl.gpus[st->gpu];
    const int r = hp_plan_stage_rank(p, v, s);
    const struct hp_stats *x = hp_jobdata_stats(d, r);
    const double busy = stage_busy_ms(d, x), planned = stage_planned_ms(d, st);
    const struct hp_model *m = d->job.model;

    tag(f, "<tr><td class=\"l\">", "</td>", "stage %d", s);
    fprintf(f, "<td>%d</td>", r);
    tag(f, "<td class=\"l\">", "</td>", "%s on %s", d->job.db.types[g->type].name,
        d->job.cl.nodes[g->node].name);
    tag(f, "<td class=\"l\">", "</td>", "%d-%d%s%s%s%s", st->u0, st->u1 - 1, m ? " " : "",
        m ? m->units[st->u0].name : "", m && st->u1 - st->u0 > 1 ? ".." : "",
        m && st->u1 - st->u0 > 1 ? m->units[st->u1 - 1].name : "");
    td_num(f, "%.3f", planned);
    td_num(f, "%.3f", busy);
    td_num(f, "%.2f", x ? x->comm_s : -1.0);
    td_num(f, "%.0f", p->opts.batch / (planned / 1e3));
    td_num(f, "%.0f", busy > 0 ? p->opts.batch / (busy / 1e3) : -1.0);
    td_ratio(f, busy > 0 ? 1.0 / busy : -1.0, 1.0 / planned);
    fprintf(f, "<td>%.2f / %.1f", st->memory / GIB, d->job.db.types[g->type].memory_gib);
    if (x && x->mem_peak > 0)
        fprintf(f, " (peak %.2f)", x->mem_peak / GIB);
    fputs("</td></tr>\n", f);
}

static void table_vw(FILE *f, const struct hp_jobdata *d, int v)
{
    const struct hp_plan *p = &d->job.plan;
    const struct hp_stats *x = hp_jobdata_stats(d, hp_plan_stage_rank(p, v, 0));
    const double pace = hp_jobdata_vw_pace(d, v);
    const double meas = x && x->minibatches > 0 ? x->images_per_s * hp_jobdata_scale(d) : -1.0;

    tag(f, "<tr class=\"vw\"><td class=\"l\" colspan=\"4\">", "</td>", "VW %d: %d stage%s, Nm %d%s",
        v, p->vws[v].nstages, p->vws[v].nstages == 1 ? "" : "s", p->vws[v].nm,
        pace < p->vws[v].rate ? " (at the pace of the slowest VW)" : "");
    fputs("<td></td><td></td><td></td>", f);
    td_num(f, "%.0f", pace);
    td_num(f, "%.0f", meas);
    td_ratio(f, meas, pace);
    fputs("<td></td></tr>\n", f);
    for (int s = 0; s < p->vws[v].nstages; s++)
        table_stage(f, d, v, s);
}

static void page_table(FILE *f, const struct hp_jobdata *d)
{
    const struct hp_plan *p = &d->job.plan;
    const double meas = job_measured(d);

    fputs("<section id=\"throughput\"><h2>Throughput: predicted and measured</h2>\n", f);
    if (d->emulated)
        tag(f, "<p>", "</p>\n",
            "Measured times are divided, measured rates multiplied, by the emulation scale "
            "S = %.4g, so that they compare with the plan's figures for the GPUs.",
            hp_jobdata_scale(d));
    fprintf(f,
            "<p>A stage's images/s is the batch over its time per minibatch in forward and "
            "backward passes%s (what it could do alone); a VW's and the job's are what they "
            "did; comm s: the stage's seconds in communication and waits.</p>\n",
            d->emulated ? " and sends, as the ranks pace them" : "");
    fputs("<table>\n<tr><th "
          "class=\"l\"></th><th>rank</th><th class=\"l\">GPU</th><th class=\"l\">units</th>"
          "<th>ms per minibatch planned</th><th>ms per minibatch measured</th><th>comm s</th>"
          "<th>images/s "
          "predicted</th><th>images/s measured</th><th>ratio</th><th>memory GiB predicted / "
          "GPU</th></tr>\n",
          f);
    tag(f, "<tr class=\"job\"><td class=\"l\" colspan=\"4\">", "</td>", "job: %d VW%s", p->nvws,
        p->nvws == 1 ? "" : "s");
    fputs("<td></td><td></td><td></td>", f);
    td_num(f, "%.0f", p->rate);
    td_num(f, "%.0f", meas >= 0 ? meas * hp_jobdata_scale(d) : -1.0);
    td_ratio(f, meas * hp_jobdata_scale(d), p->rate);
    fputs("<td></td></tr>\n", f);
    for (int v = 0; v < p->nvws; v++)
        table_vw(f, d, v);
    fputs("</table></section>\n", f);
}

/* ---- the runs of a requeued job ------------------------------------------------------------ */

#define MAX_PARTS 64

/* What interruption k (between part k-1 and part k) cost. */
struct lost {
    long samples;   /* trained in part k-1 after the checkpoint part k resumed from: redone */
    double train_s; /* the time part k-1 spent on them */
    double gap_s;   /* from part k-1's end to part k's start (queue, start, loading) */
};

/* A job of several runs (rundir.h: JOB_DIR, JOB_DIR/run-1, ...). The page shows `merged`: the
 * last run (a shallow copy of parts[nparts - 1], owning nothing but `all`) with the job
 * directory's name and every run's metrics, on the clock of the job's first start. parts[0] is
 * a shallow copy of the caller's data of the job directory; the others are owned. */
struct jobview {
    struct hp_jobdata parts[MAX_PARTS];
    int nparts;
    struct hp_jobdata merged;
    struct hp_metric *all;
    double offset[MAX_PARTS]; /* part k's start, seconds after part 0's */
    struct lost lost[MAX_PARTS];
    struct hp_fig_mark marks[MAX_PARTS];
};

static long samples_at(const struct hp_jobdata *d, const struct hp_metric *m)
{
    return m->step * (long)d->job.plan.opts.batch;
}

/* Part p's last position (samples) and the seconds it had trained then. */
static void part_end(const struct hp_jobdata *d, long *samples, double *seconds)
{
    *samples = d->have_rec && d->rec.resumed_samples > 0 ? d->rec.resumed_samples : 0;
    *seconds = 0.0;
    for (int i = 0; i < d->nmetrics; i++) {
        *samples =
            samples_at(d, &d->metrics[i]) > *samples ? samples_at(d, &d->metrics[i]) : *samples;
        *seconds = fmax(*seconds, d->metrics[i].seconds);
    }
}

/* Offsets, interruptions and marks of parts 1 .. n-1. */
static void view_times(struct jobview *v)
{
    for (int k = 1; k < v->nparts; k++) {
        const struct hp_jobdata *a = &v->parts[k - 1], *b = &v->parts[k];
        const long start = a->have_rec && a->rec.resumed_samples > 0 ? a->rec.resumed_samples : 0;
        const long resumed = b->have_rec && b->rec.resumed_samples > 0 ? b->rec.resumed_samples : 0;
        long reached;
        double trained;

        part_end(a, &reached, &trained);
        const double a_end = a->have_rec && a->rec.ended > 0.0 ? a->rec.ended
                             : a->have_rec                     ? a->rec.started + trained
                                                               : 0.0;
        v->lost[k].samples = reached > resumed ? reached - resumed : 0;
        v->lost[k].train_s = reached > start && trained > 0.0
                                 ? trained * (double)v->lost[k].samples / (double)(reached - start)
                                 : 0.0;
        v->lost[k].gap_s = b->have_rec && a_end > 0.0 ? fmax(0.0, b->rec.started - a_end) : NAN;
        v->offset[k] = b->have_rec && v->parts[0].have_rec
                           ? b->rec.started - v->parts[0].rec.started
                           : v->offset[k - 1] + trained;
        v->marks[k - 1].seconds = v->offset[k];
        v->marks[k - 1].samples = (double)resumed;
        snprintf(v->marks[k - 1].label, sizeof(v->marks[k - 1].label), "restart %d",
                 b->have_rec ? b->rec.restart : k);
    }
}

/* Every part's metrics into v->all, on the job's clock; the merged view. 0, or -HP_ENOMEM. */
static int view_merge(struct jobview *v)
{
    size_t n = 0;

    for (int k = 0; k < v->nparts; k++)
        n += (size_t)v->parts[k].nmetrics;
    if (!(v->all = calloc(n + 1, sizeof(*v->all)))) {
        hp_error("report: out of memory");
        return -HP_ENOMEM;
    }
    n = 0;
    for (int k = 0; k < v->nparts; k++)
        for (int i = 0; i < v->parts[k].nmetrics; i++, n++) {
            v->all[n] = v->parts[k].metrics[i];
            v->all[n].seconds += v->offset[k];
            v->all[n].part = k;
        }
    v->merged = v->parts[v->nparts - 1];
    snprintf(v->merged.dir, sizeof(v->merged.dir), "%s", v->parts[0].dir);
    snprintf(v->merged.name, sizeof(v->merged.name), "%s", v->parts[0].name);
    v->merged.metrics = v->all;
    v->merged.nmetrics = (int)n;
    v->merged.have_metrics = n > 0;
    return 0;
}

/* The later runs of the job in dir (dir/run-1, dir/run-2, ... in that order) after parts[0]. */
static int view_load(struct jobview *v, const char *dir, const char *config)
{
    char path[4200];

    for (int k = 1; k < 10000 && v->nparts < MAX_PARTS; k++) {
        snprintf(path, sizeof(path), "%s/run-%d", dir, k);
        if (!hp_rundir_is_job(path))
            continue;
        if (hp_jobdata_load(&v->parts[v->nparts], path, config) == 0) {
            v->nparts++;
            continue;
        }
        hp_jobdata_release(&v->parts[v->nparts]); /* the cause is logged */
        hp_warn("report: %s is left out of the job's runs", path);
    }
    if (v->nparts < 2)
        return 0;
    view_times(v);
    return view_merge(v);
}

static void view_release(struct jobview *v)
{
    for (int k = 1; k < v->nparts; k++) /* parts[0] is the caller's */
        hp_jobdata_release(&v->parts[k]);
    free(v->all);
}

static void utc(double t, char *buf, size_t n)
{
    const time_t s = (time_t)t;
    struct tm tm;

    if (t > 0.0 && gmtime_r(&s, &tm))
        strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
    else
        snprintf(buf, n, "unknown");
}

static void runs_row(FILE *f, const struct jobview *v, int k)
{
    const struct hp_jobdata *d = &v->parts[k];
    char a[64], b[64], gpus[512], before[512] = "";

    utc(d->have_rec ? d->rec.started : 0.0, a, sizeof(a));
    utc(d->have_rec ? d->rec.ended : 0.0, b, sizeof(b));
    gpu_summary(d, 0, gpus, sizeof(gpus));
    tag(f, "<tr><td>", "</td>", "%s", k ? d->name : "the job directory");
    tag(f, "<td>", "</td>", "%d", d->have_rec ? d->rec.restart : k);
    tag(f, "<td>", "</td>", "%s", a);
    tag(f, "<td>", "</td>", "%s", b);
    if (d->have_rec && d->rec.status >= 0)
        fprintf(f, "<td>%d%s</td>", d->rec.status,
                d->rec.status == 75 ? " (checkpointed, stopped)" : "");
    else
        fputs("<td>unknown</td>", f);
    if (d->have_rec && d->rec.resumed_seq >= 0)
        fprintf(f, "<td>checkpoint %ld (%ld samples)</td>", d->rec.resumed_seq,
                d->rec.resumed_samples);
    else
        fputs("<td>the beginning</td>", f);
    if (k)
        gpu_summary(&v->parts[k - 1], 0, before, sizeof(before));
    tag(f, "<td>", "</td>", "%s%s", gpus, k && strcmp(gpus, before) ? " (changed)" : "");
    if (k)
        fprintf(f, "<td>%ld samples, %.1f s</td><td>%.1f s</td><td>%.1f s</td></tr>\n",
                v->lost[k].samples, v->lost[k].train_s, v->lost[k].gap_s,
                v->lost[k].train_s + v->lost[k].gap_s);
    else
        fputs("<td></td><td></td><td></td></tr>\n", f);
}

static void page_runs(FILE *f, const struct jobview *v)
{
    double total = 0.0;

    fputs("<section id=\"runs\"><h2>Runs of the job</h2>\n", f);
    tag(f, "<p>", "</p>\n",
        "%d runs: the job was restarted %d time%s (requeued), each run in its own directory of "
        "the job's. The curves below cover every run, each restart marked; the other sections "
        "are about the last run, %s. Time lost to an interruption: the training done after the "
        "checkpoint the next run resumed from (redone), and the wall-clock gap from the end of "
        "one run to the start of the next.",
        v->nparts, v->nparts - 1, v->nparts == 2 ? "" : "s", v->parts[v->nparts - 1].name);
    fputs("<table class=\"runs\">\n<tr><th>run</th><th>restart</th><th>started (UTC)</th>"
          "<th>ended (UTC)</th><th>exit status</th><th>resumed from</th><th>GPUs of its plan</th>"
          "<th>training redone</th><th>gap</th><th>time lost</th></tr>\n",
          f);
    for (int k = 0; k < v->nparts; k++) {
        runs_row(f, v, k);
        total += k ? v->lost[k].train_s + v->lost[k].gap_s : 0.0;
    }
    fprintf(f,
            "<tr><td colspan=\"9\">time lost to %d interruption%s</td><td>%.1f s</td></tr>\n"
            "</table></section>\n",
            v->nparts - 1, v->nparts == 2 ? "" : "s", total);
}

/* The plans of the earlier runs, when the GPUs changed from one run to another. */
static void figures_plans(FILE *f, const struct jobview *v)
{
    char a[512], b[512];
    int changed = 0;

    for (int k = 1; v && k < v->nparts; k++) {
        gpu_summary(&v->parts[k - 1], 0, a, sizeof(a));
        gpu_summary(&v->parts[k], 0, b, sizeof(b));
        changed |= strcmp(a, b) != 0;
    }
    for (int k = 0; changed && k < v->nparts - 1; k++) {
        gpu_summary(&v->parts[k], 1, a, sizeof(a));
        fprintf(f, "<figure id=\"fig-plan-run-%d\">", k);
        tag(f, "<figcaption>", "</figcaption>\n",
            "The plan of run %d of the job (%s): the GPUs changed between runs.", k, a);
        hp_fig_plan(f, &v->parts[k]);
        fputs("</figure>\n", f);
    }
}

/* ---- pictures and footer ----------------------------------------------------------------- */

static void page_figures(FILE *f, const struct hp_jobdata *const *runs, int nruns,
                         const struct jobview *v)
{
    const struct hp_jobdata *d = runs[0];

    fputs("<section id=\"pictures\"><h2>Pictures</h2>\n<figure id=\"fig-pipeline\">"
          "<figcaption>The pipeline from wave 1 on, a few waves long: one row per GPU (rank), "
          "time to the right. Forward passes solid, backward passes hatched, one colour per "
          "minibatch (F/B and its number where there is room); grey: waiting to receive, red: "
          "waiting at the WSP gate for slower VWs, purple: pushes and pulls; empty space is a "
          "bubble. Hover over a block for its times.</figcaption>\n",
          f);
    hp_fig_pipeline(f, d);
    fputs("</figure>\n<figure id=\"fig-curves\"><figcaption>Loss and accuracy against time and "
          "against samples: lines are the training loss and accuracy of each log line, dashed "
          "lines with points the test set's.</figcaption>\n",
          f);
    hp_fig_curves(f, runs, nruns, v ? v->marks : NULL, v ? v->nparts - 1 : 0);
    fputs("</figure>\n<figure id=\"fig-plan\"><figcaption>The plan: each virtual worker with its "
          "GPUs in pipeline order (type, node, device, the units of its stage, planned memory "
          "against the GPU's, the measured peak marked); then which units each parameter-server "
          "shard holds.</figcaption>\n",
          f);
    hp_fig_plan(f, d);
    fputs("</figure>\n", f);
    figures_plans(f, v);
    fputs("</section>\n", f);
}

static void page_footer(FILE *f, const struct hp_jobdata *const *runs, int nruns,
                        const struct jobview *v)
{
    const struct hp_jobdata *d = runs[0];
    const int n = d->job.plan.nranks;

    fputs("<footer><h2>Files</h2><ul>\n", f);
    tag(f, "<li>", "</li>\n", "run directory %s: plan.ini (model %s, cluster %s)", d->dir,
        d->job.plan.model, d->job.cl.name);
    tag(f, "<li>", "</li>\n",
        "%d stats file%s (stats.R), %s, %d timeline part%s (timeline.R), "
        "%d rank log%s (rank-R.log), of %d ranks",
        d->nstats, d->nstats == 1 ? "" : "s", d->have_metrics ? "metrics.csv" : "no metrics.csv",
        d->ntl, d->ntl == 1 ? "" : "s", d->nlogs, d->nlogs == 1 ? "" : "s", n);
    for (int k = 1; v && k < v->nparts; k++)
        tag(f, "<li>", "</li>\n", "run %d of the job: %s (run.ini, plan.ini%s)%s", k,
            v->parts[k].dir, v->parts[k].have_metrics ? ", metrics.csv" : "",
            k == v->nparts - 1 ? "; the counts above are this run's" : "");
    tag(f, "<li>", "</li>\n", "site config (GPU types) %s", d->job.config);
    for (int i = 1; i < nruns; i++)
        tag(f, "<li>", "</li>\n", "compared with %s: plan.ini%s", runs[i]->dir,
            runs[i]->have_metrics ? ", metrics.csv" : "");
    fputs("</ul><p>Written by hetpipe report.</p></footer>\n", f);
}

static void page(FILE *f, const struct hp_jobdata *const *runs, int nruns, const struct jobview *v)
{
    const struct hp_jobdata *d = runs[0];

    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
          f);
    tag(f, "<title>", "</title>\n", "hetpipe report: %s", d->name);
    fputs(error_catcher, f);
    fprintf(f, "<style>\n%s</style></head>\n<body>\n", css);
    page_header(f, d);
    if (v)
        page_runs(f, v);
    page_warnings(f, d, runs + 1, nruns - 1);
    page_table(f, d);
    page_figures(f, runs, nruns, v);
    page_footer(f, runs, nruns, v);
    fputs(check_script, f);
    fputs("</body></html>\n", f);
}

int hp_report_write(const char *run_dir, const char *const *more, int nmore, const char *out,
                    const char *config)
{
    struct hp_jobdata *runs = calloc((size_t)nmore + 1, sizeof(*runs));
    const struct hp_jobdata **view = calloc((size_t)nmore + 1, sizeof(*view));
    struct jobview *job = NULL;
    char path[4200];
    int rc = 0, loaded = 0;
    FILE *f;

    if (!runs || !view) {
        hp_error("report: out of memory");
        free(runs);
        free(view);
        return -HP_ENOMEM;
    }
    for (int i = 0; i <= nmore && !rc; i++, loaded++) {
        rc = hp_jobdata_load(&runs[i], i ? more[i - 1] : run_dir, config);
        view[i] = &runs[i];
    }
    if (!rc && !(job = calloc(1, sizeof(*job)))) {
        hp_error("report: out of memory");
        rc = -HP_ENOMEM;
    }
    if (!rc) {
        job->parts[0] = runs[0];
        job->nparts = 1;
        rc = view_load(job, runs[0].dir, config);
        if (job->nparts > 1 && !rc)
            view[0] = &job->merged; /* the whole job */
    }
    if (!rc) {
        snprintf(path, sizeof(path), "%s/report.html", runs[0].dir);
        if (!(f = hp_out_open(out ? out : path, "report", 0666))) {
            rc = -HP_EIO;
        } else {
            page(f, view, nmore + 1, job->nparts > 1 ? job : NULL);
            rc = hp_out_close(f, 1) ? -HP_EIO : 0; /* checks the writes, logs a failure */
        }
    }
    if (job)
        view_release(job);
    free(job);
    for (int i = 0; i < loaded; i++)
        hp_jobdata_release(&runs[i]);
    free(runs);
    free(view);
    return rc;
}
