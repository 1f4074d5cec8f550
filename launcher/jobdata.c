/* jobdata.c - what a finished job left in its run directory (jobdata.h). */
#include "jobdata.h"

#include "feed.h"

#include "error.h"
#include "infile.h"
#include "log.h"
#include "parse.h"
#include "planfile.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void note(struct hp_jobdata *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A note for the page (the last slot says that more were left out). */
static void note(struct hp_jobdata *d, const char *fmt, ...)
{
    va_list ap;

    if (d->nnotes >= HP_JD_NOTES)
        return;
    if (d->nnotes == HP_JD_NOTES - 1) {
        snprintf(d->notes[d->nnotes++], sizeof(d->notes[0]), "(more notes left out)");
        return;
    }
    va_start(ap, fmt);
    vsnprintf(d->notes[d->nnotes++], sizeof(d->notes[0]), fmt, ap);
    va_end(ap);
}

/* Leading and trailing blanks and the line end off s, in place. */
static char *trim(char *s)
{
    char *e;

    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
        *--e = '\0';
    return s;
}

static const struct {
    const char *key;
    size_t off;
} stat_keys[] = {
#define K(name)                                                                                    \
    {                                                                                              \
#name, offsetof(struct hp_stats, name)                                                     \
    }
    K(emulate),         K(train_s),       K(compute_s),    K(pad_s),
    K(comm_s),          K(other_s),       K(images_per_s), K(predicted_images_per_s),
    K(mem_peak),        K(mem_predicted), K(test_acc),     K(cpu_share),
    K(eval_s),          K(job_s),         K(job_paused_s), K(job_images_per_s),
    K(pull_wait_s),     K(data_threads),  K(data_queue),   K(data_decoded),
    K(data_skipped),    K(data_decode_s), K(data_wait_s),  K(data_wait_start_s),
    K(data_depth_mean),
#undef K
};

/* One "key = value" line of a stats file into s; keys it does not know are skipped (later
 * versions may add some). 0, or a message in err. */
static int stats_line(struct hp_stats *s, char *line, char *err, size_t n)
{
    char *eq = strchr(line, '='), *key, *val;
    double x;

    if (!eq) {
        snprintf(err, n, "'%.60s' is not a 'key = value' line", trim(line));
        return -1;
    }
    *eq = '\0';
    key = trim(line);
    val = trim(eq + 1);
    if (strcmp(key, "minibatches") == 0)
        return hp_parse_long(val, 0, 1L << 62, &s->minibatches)
                   ? (snprintf(err, n, "minibatches '%.40s' is not a count", val), -1)
                   : 0;
    for (size_t i = 0; i < sizeof(stat_keys) / sizeof(stat_keys[0]); i++) {
        if (strcmp(key, stat_keys[i].key) != 0)
            continue;
        if (hp_parse_double(val, -1e300, 1e300, &x)) {
            snprintf(err, n, "%s '%.40s' is not a number", key, val);
            return -1;
        }
        *(double *)((char *)s + stat_keys[i].off) = x;
        s->has_job |= strcmp(key, "job_images_per_s") == 0;
        s->has_ps |= strcmp(key, "pull_wait_s") == 0;
        s->has_data |= strcmp(key, "data_threads") == 0;
        return 0;
    }
    return 0;
}

static void load_stats(struct hp_jobdata *d, int r)
{
    char path[4200], line[1024], err[256] = "";
    struct hp_stats s = {0};
    int lineno = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/stats.%d", d->dir, r);
    struct stat st;
    int e;
    if (!(f = hp_infile_fopen(path, 0, &st, &e))) {
        if (e != -ENOENT)
            note(d, "stats.%d: cannot be read (%s); left out", r, hp_infile_why(e, &st));
        return;
    }
    while (!err[0] && fgets(line, sizeof(line), f)) {
        lineno++;
        char *t = trim(line);
        if (*t && *t != '#' && stats_line(&s, t, err, sizeof(err)))
            break;
    }
    fclose(f);
    if (err[0]) {
        note(d, "stats.%d line %d: %s; the file is left out", r, lineno, err);
        return;
    }
    s.have = 1;
    d->stats[r] = s;
    d->nstats++;
}

/* A metrics line "split,epoch,step,seconds,loss,accuracy,images_per_s", or a text model's
 * "split,epoch,step,seconds,loss,perplexity,bits_per_byte,tokens_per_s" (the last may be
 * empty on test lines, bits per byte for token files). 0 or -1. */
static int metric_line(char *line, int text, struct hp_metric *m)
{
    char *field[8], *p = line;
    const int want = text ? 8 : 7;
    long v;
    int n = 0;

    while (n < want) {
        field[n++] = p;
        if (!(p = strchr(p, ',')))
            break;
        *p++ = '\0';
    }
    if (n != want || p)
        return -1;
    if (strcmp(field[0], "train") != 0 && strcmp(field[0], "test") != 0)
        return -1;
    m->test = field[0][1] == 'e';
    if (hp_parse_long(field[1], 0, 1L << 30, &v))
        return -1;
    m->epoch = (int)v;
    if (hp_parse_long(field[2], 0, 1L << 62, &m->step) ||
        hp_parse_double(field[3], 0.0, 1e12, &m->seconds) ||
        hp_parse_double(field[4], -1e300, 1e300, &m->loss))
        return -1;
    m->images_per_s = 0.0;
    m->perplexity = m->bits_per_byte = m->accuracy = NAN;
    if (text)
        return hp_parse_double(field[5], 0.0, 1e300, &m->perplexity) ||
                       (*field[6] && hp_parse_double(field[6], 0.0, 1e300, &m->bits_per_byte)) ||
                       (*field[7] && hp_parse_double(field[7], 0.0, 1e300, &m->images_per_s))
                   ? -1
                   : 0;
    if (hp_parse_double(field[5], 0.0, 1.0, &m->accuracy))
        return -1;
    return *field[6] && hp_parse_double(field[6], 0.0, 1e300, &m->images_per_s) ? -1 : 0;
}

static int load_metrics(struct hp_jobdata *d)
{
    static const char header[] = HP_METRICS_HEADER, text_header[] = HP_METRICS_HEADER_TEXT;
    char path[4200], line[1024];
    int lineno = 1, cap = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/metrics.csv", d->dir);
    struct stat st;
    int e;
    if (!(f = hp_infile_fopen(path, 0, &st, &e))) {
        note(d,
             "no metrics.csv%s%s: no loss or accuracy curves (the job ran without --metrics "
             "DIR/metrics.csv)",
             e == -ENOENT ? "" : ": ", e == -ENOENT ? "" : hp_infile_why(e, &st));
        return 0;
    }
    const int got = fgets(line, sizeof(line), f) != NULL;
    d->text = got && strcmp(trim(line), text_header) == 0;
    if (!got || (strcmp(line, header) != 0 && !d->text)) {
        note(d, "metrics.csv: the first line is neither '%s' nor '%s'; left out", header,
             text_header);
        fclose(f);
        return 0;
    }
    d->have_metrics = 1;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *t = trim(line);
        if (!*t)
            continue;
        if (d->nmetrics == cap) {
            struct hp_metric *m =
                realloc(d->metrics, (size_t)(cap = cap ? 2 * cap : 64) * sizeof(*m));
            if (!m) {
                fclose(f);
                hp_error("report: out of memory reading '%s'", path);
                return -HP_ENOMEM;
            }
            d->metrics = m;
        }
        if (metric_line(t, d->text, &d->metrics[d->nmetrics])) {
            note(d,
                 "metrics.csv line %d: not 'train|test,EPOCH,STEP,SECONDS,LOSS,%s'; the lines "
                 "from there on are left out",
                 lineno,
                 d->text ? "PERPLEXITY,BITS_PER_BYTE,TOKENS_PER_S" : "ACCURACY,IMAGES_PER_S");
            break;
        }
        d->nmetrics++;
    }
    fclose(f);
    return 0;
}

/* Part r's sums over all its events, and its events cut to the first ones: up to the first
 * with a minibatch past 8 waves + 4 x its stages + 16 (the pipeline picture shows waves 1 to
 * 4 or so of each VW; the slack covers VWs ahead of others), on rank 0's clock. */
static void keep_window(struct hp_tl_part *p)
{
    const long last_mb = 8L * (p->meta.nm > 0 ? p->meta.nm : 1) + 4L * p->meta.stages + 16;
    long keep = p->n;

    for (long i = 0; i < p->n; i++) {
        struct hp_tl_event *e = &p->ev[i];
        const double dt = e->t1 - e->t0;
        if (e->kind == HP_TL_FWD || e->kind == HP_TL_BWD)
            p->sums.compute += dt;
        else if (e->kind == HP_TL_RECV_ACT || e->kind == HP_TL_RECV_GRAD)
            p->sums.recv += dt;
        else if (e->kind == HP_TL_WSP_WAIT)
            p->sums.wsp += dt;
        e->t0 += p->meta.clock_offset_s;
        e->t1 += p->meta.clock_offset_s;
        if (keep == p->n && e->mb > last_mb)
            keep = i;
    }
    p->total = p->n;
    p->n = keep;
    if (keep > 0 && keep < p->total) {
        struct hp_tl_event *ev = realloc(p->ev, (size_t)keep * sizeof(*ev));
        if (ev)
            p->ev = ev;
    }
}

static void load_timelines(struct hp_jobdata *d)
{
    const int n = d->job.plan.nranks;
    int bad = 0;

    for (int r = 0; r < n; r++) {
        struct hp_tl_part *p = &d->tl[r];
        char path[4200], msg[400] = "";
        struct stat st;
        snprintf(path, sizeof(path), "%s/timeline.%d", d->dir, r);
        if (stat(path, &st) != 0)
            continue;
        hp_log_capture(msg, sizeof(msg));
        const int rc = hp_tl_part_read(path, &p->meta, &p->ev, &p->n);
        hp_log_capture(NULL, 0);
        if (rc) {
            if (bad++ < 4)
                note(d, "timeline.%d: %s; left out", r, msg[0] ? msg : hp_strerror(rc));
            continue;
        }
        if (p->meta.rank != r) {
            if (bad++ < 4)
                note(d, "timeline.%d: it says rank %d (a part of another job?); left out", r,
                     p->meta.rank);
            free(p->ev);
            memset(p, 0, sizeof(*p));
            continue;
        }
        p->have = 1;
        d->ntl++;
        keep_window(p);
        if (p->meta.dropped > 0)
            note(d,
                 "timeline.%d: %ld events were not recorded (the rank's buffer was full); "
                 "its sums are short",
                 r, p->meta.dropped);
    }
    if (d->ntl == 0 && !bad)
        note(d, "no timeline (timeline.R files): no pipeline picture; run the job with "
                "--timeline FILE to record one");
}

/* Count rank r's logged errors and warnings and keep the first of each. */
static void load_log(struct hp_jobdata *d, int r)
{
    struct hp_log_note *l = &d->logs[r];
    char path[4200], line[1024];
    FILE *f;

    snprintf(path, sizeof(path), "%s/rank-%d.log", d->dir, r);
    if (!(f = hp_infile_fopen(path, 0, NULL, NULL)))
        return;
    d->nlogs++;
    while (fgets(line, sizeof(line), f)) {
        char *t = trim(line);
        if (strstr(t, ": error: ") && l->errors++ == 0)
            snprintf(l->first_error, sizeof(l->first_error), "%s", t);
        else if (strstr(t, ": warning: ") && l->warnings++ == 0)
            snprintf(l->first_warning, sizeof(l->first_warning), "%s", t);
    }
    fclose(f);
}

/* The site config and the plan; the model when it loads (else a note). */
static int load_plan(struct hp_jobdata *d, const char *config, const char *plan_path)
{
    char path[4096], msg[400] = "";
    int rc;

    if (config)
        snprintf(path, sizeof(path), "%s", config);
    else if ((rc = hp_gpudb_default_path(path, sizeof(path))))
        return rc;
    if ((rc = hp_gpudb_load(path, &d->job.db)))
        return rc;
    snprintf(d->job.config, sizeof(d->job.config), "%s", path);
    if ((rc = hp_planfile_load(plan_path, &d->job.db, &d->job.plan, &d->job.cl, d->job.token)))
        return rc;
    hp_log_capture(msg, sizeof(msg));
    rc = hp_model_load(d->job.plan.model, &d->job.model);
    hp_log_capture(NULL, 0);
    if (rc) {
        d->job.model = NULL;
        snprintf(d->model_note, sizeof(d->model_note),
                 "the model '%.100s' did not load (%.300s): units are shown by number",
                 d->job.plan.model, msg[0] ? msg : hp_strerror(rc));
        note(d, "%s", d->model_note);
    } else if (d->job.model->nunits != d->job.plan.nunits) {
        snprintf(d->model_note, sizeof(d->model_note),
                 "the model '%.100s' has %d units, the plan %d: units are shown by number",
                 d->job.plan.model, d->job.model->nunits, d->job.plan.nunits);
        note(d, "%s", d->model_note);
        hp_model_destroy(d->job.model);
        d->job.model = NULL;
    }
    return 0;
}

/* The directory, checked; its base name. */
static int check_dir(struct hp_jobdata *d, const char *dir, char *plan_path, size_t n)
{
    struct stat st = {0};
    const char *base;
    size_t len = strlen(dir);

    if (len == 0 || len >= sizeof(d->dir) - 32) {
        hp_error("report: the run directory '%.200s' is %s", dir, len ? "too long" : "empty");
        return -HP_EINVAL;
    }
    errno = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        const char *why = errno ? strerror(errno) : "not a directory";
        hp_error("report: '%s': %s; give the run directory of a job (hetpipe run --run-dir DIR "
                 "or --keep, or hetpipe launch's job directory)",
                 dir, why);
        return -HP_ENOTFOUND;
    }
    snprintf(d->dir, sizeof(d->dir), "%s", dir);
    while (len > 1 && d->dir[len - 1] == '/')
        d->dir[--len] = '\0';
    base = strrchr(d->dir, '/');
    snprintf(d->name, sizeof(d->name), "%.255s", base && base[1] ? base + 1 : d->dir);
    snprintf(plan_path, n, "%s/plan.ini", d->dir);
    if (stat(plan_path, &st) != 0) {
        hp_error("report: the directory '%s' holds no plan.ini, so it is not a job's run "
                 "directory (hetpipe run --run-dir DIR or --keep and hetpipe launch leave one)",
                 dir);
        return -HP_ENOTFOUND;
    }
    return 0;
}

int hp_jobdata_load(struct hp_jobdata *d, const char *dir, const char *config)
{
    char plan_path[4200];
    int rc, n;

    memset(d, 0, sizeof(*d));
    d->scale = 1.0;
    if ((rc = check_dir(d, dir, plan_path, sizeof(plan_path))) ||
        (rc = load_plan(d, config, plan_path)))
        return rc;
    n = d->job.plan.nranks;
    d->stats = calloc((size_t)n, sizeof(*d->stats));
    d->tl = calloc((size_t)n, sizeof(*d->tl));
    d->logs = calloc((size_t)n, sizeof(*d->logs));
    if (!d->stats || !d->tl || !d->logs) {
        hp_error("report: out of memory for the %d ranks of '%s'", n, dir);
        return -HP_ENOMEM;
    }
    for (int r = 0; r < hp_plan_first_shard(&d->job.plan); r++)
        load_stats(d, r);
    for (int r = 0; r < n; r++)
        load_log(d, r);
    if (d->nstats == 0)
        note(d, "no stats files (stats.R): no measured throughput or memory; the job ran without "
                "--stats DIR/stats");
    for (int r = 0; r < n; r++)
        if (d->stats[r].have && d->stats[r].emulate > 0.0) {
            d->scale = d->stats[r].emulate;
            d->emulated = 1;
            break;
        }
    if ((rc = load_metrics(d)))
        return rc;
    load_timelines(d);
    rc = hp_runrec_read(d->dir, &d->rec);
    d->have_rec = rc == 0;
    if (rc < 0)
        note(d, "run.ini does not parse (see the message above): the run's times are unknown");
    return 0;
}

void hp_jobdata_release(struct hp_jobdata *d)
{
    if (d->tl)
        for (int r = 0; r < d->job.plan.nranks; r++)
            free(d->tl[r].ev);
    free(d->tl);
    free(d->stats);
    free(d->logs);
    free(d->metrics);
    hp_job_release(&d->job);
    memset(d, 0, sizeof(*d));
}

const struct hp_stats *hp_jobdata_stats(const struct hp_jobdata *d, int r)
{
    return d->stats && r >= 0 && r < d->job.plan.nranks && d->stats[r].have ? &d->stats[r] : NULL;
}

double hp_jobdata_scale(const struct hp_jobdata *d)
{
    return d->scale > 0.0 && isfinite(d->scale) ? d->scale : 1.0;
}

double hp_jobdata_vw_pace(const struct hp_jobdata *d, int v)
{
    const struct hp_plan *p = &d->job.plan;
    const double own = p->vws[v].rate;

    if (p->nvws > 1 && (p->nshards > 0 || p->opts.policy == HP_POLICY_DP) && p->rate > 0.0 &&
        p->rate / p->nvws < own)
        return p->rate / p->nvws;
    return own;
}
