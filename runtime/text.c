/* text.c - a token corpus (text.h): plain text as bytes, or llm.c's token files. */
#include "text.h"

#include "source.h"

#include "error.h"
#include "infile.h"
#include "log.h"
#include "rng.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct text_shard {
    char *path; /* for messages */
    int fd;
    int64_t first, count; /* its tokens in the split's stream */
};

struct hp_text {
    enum hp_text_kind kind;
    struct hp_text_counts n;
    char root[4096];
    char desc[4200];
    unsigned char *bytes[2]; /* plain text: each split's tokens */
    int nshards[2];          /* token files */
    struct text_shard *shards[2];
};

static const char *const split_word[2] = {"training", "validation"};
/* HP_TEXT_LLMC_MAGIC as a file starts with it (little-endian) */
static const unsigned char llmc_magic[4] = {0x88, 0xd8, 0x34, 0x01};

/* ---- plain text --------------------------------------------------------------------------- */

struct tbuf {
    unsigned char *p;
    size_t n, cap;
};

static int tbuf_put(struct tbuf *b, const void *s, size_t n)
{
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 1 << 16;
        while (c < b->n + n)
            c *= 2;
        unsigned char *q = realloc(b->p, c);
        if (!q)
            return -HP_ENOMEM;
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

/* 1 when [s, e) is blank space only. */
static int blank(const unsigned char *s, const unsigned char *e)
{
    for (; s < e; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != '\f' && *s != '\v')
            return 0;
    return 1;
}

static int is_sep(const unsigned char *line, size_t len)
{
    return len == 1 && line[0] == '%';
}

/* Entry [s, e) (its lines with their newlines) to its split, followed by sep. */
static int put_entry(struct tbuf out[2], long entries[2], const unsigned char *s,
                     const unsigned char *e, const char *sep)
{
    if (s >= e || blank(s, e))
        return 0;
    const uint64_t h = hp_rng_mix(hp_fnv1a(HP_FNV_OFFSET, s, (unsigned long)(e - s)));
    const int split = h % HP_TEXT_VAL_EVERY == 0 ? HP_TEXT_VAL : HP_TEXT_TRAIN;
    entries[split]++;
    const int rc = tbuf_put(&out[split], s, (size_t)(e - s));
    return rc ? rc : tbuf_put(&out[split], sep, strlen(sep));
}

/* Cut the text buf[0..n) (its "\r\n" already "\n", ending with '\n') into entries. */
static int cut_entries(const unsigned char *buf, size_t n, struct tbuf out[2], long entries[2])
{
    const unsigned char *end = buf + n, *line, *nl;
    int fortune = 0, rc = 0;

    for (line = buf; line < end; line = nl + 1) {
        nl = memchr(line, '\n', (size_t)(end - line));
        if (is_sep(line, (size_t)(nl - line))) {
            fortune = 1;
            break;
        }
    }
    const unsigned char *start = buf;
    for (line = buf; rc == 0 && line < end; line = nl + 1) {
        nl = memchr(line, '\n', (size_t)(end - line));
        const size_t len = (size_t)(nl - line);
        if (fortune && is_sep(line, len)) {
            rc = put_entry(out, entries, start, line, "%\n");
            start = nl + 1;
        } else if (!fortune && len == 0) {
            rc = put_entry(out, entries, start, line, "\n");
            start = nl + 1;
        }
    }
    if (rc == 0)
        rc = put_entry(out, entries, start, end, fortune ? "%\n" : "\n");
    return rc;
}

/* Read the text file (fd, size bytes) into a new buffer: "\r\n" as "\n", a final '\n'. */
static int slurp_text(int fd, const char *path, size_t size, unsigned char **out, size_t *n)
{
    unsigned char *b = malloc(size + 1);
    size_t got = 0, w = 0;

    if (!b)
        return -HP_ENOMEM;
    while (got < size) {
        const ssize_t r = read(fd, b + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            const int rc = r < 0 ? -errno : -HP_EIO;
            hp_error("cannot read '%s': %s", path, r < 0 ? hp_strerror(rc) : "it got shorter");
            free(b);
            return rc;
        }
        got += (size_t)r;
    }
    for (size_t i = 0; i < size; i++)
        if (!(b[i] == '\r' && i + 1 < size && b[i + 1] == '\n'))
            b[w++] = b[i];
    if (w > 0 && b[w - 1] != '\n')
        b[w++] = '\n';
    *out = b;
    *n = w;
    return 0;
}

/* One text file (relative to dirfd; disp for messages) into the splits. */
static int add_file(struct hp_text *t, int dirfd, const char *rel, const char *disp,
                    struct tbuf out[2])
{
    struct stat st;
    unsigned char *buf = NULL;
    size_t n = 0;
    int rc;
    const int fd = hp_infile_openat(dirfd, rel, 0, &st);

    if (fd < 0) {
        hp_error("cannot read text file '%s': %s", disp, hp_infile_why(fd, &st));
        return fd == -HP_ENOTREG ? -HP_EDATA : fd;
    }
    if (st.st_size > HP_TEXT_MAX_BYTES - (off_t)(out[0].n + out[1].n)) {
        hp_error("text corpus '%s': more than %ld bytes of text with '%s' (tokenize it into "
                 "llm.c's token files: tests/data/make_tokens.py)",
                 t->root, HP_TEXT_MAX_BYTES, disp);
        close(fd);
        return -HP_EDATA;
    }
    rc = slurp_text(fd, disp, (size_t)st.st_size, &buf, &n);
    close(fd);
    if (rc)
        return rc;
    if (n >= 4 && memcmp(buf, llmc_magic, 4) == 0) {
        hp_error("text file '%s' is an llm.c token file: put it in a directory of token files "
                 "as NAME_train_*.bin or NAME_val_*.bin",
                 disp);
        free(buf);
        return -HP_EDATA;
    }
    rc = cut_entries(buf, n, out, t->n.entries);
    free(buf);
    t->n.files[0]++;
    t->n.files[1]++;
    return rc;
}

static int has_suffix(const char *s, const char *suf)
{
    const size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* 1 when name (in dirfd) is a directory, following a link. */
static int is_dir_at(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

/* Plain text: the directory dirfd's files (names sorted), or the file at t->root (dirfd -1). */
static int open_bytes(struct hp_text *t, int dirfd, char **names, int nnames)
{
    struct tbuf out[2] = {{0}};
    char disp[4400];
    int rc = 0;

    if (dirfd < 0)
        rc = add_file(t, AT_FDCWD, t->root, t->root, out);
    for (int i = 0; rc == 0 && i < nnames; i++) {
        if (has_suffix(names[i], ".dat") || has_suffix(names[i], ".u8") ||
            is_dir_at(dirfd, names[i]))
            continue;
        snprintf(disp, sizeof(disp), "%s/%s", t->root, names[i]);
        rc = add_file(t, dirfd, names[i], disp, out);
    }
    if (rc == 0 && t->n.files[0] == 0) {
        hp_error("text corpus '%s' holds no text file (the *.dat and *.u8 of fortune's "
                 "indexes, hidden files and folders are passed over)",
                 t->root);
        rc = -HP_EDATA;
    }
    for (int s = 0; s < 2; s++) {
        t->bytes[s] = out[s].p;
        t->n.ntokens[s] = (int64_t)out[s].n;
    }
    if (rc == -HP_ENOMEM)
        hp_error("text corpus '%s': %s", t->root, hp_strerror(rc));
    t->kind = HP_TEXT_BYTES;
    snprintf(t->desc, sizeof(t->desc), "plain text %s (bytes)", t->root);
    return rc;
}

/* ---- llm.c's token files ------------------------------------------------------------------ */

static int32_t le32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

int hp_text_llmc_check(const unsigned char *header, int64_t file_size, const char *name,
                       int64_t *count)
{
    const int32_t magic = le32(header), version = le32(header + 4), n = le32(header + 8);

    if (magic != HP_TEXT_LLMC_MAGIC) {
        hp_error("token file '%s': magic %d is not llm.c's %d", name, magic, HP_TEXT_LLMC_MAGIC);
        return -HP_EDATA;
    }
    if (version != HP_TEXT_LLMC_VERSION) {
        hp_error("token file '%s': version %d is not supported (only 1: uint16 tokens)", name,
                 version);
        return -HP_EDATA;
    }
    if (n < 1) {
        hp_error("token file '%s': its header counts %d tokens (at least 1)", name, n);
        return -HP_EDATA;
    }
    if (file_size != HP_TEXT_LLMC_HEADER + 2 * (int64_t)n) {
        hp_error("token file '%s' has %lld bytes, not the %lld of its header's %d tokens "
                 "(1024 + 2 x %d)",
                 name, (long long)file_size, (long long)HP_TEXT_LLMC_HEADER + 2 * (int64_t)n, n, n);
        return -HP_EDATA;
    }
    *count = n;
    return 0;
}

/* pread n bytes at off, all of them; 0, or -errno / -HP_EIO (short: the file shrank). */
static int pread_all(int fd, void *buf, size_t n, off_t off)
{
    size_t got = 0;

    while (got < n) {
        const ssize_t r = pread(fd, (char *)buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -HP_EIO;
        got += (size_t)r;
    }
    return 0;
}

/* 0: not a token file's name; 1 + split otherwise (NAME_train_*.bin, NAME_train.bin, ...). */
static int shard_split(const char *name)
{
    if (!has_suffix(name, ".bin"))
        return 0;
    if (strstr(name, "_train_") || has_suffix(name, "_train.bin"))
        return 1 + HP_TEXT_TRAIN;
    if (strstr(name, "_val_") || has_suffix(name, "_val.bin"))
        return 1 + HP_TEXT_VAL;
    return 0;
}

/* Open and check shard `name` of dirfd into sh (its first token: *next, advanced). */
static int open_shard(struct hp_text *t, int dirfd, const char *name, struct text_shard *sh,
                      int64_t *next)
{
    unsigned char hdr[HP_TEXT_LLMC_HEADER];
    struct stat st;
    char disp[4400];
    int rc;

    snprintf(disp, sizeof(disp), "%s/%s", t->root, name);
    if (!(sh->path = strdup(disp)))
        return -HP_ENOMEM;
    sh->fd = hp_infile_openat(dirfd, name, 0, &st);
    if (sh->fd < 0) {
        rc = sh->fd;
        hp_error("cannot read token file '%s': %s", disp, hp_infile_why(rc, &st));
        return rc == -HP_ENOTREG ? -HP_EDATA : rc;
    }
    if (st.st_size < HP_TEXT_LLMC_HEADER) {
        hp_error("token file '%s' has %lld bytes, less than llm.c's header (%d)", disp,
                 (long long)st.st_size, HP_TEXT_LLMC_HEADER);
        return -HP_EDATA;
    }
    if ((rc = pread_all(sh->fd, hdr, sizeof(hdr), 0)) != 0) {
        hp_error("cannot read the header of token file '%s': %s", disp, hp_strerror(rc));
        return rc;
    }
    if ((rc = hp_text_llmc_check(hdr, (int64_t)st.st_size, disp, &sh->count)) != 0)
        return rc;
    sh->first = *next;
    *next += sh->count;
    return 0;
}

static int open_llmc(struct hp_text *t, int dirfd, char **names, int nnames)
{
    int rc = 0, total = 0;

    for (int i = 0; i < nnames; i++)
        total += shard_split(names[i]) != 0;
    if (total > HP_TEXT_MAX_SHARDS) {
        hp_error("'%s' holds %d token files, more than %d: join them", t->root, total,
                 HP_TEXT_MAX_SHARDS);
        return -HP_EDATA;
    }
    for (int s = 0; s < 2; s++)
        if (!(t->shards[s] = calloc((size_t)total + 1, sizeof(struct text_shard))))
            return -HP_ENOMEM;
    for (int i = 0; rc == 0 && i < nnames; i++) {
        const int k = shard_split(names[i]);
        if (!k)
            continue;
        const int s = k - 1;
        struct text_shard *sh = &t->shards[s][t->nshards[s]++];
        sh->fd = -1;
        rc = open_shard(t, dirfd, names[i], sh, &t->n.ntokens[s]);
    }
    if (rc == 0 && t->nshards[HP_TEXT_TRAIN] == 0) {
        hp_error("'%s' holds token files for validation but none for training "
                 "(NAME_train_*.bin or NAME_train.bin)",
                 t->root);
        rc = -HP_EDATA;
    }
    t->n.files[0] = t->nshards[0];
    t->n.files[1] = t->nshards[1];
    t->kind = HP_TEXT_LLMC;
    snprintf(t->desc, sizeof(t->desc), "llm.c token files %s", t->root);
    return rc;
}

/* Shard k of split s holding token off (binary search; off < ntokens). */
static int find_shard(const struct hp_text *t, int s, int64_t off)
{
    int lo = 0, hi = t->nshards[s] - 1;

    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (t->shards[s][mid].first <= off)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Tokens [off, off + n) of split s, from its files, into out[n]. */
static int read_llmc(const struct hp_text *t, int s, int64_t off, long n, int32_t *out)
{
    int k = find_shard(t, s, off);

    while (n > 0) {
        const struct text_shard *sh = &t->shards[s][k];
        const int64_t local = off - sh->first;
        const long m = (long)(sh->count - local < n ? sh->count - local : n);
        /* the uint16s into the upper half of out[0..m), then widened in place from the
         * front (out[j] ends at or before uint16 j + 1 starts: nothing unread is written) */
        unsigned char *raw = (unsigned char *)out + 2 * (size_t)m;
        const int rc =
            pread_all(sh->fd, raw, 2 * (size_t)m, (off_t)(HP_TEXT_LLMC_HEADER + 2 * local));
        if (rc) {
            hp_error("cannot read token file '%s' at token %lld: %s", sh->path, (long long)local,
                     rc == -HP_EIO ? "it is shorter than when it was opened" : hp_strerror(rc));
            return rc;
        }
        for (long j = 0; j < m; j++) {
            const int32_t v = (int32_t)raw[2 * j] | (int32_t)raw[2 * j + 1] << 8;
            if (v >= t->n.vocab) {
                hp_error("token file '%s': token %d at position %lld (byte %lld) is not below "
                         "the model's vocabulary of %d",
                         sh->path, v, (long long)(local + j),
                         (long long)(HP_TEXT_LLMC_HEADER + 2 * (local + j)), t->n.vocab);
                return -HP_EDATA;
            }
            out[j] = v;
        }
        out += m;
        off += m;
        n -= m;
        k++;
    }
    return 0;
}

/* ---- the corpus --------------------------------------------------------------------------- */

/* The sequence counts; errors when the training split (or a needed validation one) is short. */
static int set_counts(struct hp_text *t, int need_val)
{
    const int T = t->n.T;

    for (int s = 0; s < 2; s++) {
        const int64_t nt = t->n.ntokens[s];
        if (nt < (int64_t)T + 1) {
            if (s == HP_TEXT_TRAIN || need_val) {
                hp_error("%s: the %s split has %lld tokens, fewer than the context %d + 1", t->desc,
                         split_word[s], (long long)nt, T);
                return -HP_EDATA;
            }
            continue;
        }
        t->n.nseq[s] = (long)(s == HP_TEXT_TRAIN ? nt / T : (nt - 1) / T);
    }
    return 0;
}

int hp_text_open(const char *path, int T, int vocab, int need_val, struct hp_text **out)
{
    struct hp_text *t;
    char **names = NULL;
    int nnames = 0, dirfd = -1, rc, llmc = 0;

    *out = NULL;
    if (!path || !*path || strlen(path) >= sizeof(t->root) || T < 1 || T > HP_TEXT_MAX_T ||
        vocab < 1) {
        hp_error("text corpus '%s': the context must be 1 to %d (%d), the vocabulary at least "
                 "1 (%d)",
                 path ? path : "", HP_TEXT_MAX_T, T, vocab);
        return -HP_EINVAL;
    }
    if (!(t = calloc(1, sizeof(*t))))
        return -HP_ENOMEM;
    snprintf(t->root, sizeof(t->root), "%s", path);
    t->n.T = T;
    t->n.vocab = vocab;
    dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd >= 0) {
        if ((rc = hp_source_list_dir(dirfd, path, NULL, INT_MAX, "entries", &names, &nnames,
                                     NULL)) != 0)
            goto out;
        for (int i = 0; i < nnames; i++)
            llmc |= shard_split(names[i]) != 0;
    } else if (errno != ENOTDIR) {
        rc = -errno;
        hp_error("cannot open text corpus '%s': %s", path, hp_strerror(rc));
        goto out;
    }
    if (!llmc && vocab < 256) {
        hp_error("text corpus '%s' is plain text, tokenized by bytes: the model's vocabulary "
                 "must be 256 or more, not %d",
                 path, vocab);
        rc = -HP_EINVAL;
        goto out;
    }
    rc = llmc ? open_llmc(t, dirfd, names, nnames) : open_bytes(t, dirfd, names, nnames);
    if (rc == 0)
        rc = set_counts(t, need_val);
out:
    free_names(names, nnames);
    if (dirfd >= 0)
        close(dirfd);
    if (rc) {
        hp_text_close(t);
        return rc;
    }
    *out = t;
    return 0;
}

void hp_text_close(struct hp_text *t)
{
    if (!t)
        return;
    for (int s = 0; s < 2; s++) {
        free(t->bytes[s]);
        for (int k = 0; t->shards[s] && k < t->nshards[s]; k++) {
            if (t->shards[s][k].fd >= 0)
                close(t->shards[s][k].fd);
            free(t->shards[s][k].path);
        }
        free(t->shards[s]);
    }
    free(t);
}

const struct hp_text_counts *hp_text_n(const struct hp_text *t)
{
    return &t->n;
}

enum hp_text_kind hp_text_kind(const struct hp_text *t)
{
    return t->kind;
}

const char *hp_text_describe(const struct hp_text *t)
{
    return t->desc;
}

int hp_text_read(const struct hp_text *t, int split, int64_t off, long n, int32_t *tokens)
{
    if ((split != HP_TEXT_TRAIN && split != HP_TEXT_VAL) || off < 0 || n < 0 ||
        off > t->n.ntokens[split] - n) {
        hp_error("%s: tokens %lld + %ld are not in split %d", t->desc, (long long)off, n, split);
        return -HP_EINVAL;
    }
    if (t->kind == HP_TEXT_LLMC)
        return read_llmc(t, split, off, n, tokens);
    for (long j = 0; j < n; j++)
        tokens[j] = t->bytes[split][off + j];
    return 0;
}

int64_t hp_text_train_offset(const struct hp_text *t, uint64_t seed, long epoch, long i)
{
    const uint64_t s = hp_rng_derive(hp_rng_derive(seed, HP_TEXT_RNG_TAG), (uint64_t)epoch);
    return (int64_t)(hp_rng_u64(s, (uint64_t)i) % (uint64_t)(t->n.ntokens[0] - t->n.T));
}

int hp_text_train_seq(const struct hp_text *t, uint64_t seed, long epoch, long i, int32_t *tokens)
{
    if (i < 0 || i >= t->n.nseq[HP_TEXT_TRAIN] || epoch < 0) {
        hp_error("%s: training sequence %ld of epoch %ld is not one (%ld an epoch)", t->desc, i,
                 epoch, t->n.nseq[HP_TEXT_TRAIN]);
        return -HP_EINVAL;
    }
    return hp_text_read(t, HP_TEXT_TRAIN, hp_text_train_offset(t, seed, epoch, i), t->n.T + 1L,
                        tokens);
}

int hp_text_val_seq(const struct hp_text *t, long i, int32_t *tokens)
{
    if (i < 0 || i >= t->n.nseq[HP_TEXT_VAL]) {
        hp_error("%s: validation window %ld is not one (%ld)", t->desc, i, t->n.nseq[HP_TEXT_VAL]);
        return -HP_EINVAL;
    }
    return hp_text_read(t, HP_TEXT_VAL, (int64_t)i * t->n.T, t->n.T + 1L, tokens);
}

double hp_text_perplexity(double loss)
{
    return exp(loss);
}

double hp_text_bits_per_byte(double loss, double tokens_per_byte)
{
    return loss * tokens_per_byte / log(2.0);
}
