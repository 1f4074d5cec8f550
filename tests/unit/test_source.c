/* test_source.c - the data sources (runtime/source.h): image folders and tar shards built
 * here in a temporary directory (fake "images": the sources do not decode), the IDX source
 * on the installed Fashion-MNIST, the shard cache read in permuted orders, and every refusal
 * with the path it names. */
#include "suites.h"
#include "util.h"

#include "data.h"
#include "error.h"
#include "infile.h"
#include "log.h"
#include "source.h"

#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static void setup(void)
{
    snprintf(root, sizeof(root), "/tmp/hp-source-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void)
{
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* root/rel with its directories; content: text (NULL: the path itself). */
static void put(const char *rel, const char *text)
{
    char path[1024];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text ? text : rel, f);
    fclose(f);
}

static void put_dir(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    ck_assert_int_eq(mkdir(path, 0755), 0);
}

struct mem {
    const char *name, *data;
    int type; /* 0: a file */
    const char *link;
};
#define F(name, data)                                                                              \
    {                                                                                              \
        (name), (data), 0, NULL                                                                    \
    }

/* root/name as a tar (pax) of members m[0..n). */
static void put_tar(const char *name, const struct mem *m, int n)
{
    struct archive *a = archive_write_new();
    char path[1024];

    snprintf(path, sizeof(path), "%s/%s", root, name);
    ck_assert_int_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    ck_assert_int_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
    for (int i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        const size_t len = m[i].data ? strlen(m[i].data) : 0;
        archive_entry_set_pathname(e, m[i].name);
        archive_entry_set_filetype(e, m[i].type ? (unsigned)m[i].type : AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, m[i].type ? 0 : (la_int64_t)len);
        if (m[i].link)
            archive_entry_set_symlink(e, m[i].link);
        ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
        if (len)
            ck_assert_int_eq(archive_write_data(a, m[i].data, len), (la_ssize_t)len);
        archive_entry_free(e);
    }
    ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

/* Open with the log captured: the return code, the message in msg. */
static int open_msg(int (*op)(const char *, int, struct hp_source **), int need_val,
                    struct hp_source **s, char *msg, size_t n)
{
    int rc;

    msg[0] = '\0';
    hp_log_capture(msg, n);
    rc = op(root, need_val, s);
    hp_log_capture(NULL, 0);
    return rc;
}

static int open_any(const char *dir, int need_val, struct hp_source **s)
{
    return hp_source_open(dir, "imagenet", need_val, s);
}

/* Sample (split, id) read: its bytes equal text, its label, its name ends in suffix. */
static void expect_sample(struct hp_source *s, int split, long id, const char *text, int label,
                          const char *suffix)
{
    struct hp_sample smp;
    char err[512];

    ck_assert_msg(s->ops->read(s, split, id, &smp, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(smp.size, strlen(text));
    ck_assert(memcmp(smp.data, text, smp.size) == 0);
    ck_assert_int_eq(smp.label, label);
    ck_assert_msg(strlen(smp.name) >= strlen(suffix) &&
                      strcmp(smp.name + strlen(smp.name) - strlen(suffix), suffix) == 0,
                  "name %s, expected ...%s", smp.name, suffix);
    s->ops->release(s, &smp);
}

START_TEST(folder_layout)
{
    struct hp_source *s;
    char msg[512], path[1024], target[1024];

    put("train/b/z.jpeg", NULL);
    put("train/a/2.jpg", NULL);
    put("train/a/1.PNG", NULL);
    put("train/a/notes.txt", NULL);    /* not an image: passed over, counted */
    put("train/a/.hidden.jpg", NULL);  /* hidden: passed over */
    put("train/b/sub/deep.jpg", NULL); /* a directory inside a class: counted */
    put("train/.cache/x.jpg", NULL);   /* a hidden "class" */
    put("train/README", NULL);         /* a file beside the classes: counted */
    put("val/a/v.jpg", NULL);
    snprintf(path, sizeof(path), "%s/train/b/link.jpg", root);
    snprintf(target, sizeof(target), "%s/train/a/1.PNG", root);
    ck_assert_int_eq(symlink(target, path), 0); /* a linked image: allowed */
    ck_assert_int_eq(open_msg(open_any, 1, &s, msg, sizeof(msg)), 0);
    ck_assert_int_eq(s->kind, HP_SOURCE_FOLDER);
    ck_assert_str_eq(hp_source_kind_name(s), "image folder");
    ck_assert_int_eq(s->encoded, 1);
    ck_assert_int_eq(s->nclasses, 2);
    ck_assert_str_eq(s->classes[0], "a");
    ck_assert_str_eq(s->classes[1], "b");
    ck_assert_int_eq(s->n[HP_SPLIT_TRAIN], 4);
    ck_assert_int_eq(s->n[HP_SPLIT_VAL], 1);
    ck_assert_int_eq(s->nskipped[HP_SPLIT_TRAIN], 3);
    /* class by class, files in strcmp order ('1' < '2'; "link" < "z") */
    expect_sample(s, HP_SPLIT_TRAIN, 0, "train/a/1.PNG", 0, "/train/a/1.PNG");
    expect_sample(s, HP_SPLIT_TRAIN, 1, "train/a/2.jpg", 0, "/train/a/2.jpg");
    expect_sample(s, HP_SPLIT_TRAIN, 2, "train/a/1.PNG", 1, "/train/b/link.jpg");
    expect_sample(s, HP_SPLIT_TRAIN, 3, "train/b/z.jpeg", 1, "/train/b/z.jpeg");
    expect_sample(s, HP_SPLIT_VAL, 0, "val/a/v.jpg", 0, "/val/a/v.jpg");
    struct hp_sample smp;
    ck_assert_int_eq(s->ops->read(s, HP_SPLIT_TRAIN, 4, &smp, msg, sizeof(msg)), -HP_EINVAL);
    hp_source_close(s);
}
END_TEST

/* val's classes are a subset: labels follow train's numbering, empty classes in between */
START_TEST(folder_val_subset)
{
    struct hp_source *s;
    char msg[512];

    put("train/a/1.jpg", NULL);
    put("train/b/1.jpg", NULL);
    put("train/c/1.jpg", NULL);
    put("train/d/1.jpg", NULL);
    put("val/b/x.jpg", NULL);
    put("val/b/y.jpg", NULL);
    put("val/d/z.jpg", NULL);
    put_dir("val/a"); /* empty, and first: before any val image (fuzz_folder found UB here) */
    ck_assert_int_eq(open_msg(hp_source_open_folder, 1, &s, msg, sizeof(msg)), 0);
    ck_assert_int_eq(s->n[HP_SPLIT_VAL], 3);
    expect_sample(s, HP_SPLIT_VAL, 0, "val/b/x.jpg", 1, "/val/b/x.jpg");
    expect_sample(s, HP_SPLIT_VAL, 1, "val/b/y.jpg", 1, "/val/b/y.jpg");
    expect_sample(s, HP_SPLIT_VAL, 2, "val/d/z.jpg", 3, "/val/d/z.jpg");
    expect_sample(s, HP_SPLIT_TRAIN, 3, "train/d/1.jpg", 3, "/train/d/1.jpg");
    hp_source_close(s);
}
END_TEST

/* A refusal: the message holds each of want[] (root replaces "ROOT"). */
static void expect_refused(int (*op)(const char *, int, struct hp_source **), int need_val,
                           const char *const *want)
{
    struct hp_source *s = NULL;
    char msg[1024], w[1024];

    ck_assert_int_lt(open_msg(op, need_val, &s, msg, sizeof(msg)), 0);
    for (int i = 0; want[i]; i++) {
        const char *r = strstr(want[i], "ROOT");
        if (r)
            snprintf(w, sizeof(w), "%.*s%s%s", (int)(r - want[i]), want[i], root, r + 4);
        else
            snprintf(w, sizeof(w), "%s", want[i]);
        ck_assert_msg(strstr(msg, w), "message '%s' lacks '%s'", msg, w);
    }
}

START_TEST(folder_refusals)
{
    char path[1024];

    put("train/a/1.jpg", NULL);
    put("train/foo/readme.txt", NULL);
    expect_refused(hp_source_open_folder, 0,
                   (const char *const[]){"class folder ROOT/train/foo holds no "
                                         ".jpg/.jpeg/.png image",
                                         NULL});
    snprintf(path, sizeof(path), "%s/train/foo/readme.txt", root);
    unlink(path);
    snprintf(path, sizeof(path), "%s/train/foo", root);
    rmdir(path);
    put("val/zzz/1.jpg", NULL);
    expect_refused(hp_source_open_folder, 0,
                   (const char *const[]){"ROOT/val/zzz", "not a class of", NULL});
    snprintf(path, sizeof(path), "%s/val/zzz/1.jpg", root);
    unlink(path);
    snprintf(path, sizeof(path), "%s/val/zzz", root);
    rmdir(path);
    expect_refused(hp_source_open_folder, 1, (const char *const[]){"ROOT/val", "no image", NULL});
    snprintf(path, sizeof(path), "%s/val", root);
    rmdir(path);
    expect_refused(hp_source_open_folder, 1, (const char *const[]){"ROOT/val", NULL});
    snprintf(path, sizeof(path), "%s/train/a/fifo.jpg", root);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    expect_refused(hp_source_open_folder, 0,
                   (const char *const[]){"ROOT/train/a/fifo.jpg", "FIFO", NULL});
}
END_TEST

START_TEST(folder_empty_train)
{
    put_dir("train");
    expect_refused(hp_source_open_folder, 0,
                   (const char *const[]){"ROOT/train", "holds no image", NULL});
}
END_TEST

/* what a read refuses: a link to a FIFO, a file larger than a sample may be */
START_TEST(folder_read_refusals)
{
    struct hp_source *s;
    struct hp_sample smp;
    char msg[512], path[1024], target[1024];

    put("train/a/1.jpg", NULL);
    put("train/a/3.jpg", NULL);
    snprintf(target, sizeof(target), "%s/fifo", root);
    ck_assert_int_eq(mkfifo(target, 0600), 0);
    snprintf(path, sizeof(path), "%s/train/a/2.jpg", root);
    ck_assert_int_eq(symlink(target, path), 0);
    snprintf(path, sizeof(path), "%s/train/a/3.jpg", root);
    ck_assert_int_eq(truncate(path, HP_SOURCE_MAX_SAMPLE + 1), 0); /* sparse */
    ck_assert_int_eq(open_msg(hp_source_open_folder, 0, &s, msg, sizeof(msg)), 0);
    ck_assert_int_eq(s->n[0], 3);
    ck_assert_int_lt(s->ops->read(s, 0, 1, &smp, msg, sizeof(msg)), 0);
    ck_assert_msg(strstr(msg, "/train/a/2.jpg") && strstr(msg, "FIFO"), "%s", msg);
    ck_assert_int_eq(s->ops->read(s, 0, 2, &smp, msg, sizeof(msg)), -HP_EDATA);
    ck_assert_msg(strstr(msg, "/train/a/3.jpg") && strstr(msg, "more than"), "%s", msg);
    expect_sample(s, 0, 0, "train/a/1.jpg", 0, "/train/a/1.jpg");
    hp_source_close(s);
}
END_TEST

START_TEST(shards_layout)
{
    struct hp_source *s;
    char msg[512];

    put_tar("train-000000.tar",
            (const struct mem[]){F("./a.jpg", "image a"),
                                 F("./a.cls", "2\n"),
                                 F("./a.json", "{}"), /* another extension: passed over */
                                 {"d/", NULL, AE_IFDIR, NULL},
                                 F("d/b.x.png", "image b"), /* key d/b, extension x.png */
                                 F("d/b.x.cls", "0"),
                                 F("d/c.PNG", "image c"),
                                 F("d/c.cls", "1")},
            8);
    put_tar("train-000001.tar", (const struct mem[]){F("e.jpeg", "image e"), F("e.cls", "1")}, 2);
    put_tar("val-000000.tar", (const struct mem[]){F("v.jpg", "image v"), F("v.cls", " 2 \r\n")},
            2);
    put("train-000002.txt", NULL); /* not a shard */
    ck_assert_msg(open_msg(open_any, 1, &s, msg, sizeof(msg)) == 0, "%s", msg);
    ck_assert_int_eq(s->kind, HP_SOURCE_SHARDS);
    ck_assert_str_eq(hp_source_kind_name(s), "tar shards");
    ck_assert_int_eq(s->nclasses, 3); /* no classes.txt: the largest label + 1 */
    ck_assert_str_eq(s->classes[2], "2");
    ck_assert_int_eq(s->n[0], 2 + 1);
    ck_assert_int_eq(s->n[1], 1);
    ck_assert_int_eq(s->nshards[0], 2);
    ck_assert_int_eq(s->shard_first[0][1], 2);
    ck_assert_int_eq(s->shard_n[0][0], 2);
    ck_assert_int_eq(s->shard_n[0][1], 1);
    /* the .json member, d/, and d/b.x.png, d/b.x.cls: the extension follows the first '.'
     * (WebDataset's rule), so "x.png" and "x.cls" are neither image nor label */
    ck_assert_int_eq(s->nskipped[0], 4);
    expect_sample(s, 0, 0, "image a", 2, "/train-000000.tar:./a.jpg");
    expect_sample(s, 0, 1, "image c", 1, "/train-000000.tar:d/c.PNG");
    expect_sample(s, 0, 2, "image e", 1, "/train-000001.tar:e.jpeg");
    expect_sample(s, 1, 0, "image v", 2, "/val-000000.tar:v.jpg");
    hp_source_close(s);
}
END_TEST

START_TEST(shards_classes_txt)
{
    struct hp_source *s;
    char msg[512];

    put("classes.txt", "tench\ngoldfish\r\nshark\n");
    put_tar("train-000000.tar", (const struct mem[]){F("a.jpg", "image a"), F("a.cls", "0")}, 2);
    ck_assert_int_eq(open_msg(hp_source_open_shards, 0, &s, msg, sizeof(msg)), 0);
    ck_assert_int_eq(s->nclasses, 3);
    ck_assert_str_eq(s->classes[0], "tench");
    ck_assert_str_eq(s->classes[1], "goldfish");
    ck_assert_str_eq(s->classes[2], "shark");
    ck_assert_int_eq(s->n[1], 0);
    hp_source_close(s);
}
END_TEST

/* A ustar header claiming `size` bytes for `name`, followed by a few bytes only. */
static void put_raw_tar(const char *file, const char *name, long long size)
{
    unsigned char h[512] = {0};
    unsigned sum = 0;
    char path[1024];

    snprintf((char *)h, 100, "%s", name);
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    snprintf((char *)h + 124, 12, "%011llo", size);
    memcpy(h + 136, "00000000000", 12);
    memset(h + 148, ' ', 8);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    snprintf(path, sizeof(path), "%s/%s", root, file);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fwrite(h, 1, 512, f);
    fwrite("abcd", 1, 4, f);
    fclose(f);
}

static const struct refusal {
    struct mem m[4];
    int n;
    const char *classes; /* classes.txt, or NULL */
    struct mem val[2];   /* a val shard when val[0].name */
    const char *want[4];
} refusals[] = {
    {{F("../escape.jpg", "x"), F("../escape.cls", "0")},
     2,
     NULL,
     {{0}},
     {"ROOT/train-000000.tar: member '../escape.jpg'", "'..'", NULL}},
    {{F("a/../../b.jpg", "x")}, 1, NULL, {{0}}, {"member 'a/../../b.jpg'", "'..'", NULL}},
    {{F("/etc/x.jpg", "x")}, 1, NULL, {{0}}, {"member '/etc/x.jpg'", "absolute", NULL}},
    {{F("a.jpg", "x"), F("b.jpg", "y"), F("b.cls", "0")},
     3,
     NULL,
     {{0}},
     {"member 'a.jpg'", "an image without a label (no a.cls", NULL}},
    {{F("a.cls", "0"), F("b.jpg", "y"), F("b.cls", "0")},
     3,
     NULL,
     {{0}},
     {"member 'a.cls'", "a label without an image", NULL}},
    {{F("a.jpg", "x"), F("a.png", "y"), F("a.cls", "0")},
     3,
     NULL,
     {{0}},
     {"member 'a.png'", "a second image", NULL}},
    {{F("a.jpg", "x"), F("a.cls", "cat")},
     2,
     NULL,
     {{0}},
     {"member 'a.cls'", "'cat' is not a class", NULL}},
    {{F("a.jpg", "x"), F("a.cls", "-1")},
     2,
     NULL,
     {{0}},
     {"member 'a.cls'", "not a class index", NULL}},
    {{F("a.jpg", "x"), F("a.cls", "3")},
     2,
     "a\nb\nc\n",
     {{0}},
     {"member 'a.cls'", "'3' is not a class index in [0, 3)", "ROOT/classes.txt names 3"}},
    {{F("a.jpg", "x"), F("a.cls", "1")},
     2,
     NULL,
     {F("v.jpg", "x"), F("v.cls", "2")},
     {"ROOT/val-000000.tar: member 'v.cls'", "'2' is not a class index in [0, 2)", NULL}},
    {{{"a.jpg", NULL, AE_IFLNK, "/etc/passwd"}, F("a.cls", "0")},
     2,
     NULL,
     {{0}},
     {"member 'a.jpg'", "symbolic link", NULL}},
    {{F("a.jpg", "x"), F("a.cls", "0")},
     2,
     "a\n\nc\n",
     {{0}},
     {"ROOT/classes.txt", "empty line", NULL}},
};

START_TEST(shards_refusals)
{
    const struct refusal *r = &refusals[_i];

    put_tar("train-000000.tar", r->m, r->n);
    if (r->classes)
        put("classes.txt", r->classes);
    if (r->val[0].name)
        put_tar("val-000000.tar", r->val, 2);
    expect_refused(hp_source_open_shards, 0, r->want);
}
END_TEST

START_TEST(shards_refusals_raw)
{
    put_raw_tar("train-000000.tar", "big.jpg", HP_SOURCE_MAX_SAMPLE + 1);
    expect_refused(hp_source_open_shards, 0,
                   (const char *const[]){"ROOT/train-000000.tar: member 'big.jpg'",
                                         "more than a sample may be", NULL});
    put("train-000000.tar.x", NULL);
    put("train-000001.tar", "this is not a tar file, it is text that goes on for a while......");
    put_tar("train-000000.tar", (const struct mem[]){F("a.jpg", "x"), F("a.cls", "0")}, 2);
    expect_refused(hp_source_open_shards, 0,
                   (const char *const[]){"ROOT/train-000001.tar", "not a readable tar", NULL});
}
END_TEST

/* the fuzz corpus's seed with a member "../escape.jpg" (tests/fuzz/corpus/tar/escape.tar) */
START_TEST(shards_escape_seed)
{
    char path[1024], buf[16384];
    int err = 0;
    FILE *in = hp_infile_fopen("tests/fuzz/corpus/tar/escape.tar", 0, NULL, &err), *out;

    ck_assert_msg(in, "tests/fuzz/corpus/tar/escape.tar (run from the repository): %s",
                  hp_strerror(err));
    const size_t n = fread(buf, 1, sizeof(buf), in);
    fclose(in);
    ck_assert_uint_gt(n, 1024);
    snprintf(path, sizeof(path), "%s/train-000000.tar", root);
    ck_assert_ptr_nonnull(out = fopen(path, "w"));
    ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(out);
    expect_refused(hp_source_open_shards, 0,
                   (const char *const[]){"ROOT/train-000000.tar: member '../escape.jpg'",
                                         "a '..' component", NULL});
}
END_TEST

START_TEST(no_data_set)
{
    char want[512];

    put("notes.txt", NULL);
    expect_refused(open_any, 0, (const char *const[]){"ROOT", "holds none of", NULL});
    expect_refused(hp_source_open_shards, 0,
                   (const char *const[]){"ROOT", "no training shard", NULL});
    expect_refused(hp_source_open_folder, 0, (const char *const[]){"ROOT/train", NULL});
    /* no directory for imagenet: the message says what to give */
    struct hp_source *s;
    char msg[512];
    unsetenv("HETPIPE_DATA");
    hp_log_capture(msg, sizeof(msg));
    ck_assert_int_lt(hp_source_open(NULL, "imagenet", 0, &s), 0);
    hp_log_capture(NULL, 0);
    snprintf(want, sizeof(want),
             "a model with dataset = imagenet needs --data DIR: an image folder "
             "(DIR/train/CLASS/*.jpg) or tar shards (DIR/train-000000.tar)");
    ck_assert_str_eq(msg, want);
}
END_TEST

/* ---- the shard cache ---- */
#define NSH 5
#define PER 4

/* sample id's bytes: a text of 20 + 53 * id % 300 characters */
static void content(long id, char *buf, size_t n)
{
    const size_t len = 20 + (size_t)(53 * id % 300);
    ck_assert_uint_lt(len, n);
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)('a' + (id * 7 + (long)i) % 26);
    buf[len] = '\0';
}

static void put_cache_shards(void)
{
    char data[NSH * PER][400], names[NSH * PER][2][32], cls[NSH * PER][8], file[64];

    for (int k = 0; k < NSH; k++) {
        struct mem m[2 * PER];
        for (int j = 0; j < PER; j++) {
            const int id = k * PER + j;
            content(id, data[id], sizeof(data[id]));
            snprintf(names[id][0], sizeof(names[id][0]), "%08d.jpg", id);
            snprintf(names[id][1], sizeof(names[id][1]), "%08d.cls", id);
            snprintf(cls[id], sizeof(cls[id]), "%d", id % 3);
            m[2 * j] = (struct mem){names[id][0], data[id], 0, NULL};
            m[2 * j + 1] = (struct mem){names[id][1], cls[id], 0, NULL};
        }
        snprintf(file, sizeof(file), "train-%06d.tar", k);
        put_tar(file, m, 2 * PER);
    }
}

struct reader {
    struct hp_source *s;
    const long *order;
    long n;
    long *next; /* shared, under lock */
    pthread_mutex_t *lock;
    int bad;
};

/* Read order[] (the next index from the shared counter), checking every byte. */
static void *read_some(void *arg)
{
    struct reader *r = arg;
    char want[400], err[512];

    for (;;) {
        pthread_mutex_lock(r->lock);
        const long i = (*r->next)++;
        pthread_mutex_unlock(r->lock);
        if (i >= r->n)
            break;
        struct hp_sample smp;
        const long id = r->order[i];
        if (r->s->ops->read(r->s, HP_SPLIT_TRAIN, id, &smp, err, sizeof(err)) != 0) {
            r->bad++;
            continue;
        }
        content(id, want, sizeof(want));
        if (smp.size != strlen(want) || memcmp(smp.data, want, smp.size) != 0 ||
            smp.label != id % 3)
            r->bad++;
        r->s->ops->release(r->s, &smp);
    }
    return NULL;
}

static void read_order(struct hp_source *s, const long *order, long n, int threads)
{
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    struct reader r[4];
    pthread_t t[4];
    long next = 0;

    s->ops->begin(s, HP_SPLIT_TRAIN, order, n);
    for (int i = 0; i < threads; i++) {
        r[i] = (struct reader){s, order, n, &next, &lock, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, read_some, &r[i]), 0);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(r[i].bad, 0);
    }
}

/* The feed's shard order: shards permuted, each one's members permuted. */
static void shard_order(long *order, uint64_t seed)
{
    int sh[NSH], mem[PER];

    hp_permute(sh, NSH, seed);
    for (int k = 0; k < NSH; k++) {
        hp_permute(mem, PER, seed * 31 + (uint64_t)k);
        for (int j = 0; j < PER; j++)
            order[k * PER + j] = sh[k] * PER + mem[j];
    }
}

START_TEST(shards_cache_order)
{
    struct hp_source *s;
    struct hp_shard_stats st;
    long order[NSH * PER];
    char msg[512];

    put_cache_shards();
    ck_assert_int_eq(open_msg(hp_source_open_shards, 0, &s, msg, sizeof(msg)), 0);
    ck_assert_int_eq(s->n[0], NSH * PER);
    shard_order(order, 7);
    read_order(s, order, NSH * PER, 1);
    ck_assert_int_eq(hp_source_shard_stats(s, &st), 0);
    ck_assert_int_eq(st.loads, NSH); /* each shard read once, whole */
    ck_assert_int_le(st.max_resident, 2);
    ck_assert_int_ge(st.max_resident, 1);
    /* the next epoch, 4 threads at once */
    shard_order(order, 8);
    read_order(s, order, NSH * PER, 4);
    ck_assert_int_eq(hp_source_shard_stats(s, &st), 0);
    ck_assert_int_le(st.max_resident, 2);
    /* 2 shards' bytes at most: each shard here is under 4 * 320 bytes */
    ck_assert_uint_le(st.max_bytes, 2 * PER * 320);
    hp_source_close(s);
}
END_TEST

/* An order that visits shards back and forth, and reads without begin: still every byte */
START_TEST(shards_cache_any_order)
{
    struct hp_source *s;
    struct hp_shard_stats st;
    long order[NSH * PER];
    int perm[NSH * PER];
    char msg[512];

    put_cache_shards();
    put_tar("val-000000.tar", (const struct mem[]){F("v.jpg", "image v"), F("v.cls", "1")}, 2);
    ck_assert_int_eq(open_msg(hp_source_open_shards, 1, &s, msg, sizeof(msg)), 0);
    hp_permute(perm, NSH * PER, 3);
    for (int i = 0; i < NSH * PER; i++)
        order[i] = perm[i];
    read_order(s, order, NSH * PER, 3);
    expect_sample(s, HP_SPLIT_VAL, 0, "image v", 1, "/val-000000.tar:v.jpg");
    s->ops->begin(s, HP_SPLIT_TRAIN, NULL, 0); /* no order: loaded when read */
    for (long id = NSH * PER - 1; id >= 0; id--) {
        char want[400];
        content(id, want, sizeof(want));
        expect_sample(s, HP_SPLIT_TRAIN, id, want, (int)(id % 3), ".jpg");
    }
    ck_assert_int_eq(hp_source_shard_stats(s, &st), 0);
    ck_assert_int_le(st.max_resident, 2);
    hp_source_close(s);
}
END_TEST

/* A shard that changed after open: a read names the shard; reads of others go on */
START_TEST(shards_changed)
{
    struct hp_source *s;
    struct hp_sample smp;
    char msg[512];

    put_cache_shards();
    ck_assert_int_eq(open_msg(hp_source_open_shards, 0, &s, msg, sizeof(msg)), 0);
    put_tar("train-000001.tar", (const struct mem[]){F("other.jpg", "x"), F("other.cls", "0")}, 2);
    ck_assert_int_eq(s->ops->read(s, 0, PER, &smp, msg, sizeof(msg)), -HP_EDATA);
    ck_assert_msg(strstr(msg, "/train-000001.tar") && strstr(msg, "changed"), "%s", msg);
    char want[400];
    content(0, want, sizeof(want));
    expect_sample(s, 0, 0, want, 0, "/train-000000.tar:00000000.jpg");
    hp_source_close(s);
}
END_TEST

START_TEST(idx_source)
{
    struct hp_source *s;
    struct hp_dataset d = {0};
    struct hp_sample smp;
    char err[256];

    if (access(HP_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0)
        return; /* tests/deps.sh installs it; test_data.c fails without it */
    unsetenv("HETPIPE_DATA");
    ck_assert_int_eq(hp_source_open(NULL, "fashion-mnist", 1, &s), 0);
    ck_assert_int_eq(s->kind, HP_SOURCE_IDX);
    ck_assert_str_eq(hp_source_kind_name(s), "idx");
    ck_assert_int_eq(s->encoded, 0);
    ck_assert_int_eq(s->n[0], 60000);
    ck_assert_int_eq(s->n[1], 10000);
    ck_assert_int_eq(s->nclasses, 10);
    ck_assert_str_eq(s->classes[9], "9_ankle_boot");
    ck_assert_int_eq(s->c * s->h * s->w, 784);
    ck_assert_int_eq(hp_dataset_load_fashion_mnist(HP_FASHION_MNIST_DIR, 0, &d), 0);
    ck_assert_int_eq(s->ops->read(s, HP_SPLIT_VAL, 1234, &smp, err, sizeof(err)), 0);
    ck_assert_uint_eq(smp.size, 784 * sizeof(float));
    ck_assert(memcmp(smp.data, d.images + 1234 * 784, smp.size) == 0);
    ck_assert_int_eq(smp.label, d.labels[1234]);
    s->ops->release(s, &smp);
    hp_dataset_release(&d);
    hp_source_close(s);
}
END_TEST

Suite *suite_source(void)
{
    Suite *s = suite_create("source");
    TCase *t = tcase_create("source");

    tcase_set_timeout(t, 60);
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, folder_layout);
    tcase_add_test(t, folder_val_subset);
    tcase_add_test(t, folder_refusals);
    tcase_add_test(t, folder_empty_train);
    tcase_add_test(t, folder_read_refusals);
    tcase_add_test(t, shards_layout);
    tcase_add_test(t, shards_classes_txt);
    tcase_add_loop_test(t, shards_refusals, 0, (int)(sizeof(refusals) / sizeof(refusals[0])));
    tcase_add_test(t, shards_refusals_raw);
    tcase_add_test(t, shards_escape_seed);
    tcase_add_test(t, no_data_set);
    tcase_add_test(t, shards_cache_order);
    tcase_add_test(t, shards_cache_any_order);
    tcase_add_test(t, shards_changed);
    tcase_add_test(t, idx_source);
    suite_add_tcase(s, t);
    return s;
}
