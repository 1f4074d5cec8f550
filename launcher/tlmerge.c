/* tlmerge.c - the ranks' timeline parts merged into one trace-event JSON file (tlmerge.h). */
#include "tlmerge.h"

#include "error.h"
#include "log.h"
#include "output.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define DATA_TID 1000000 /* + rank: a first stage's data track (its waits for input) */

void hp_tl_job_release(struct hp_tl_job *job)
{
    for (int r = 0; job->ev && r < job->nranks; r++)
        free(job->ev[r]);
    free(job->ev);
    free(job->meta);
    free(job->n);
    memset(job, 0, sizeof(*job));
}

int hp_tl_job_load(const char *prefix, int nranks, struct hp_tl_job *job)
{
    char path[4200];
    int got = 0;

    memset(job, 0, sizeof(*job));
    job->nranks = nranks;
    job->meta = calloc((size_t)nranks, sizeof(*job->meta));
    job->ev = calloc((size_t)nranks, sizeof(*job->ev));
    job->n = calloc((size_t)nranks, sizeof(*job->n));
    if (!job->meta || !job->ev || !job->n) {
        hp_tl_job_release(job);
        return -HP_ENOMEM;
    }
    job->t0 = 0.0;
    for (int r = 0; r < nranks; r++) {
        snprintf(path, sizeof(path), "%s.%d", prefix, r);
        if (hp_tl_part_read(path, &job->meta[r], &job->ev[r], &job->n[r]) != 0 ||
            job->meta[r].rank != r) {
            if (job->meta[r].rank != r && job->ev[r])
                hp_warn("timeline: %s is the part of rank %d, not of rank %d", path,
                        job->meta[r].rank, r);
            free(job->ev[r]);
            job->ev[r] = NULL;
            job->n[r] = 0;
            job->meta[r].rank = -1;
            job->missing++;
            continue;
        }
        if (job->meta[r].dropped)
            hp_warn("timeline: rank %d recorded all but %ld events (its buffer was full)", r,
                    job->meta[r].dropped);
        for (long i = 0; i < job->n[r]; i++) {
            const double t = job->ev[r][i].t0 + job->meta[r].clock_offset_s;
            if (got == 0 || t < job->t0)
                job->t0 = t;
            got = 1;
        }
    }
    if (job->missing == nranks) {
        hp_error("timeline: no part of %s.0 .. %s.%d could be read", prefix, prefix, nranks - 1);
        hp_tl_job_release(job);
        return -HP_EDATA;
    }
    if (job->missing)
        hp_warn("timeline: %d of %d ranks' parts are missing: the timeline shows the others",
                job->missing, nranks);
    return 0;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* The process of rank r's track: its VW, or nvws for the PS shards. */
static int pid_of(const struct hp_tl_meta *m, int nvws)
{
    return m->vw >= 0 ? m->vw : nvws;
}

static void write_meta(FILE *f, const struct hp_tl_job *job, int nvws, int *first)
{
    char name[256];

    for (int p = 0; p <= nvws; p++) {
        const struct hp_tl_meta *m = NULL;
        for (int r = 0; r < job->nranks && !m; r++)
            if (job->meta[r].rank >= 0 && pid_of(&job->meta[r], nvws) == p)
                m = &job->meta[r];
        if (!m)
            continue;
        if (m->vw < 0)
            snprintf(name, sizeof(name), "parameter servers");
        else if (strcmp(m->role, "replica") == 0)
            snprintf(name, sizeof(name), "replica %d (dp)", m->vw);
        else
            snprintf(name, sizeof(name), "VW %d: %d stage%s, Nm %d", m->vw, m->stages,
                     m->stages == 1 ? "" : "s", m->nm);
        fprintf(f, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":",
                *first ? "" : ",", p);
        json_str(f, name);
        fprintf(f,
                "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{"
                "\"sort_index\":%d}}",
                p, p);
        *first = 0;
    }
    for (int r = 0; r < job->nranks; r++) {
        const struct hp_tl_meta *m = &job->meta[r];
        if (m->rank < 0)
            continue;
        if (m->vw < 0)
            snprintf(name, sizeof(name), "PS shard %d on %s (rank %d)", m->stage, m->node, r);
        else
            snprintf(name, sizeof(name), "stage %d: %s on %s (rank %d)", m->stage, m->gpu, m->node,
                     r);
        fprintf(f,
                ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{"
                "\"name\":",
                pid_of(m, nvws), r);
        json_str(f, name);
        fprintf(f,
                "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"sort_index\":%d}}",
                pid_of(m, nvws), r, m->stage);
        if (m->vw >= 0 && m->stage == 0) { /* its data track: the waits for input */
            fprintf(f,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{"
                    "\"name\":\"data input (rank %d)\"}},\n{\"name\":\"thread_sort_index\","
                    "\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":-1}}",
                    pid_of(m, nvws), DATA_TID + r, r, pid_of(m, nvws), DATA_TID + r);
        }
    }
}

/* An event's name: what a track shows on its slice. */
static void event_name(const struct hp_tl_event *e, char *out, size_t n)
{
    switch (e->kind) {
    case HP_TL_FWD:
        snprintf(out, n, "F%" PRId64, e->mb);
        break;
    case HP_TL_BWD:
        snprintf(out, n, "B%" PRId64, e->mb);
        break;
    case HP_TL_PUSH:
    case HP_TL_SERVE_PUSH:
    case HP_TL_WSP_WAIT:
    case HP_TL_SERVE_PULL:
        snprintf(out, n, "%s wave %d", hp_tl_kind_names[e->kind], e->wave);
        break;
    case HP_TL_CKPT:
        snprintf(out, n, "checkpoint %d", e->wave);
        break;
    default:
        snprintf(out, n, "%s", hp_tl_kind_names[e->kind]);
    }
}

/* Microseconds from the job's first event, on rank 0's clock. */
static double us(const struct hp_tl_job *job, int r, double t)
{
    return (t + job->meta[r].clock_offset_s - job->t0) * 1e6;
}

static long write_events(FILE *f, const struct hp_tl_job *job, int nvws)
{
    char name[64];
    long count = 0;

    for (int r = 0; r < job->nranks; r++)
        for (long i = 0; i < job->n[r]; i++) {
            const struct hp_tl_event *e = &job->ev[r][i];
            event_name(e, name, sizeof(name));
            fprintf(f,
                    ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                    "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"mb\":%" PRId64 ",\"wave\":%d,"
                    "\"peer\":%d,\"bytes\":%" PRId64 "}}",
                    name, hp_tl_kind_names[e->kind], pid_of(&job->meta[r], nvws),
                    e->kind == HP_TL_DATA ? DATA_TID + r : r, us(job, r, e->t0),
                    (e->t1 - e->t0) * 1e6, e->mb, e->wave, e->peer, e->bytes);
            count++;
        }
    return count;
}

/* A message end: rank, peer, kind (activation or gradient), minibatch, event. */
struct end {
    int rank, peer, kind;
    int64_t mb;
    const struct hp_tl_event *e;
};

static int by_key(const void *a, const void *b)
{
    const struct end *x = a, *y = b;
    /* sends keyed (sender, receiver), receives (their peer, themselves): the same order */
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->peer != y->peer)
        return x->peer < y->peer ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->mb < y->mb ? -1 : x->mb > y->mb;
}

/* Flows from each send to the receive that took it: both lists sorted by (sender, receiver,
 * kind, minibatch) and joined. */
static long write_flows(FILE *f, const struct hp_tl_job *job, int nvws)
{
    long ns = 0, nr = 0, flows = 0;

    for (int r = 0; r < job->nranks; r++)
        for (long i = 0; i < job->n[r]; i++) {
            const int k = job->ev[r][i].kind;
            ns += k == HP_TL_SEND_ACT || k == HP_TL_SEND_GRAD;
            nr += k == HP_TL_RECV_ACT || k == HP_TL_RECV_GRAD;
        }
    struct end *s = calloc((size_t)ns + 1, sizeof(*s)), *v = calloc((size_t)nr + 1, sizeof(*v));
    if (!s || !v) {
        free(s);
        free(v);
        return -1;
    }
    ns = nr = 0;
    for (int r = 0; r < job->nranks; r++)
        for (long i = 0; i < job->n[r]; i++) {
            const struct hp_tl_event *e = &job->ev[r][i];
            if (e->kind == HP_TL_SEND_ACT || e->kind == HP_TL_SEND_GRAD)
                s[ns++] = (struct end){r, e->peer, e->kind == HP_TL_SEND_GRAD, e->mb, e};
            else if (e->kind == HP_TL_RECV_ACT || e->kind == HP_TL_RECV_GRAD)
                v[nr++] = (struct end){e->peer, r, e->kind == HP_TL_RECV_GRAD, e->mb, e};
        }
    qsort(s, (size_t)ns, sizeof(*s), by_key);
    qsort(v, (size_t)nr, sizeof(*v), by_key);
    for (long i = 0, j = 0; i < ns && j < nr;) {
        const int c = by_key(&s[i], &v[j]);
        if (c != 0) {
            c < 0 ? i++ : j++;
            continue;
        }
        const char *what = s[i].kind ? "gradient" : "activation";
        const int from = s[i].rank, to = v[j].peer;
        const double te = us(job, to, v[j].e->t1), tb = us(job, to, v[j].e->t0);
        flows++;
        fprintf(f,
                ",\n{\"name\":\"%s\",\"cat\":\"flow\",\"ph\":\"s\",\"id\":%ld,\"pid\":%d,"
                "\"tid\":%d,\"ts\":%.3f}",
                what, flows, pid_of(&job->meta[from], nvws), from, us(job, from, s[i].e->t0));
        /* bound to the receive's slice: a time inside it */
        fprintf(f,
                ",\n{\"name\":\"%s\",\"cat\":\"flow\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%ld,"
                "\"pid\":%d,\"tid\":%d,\"ts\":%.3f}",
                what, flows, pid_of(&job->meta[to], nvws), to, te - tb > 0.002 ? te - 0.001 : tb);
        i++;
        j++;
    }
    free(s);
    free(v);
    return flows;
}

int hp_tl_job_write_json(const struct hp_tl_job *job, const char *out, long *nevents, long *nflows)
{
    FILE *f = hp_out_open(out, "timeline", 0666);
    int nvws = 0, first = 1;
    long events, flows;

    if (!f)
        return -HP_EIO;
    for (int r = 0; r < job->nranks; r++)
        if (job->meta[r].rank >= 0 && job->meta[r].vw + 1 > nvws)
            nvws = job->meta[r].vw + 1;
    fprintf(f,
            "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"hetpipe timeline %d\","
            "\"ranks\":%d,\"missing_ranks\":%d},\n\"traceEvents\":[",
            HP_TL_VERSION, job->nranks, job->missing);
    write_meta(f, job, nvws, &first);
    events = write_events(f, job, nvws);
    flows = write_flows(f, job, nvws);
    fprintf(f, "\n]}\n");
    if (flows < 0) {
        hp_out_close(f, 0);
        return -HP_ENOMEM;
    }
    if (nevents)
        *nevents = events;
    if (nflows)
        *nflows = flows;
    return hp_out_close(f, !ferror(f)) ? -HP_EIO : 0;
}

int hp_tl_merge(const char *prefix, int nranks, const char *out)
{
    struct hp_tl_job job;
    long events = 0, flows = 0;
    int rc = hp_tl_job_load(prefix, nranks, &job);

    if (rc)
        return rc;
    rc = hp_tl_job_write_json(&job, out, &events, &flows);
    if (!rc)
        printf("timeline: %ld events and %ld flows of %d ranks in %s (open it in "
               "https://ui.perfetto.dev or chrome://tracing)\n",
               events, flows, nranks - job.missing, out);
    hp_tl_job_release(&job);
    return rc;
}
