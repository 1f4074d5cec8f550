/* test_text.c - the token corpus (runtime/text.h): Debian's fortunes as bytes (the split's
 * counts pinned, no entry in both splits, every entry where its hash says; against
 * tests/data/make_tokens.py, a second implementation of the split written from text.h's
 * words, through llm.c's format), small corpora built here (`%` and paragraph entries, CRLF,
 * files passed over), the sampling (a function of (seed, epoch, i), inside the corpus, the same
 * from 4 threads), llm.c's token files (read right across files, every refusal naming the
 * file) and the metrics. */
#include "suites.h"

#include "error.h"
#include "log.h"
#include "rng.h"
#include "text.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORTUNES "/usr/share/games/fortunes"
#define FORT_E0 14485 /* entries, tokens of each split */
#define FORT_E1 732
#define FORT_N0 2457788
#define FORT_N1 118888

static char root[256];
static char msg[1024];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static void setup(void)
{
    snprintf(root, sizeof(root), "/tmp/hp-text-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void)
{
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void put(const char *rel, const void *data, size_t n)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void put_str(const char *rel, const char *text)
{
    put(rel, text, strlen(text));
}

/* An llm.c token file root/rel: header (magic, version, count), the tokens, `extra` bytes. */
static void put_llmc(const char *rel, int32_t magic, int32_t version, int32_t count,
                     const uint16_t *tok, size_t ntok, size_t extra)
{
    const size_t n = 1024 + 2 * ntok + extra;
    unsigned char *b = calloc(1, n);
    const int32_t h[3] = {magic, version, count};

    ck_assert_ptr_nonnull(b);
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 4; j++)
            b[4 * k + j] = (unsigned char)((uint32_t)h[k] >> (8 * j));
    for (size_t i = 0; i < ntok; i++) {
        b[1024 + 2 * i] = (unsigned char)(tok[i] & 0xff);
        b[1024 + 2 * i + 1] = (unsigned char)(tok[i] >> 8);
    }
    put(rel, b, n);
    free(b);
}

/* hp_text_open with the log captured into msg. */
static int open_msg(const char *path, int T, int vocab, int need_val, struct hp_text **t)
{
    int rc;

    msg[0] = '\0';
    hp_log_capture(msg, sizeof(msg));
    rc = hp_text_open(path, T, vocab, need_val, t);
    hp_log_capture(NULL, 0);
    return rc;
}

/* A split's whole stream as bytes (a byte corpus), malloc'ed. */
static unsigned char *stream(const struct hp_text *t, int split)
{
    const int64_t n = hp_text_n(t)->ntokens[split];
    int32_t *tok = malloc((size_t)n * sizeof(int32_t));
    unsigned char *b = malloc((size_t)n + 1);

    ck_assert(tok && b);
    ck_assert_int_eq(hp_text_read(t, split, 0, (long)n, tok), 0);
    for (int64_t i = 0; i < n; i++) {
        ck_assert(tok[i] >= 0 && tok[i] < 256);
        b[i] = (unsigned char)tok[i];
    }
    b[n] = '\0';
    free(tok);
    return b;
}

/* The entries of a byte split made of `%` entries: each "ENTRY%\n"; their starts into
 * start[] (n + 1: the end last), their number returned. */
static long fortune_entries(const unsigned char *b, size_t n, size_t *start, long max)
{
    long k = 0;
    size_t s = 0;

    for (size_t i = 0; i + 1 < n; i++) {
        if (b[i] == '%' && b[i + 1] == '\n' && (i == 0 || b[i - 1] == '\n')) {
            ck_assert_int_lt(k, max);
            ck_assert_uint_gt(i, s); /* no empty entry */
            start[k++] = s;
            s = i + 2;
        }
    }
    ck_assert_uint_eq(s, n); /* the stream ends with a separator */
    start[k] = n + 2;
    return k;
}

static int is_val(const unsigned char *e, size_t n)
{
    return hp_rng_mix(hp_fnv1a(HP_FNV_OFFSET, e, n)) % HP_TEXT_VAL_EVERY == 0;
}

struct ent {
    uint64_t h;
    const unsigned char *p;
    size_t n;
};

static int cmp_ent(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    return memcmp(x->p, y->p, x->n);
}

/* The installed fortunes (package fortunes 1:1.99.1-7.3, Debian 12): 43 files, their entries
 * split by hash, the counts pinned; every entry in the split its hash names, none in both. */
START_TEST(fortunes_split)
{
    struct hp_text *t;

    ck_assert_msg(access(FORTUNES "/fortunes", R_OK) == 0,
                  "install Debian's fortunes (tests/deps.sh) for " FORTUNES);
    ck_assert_int_eq(open_msg(FORTUNES, 64, 256, 1, &t), 0);
    const struct hp_text_counts *c = hp_text_n(t);
    ck_assert_int_eq(hp_text_kind(t), HP_TEXT_BYTES);
    ck_assert_str_eq(hp_text_describe(t), "plain text " FORTUNES " (bytes)");
    ck_assert_int_eq(c->files[0], 43);
    ck_assert_int_eq(c->entries[0], FORT_E0);
    ck_assert_int_eq(c->entries[1], FORT_E1);
    ck_assert_int_eq(c->ntokens[0], FORT_N0);
    ck_assert_int_eq(c->ntokens[1], FORT_N1);
    ck_assert_int_eq(c->nseq[0], FORT_N0 / 64);
    ck_assert_int_eq(c->nseq[1], (FORT_N1 - 1) / 64);

    struct ent *all = malloc((size_t)(c->entries[0] + c->entries[1]) * sizeof(*all));
    unsigned char *bufs[2];
    long ne = 0;
    for (int s = 0; s < 2; s++) {
        unsigned char *b = bufs[s] = stream(t, s);
        size_t *st = malloc((size_t)(c->entries[s] + 1) * sizeof(size_t));
        ck_assert_int_eq(fortune_entries(b, (size_t)c->ntokens[s], st, c->entries[s]),
                         c->entries[s]);
        for (long k = 0; k < c->entries[s]; k++) {
            const unsigned char *e = b + st[k];
            const size_t n = st[k + 1] - 2 - st[k];
            ck_assert_int_eq(is_val(e, n), s);
            ck_assert_ptr_null(memmem(e, n, "\r\n", 2));
            all[ne++] = (struct ent){hp_fnv1a(HP_FNV_OFFSET, e, n), e, n};
        }
        free(st);
    }
    /* no entry in both splits: equal entries are neighbours once sorted, and of one split */
    qsort(all, (size_t)ne, sizeof(*all), cmp_ent);
    for (long k = 1; k < ne; k++)
        if (cmp_ent(&all[k - 1], &all[k]) == 0)
            ck_assert_int_eq(is_val(all[k - 1].p, all[k - 1].n), is_val(all[k].p, all[k].n));
    free(all);
    free(bufs[0]);
    free(bufs[1]);
    hp_text_close(t);
}
END_TEST

/* Run python3 tests/data/make_tokens.py ARGS; its exit status (127: no python3). */
static int run_python(const char *split, const char *out, const char *in)
{
    int status;
    const pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execlp("python3", "python3", "tests/data/make_tokens.py", "--split", split, out, in,
               (char *)NULL);
        _exit(127);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* make_tokens.py's split of the fortunes (its own code) as llm.c files equals text.c's. */
START_TEST(fortunes_second_implementation)
{
    char out[2][512];
    struct hp_text *bytes, *llmc;

    snprintf(out[0], sizeof(out[0]), "%s/fortunes_train_000000.bin", root);
    snprintf(out[1], sizeof(out[1]), "%s/fortunes_val_000000.bin", root);
    for (int s = 0; s < 2; s++) {
        const int rc = run_python(s ? "val" : "train", out[s], FORTUNES);
        if (rc == 127) {
            printf("text: no python3: make_tokens.py's split skipped\n");
            return;
        }
        ck_assert_int_eq(rc, 0);
    }
    ck_assert_int_eq(open_msg(FORTUNES, 64, 256, 1, &bytes), 0);
    ck_assert_int_eq(open_msg(root, 64, 256, 1, &llmc), 0);
    ck_assert_int_eq(hp_text_kind(llmc), HP_TEXT_LLMC);
    for (int s = 0; s < 2; s++) {
        const int64_t n = hp_text_n(bytes)->ntokens[s];
        ck_assert_int_eq(hp_text_n(llmc)->ntokens[s], n);
        ck_assert_int_eq(hp_text_n(llmc)->files[s], 1);
        int32_t *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
        ck_assert_int_eq(hp_text_read(bytes, s, 0, (long)n, a), 0);
        ck_assert_int_eq(hp_text_read(llmc, s, 0, (long)n, b), 0);
        ck_assert_int_eq(memcmp(a, b, (size_t)n * 4), 0);
        free(a);
        free(b);
    }
    /* the same sequences from either */
    int32_t x[65], y[65];
    for (long i = 0; i < 200; i++) {
        ck_assert_int_eq(hp_text_train_seq(bytes, 7, 3, i * 97, x), 0);
        ck_assert_int_eq(hp_text_train_seq(llmc, 7, 3, i * 97, y), 0);
        ck_assert_int_eq(memcmp(x, y, sizeof(x)), 0);
    }
    hp_text_close(bytes);
    hp_text_close(llmc);
}
END_TEST

/* 200 numbered entries in fortune's format (with \r\n when crlf) into buf; the expected
 * streams of both splits into want[2]. */
static void numbered(char *buf, size_t n, int crlf, char *want[2], size_t wn)
{
    const char *nl = crlf ? "\r\n" : "\n";
    size_t len = 0, wl[2] = {0, 0};

    want[0][0] = want[1][0] = '\0';
    len += (size_t)snprintf(buf + len, n - len, "%%%s%%%s", nl, nl); /* empty entries */
    for (int k = 0; k < 200; k++) {
        char e[64];
        const int el = snprintf(e, sizeof(e), "entry %d\nline two\n", k);
        len += (size_t)snprintf(buf + len, n - len, "entry %d%sline two%s%%%s", k, nl, nl, nl);
        if (k == 50) /* blank space only: dropped */
            len += (size_t)snprintf(buf + len, n - len, "  %s\t%s%%%s", nl, nl, nl);
        const int s = is_val((const unsigned char *)e, (size_t)el);
        wl[s] += (size_t)snprintf(want[s] + wl[s], wn - wl[s], "%s%%\n", e);
    }
    /* a last entry without its separator and its newline */
    len += (size_t)snprintf(buf + len, n - len, "last");
    const int s = is_val((const unsigned char *)"last\n", 5);
    snprintf(want[s] + wl[s], wn - wl[s], "last\n%%\n");
}

static void check_streams(const struct hp_text *t, char *want[2])
{
    for (int s = 0; s < 2; s++) {
        unsigned char *b = stream(t, s);
        ck_assert_int_eq(hp_text_n(t)->ntokens[s], (int64_t)strlen(want[s]));
        ck_assert_str_eq((const char *)b, want[s]);
        free(b);
    }
}

/* `%` entries, LF or CRLF: the same streams, each entry where its hash says. */
START_TEST(fortune_format)
{
    static char buf[1 << 15], w0[1 << 15], w1[1 << 15];
    char *want[2] = {w0, w1}, path[512];
    struct hp_text *t;

    for (int crlf = 0; crlf < 2; crlf++) {
        numbered(buf, sizeof(buf), crlf, want, sizeof(w0));
        put_str(crlf ? "crlf" : "lf", buf);
        snprintf(path, sizeof(path), "%s/%s", root, crlf ? "crlf" : "lf");
        ck_assert_int_eq(open_msg(path, 4, 256, 1, &t), 0);
        ck_assert_int_eq(hp_text_n(t)->files[0], 1);
        ck_assert_int_eq(hp_text_n(t)->entries[0] + hp_text_n(t)->entries[1], 201);
        ck_assert_int_gt(hp_text_n(t)->entries[1], 0);
        check_streams(t, want);
        hp_text_close(t);
    }
}
END_TEST

/* A directory: its files in name order; *.dat, *.u8, hidden files and folders passed over; a
 * file without `%` lines cut into paragraphs. */
START_TEST(directory_and_paragraphs)
{
    char path[512], w0[4096] = "", w1[4096] = "", *want[2] = {w0, w1};
    struct hp_text *t;
    const char *paras[] = {"one\ntwo\n", "three\n", "four  \nfive\n", "six\n"};

    put_str("b_paragraphs", "one\ntwo\n\n\nthree\n\nfour  \nfive\n\n\nsix");
    put_str("a_fortunes", "alpha\n%\nbeta\r\n%\n");
    put_str("a_fortunes.dat", "\x01\x02binary index");
    put_str(".hidden", "hidden\n%\n");
    snprintf(path, sizeof(path), "%s/sub", root);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    put_str("sub/inner", "inner\n%\n");
    snprintf(path, sizeof(path), "%s/a_fortunes.u8", root);
    ck_assert_int_eq(symlink("a_fortunes", path), 0);
    const char *fort[] = {"alpha\n", "beta\n"};
    for (int k = 0; k < 2; k++) {
        const int s = is_val((const unsigned char *)fort[k], strlen(fort[k]));
        strcat(want[s], fort[k]);
        strcat(want[s], "%\n");
    }
    for (int k = 0; k < 4; k++) {
        const int s = is_val((const unsigned char *)paras[k], strlen(paras[k]));
        strcat(want[s], paras[k]);
        strcat(want[s], "\n");
    }
    ck_assert_int_eq(open_msg(root, 1, 256, 0, &t), 0);
    ck_assert_int_eq(hp_text_n(t)->files[0], 2);
    ck_assert_int_eq(hp_text_n(t)->entries[0] + hp_text_n(t)->entries[1], 6);
    check_streams(t, want);
    hp_text_close(t);
}
END_TEST

/* Refusals of plain text: a FIFO, nothing to read, a vocabulary under 256, a context out of
 * range, too few tokens for the context. */
START_TEST(text_refusals)
{
    char path[512];
    struct hp_text *t = NULL;

    ck_assert_int_eq(open_msg(root, 8, 256, 0, &t), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(msg, "holds no text file"));
    ck_assert_ptr_nonnull(strstr(msg, root));

    put_str("corpus", "short\n%\n");
    snprintf(path, sizeof(path), "%s/corpus", root);
    ck_assert_int_eq(open_msg(path, 8, 255, 0, &t), -HP_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "256 or more, not 255"));
    ck_assert_int_eq(open_msg(path, 0, 256, 0, &t), -HP_EINVAL);
    ck_assert_int_eq(open_msg(path, HP_TEXT_MAX_T + 1, 256, 0, &t), -HP_EINVAL);
    ck_assert_int_eq(open_msg(path, 100, 256, 0, &t), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(msg, "fewer than the context 100 + 1"));
    ck_assert_ptr_nonnull(strstr(msg, path));
    ck_assert_ptr_null(t);

    /* a token file given as text (one file; in a directory under another name) */
    const uint16_t tok[4] = {1, 2, 3, 4};
    put_llmc("tokens.bin", HP_TEXT_LLMC_MAGIC, 1, 4, tok, 4, 0);
    snprintf(path, sizeof(path), "%s/tokens.bin", root);
    ck_assert_int_eq(open_msg(path, 2, 256, 0, &t), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(msg, path));
    ck_assert_ptr_nonnull(strstr(msg, "is an llm.c token file"));
    ck_assert_int_eq(open_msg(root, 2, 256, 0, &t), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(msg, "is an llm.c token file"));
    ck_assert_int_eq(unlink(path), 0);

    snprintf(path, sizeof(path), "%s/fifo", root);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(open_msg(root, 2, 256, 0, &t), -HP_EDATA); /* never blocks */
    ck_assert_ptr_nonnull(strstr(msg, path));
    ck_assert_ptr_nonnull(strstr(msg, "FIFO"));
    ck_assert_int_eq(open_msg(path, 2, 256, 0, &t), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(msg, "FIFO"));
    snprintf(path, sizeof(path), "%s/missing", root);
    ck_assert_int_eq(open_msg(path, 2, 256, 0, &t), -ENOENT);
    ck_assert_ptr_nonnull(strstr(msg, path));
}
END_TEST

/* The sampling: a function of (seed, epoch, i), every sequence the corpus's tokens at its
 * offset, the offsets spread over [0, ntokens - T - 1]; validation windows in order. */
START_TEST(sampling)
{
    enum { T = 32 };
    struct hp_text *a, *b;

    ck_assert_int_eq(open_msg(FORTUNES, T, 256, 1, &a), 0);
    ck_assert_int_eq(open_msg(FORTUNES, T, 256, 1, &b), 0);
    const struct hp_text_counts *c = hp_text_n(a);
    unsigned char *all = stream(a, HP_TEXT_TRAIN);
    int32_t x[T + 1], y[T + 1];
    int64_t lo = c->ntokens[0], hi = -1;
    long same_epoch = 0;

    for (long i = 0; i < c->nseq[0]; i += 7) {
        const int64_t off = hp_text_train_offset(a, 42, 1, i);
        ck_assert(off >= 0 && off <= c->ntokens[0] - T - 1);
        lo = off < lo ? off : lo;
        hi = off > hi ? off : hi;
        ck_assert_int_eq(hp_text_train_seq(a, 42, 1, i, x), 0);
        ck_assert_int_eq(hp_text_train_seq(b, 42, 1, i, y), 0);
        ck_assert_int_eq(memcmp(x, y, sizeof(x)), 0);
        for (int j = 0; j <= T; j++)
            ck_assert_int_eq(x[j], all[off + j]);
        same_epoch += hp_text_train_offset(a, 42, 2, i) == off;
        ck_assert_int_eq(hp_text_train_offset(a, 42, 1, i), off);
    }
    ck_assert_int_lt(same_epoch, 3); /* another epoch, other offsets */
    ck_assert_int_lt(lo, c->ntokens[0] / 1000);
    ck_assert_int_gt(hi, c->ntokens[0] - T - 1 - c->ntokens[0] / 1000);
    ck_assert_int_ne(hp_text_train_offset(a, 42, 1, 5), hp_text_train_offset(a, 43, 1, 5));
    /* the last sequence of an epoch; none after it */
    ck_assert_int_eq(hp_text_train_seq(a, 42, 1, c->nseq[0] - 1, x), 0);
    hp_log_capture(msg, sizeof(msg));
    ck_assert_int_eq(hp_text_train_seq(a, 42, 1, c->nseq[0], x), -HP_EINVAL);
    ck_assert_int_eq(hp_text_val_seq(a, c->nseq[1], x), -HP_EINVAL);
    hp_log_capture(NULL, 0);
    free(all);

    all = stream(a, HP_TEXT_VAL);
    for (long i = 0; i < c->nseq[1]; i++) {
        ck_assert_int_eq(hp_text_val_seq(a, i, x), 0);
        for (int j = 0; j <= T; j++)
            ck_assert_int_eq(x[j], all[i * T + j]);
    }
    ck_assert_int_le((c->nseq[1] - 1) * T + T + 1, c->ntokens[1]);
    free(all);
    hp_text_close(a);
    hp_text_close(b);
}
END_TEST

#define NTOK0 5000
#define NTOK1 3001

static uint16_t tok_of(long k)
{
    return (uint16_t)((k * 7919 + 13) % 50257);
}

/* Token files: two training files (a sequence may straddle them), one validation file. */
static void put_shards(void)
{
    static uint16_t tok[NTOK0 + NTOK1 + 4000];

    for (long k = 0; k < NTOK0 + NTOK1 + 4000; k++)
        tok[k] = tok_of(k);
    put_llmc("fw_train_000001.bin", HP_TEXT_LLMC_MAGIC, 1, NTOK0, tok, NTOK0, 0);
    put_llmc("fw_train_000002.bin", HP_TEXT_LLMC_MAGIC, 1, NTOK1, tok + NTOK0, NTOK1, 0);
    put_llmc("fw_val_000000.bin", HP_TEXT_LLMC_MAGIC, 1, 4000, tok + NTOK0 + NTOK1, 4000, 0);
    put_str("README", "not a token file\n");
}

START_TEST(llmc_read)
{
    struct hp_text *t;
    int32_t x[65];

    put_shards();
    ck_assert_int_eq(open_msg(root, 64, 50257, 1, &t), 0);
    const struct hp_text_counts *c = hp_text_n(t);
    ck_assert_int_eq(hp_text_kind(t), HP_TEXT_LLMC);
    ck_assert_int_eq(c->files[0], 2);
    ck_assert_int_eq(c->files[1], 1);
    ck_assert_int_eq(c->ntokens[0], NTOK0 + NTOK1);
    ck_assert_int_eq(c->ntokens[1], 4000);
    ck_assert_int_eq(c->nseq[0], (NTOK0 + NTOK1) / 64);
    ck_assert_int_eq(c->nseq[1], 3999 / 64);
    /* across the two training files */
    ck_assert_int_eq(hp_text_read(t, 0, NTOK0 - 30, 65, x), 0);
    for (int j = 0; j < 65; j++)
        ck_assert_int_eq(x[j], tok_of(NTOK0 - 30 + j));
    for (long i = 0; i < c->nseq[0]; i++) {
        const int64_t off = hp_text_train_offset(t, 1, 0, i);
        ck_assert_int_eq(hp_text_train_seq(t, 1, 0, i, x), 0);
        for (int j = 0; j < 65; j++)
            ck_assert_int_eq(x[j], tok_of(off + j));
    }
    for (long i = 0; i < c->nseq[1]; i++) {
        ck_assert_int_eq(hp_text_val_seq(t, i, x), 0);
        for (int j = 0; j < 65; j++)
            ck_assert_int_eq(x[j], tok_of(NTOK0 + NTOK1 + i * 64 + j));
    }
    hp_text_close(t);
}
END_TEST

/* llm.c's tinyshakespeare names (NAME_train.bin, NAME_val.bin); no validation file. */
START_TEST(llmc_names)
{
    const uint16_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct hp_text *t;

    put_llmc("tiny_shakespeare_train.bin", HP_TEXT_LLMC_MAGIC, 1, 8, tok, 8, 0);
    ck_assert_int_eq(open_msg(root, 4, 9, 0, &t), 0);
    ck_assert_int_eq(hp_text_n(t)->nseq[0], 2);
    ck_assert_int_eq(hp_text_n(t)->nseq[1], 0);
    hp_text_close(t);
    ck_assert_int_eq(open_msg(root, 4, 9, 1, &t), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(msg, "validation split has 0 tokens"));
    put_llmc("tiny_shakespeare_val.bin", HP_TEXT_LLMC_MAGIC, 1, 5, tok, 5, 0);
    ck_assert_int_eq(open_msg(root, 4, 9, 1, &t), 0);
    ck_assert_int_eq(hp_text_n(t)->nseq[1], 1);
    hp_text_close(t);
}
END_TEST

/* A bad token file: its name, what is wrong. */
static const struct {
    int32_t magic, version, count;
    size_t ntok, extra;
    const char *says;
} bad[] = {
    {20240521, 1, 100, 100, 0, "magic 20240521 is not llm.c's 20240520"},
    {HP_TEXT_LLMC_MAGIC, 2, 100, 100, 0, "version 2 is not supported"},
    {HP_TEXT_LLMC_MAGIC, 1, 100, 100, 1, "has 1225 bytes, not the 1224 of its header's 100"},
    {HP_TEXT_LLMC_MAGIC, 1, 100, 99, 0, "has 1222 bytes, not the 1224"},
    {HP_TEXT_LLMC_MAGIC, 1, 0, 0, 0, "counts 0 tokens"},
    {HP_TEXT_LLMC_MAGIC, 1, -5, 0, 0, "counts -5 tokens"},
};

START_TEST(llmc_refusals)
{
    static uint16_t tok[100];
    char path[512];
    struct hp_text *t = NULL;

    put_llmc("x_val_000000.bin", HP_TEXT_LLMC_MAGIC, 1, 100, tok, 100, 0);
    put_llmc("x_train_000000.bin", bad[_i].magic, bad[_i].version, bad[_i].count, tok, bad[_i].ntok,
             bad[_i].extra);
    ck_assert_int_eq(open_msg(root, 4, 100, 1, &t), -HP_EDATA);
    snprintf(path, sizeof(path), "token file '%s/x_train_000000.bin'", root);
    ck_assert_msg(strstr(msg, path) && strstr(msg, bad[_i].says), "message: %s", msg);
    ck_assert_ptr_null(t);
}
END_TEST

START_TEST(llmc_refusals_other)
{
    static uint16_t tok[100];
    char path[512];
    struct hp_text *t = NULL;

    /* shorter than a header */
    put("x_train_000000.bin", "\x88\xd8\x34\x01", 4); /* the magic alone */
    ck_assert_int_eq(open_msg(root, 4, 100, 0, &t), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(msg, "less than llm.c's header"));
    /* a FIFO with a token file's name: refused at once */
    snprintf(path, sizeof(path), "%s/x_train_000000.bin", root);
    unlink(path);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(open_msg(root, 4, 100, 0, &t), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(msg, path));
    ck_assert_ptr_nonnull(strstr(msg, "FIFO"));
    unlink(path);
    /* validation files only */
    put_llmc("x_val_000000.bin", HP_TEXT_LLMC_MAGIC, 1, 100, tok, 100, 0);
    ck_assert_int_eq(open_msg(root, 4, 100, 0, &t), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(msg, "none for training"));
    ck_assert_ptr_null(t);
}
END_TEST

/* A token >= the vocabulary: refused when read, naming the file and the position; a file
 * that shrank after open: a short read named. */
START_TEST(llmc_read_refusals)
{
    uint16_t tok[100];
    char path[512], want[640];
    struct hp_text *t;
    int32_t x[5];

    for (int k = 0; k < 100; k++)
        tok[k] = (uint16_t)(k % 50);
    tok[77] = 60000;
    put_llmc("x_train_000000.bin", HP_TEXT_LLMC_MAGIC, 1, 100, tok, 100, 0);
    ck_assert_int_eq(open_msg(root, 4, 50257, 0, &t), 0);
    ck_assert_int_eq(hp_text_read(t, 0, 70, 5, x), 0);
    hp_log_capture(msg, sizeof(msg));
    ck_assert_int_eq(hp_text_read(t, 0, 75, 5, x), -HP_EDATA);
    hp_log_capture(NULL, 0);
    snprintf(want, sizeof(want),
             "token file '%s/x_train_000000.bin': token 60000 at position 77 (byte 1178)", root);
    ck_assert_msg(strstr(msg, want) && strstr(msg, "vocabulary of 50257"), "message: %s", msg);
    snprintf(path, sizeof(path), "%s/x_train_000000.bin", root);
    ck_assert_int_eq(truncate(path, 1024 + 2 * 50), 0);
    hp_log_capture(msg, sizeof(msg));
    ck_assert_int_eq(hp_text_read(t, 0, 60, 5, x), -HP_EIO);
    hp_log_capture(NULL, 0);
    ck_assert_ptr_nonnull(strstr(msg, path));
    ck_assert_ptr_nonnull(strstr(msg, "shorter than when it was opened"));
    hp_text_close(t);
}
END_TEST

struct reader {
    const struct hp_text *t;
    int part;
    long bad;
};

/* Every 4th training sequence of epoch 2, checked against the tokens at its offset. */
static void *read_part(void *arg)
{
    struct reader *r = arg;
    int32_t x[65];
    const struct hp_text_counts *c = hp_text_n(r->t);

    for (long i = r->part; i < c->nseq[0]; i += 4) {
        const int64_t off = hp_text_train_offset(r->t, 9, 2, i);
        if (hp_text_train_seq(r->t, 9, 2, i, x) != 0) {
            r->bad++;
            continue;
        }
        for (int j = 0; j < 65; j++)
            r->bad += x[j] != tok_of(off + j);
    }
    return NULL;
}

START_TEST(llmc_threads)
{
    struct hp_text *t;
    pthread_t th[4];
    struct reader r[4];

    put_shards();
    ck_assert_int_eq(open_msg(root, 64, 50257, 1, &t), 0);
    for (int k = 0; k < 4; k++) {
        r[k] = (struct reader){t, k, 0};
        ck_assert_int_eq(pthread_create(&th[k], NULL, read_part, &r[k]), 0);
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        ck_assert_int_eq(r[k].bad, 0);
    }
    hp_text_close(t);
}
END_TEST

START_TEST(metrics)
{
    ck_assert_double_eq_tol(hp_text_perplexity(log(256.0)), 256.0, 1e-9);
    ck_assert_double_eq_tol(hp_text_perplexity(0.0), 1.0, 1e-15);
    ck_assert_double_eq_tol(hp_text_bits_per_byte(log(256.0), 1.0), 8.0, 1e-12);
    ck_assert_double_eq_tol(hp_text_bits_per_byte(log(2.0), 1.0), 1.0, 1e-12);
    /* a BPE model at 4 bytes a token: 3.2 nats a token are 3.2 / 4 / ln 2 bits a byte */
    ck_assert_double_eq_tol(hp_text_bits_per_byte(3.2, 0.25), 0.8 / 0.6931471805599453, 1e-12);
}
END_TEST

Suite *suite_text(void)
{
    Suite *s = suite_create("text");
    TCase *t = tcase_create("text");

    tcase_set_timeout(t, 60);
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, fortunes_split);
    tcase_add_test(t, fortunes_second_implementation);
    tcase_add_test(t, fortune_format);
    tcase_add_test(t, directory_and_paragraphs);
    tcase_add_test(t, text_refusals);
    tcase_add_test(t, sampling);
    tcase_add_test(t, llmc_read);
    tcase_add_test(t, llmc_names);
    tcase_add_loop_test(t, llmc_refusals, 0, (int)(sizeof(bad) / sizeof(bad[0])));
    tcase_add_test(t, llmc_refusals_other);
    tcase_add_test(t, llmc_read_refusals);
    tcase_add_test(t, llmc_threads);
    tcase_add_test(t, metrics);
    suite_add_tcase(s, t);
    return s;
}
