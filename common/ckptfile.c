/* ckptfile.c - checkpoint files: the directory layout, parts, manifest, checks, the newest valid
 * one, pruning (ckptfile.h). */
#include "ckptfile.h"

#include "error.h"
#include "infile.h"
#include "log.h"
#include "parse.h"
#include "planfile.h"
#include "rng.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define PART_MAGIC "HPCKPART"
#define MANIFEST "manifest"
#define MANIFEST_MAX (64 << 20) /* bytes: 2^18 file lines and more */

struct file_header {
    char magic[8];
    uint32_t version;
    int32_t rank;
    uint64_t reserved;
};

struct rec_header {
    uint32_t kind;
    int32_t unit;
    int32_t vw;
    uint32_t crc;
    uint64_t bytes;
};

_Static_assert(sizeof(struct file_header) == 24, "part header is 24 bytes");
_Static_assert(sizeof(struct rec_header) == 24, "record header is 24 bytes");

static const char *kind_name(int kind)
{
    static const char *const names[] = {
        "?",      "parameters",     "momentum", "batch-norm statistics",
        "client", "global weights", "clocks",   "AdamW second moment"};
    return kind >= 1 && kind <= HP_CK_MOMENT2 ? names[kind] : names[0];
}

static uint32_t crc_of(uint32_t crc, const void *p, size_t n)
{
    const unsigned char *b = p;

    while (n > 0) { /* zlib's length is a uInt */
        const uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, b, k);
        b += k;
        n -= k;
    }
    return crc;
}

uint64_t hp_ckpt_model_sig(const struct hp_model *m)
{
    uint64_t h = hp_fnv1a(HP_FNV_OFFSET, &m->nunits, sizeof(m->nunits));

    for (int u = 0; u < m->nunits; u++) {
        const uint64_t v[2] = {m->units[u].nparams, m->units[u].nstate};
        h = hp_fnv1a(h, v, sizeof(v));
        h = hp_fnv1a(h, m->units[u].kind, strlen(m->units[u].kind));
    }
    return h;
}

int hp_ckpt_compatible(const struct hp_ckpt_info *ci, const struct hp_model *m, uint64_t seed,
                       long batch, char *why, size_t n)
{
    if (ci->model_sig == hp_ckpt_model_sig(m) && ci->nunits == m->nunits && ci->seed == seed &&
        ci->batch == batch)
        return 0;
    snprintf(why, n,
             "it was taken for model '%s' with --seed %" PRIu64 " --batch %ld; this job is model "
             "'%s' with --seed %" PRIu64 " --batch %ld (the same model, seed and batch are "
             "needed: they decide the weights and the data order)",
             ci->model, ci->seed, ci->batch, m->name, seed, batch);
    return -HP_EDATA;
}

int hp_ckpt_same_data(const struct hp_ckpt_info *ci, long ntrain, long epochs, int cosine,
                      char *why, size_t n)
{
    if (ci->ntrain != ntrain) {
        snprintf(why, n,
                 "it was taken in a job of %ld training samples; this job has %ld (--train-limit): "
                 "the data order and the position in it would not be the checkpoint's; resume "
                 "with --train-limit %ld",
                 ci->ntrain, ntrain, ci->ntrain);
        return -HP_EDATA;
    }
    if (cosine && ci->epochs != epochs) {
        snprintf(why, n,
                 "it was taken in a job of --epochs %ld; this job has --epochs %ld: the cosine "
                 "schedule's learning rate follows this job's total steps, so it goes on from "
                 "another value than the checkpoint's",
                 ci->epochs, epochs);
        return 1;
    }
    return 0;
}

int hp_ckpt_dir(const char *parent, long seq, char *out, size_t n)
{
    const int w = snprintf(out, n, "%s/ckpt-%ld", parent, seq);

    return w < 0 || (size_t)w >= n ? -HP_EINVAL : 0;
}

/* Open a checkpoint's file `path` for reading: a regular file, never a link (hetpipe wrote it),
 * opened without blocking (infile.h). NULL with *err (-errno or -HP_ENOTREG) and *st. */
static FILE *open_regular(const char *path, struct stat *st, int *err)
{
    return hp_infile_fopen(path, HP_INFILE_NOFOLLOW, st, err);
}

/* ---- writing a part ---- */

struct hp_ckpt_writer {
    FILE *f;
    char tmp[4200], path[4200];
    uint64_t bytes;
    uint32_t crc;
};

static int w_put(struct hp_ckpt_writer *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->f) != n)
        return -HP_EIO;
    w->crc = crc_of(w->crc, p, n);
    w->bytes += n;
    return 0;
}

int hp_ckpt_part_create(const char *dir, int rank, struct hp_ckpt_writer **out)
{
    struct hp_ckpt_writer *w = calloc(1, sizeof(*w));
    const struct file_header fh = {.magic = PART_MAGIC, .version = HP_CKPT_FORMAT, .rank = rank};
    int fd;

    *out = NULL;
    if (!w)
        return -HP_ENOMEM;
    snprintf(w->path, sizeof(w->path), "%s/rank-%d.part", dir, rank);
    snprintf(w->tmp, sizeof(w->tmp), "%s/rank-%d.part.tmp", dir, rank);
    w->crc = (uint32_t)crc32(0L, Z_NULL, 0);
    fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || !(w->f = fdopen(fd, "wb"))) {
        hp_error("checkpoint: cannot create %s: %s", w->tmp, strerror(errno));
        if (fd >= 0)
            close(fd);
        free(w);
        return -HP_EIO;
    }
    if (w_put(w, &fh, sizeof(fh))) {
        hp_ckpt_part_abort(w);
        return -HP_EIO;
    }
    *out = w;
    return 0;
}

int hp_ckpt_part_add(struct hp_ckpt_writer *w, int kind, int unit, int vw, const void *data,
                     size_t bytes)
{
    const struct rec_header rh = {.kind = (uint32_t)kind,
                                  .unit = unit,
                                  .vw = vw,
                                  .crc = crc_of((uint32_t)crc32(0L, Z_NULL, 0), data, bytes),
                                  .bytes = bytes};

    if (w_put(w, &rh, sizeof(rh)) || w_put(w, data, bytes)) {
        hp_error("checkpoint: cannot write %s: %s", w->tmp, strerror(errno));
        return -HP_EIO;
    }
    return 0;
}

void hp_ckpt_part_abort(struct hp_ckpt_writer *w)
{
    if (!w)
        return;
    if (w->f)
        fclose(w->f);
    unlink(w->tmp);
    free(w);
}

/* fflush, fsync and close f; -HP_EIO logged naming path. */
static int close_synced(FILE *f, const char *path)
{
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;

    bad |= fclose(f) != 0;
    if (bad)
        hp_error("checkpoint: cannot write %s: %s", path, strerror(errno));
    return bad ? -HP_EIO : 0;
}

int hp_ckpt_part_close(struct hp_ckpt_writer *w, uint64_t *bytes, uint32_t *crc)
{
    int rc = close_synced(w->f, w->tmp);

    w->f = NULL;
    if (!rc && rename(w->tmp, w->path) != 0) {
        hp_error("checkpoint: cannot rename %s: %s", w->tmp, strerror(errno));
        rc = -HP_EIO;
    }
    *bytes = w->bytes;
    *crc = w->crc;
    if (rc)
        unlink(w->tmp);
    free(w);
    return rc;
}

/* ---- reading a part ---- */

struct rec {
    struct rec_header h;
    long off;
};

struct hp_ckpt_reader {
    FILE *f;
    char path[4200];
    struct rec *recs;
    int n;
};

void hp_ckpt_part_close_reader(struct hp_ckpt_reader *r)
{
    if (!r)
        return;
    if (r->f)
        fclose(r->f);
    free(r->recs);
    free(r);
}

static int index_records(struct hp_ckpt_reader *r, long size)
{
    int cap = 0;
    long off = (long)sizeof(struct file_header);

    while (off < size) {
        struct rec_header h;
        if (size - off < (long)sizeof(h) || fseek(r->f, off, SEEK_SET) ||
            fread(&h, sizeof(h), 1, r->f) != 1 ||
            h.bytes > (uint64_t)(size - off - (long)sizeof(h))) {
            hp_error("checkpoint: %s: record %d at byte %ld is cut short (the file is truncated "
                     "or corrupt)",
                     r->path, r->n, off);
            return -HP_EDATA;
        }
        if (r->n == cap) {
            cap = cap ? 2 * cap : 64;
            struct rec *p = realloc(r->recs, (size_t)cap * sizeof(*p));
            if (!p)
                return -HP_ENOMEM;
            r->recs = p;
        }
        r->recs[r->n++] = (struct rec){.h = h, .off = off + (long)sizeof(h)};
        off += (long)sizeof(h) + (long)h.bytes;
    }
    return 0;
}

int hp_ckpt_part_open(const char *dir, int rank, struct hp_ckpt_reader **out)
{
    struct hp_ckpt_reader *r = calloc(1, sizeof(*r));
    struct file_header fh;
    struct stat st;
    int rc;

    *out = NULL;
    if (!r)
        return -HP_ENOMEM;
    snprintf(r->path, sizeof(r->path), "%s/rank-%d.part", dir, rank);
    if (!(r->f = open_regular(r->path, &st, &rc))) {
        hp_error("checkpoint: cannot read %s: %s", r->path, hp_infile_why(rc, &st));
        hp_ckpt_part_close_reader(r);
        return -HP_EIO;
    }
    if (fread(&fh, sizeof(fh), 1, r->f) != 1 || memcmp(fh.magic, PART_MAGIC, 8) ||
        fh.version != HP_CKPT_FORMAT || fh.rank != rank) {
        hp_error("checkpoint: %s is not a part of format %d for rank %d", r->path, HP_CKPT_FORMAT,
                 rank);
        hp_ckpt_part_close_reader(r);
        return -HP_EDATA;
    }
    rc = index_records(r, (long)st.st_size);
    if (rc) {
        hp_ckpt_part_close_reader(r);
        return rc;
    }
    *out = r;
    return 0;
}

static const struct rec *find(const struct hp_ckpt_reader *r, int kind, int unit)
{
    for (int i = 0; i < r->n; i++)
        if ((int)r->recs[i].h.kind == kind && r->recs[i].h.unit == unit)
            return &r->recs[i];
    return NULL;
}

int hp_ckpt_part_has(const struct hp_ckpt_reader *r, int kind, int unit)
{
    return find(r, kind, unit) != NULL;
}

int hp_ckpt_part_read(struct hp_ckpt_reader *r, int kind, int unit, void *out, size_t bytes)
{
    const struct rec *e = find(r, kind, unit);

    if (!e) {
        hp_error("checkpoint: %s has no %s of unit %d", r->path, kind_name(kind), unit);
        return -HP_EDATA;
    }
    if (e->h.bytes != bytes) {
        hp_error("checkpoint: %s: the %s of unit %d are %" PRIu64 " bytes, %zu expected (another "
                 "model?)",
                 r->path, kind_name(kind), unit, e->h.bytes, bytes);
        return -HP_EDATA;
    }
    if ((bytes && (fseek(r->f, e->off, SEEK_SET) || fread(out, 1, bytes, r->f) != bytes))) {
        hp_error("checkpoint: cannot read %s: %s", r->path, strerror(errno));
        return -HP_EIO;
    }
    if (crc_of((uint32_t)crc32(0L, Z_NULL, 0), out, bytes) != e->h.crc) {
        hp_error("checkpoint: %s: the %s of unit %d fail their checksum (corrupt)", r->path,
                 kind_name(kind), unit);
        return -HP_EDATA;
    }
    return 0;
}

/* ---- the manifest ---- */

void hp_ckpt_info_release(struct hp_ckpt_info *ci)
{
    free(ci->names);
    free(ci->bytes);
    free(ci->crc);
    ci->names = NULL;
    ci->bytes = NULL;
    ci->crc = NULL;
    ci->nfiles = 0;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd >= 0 && fsync(fd) == 0 ? 0 : -HP_EIO;

    if (fd >= 0)
        close(fd);
    if (rc)
        hp_error("checkpoint: cannot sync directory %s: %s", dir, strerror(errno));
    return rc;
}

/* A value that a manifest line holds: no line break or other control character. */
static int one_line(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < ' ' || *s == 0x7f)
            return 0;
    return 1;
}

int hp_ckpt_manifest_write(const struct hp_ckpt_info *ci)
{
    char path[4200], tmp[4200], *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    int rc = 0, fd;

    if (!m)
        return -HP_ENOMEM;
    if (ci->nfiles > HP_CKPT_MAX_FILES || ci->nranks > HP_CKPT_MAX_FILES || !one_line(ci->model)) {
        hp_error("checkpoint: cannot write the manifest of %s: %d files for %d ranks (at most "
                 "%d), model '%.63s' (one line)",
                 ci->dir, ci->nfiles, ci->nranks, HP_CKPT_MAX_FILES, ci->model);
        fclose(m);
        free(text);
        return -HP_EINVAL;
    }
    /* the comment names the directory on one line whatever its characters */
    fputs("# hetpipe checkpoint: ", m);
    for (const char *c = ci->dir; *c; c++)
        fputc((unsigned char)*c < ' ' || *c == 0x7f ? '?' : *c, m);
    fprintf(m, "\nformat = %d\nseq = %ld\nmodel = %s\n", HP_CKPT_FORMAT, ci->seq, ci->model);
    fprintf(m, "model_signature = %016" PRIx64 "\nunits = %d\nseed = %" PRIu64 "\n", ci->model_sig,
            ci->nunits, ci->seed);
    fprintf(m, "batch = %ld\ntrain_samples = %ld\nepochs = %ld\nepoch = %ld\nminibatch = %ld\n",
            ci->batch, ci->ntrain, ci->epochs, ci->epoch, ci->minibatch);
    fprintf(m, "vws = %d\nranks = %d\nsamples = %ld\nreason = %s\n", ci->nvws, ci->nranks,
            ci->samples, ci->reason);
    fprintf(m, "lr = %.9g\nmomentum = %.9g\nweight_decay = %.9g\nschedule = %s\n", ci->lr,
            ci->momentum, ci->weight_decay, ci->schedule[0] ? ci->schedule : "-");
    fprintf(m, "optimizer = %s\n", ci->optimizer[0] ? ci->optimizer : "sgd");
    for (int i = 0; i < ci->nfiles; i++)
        fprintf(m, "file = %s %" PRIu64 " %08" PRIx32 "\n", ci->names[i], ci->bytes[i], ci->crc[i]);
    if (fclose(m) != 0) {
        free(text);
        return -HP_ENOMEM;
    }
    const uint32_t crc = crc_of((uint32_t)crc32(0L, Z_NULL, 0), text, len);
    snprintf(path, sizeof(path), "%s/" MANIFEST, ci->dir);
    snprintf(tmp, sizeof(tmp), "%s/" MANIFEST ".tmp", ci->dir);
    rc = fsync_dir(ci->dir);
    fd = rc ? -1 : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!rc && !f) {
        hp_error("checkpoint: cannot create %s: %s", tmp, strerror(errno));
        if (fd >= 0)
            close(fd);
        rc = -HP_EIO;
    }
    if (!rc) {
        fwrite(text, 1, len, f);
        fprintf(f, "checksum = %08" PRIx32 "\n", crc);
        rc = close_synced(f, tmp);
    }
    if (!rc && rename(tmp, path) != 0) {
        hp_error("checkpoint: cannot rename %s: %s", tmp, strerror(errno));
        rc = -HP_EIO;
    }
    if (!rc)
        rc = fsync_dir(ci->dir);
    else
        unlink(tmp);
    free(text);
    return rc;
}

#define WHY(...) (snprintf(why, n, __VA_ARGS__), -HP_EDATA)

/* One "key = value" line of the manifest into ci. */
static int manifest_line(struct hp_ckpt_info *ci, char *key, char *val, char *why, size_t n)
{
    static const char *const longs[] = {"seq",   "batch",     "train_samples", "epochs",
                                        "epoch", "minibatch", "samples",       NULL};
    long *const lp[] = {&ci->seq,   &ci->batch,     &ci->ntrain, &ci->epochs,
                        &ci->epoch, &ci->minibatch, &ci->samples};
    long x;

    for (int i = 0; longs[i]; i++)
        if (!strcmp(key, longs[i]))
            return hp_parse_long(val, 0, 1L << 60, lp[i]) ? WHY("%s: bad value '%s'", key, val) : 0;
    if (!strcmp(key, "format"))
        return hp_parse_long(val, 0, 1000, &x) || x != HP_CKPT_FORMAT
                   ? WHY("format %s: this hetpipe reads format %d", val, HP_CKPT_FORMAT)
                   : 0;
    if (!strcmp(key, "units") || !strcmp(key, "vws") || !strcmp(key, "ranks")) {
        if (hp_parse_long(val, 1, HP_CKPT_MAX_FILES, &x))
            return WHY("%s: bad value '%s'", key, val);
        *(key[0] == 'u' ? &ci->nunits : key[0] == 'v' ? &ci->nvws : &ci->nranks) = (int)x;
        return 0;
    }
    if (!strcmp(key, "model"))
        return snprintf(ci->model, sizeof(ci->model), "%s", val) >= (int)sizeof(ci->model)
                   ? WHY("model: name too long")
                   : 0;
    if (!strcmp(key, "reason"))
        return snprintf(ci->reason, sizeof(ci->reason), "%s", val), 0;
    if (!strcmp(key, "schedule"))
        return snprintf(ci->schedule, sizeof(ci->schedule), "%s", val), 0;
    if (!strcmp(key, "optimizer"))
        return strcmp(val, "sgd") && strcmp(val, "adamw")
                   ? WHY("optimizer: '%s' is not sgd or adamw", val)
                   : (snprintf(ci->optimizer, sizeof(ci->optimizer), "%s", val), 0);
    if (!strcmp(key, "lr") || !strcmp(key, "momentum") || !strcmp(key, "weight_decay"))
        return hp_parse_double(val, 0.0, 1e6,
                               key[0] == 'l'   ? &ci->lr
                               : key[0] == 'm' ? &ci->momentum
                                               : &ci->weight_decay)
                   ? WHY("%s: bad value '%s'", key, val)
                   : 0;
    if (!strcmp(key, "model_signature") || !strcmp(key, "seed")) {
        char *end;
        errno = 0;
        const uint64_t v = strtoull(val, &end, key[0] == 'm' ? 16 : 10);
        if (errno || *end || !*val)
            return WHY("%s: bad value '%s'", key, val);
        *(key[0] == 'm' ? &ci->model_sig : &ci->seed) = v;
        return 0;
    }
    if (!strcmp(key, "file")) {
        char name[64];
        unsigned long long b;
        unsigned c;
        if (ci->nfiles >= ci->files_max || sscanf(val, "%63s %llu %x", name, &b, &c) != 3 ||
            strchr(name, '/') || name[0] == '.')
            return WHY("file: bad entry '%s'", val);
        memcpy(ci->names[ci->nfiles], name, sizeof(name));
        ci->bytes[ci->nfiles] = b;
        ci->crc[ci->nfiles++] = c;
        return 0;
    }
    return WHY("unknown key '%s'", key);
}

/* Parse and checksum the manifest text. */
static int manifest_parse(struct hp_ckpt_info *ci, char *text, size_t len, char *why, size_t n)
{
    char *sum = NULL;

    for (char *p = text; p < text + len;) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        if (!nl)
            return WHY("the last line is cut short");
        if (!strncmp(p, "checksum = ", 11) && nl + 1 == text + len)
            sum = p;
        p = nl + 1;
    }
    if (!sum)
        return WHY("no checksum line at the end (incomplete)");
    unsigned want;
    if (sscanf(sum + 11, "%x", &want) != 1 ||
        crc_of((uint32_t)crc32(0L, Z_NULL, 0), text, (size_t)(sum - text)) != want)
        return WHY("the checksum does not match its contents");
    *sum = '\0';
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#')
            continue;
        char *eq = strstr(line, " = ");
        if (!eq)
            return WHY("bad line '%.60s'", line);
        *eq = '\0';
        int rc = manifest_line(ci, line, eq + 3, why, n);
        if (rc)
            return rc;
    }
    if (!ci->seq || !ci->nunits || !ci->nvws || !ci->nranks || !ci->model[0] || !ci->batch)
        return WHY("a required key is missing");
    /* the position: within an epoch of ntrain / batch / vws minibatches (its end included) */
    const long per_vw = ci->ntrain / ci->batch / ci->nvws;
    if (ci->ntrain > 0 && (ci->minibatch > per_vw || (ci->epochs && ci->epoch > ci->epochs)))
        return WHY("its position (epoch %ld, minibatch %ld) is past the end of %s (%ld samples "
                   "at batch %ld over %d VWs: %ld minibatches per VW and epoch, %ld epochs)",
                   ci->epoch + 1, ci->minibatch, ci->minibatch > per_vw ? "an epoch" : "the job",
                   ci->ntrain, ci->batch, ci->nvws, per_vw, ci->epochs);
    return 0;
}

static int check_file(const char *dir, const char *name, uint64_t bytes, uint32_t crc, int contents,
                      char *why, size_t n)
{
    char path[4200];
    struct stat st;
    int err;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (lstat(path, &st) != 0)
        return WHY("%s is missing", name);
    if (!S_ISREG(st.st_mode))
        return WHY("%s is %s, not a regular file", name, hp_infile_kind(&st));
    if ((uint64_t)st.st_size != bytes)
        return WHY("%s has %lld bytes, the manifest says %" PRIu64, name, (long long)st.st_size,
                   bytes);
    if (!contents)
        return 0;
    FILE *f = open_regular(path, &st, &err);
    if (!f)
        return WHY("cannot read %s: %s", name, hp_infile_why(err, &st));
    static char buf[1 << 16];
    uint32_t c = (uint32_t)crc32(0L, Z_NULL, 0);
    size_t k;
    while ((k = fread(buf, 1, sizeof(buf), f)) > 0)
        c = crc_of(c, buf, k);
    fclose(f);
    return c == crc ? 0 : WHY("%s fails its checksum (corrupt)", name);
}

int hp_ckpt_check(const char *dir, int contents, struct hp_ckpt_info *ci, char *why, size_t n)
{
    char path[4200];
    struct stat st;
    int rc = 0;

    memset(ci, 0, sizeof(*ci));
    snprintf(ci->dir, sizeof(ci->dir), "%s", dir);
    snprintf(path, sizeof(path), "%s/" MANIFEST, dir);
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return WHY("it is not a directory");
    int err = 0;
    FILE *f = open_regular(path, &st, &err);
    if (!f && err == -ENOENT)
        return WHY("it has no manifest (an incomplete checkpoint)");
    if (!f)
        return WHY("cannot read its manifest: %s", hp_infile_why(err, &st));
    if (st.st_size > MANIFEST_MAX) {
        fclose(f);
        return WHY("its manifest has %lld bytes, more than a manifest's %d", (long long)st.st_size,
                   MANIFEST_MAX);
    }
    char *text = malloc((size_t)st.st_size + 1);
    size_t len = text ? fread(text, 1, (size_t)st.st_size, f) : 0, lines = 1;
    fclose(f);
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    if (lines > HP_CKPT_MAX_FILES)
        lines = HP_CKPT_MAX_FILES; /* file lines beyond are refused by manifest_line */
    ci->names = calloc(lines, sizeof(*ci->names));
    ci->bytes = calloc(lines, sizeof(*ci->bytes));
    ci->crc = calloc(lines, sizeof(*ci->crc));
    ci->files_max = (int)lines;
    if (!text || !ci->names || !ci->bytes || !ci->crc)
        rc = -HP_ENOMEM;
    if (!rc) {
        text[len] = '\0';
        rc = strlen(text) != len ? WHY("the manifest is not text")
                                 : manifest_parse(ci, text, len, why, n);
    }
    free(text);
    for (int i = 0; i < ci->nfiles && !rc; i++)
        rc = check_file(dir, ci->names[i], ci->bytes[i], ci->crc[i], contents, why, n);
    if (!rc) {
        int parts = 0, plan = 0;
        for (int i = 0; i < ci->nfiles; i++) {
            parts += !strncmp(ci->names[i], "rank-", 5);
            plan |= !strcmp(ci->names[i], "plan.ini");
        }
        if (parts != ci->nranks || !plan)
            rc = WHY("the manifest lists %d parts for %d ranks%s", parts, ci->nranks,
                     plan ? "" : " and no plan.ini");
    }
    if (rc)
        hp_ckpt_info_release(ci);
    return rc;
}

/* ckpt-N entries of parent, N > 0, sorted by N descending. */
static int list_ckpts(const char *parent, long **out)
{
    DIR *d = opendir(parent);
    struct dirent *e;
    long *v = NULL;
    int n = 0, cap = 0;

    *out = NULL;
    if (!d)
        return 0;
    while ((e = readdir(d))) {
        long k;
        if (strncmp(e->d_name, "ckpt-", 5) || hp_parse_long(e->d_name + 5, 1, 1L << 40, &k))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            long *p = realloc(v, (size_t)cap * sizeof(long));
            if (!p)
                break;
            v = p;
        }
        v[n++] = k;
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort, descending */
        for (int j = i; j > 0 && v[j] > v[j - 1]; j--) {
            const long t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    *out = v;
    return n;
}

int hp_ckpt_latest(const char *parent, struct hp_ckpt_info *ci)
{
    long *v;
    const int n = list_ckpts(parent, &v);
    int found = 1;

    for (int i = 0; i < n && found == 1; i++) {
        char dir[4200], why[512];
        if (hp_ckpt_dir(parent, v[i], dir, sizeof(dir)))
            continue;
        if (!hp_ckpt_check(dir, 1, ci, why, sizeof(why)))
            found = 0;
        else
            hp_warn("checkpoint %s is not valid (skipped): %s", dir, why);
    }
    free(v);
    return found;
}

int hp_ckpt_new_dir(const char *parent, long after, long *seq, char *out, size_t n)
{
    if (!out || n == 0)
        return -HP_EINVAL;
    long *v;
    const int k = list_ckpts(parent, &v);
    long next = (k > 0 && v[0] > after ? v[0] : after) + 1;

    free(v);
    if (mkdir(parent, 0700) != 0 && errno != EEXIST) {
        hp_error("checkpoint: cannot create %s: %s", parent, strerror(errno));
        return -HP_EIO;
    }
    for (int tries = 0; tries < 100; tries++, next++) {
        if (hp_ckpt_dir(parent, next, out, n)) {
            hp_error("checkpoint: the path %s/ckpt-%ld is too long", parent, next);
            return -HP_EIO;
        }
        if (mkdir(out, 0700) == 0) {
            *seq = next;
            return 0;
        }
        if (errno != EEXIST)
            break;
    }
    hp_error("checkpoint: cannot create %s: %s", out, strerror(errno));
    return -HP_EIO;
}

/* Whether a file name is one a checkpoint holds. */
static int ours(const char *name)
{
    return !strncmp(name, "rank-", 5) || !strncmp(name, "plan.ini", 8) ||
           !strncmp(name, MANIFEST, strlen(MANIFEST));
}

void hp_ckpt_remove(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4400];

    if (!d)
        return;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && ours(e->d_name)) {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    if (rmdir(dir) != 0)
        hp_warn("checkpoint: could not remove %s: %s", dir, strerror(errno));
}

void hp_ckpt_prune(const char *parent, int keep)
{
    long *v;
    const int n = list_ckpts(parent, &v);
    int valid = 0;

    for (int i = 0; i < n; i++) {
        char dir[4200], why[512];
        struct hp_ckpt_info ci;
        if (hp_ckpt_dir(parent, v[i], dir, sizeof(dir)))
            continue;
        const int ok = !hp_ckpt_check(dir, 0, &ci, why, sizeof(why));
        hp_ckpt_info_release(&ci);
        if (ok)
            valid++;
        if ((ok && valid > keep) || (!ok && valid > 0))
            hp_ckpt_remove(dir);
    }
    free(v);
}

int hp_ckpt_copy_file(const char *src, const char *dir, const char *name, uint64_t *bytes,
                      uint32_t *crc)
{
    char tmp[4200], path[4200], buf[1 << 14];
    struct stat st;
    int fd, rc = 0;
    FILE *in = hp_infile_fopen(src, 0, &st, &rc), *out = NULL; /* the plan: may be a link */
    size_t k;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, name);
    if (!in) {
        hp_error("checkpoint: cannot copy %s: %s", src, hp_infile_why(rc, &st));
        return -HP_EIO;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || !(out = fdopen(fd, "wb"))) {
        hp_error("checkpoint: cannot copy %s to %s: %s", src, tmp, strerror(errno));
        if (fd >= 0)
            close(fd);
        if (in)
            fclose(in);
        return -HP_EIO;
    }
    *bytes = 0;
    *crc = (uint32_t)crc32(0L, Z_NULL, 0);
    while ((k = fread(buf, 1, sizeof(buf), in)) > 0 && !rc) {
        rc = fwrite(buf, 1, k, out) == k ? 0 : -HP_EIO;
        *crc = crc_of(*crc, buf, k);
        *bytes += k;
    }
    fclose(in);
    if (close_synced(out, tmp) || rc || rename(tmp, path) != 0) {
        unlink(tmp);
        return -HP_EIO;
    }
    return 0;
}

/* ---- resuming ---- */

int hp_ckpt_source_open(const char *dir, const struct hp_gpudb *db, int nunits,
                        struct hp_ckpt_source *src)
{
    char why[512], path[4300], token[33];
    int rc;

    memset(src, 0, sizeof(*src));
    if (hp_ckpt_check(dir, 0, &src->ci, why, sizeof(why))) {
        hp_error("option '--resume': %s is not a valid checkpoint: %s", dir, why);
        return -HP_EDATA;
    }
    snprintf(path, sizeof(path), "%s/plan.ini", dir);
    rc = hp_planfile_load(path, db, &src->plan, &src->cl, token);
    if (rc)
        return rc;
    if (src->plan.nranks != src->ci.nranks || src->plan.nunits != nunits) {
        hp_error("option '--resume': %s: its plan.ini does not match its manifest", dir);
        return -HP_EDATA;
    }
    src->parts = calloc((size_t)src->plan.nranks, sizeof(*src->parts));
    return src->parts ? 0 : -HP_ENOMEM;
}

struct hp_ckpt_reader *hp_ckpt_source_part(struct hp_ckpt_source *src, int rank)
{
    if (!src->parts[rank] && hp_ckpt_part_open(src->ci.dir, rank, &src->parts[rank]))
        return NULL;
    return src->parts[rank];
}

void hp_ckpt_source_release(struct hp_ckpt_source *src)
{
    if (src->parts)
        for (int r = 0; r < src->plan.nranks; r++)
            hp_ckpt_part_close_reader(src->parts[r]);
    free(src->parts);
    src->parts = NULL;
    hp_plan_release(&src->plan);
    hp_cluster_release(&src->cl);
    hp_ckpt_info_release(&src->ci);
}

/* ---- plans ---- */

int hp_ckpt_same_layout(const struct hp_plan *a, const struct hp_plan *b)
{
    if (a->grouping != b->grouping || a->nvws != b->nvws || a->nranks != b->nranks ||
        a->nshards != b->nshards || a->nunits != b->nunits || a->opts.batch != b->opts.batch ||
        a->opts.seed != b->opts.seed || a->opts.staleness != b->opts.staleness)
        return 0;
    for (int u = 0; u < a->nunits; u++)
        if (a->nshards && a->unit_shard[u] != b->unit_shard[u])
            return 0;
    for (int v = 0; v < a->nvws; v++) {
        const struct hp_vw_plan *x = &a->vws[v], *y = &b->vws[v];
        if (x->nstages != y->nstages || x->nm != y->nm)
            return 0;
        for (int s = 0; s < x->nstages; s++)
            if (x->stages[s].u0 != y->stages[s].u0 || x->stages[s].u1 != y->stages[s].u1 ||
                x->stages[s].in_flight != y->stages[s].in_flight ||
                hp_plan_stage_rank(a, v, s) != hp_plan_stage_rank(b, v, s))
                return 0;
    }
    return 1;
}

void hp_ckpt_unit_source(const struct hp_plan *old, int v, int u, int *worker, int *shard)
{
    const int x = v % old->nvws;
    const struct hp_vw_plan *vw = &old->vws[x];

    *worker = -1;
    for (int s = 0; s < vw->nstages && *worker < 0; s++)
        if (u >= vw->stages[s].u0 && u < vw->stages[s].u1)
            *worker = hp_plan_stage_rank(old, x, s);
    *shard = old->nshards > 0 ? hp_plan_first_shard(old) + old->unit_shard[u] : -1;
}
