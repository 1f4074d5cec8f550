/* tlpart.c - the timeline part file: writing and reading it (tlpart.h). */
#include "tlpart.h"

#include "error.h"
#include "infile.h"
#include "log.h"
#include "output.h"
#include "parse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const hp_tl_kind_names[HP_TL_KINDS] = {
    [HP_TL_FWD] = "fwd",
    [HP_TL_BWD] = "bwd",
    [HP_TL_UPDATE] = "update",
    [HP_TL_SEND_ACT] = "send_act",
    [HP_TL_SEND_GRAD] = "send_grad",
    [HP_TL_RECV_ACT] = "recv_act",
    [HP_TL_RECV_GRAD] = "recv_grad",
    [HP_TL_PUSH] = "push",
    [HP_TL_PULL] = "pull",
    [HP_TL_WSP_WAIT] = "wsp_wait",
    [HP_TL_ALLREDUCE] = "allreduce",
    [HP_TL_EVAL] = "eval",
    [HP_TL_CKPT] = "ckpt",
    [HP_TL_SERVE_PUSH] = "serve_push",
    [HP_TL_SERVE_PULL] = "serve_pull",
    [HP_TL_DATA] = "data",
    [HP_TL_VWSYNC] = "vwsync",
};

/* A name written on one line: control characters as '?'. */
static void put_name(FILE *f, const char *key, const char *v)
{
    fprintf(f, "%s = ", key);
    for (; *v; v++)
        fputc((unsigned char)*v < ' ' || *v == 0x7f ? '?' : *v, f);
    fputc('\n', f);
}

int hp_tl_part_write(const char *path, const struct hp_tl_meta *m, const struct hp_tl_event *ev,
                     long n, long dropped)
{
    FILE *f = hp_out_open(path, "timeline", 0666);

    if (!f)
        return -HP_EIO;
    fprintf(f, "# hetpipe timeline %d\nrank = %d\n", HP_TL_VERSION, m->rank);
    put_name(f, "role", m->role);
    fprintf(f, "vw = %d\nstage = %d\nstages = %d\nnm = %d\n", m->vw, m->stage, m->stages, m->nm);
    put_name(f, "node", m->node);
    put_name(f, "gpu", m->gpu[0] ? m->gpu : "-");
    fprintf(f, "device = %d\nclock_offset_s = %.9f\nevents = %ld\ndropped = %ld\n", m->device,
            m->clock_offset_s, n, dropped);
    fprintf(f, "kind,t0,t1,mb,peer,bytes,wave\n");
    for (long i = 0; i < n; i++) {
        const struct hp_tl_event *e = &ev[i];
        fprintf(f, "%s,%.6f,%.6f,%" PRId64 ",%d,%" PRId64 ",%d\n", hp_tl_kind_names[e->kind], e->t0,
                e->t1, e->mb, e->peer, e->bytes, e->wave);
    }
    return hp_out_close(f, !ferror(f)) ? -HP_EIO : 0;
}

/* ---- reading ---- */

struct reader {
    const char *path;
    FILE *f;
    char line[512];
    long lineno;
};

/* The next line (without its newline) into r->line: 1, 0 at the end, -1 when too long. */
static int next_line(struct reader *r)
{
    if (!fgets(r->line, sizeof(r->line), r->f))
        return 0;
    r->lineno++;
    size_t len = strlen(r->line);
    if (len && r->line[len - 1] == '\n')
        r->line[--len] = '\0';
    else if (!feof(r->f))
        return -1;
    return 1;
}

/* An error at the reader's line: -HP_EDATA. */
static int bad(const struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(const struct reader *r, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hp_error("%s: line %ld: %s", r->path, r->lineno, msg);
    return -HP_EDATA;
}

/* "key = value" with `key` expected: the value, or NULL (logged). */
static const char *value_of(struct reader *r, const char *key)
{
    const size_t n = strlen(key);

    if (next_line(r) != 1 || strncmp(r->line, key, n) != 0 || strncmp(r->line + n, " = ", 3)) {
        hp_error("%s: line %ld: expected '%s = ...' (a timeline part file, version %d)", r->path,
                 r->lineno, key, HP_TL_VERSION);
        return NULL;
    }
    return r->line + n + 3;
}

static int int_of(struct reader *r, const char *key, long lo, long hi, long *out)
{
    const char *v = value_of(r, key);

    if (!v)
        return -HP_EDATA;
    if (hp_parse_long(v, lo, hi, out)) {
        hp_error("%s: line %ld: %s '%s' is not an integer in %ld..%ld", r->path, r->lineno, key, v,
                 lo, hi);
        return -HP_EDATA;
    }
    return 0;
}

static int str_of(struct reader *r, const char *key, char *out, size_t n)
{
    const char *v = value_of(r, key);

    if (!v)
        return -HP_EDATA;
    int printable = 1;
    for (const char *c = v; *c; c++)
        printable &= (unsigned char)*c >= ' ' && *c != 0x7f;
    if (!*v || strlen(v) >= n || !printable) {
        hp_error("%s: line %ld: %s must have 1 to %zu characters, none a control character",
                 r->path, r->lineno, key, n - 1);
        return -HP_EDATA;
    }
    snprintf(out, n, "%s", v);
    return 0;
}

static int read_meta(struct reader *r, struct hp_tl_meta *m, long *events)
{
    long v[8];
    const char *off;
    char head[64];

    snprintf(head, sizeof(head), "# hetpipe timeline %d", HP_TL_VERSION);
    if (next_line(r) != 1 || strcmp(r->line, head) != 0) {
        hp_error("%s: not a timeline part file of version %d (its first line is not '%s')", r->path,
                 HP_TL_VERSION, head);
        return -HP_EDATA;
    }
    if (int_of(r, "rank", 0, 1 << 24, &v[0]) || str_of(r, "role", m->role, sizeof(m->role)) ||
        int_of(r, "vw", -1, 1 << 24, &v[1]) || int_of(r, "stage", -1, 1 << 24, &v[2]) ||
        int_of(r, "stages", 0, 1 << 24, &v[3]) || int_of(r, "nm", 0, 1 << 24, &v[4]) ||
        str_of(r, "node", m->node, sizeof(m->node)) || str_of(r, "gpu", m->gpu, sizeof(m->gpu)) ||
        int_of(r, "device", -1, 1 << 24, &v[5]) || !(off = value_of(r, "clock_offset_s")))
        return -HP_EDATA;
    if (hp_parse_double(off, -1e9, 1e9, &m->clock_offset_s))
        return bad(r, "clock_offset_s '%s' is not a number of seconds", off);
    if (int_of(r, "events", 0, HP_TL_EVENTS_MAX, &v[6]) || int_of(r, "dropped", 0, 1L << 40, &v[7]))
        return -HP_EDATA;
    m->rank = (int)v[0];
    m->vw = (int)v[1];
    m->stage = (int)v[2];
    m->stages = (int)v[3];
    m->nm = (int)v[4];
    m->device = (int)v[5];
    m->dropped = v[7];
    *events = v[6];
    if (next_line(r) != 1 || strcmp(r->line, "kind,t0,t1,mb,peer,bytes,wave") != 0)
        return bad(r, "expected the header 'kind,t0,t1,mb,peer,bytes,wave'");
    return 0;
}

static int read_event(struct reader *r, struct hp_tl_event *e)
{
    char kind[16];
    long long mb, bytes;
    int peer, wave, used = 0;

    if (sscanf(r->line, "%15[a-z_],%lf,%lf,%lld,%d,%lld,%d%n", kind, &e->t0, &e->t1, &mb, &peer,
               &bytes, &wave, &used) != 7 ||
        r->line[used] != '\0')
        return bad(r, "expected 'kind,t0,t1,mb,peer,bytes,wave', got '%.80s'", r->line);
    e->kind = -1;
    for (int k = 0; k < HP_TL_KINDS; k++)
        if (strcmp(kind, hp_tl_kind_names[k]) == 0)
            e->kind = k;
    if (e->kind < 0)
        return bad(r, "unknown event kind '%s'", kind);
    /* times are seconds of a clock since boot: 10^12 s is 30,000 years */
    if (!(e->t1 >= e->t0) || !(e->t0 > -1e12) || !(e->t1 < 1e12) || peer < -1 || bytes < 0)
        return bad(r, "an event that ends before it starts, a time beyond 10^12 s, or a bad "
                      "peer or byte count");
    e->mb = mb;
    e->bytes = bytes;
    e->peer = peer;
    e->wave = wave;
    return 0;
}

int hp_tl_part_read(const char *path, struct hp_tl_meta *meta, struct hp_tl_event **ev, long *n)
{
    struct reader r = {.path = path};
    long want = 0, got = 0;
    int rc, more;

    *ev = NULL;
    *n = 0;
    memset(meta, 0, sizeof(*meta));
    struct stat st;
    if (!(r.f = hp_infile_fopen(path, 0, &st, &rc))) {
        hp_error("cannot read the timeline part '%s': %s", path, hp_infile_why(rc, &st));
        return -HP_EIO;
    }
    rc = read_meta(&r, meta, &want);
    if (!rc && !(*ev = calloc((size_t)(want ? want : 1), sizeof(**ev))))
        rc = -HP_ENOMEM;
    while (!rc && (more = next_line(&r)) != 0) {
        if (more < 0)
            rc = bad(&r, "the line is longer than %zu bytes", sizeof(r.line) - 2);
        else if (got == want)
            rc = bad(&r, "more events than the %ld announced", want);
        else
            rc = read_event(&r, &(*ev)[got++]);
    }
    if (!rc && got != want) {
        hp_error("%s: %ld events of the %ld announced (cut short?)", path, got, want);
        rc = -HP_EDATA;
    }
    fclose(r.f);
    if (rc) {
        free(*ev);
        *ev = NULL;
        return rc;
    }
    *n = got;
    return 0;
}
