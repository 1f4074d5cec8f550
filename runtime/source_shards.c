/* source_shards.c - tar shards in the WebDataset convention as a source (source.h):
 * ROOT/train-*.tar and ROOT/val-*.tar (each split's shards in strcmp order), read through
 * libarchive (tar, optionally gzip-compressed).
 *
 * A sample is the members of one key, adjacent in the tar: KEY.jpg, KEY.jpeg or KEY.png (the
 * image; one) and KEY.cls (its class index as decimal text). As in WebDataset, KEY is the
 * member's path up to the first '.' of its last component, so keys may have directories
 * ("n01440764/x.jpg": key "n01440764/x"); a leading "./" is dropped. Members of other
 * extensions and directories are passed over (nskipped). Refused, naming the shard and the
 * member: a path that is absolute or has a ".." component, a member that is not a regular
 * file (a symbolic or hard link, a device, a FIFO: shards are made by a program, and a link
 * would name data outside the member), a used member larger than HP_SOURCE_MAX_SAMPLE, a key
 * with an image and no .cls or a .cls and no image, two images for one key, a .cls that is not
 * an integer in [0, nclasses). nclasses: the lines of ROOT/classes.txt (the class names), else
 * the largest training label + 1 (names "0", "1", ...).
 *
 * Open reads every shard's headers and .cls members (image data is skipped); per sample it
 * keeps the label, the image's size and member name (in one arena). Reading: a cache of at
 * most 2 whole shards in memory (the memory bound: the bytes of the 2 largest shards' images),
 * each loaded by reading the shard from start to end through libarchive (1 MiB reads). begin()
 * gives the order: a loader thread loads the shards ahead in the order the ids first visit
 * them, into a free slot; a shard is dropped once every id of it in the order has been
 * released. A read of a shard that is not resident or being loaded (no begin, another split,
 * an order that visits shards back and forth) loads it in the reading thread, into a free slot
 * or in place of the least recently used unpinned one. Waits are bounded: 60 s for a shard.
 */
#include "source.h"

#include "clock.h"
#include "error.h"
#include "infile.h"
#include "log.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (1 << 20)
#define WAIT_S 60
#define KEY_MAX 1024
#define CLASSES_MAX_BYTES (16L << 20)

static const char *const split_names[2] = {"train", "val"};

enum { SLOT_EMPTY, SLOT_LOADING, SLOT_READY, SLOT_FAILED };

struct shard_split {
    int32_t *label; /* [n] */
    uint32_t *size; /* [n]: the image's bytes */
    uint64_t *name; /* [n]: the image member's path (as in the tar) in the arena */
    size_t cap;
    size_t *bytes; /* [nshards]: its images' bytes */
};

struct slot {
    int split, k, state;
    unsigned char *bytes;
    size_t *off; /* [shard_n + 1] */
    size_t nbytes;
    int pins;
    unsigned long last_use;
    char err[512];
};

struct shards_source {
    struct hp_source s;
    struct shard_split sp[2];
    char *arena;
    size_t alen, acap;
    int have_classes_txt;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct slot slot[2];
    unsigned long tick;
    /* begin()'s order: the shards of bsplit in the order its ids first visit them */
    int bsplit;
    int *seq, nseq, next_load;
    long *need, *released; /* [nshards of bsplit]: ids in the order, ids released */
    pthread_t loader;
    int loader_started, stop;
    struct hp_shard_stats stats;
};

/* What one key's members gave while a shard is scanned. */
struct group {
    char key[KEY_MAX];
    char img[KEY_MAX + 16]; /* the image member's path as in the tar */
    char cls[KEY_MAX + 16];
    int has_img, has_cls;
    uint32_t img_size;
    long label;
};

/* "" when path stays inside the shard, else why not. */
static const char *path_problem(const char *path)
{
    if (!*path)
        return "an empty name";
    if (path[0] == '/')
        return "an absolute path (a member's path must stay inside the shard)";
    for (const char *p = path; *p;) {
        const size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return "a '..' component (a member's path must stay inside the shard)";
        p += n;
        p += *p == '/';
    }
    return "";
}

/* Split a member's path into its key and its extension (after the first '.' of the last
 * component); 0, or -1 when the key is too long. */
static int split_key(const char *path, char *key, const char **ext)
{
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strchr(base, '.');
    const size_t n = dot ? (size_t)(dot - path) : strlen(path);
    if (n >= KEY_MAX)
        return -1;
    memcpy(key, path, n);
    key[n] = '\0';
    *ext = dot ? dot + 1 : "";
    return 0;
}

static int is_image_ext(const char *ext)
{
    return strcasecmp(ext, "jpg") == 0 || strcasecmp(ext, "jpeg") == 0 ||
           strcasecmp(ext, "png") == 0;
}

/* One shard's scan: the shard's path for messages, the label limit and its explanation. */
struct scan {
    struct shards_source *x;
    int split;
    const char *shard;
    char q[600]; /* the shard's path, escaped */
    int limit;
    const char *limit_why;
    int32_t max_label;
};

static void member_error(struct scan *sc, const char *member, const char *what)
{
    char m[600];

    hp_error("%s: member '%s': %s", sc->q, hp_str_escape(member, m, sizeof(m)), what);
}

/* The group's sample, when it is one (its members are all seen). */
static int flush_group(struct scan *sc, struct group *g)
{
    struct shards_source *x = sc->x;
    struct shard_split *sp = &x->sp[sc->split];
    const long id = x->s.n[sc->split];
    char what[KEY_MAX + 128], m[600];
    int rc;

    if (g->has_img && !g->has_cls) {
        snprintf(what, sizeof(what), "an image without a label (no %s.cls beside it)",
                 hp_str_escape(g->key, m, sizeof(m)));
        member_error(sc, g->img, what);
        return -HP_EDATA;
    }
    if (g->has_cls && !g->has_img) {
        snprintf(what, sizeof(what),
                 "a label without an image (no %s.jpg, .jpeg or .png "
                 "beside it)",
                 hp_str_escape(g->key, m, sizeof(m)));
        member_error(sc, g->cls, what);
        return -HP_EDATA;
    }
    if (!g->has_img)
        return 0;
    const size_t len = strlen(g->img) + 1, had = sp->cap;
    if ((rc = hp_source_grow((void **)&x->arena, &x->acap, x->alen + len, 1)) != 0 ||
        (rc = hp_source_grow((void **)&sp->label, &sp->cap, (size_t)id + 1, sizeof(int32_t))) != 0)
        return rc;
    if (sp->cap != had) { /* size and name follow label's capacity */
        void *p1 = realloc(sp->size, sp->cap * sizeof(uint32_t));
        if (p1)
            sp->size = p1;
        void *p2 = p1 ? realloc(sp->name, sp->cap * sizeof(uint64_t)) : NULL;
        if (!p2) {
            sp->cap = had; /* the arrays hold at least `had` */
            return -HP_ENOMEM;
        }
        sp->name = p2;
    }
    memcpy(x->arena + x->alen, g->img, len);
    sp->name[id] = x->alen;
    x->alen += len;
    sp->label[id] = (int32_t)g->label;
    sp->size[id] = g->img_size;
    if (g->label > sc->max_label)
        sc->max_label = (int32_t)g->label;
    x->s.n[sc->split]++;
    return 0;
}

/* A .cls member's payload as a class index; 0, or -HP_EDATA (logged). */
static int read_label(struct scan *sc, struct archive *a, const char *member, int64_t size,
                      long *label)
{
    char buf[64], what[200], m[100];
    la_ssize_t got = 0, r = 1;
    char *end;

    if (size >= (int64_t)sizeof(buf)) {
        member_error(sc, member, "not a class index (more than 63 bytes)");
        return -HP_EDATA;
    }
    while (got < size && (r = archive_read_data(a, buf + got, (size_t)(size - got))) > 0)
        got += r;
    if (r < 0 || got != size) {
        snprintf(what, sizeof(what), "cannot read it: %s",
                 r < 0 ? archive_error_string(a) : "truncated");
        member_error(sc, member, what);
        return -HP_EDATA;
    }
    buf[got] = '\0';
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r' || buf[got - 1] == ' ' ||
                       buf[got - 1] == '\t'))
        buf[--got] = '\0';
    const char *t = buf + strspn(buf, " \t"); /* white space around the digits: allowed */
    const la_ssize_t nt = got - (t - buf);
    int ok = nt > 0 && nt <= 9 && strlen(t) == (size_t)nt; /* no NUL inside */
    for (la_ssize_t i = 0; ok && i < nt; i++)
        ok = t[i] >= '0' && t[i] <= '9';
    *label = ok ? strtol(t, &end, 10) : -1;
    if (!ok || *label >= sc->limit) {
        snprintf(what, sizeof(what), "'%s' is not a class index in [0, %d)%s",
                 hp_str_escape(buf, m, sizeof(m)), sc->limit, sc->limit_why);
        member_error(sc, member, what);
        return -HP_EDATA;
    }
    return 0;
}

/* One member of a shard being scanned, into the group of its key. */
static int scan_member(struct scan *sc, struct archive *a, struct archive_entry *e, struct group *g)
{
    const char *path = archive_entry_pathname(e), *ext, *why;
    const int64_t size = archive_entry_size(e);
    char key[KEY_MAX], what[300];
    int rc;

    if (!path)
        path = "";
    why = path_problem(path);
    if (*why) {
        member_error(sc, path, why);
        return -HP_EDATA;
    }
    if (archive_entry_filetype(e) == AE_IFDIR) {
        sc->x->s.nskipped[sc->split]++;
        return 0;
    }
    if (archive_entry_filetype(e) != AE_IFREG || archive_entry_hardlink(e)) {
        snprintf(what, sizeof(what), "a %s, not a regular file (a shard's members are files)",
                 archive_entry_hardlink(e)                ? "hard link"
                 : archive_entry_filetype(e) == AE_IFLNK  ? "symbolic link"
                 : archive_entry_filetype(e) == AE_IFIFO  ? "FIFO"
                 : archive_entry_filetype(e) == AE_IFSOCK ? "socket"
                                                          : "device");
        member_error(sc, path, what);
        return -HP_EDATA;
    }
    if (split_key(path, key, &ext) != 0) {
        member_error(sc, path, "a name longer than 1023 bytes");
        return -HP_EDATA;
    }
    const int img = is_image_ext(ext), cls = strcasecmp(ext, "cls") == 0;
    if (!img && !cls) {
        sc->x->s.nskipped[sc->split]++;
        return 0;
    }
    if (size < 0 || size > HP_SOURCE_MAX_SAMPLE) {
        snprintf(what, sizeof(what), "%lld bytes, more than a sample may be (%ld)", (long long)size,
                 (long)HP_SOURCE_MAX_SAMPLE);
        member_error(sc, path, what);
        return -HP_EDATA;
    }
    if (strcmp(key, g->key) != 0 || (!g->has_img && !g->has_cls)) {
        if ((rc = flush_group(sc, g)) != 0)
            return rc;
        snprintf(g->key, sizeof(g->key), "%s", key);
        g->has_img = g->has_cls = 0;
    }
    if ((img && g->has_img) || (cls && g->has_cls)) {
        member_error(sc, path,
                     img ? "a second image for its key (one of .jpg, .jpeg, .png)"
                         : "a second .cls for its key");
        return -HP_EDATA;
    }
    if (cls) {
        snprintf(g->cls, sizeof(g->cls), "%s", path);
        g->has_cls = 1;
        return read_label(sc, a, path, size, &g->label);
    }
    snprintf(g->img, sizeof(g->img), "%s", path);
    g->has_img = 1;
    g->img_size = (uint32_t)size;
    return 0;
}

/* A new libarchive reader on shard `path` (tar, maybe gzip'd), opened on fd (*fd; close it
 * after archive_read_free). NULL with the error logged (rc in *rc). */
static struct archive *open_tar(const char *path, const char *q, int *fd, int *rc)
{
    struct stat st;
    struct archive *a;

    *fd = hp_infile_open(path, 0, &st);
    if (*fd < 0) {
        *rc = *fd;
        hp_error("cannot open shard '%s': %s", q, hp_infile_why(*fd, &st));
        return NULL;
    }
    a = archive_read_new();
    if (!a || archive_read_support_format_tar(a) != ARCHIVE_OK ||
        archive_read_support_filter_gzip(a) < ARCHIVE_WARN ||
        archive_read_open_fd(a, *fd, BLOCK) != ARCHIVE_OK) {
        *rc = a ? -HP_EDATA : -HP_ENOMEM;
        if (a)
            hp_error("shard '%s' is not a readable tar file: %s", q, archive_error_string(a));
        archive_read_free(a);
        close(*fd);
        return NULL;
    }
    return a;
}

/* Shard k of split: its samples appended. */
static int scan_shard(struct scan *sc, int k)
{
    struct shards_source *x = sc->x;
    struct archive_entry *e;
    struct archive *a;
    struct group *g = calloc(1, sizeof(*g));
    const long first = x->s.n[sc->split];
    int fd, rc = 0, r;

    sc->shard = x->s.shard_path[sc->split][k];
    hp_str_escape(sc->shard, sc->q, sizeof(sc->q));
    if (!g)
        return -HP_ENOMEM;
    a = open_tar(sc->shard, sc->q, &fd, &rc);
    if (!a) {
        free(g);
        return rc;
    }
    while (rc == 0 && ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN))
        rc = scan_member(sc, a, e, g);
    if (rc == 0 && r != ARCHIVE_EOF) {
        hp_error("shard '%s' is not a readable tar file: %s", sc->q, archive_error_string(a));
        rc = -HP_EDATA;
    }
    if (rc == 0)
        rc = flush_group(sc, g);
    archive_read_free(a);
    close(fd);
    free(g);
    x->s.shard_first[sc->split][k] = first;
    x->s.shard_n[sc->split][k] = x->s.n[sc->split] - first;
    for (long id = first; rc == 0 && id < x->s.n[sc->split]; id++)
        x->sp[sc->split].bytes[k] += x->sp[sc->split].size[id];
    return rc;
}

/* ROOT/classes.txt's lines as the class names, when the file is there. */
static int read_classes(struct shards_source *x)
{
    char path[4200], q[600];
    struct stat st;
    int err = 0, rc = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/classes.txt", x->s.root);
    hp_str_escape(path, q, sizeof(q));
    f = hp_infile_fopen(path, 0, &st, &err);
    if (!f) {
        if (err == -ENOENT)
            return 0;
        hp_error("cannot read '%s': %s", q, hp_infile_why(err, &st));
        return err;
    }
    if (st.st_size > CLASSES_MAX_BYTES) {
        hp_error("'%s' is %lld bytes: more than a list of class names may be (%ld)", q,
                 (long long)st.st_size, CLASSES_MAX_BYTES);
        fclose(f);
        return -HP_EDATA;
    }
    char *line = NULL;
    size_t lcap = 0, cap = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&line, &lcap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0 || strlen(line) != (size_t)len) {
            hp_error("'%s' line %d: %s (one class name a line, in label order)", q,
                     x->s.nclasses + 1, len ? "a NUL byte" : "an empty line");
            rc = -HP_EDATA;
        } else if (x->s.nclasses >= HP_SOURCE_MAX_CLASSES) {
            hp_error("'%s' names more than %d classes", q, HP_SOURCE_MAX_CLASSES);
            rc = -HP_EDATA;
        } else if ((rc = hp_source_grow((void **)&x->s.classes, &cap, (size_t)x->s.nclasses + 1,
                                        sizeof(char *))) == 0 &&
                   !(x->s.classes[x->s.nclasses++] = strdup(line)))
            rc = -HP_ENOMEM;
    }
    free(line);
    fclose(f);
    if (rc == 0 && x->s.nclasses == 0) {
        hp_error("'%s' is empty (one class name a line, in label order)", q);
        rc = -HP_EDATA;
    }
    x->have_classes_txt = rc == 0;
    return rc;
}

/* ROOT's SPLIT-*.tar files, sorted, into the common fields' shard arrays. */
static int list_shards(struct shards_source *x, DIR *d)
{
    struct dirent *e;
    size_t cap[2] = {0, 0};
    int rc = 0;

    while (rc == 0 && (e = readdir(d)) != NULL) {
        const size_t n = strlen(e->d_name);
        for (int sp = 0; sp < 2; sp++) {
            const size_t lp = strlen(split_names[sp]) + 1;
            char path[4200];
            if (n < lp + 4 || strncmp(e->d_name, split_names[sp], lp - 1) != 0 ||
                e->d_name[lp - 1] != '-' || strcmp(e->d_name + n - 4, ".tar") != 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", x->s.root, e->d_name);
            if ((rc = hp_source_grow((void **)&x->s.shard_path[sp], &cap[sp],
                                     (size_t)x->s.nshards[sp] + 1, sizeof(char *))) == 0 &&
                !(x->s.shard_path[sp][x->s.nshards[sp]++] = strdup(path)))
                rc = -HP_ENOMEM;
        }
    }
    for (int sp = 0; rc == 0 && sp < 2; sp++) {
        if (x->s.nshards[sp] > 1)
            qsort(x->s.shard_path[sp], (size_t)x->s.nshards[sp], sizeof(char *), hp_source_cmp_str);
        const size_t m = (size_t)x->s.nshards[sp] + 1;
        x->s.shard_first[sp] = calloc(m, sizeof(long));
        x->s.shard_n[sp] = calloc(m, sizeof(long));
        x->sp[sp].bytes = calloc(m, sizeof(size_t));
        if (!x->s.shard_first[sp] || !x->s.shard_n[sp] || !x->sp[sp].bytes)
            rc = -HP_ENOMEM;
    }
    return rc;
}

/* Every shard's index, then the classes; 0, or a negative code (logged). */
static int scan_all(struct shards_source *x, int need_val)
{
    struct scan sc = {.x = x};
    char q[600], why[800];
    int rc = 0;

    hp_str_escape(x->s.root, q, sizeof(q));
    for (int sp = 0; rc == 0 && sp < 2; sp++) {
        if (x->have_classes_txt || sp == HP_SPLIT_VAL) {
            sc.limit = x->s.nclasses;
            if (x->have_classes_txt)
                snprintf(why, sizeof(why), " (%s/classes.txt names %d classes)", q, x->s.nclasses);
            else
                snprintf(why, sizeof(why), " (the training shards' labels)");
        } else {
            sc.limit = HP_SOURCE_MAX_CLASSES;
            snprintf(why, sizeof(why), " (at most %d classes)", HP_SOURCE_MAX_CLASSES);
        }
        sc.limit_why = why;
        sc.split = sp;
        sc.max_label = -1;
        if (sp == HP_SPLIT_VAL && x->s.nshards[sp] == 0 && need_val) {
            hp_error("'%s' holds no validation shard (%s/val-000000.tar, ...)", q, q);
            rc = -HP_EDATA;
        }
        for (int k = 0; rc == 0 && k < x->s.nshards[sp]; k++)
            rc = scan_shard(&sc, k);
        if (rc == 0 && x->s.n[sp] == 0 && (sp == HP_SPLIT_TRAIN || need_val)) {
            hp_error("the %s shards in '%s' hold no sample (members KEY.jpg|jpeg|png + KEY.cls)",
                     split_names[sp], q);
            rc = -HP_EDATA;
        }
        if (rc == 0 && sp == HP_SPLIT_TRAIN && !x->have_classes_txt) {
            x->s.nclasses = sc.max_label + 1;
            x->s.classes = calloc((size_t)x->s.nclasses, sizeof(char *));
            for (int c = 0; rc == 0 && c < x->s.nclasses; c++)
                if (!x->s.classes || asprintf(&x->s.classes[c], "%d", c) < 0) {
                    if (x->s.classes)
                        x->s.classes[c] = NULL;
                    rc = -HP_ENOMEM;
                }
        }
    }
    return rc;
}

/* Shard k of split read whole into *bytes (its images, in id order) and *off. No lock held. */
static int load_shard(struct shards_source *x, int split, int k, unsigned char **bytes,
                      size_t **off, char *err, size_t errlen)
{
    const struct shard_split *sp = &x->sp[split];
    const long first = x->s.shard_first[split][k], n = x->s.shard_n[split][k];
    const char *path = x->s.shard_path[split][k];
    struct archive_entry *e;
    struct archive *a;
    char q[240], m[200];
    size_t pos = 0;
    long j = 0;
    int fd, rc = 0, r;

    hp_str_escape(path, q, sizeof(q));
    *bytes = malloc(sp->bytes[k] ? sp->bytes[k] : 1);
    *off = malloc(((size_t)n + 1) * sizeof(size_t));
    if (!*bytes || !*off) {
        snprintf(err, errlen, "%s: out of memory for %zu bytes", q, sp->bytes[k]);
        rc = -HP_ENOMEM;
    }
    a = rc ? NULL : open_tar(path, q, &fd, &rc);
    if (!a && rc == 0)
        rc = -HP_EDATA;
    if (!a && err[0] == '\0')
        snprintf(err, errlen, "cannot read shard '%s' (logged)", q);
    while (a && rc == 0 && j < n &&
           ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN)) {
        const char *name = archive_entry_pathname(e);
        const uint64_t want = sp->name[first + j];
        if (!name || strcmp(name, x->arena + want) != 0)
            continue;
        const size_t size = sp->size[first + j];
        la_ssize_t got = 0, rr = 1;
        (*off)[j] = pos;
        while ((size_t)got < size &&
               (rr = archive_read_data(a, *bytes + pos + got, size - (size_t)got)) > 0)
            got += rr;
        if (rr < 0 || (size_t)got != size || archive_entry_size(e) != (int64_t)size) {
            snprintf(err, errlen, "%s:%s: %s", q, hp_str_escape(name, m, sizeof(m)),
                     rr < 0 ? archive_error_string(a) : "changed since the shard was opened");
            rc = -HP_EDATA;
        }
        pos += size;
        j++;
    }
    if (a && rc == 0 && j < n) {
        snprintf(err, errlen, "%s: member '%s' is missing (the shard changed since it was opened)",
                 q, hp_str_escape(x->arena + sp->name[first + j], m, sizeof(m)));
        rc = -HP_EDATA;
    }
    if (a) {
        archive_read_free(a);
        close(fd);
    }
    if (rc) {
        free(*bytes);
        free(*off);
        *bytes = NULL;
        *off = NULL;
        return rc;
    }
    (*off)[n] = pos;
    return 0;
}

static struct slot *find_slot(struct shards_source *x, int split, int k)
{
    for (int i = 0; i < 2; i++)
        if (x->slot[i].state != SLOT_EMPTY && x->slot[i].split == split && x->slot[i].k == k)
            return &x->slot[i];
    return NULL;
}

static void evict(struct slot *sl)
{
    free(sl->bytes);
    free(sl->off);
    sl->bytes = NULL;
    sl->off = NULL;
    sl->state = SLOT_EMPTY;
    sl->k = -1;
}

/* A slot to load into: an empty one, else the least recently used one nobody holds (dropped);
 * NULL when both are held or loading. */
static struct slot *take_slot(struct shards_source *x, int evict_ok)
{
    struct slot *best = NULL;

    for (int i = 0; i < 2; i++)
        if (x->slot[i].state == SLOT_EMPTY)
            return &x->slot[i];
    for (int i = 0; evict_ok && i < 2; i++)
        if (x->slot[i].state != SLOT_LOADING && x->slot[i].pins == 0 &&
            (!best || x->slot[i].last_use < best->last_use))
            best = &x->slot[i];
    if (best)
        evict(best);
    return best;
}

/* Load shard k of split into sl (claimed by the caller, who holds mu; released meanwhile). */
static void fill_slot(struct shards_source *x, struct slot *sl, int split, int k)
{
    unsigned char *bytes;
    size_t *off, nres = 0;
    int resident = 0;

    sl->split = split;
    sl->k = k;
    sl->state = SLOT_LOADING;
    sl->err[0] = '\0';
    sl->nbytes = x->sp[split].bytes[k];
    sl->last_use = ++x->tick;
    x->stats.loads++;
    for (int i = 0; i < 2; i++)
        if (x->slot[i].state != SLOT_EMPTY) {
            resident++;
            nres += x->slot[i].nbytes;
        }
    if (resident > x->stats.max_resident)
        x->stats.max_resident = resident;
    if (nres > x->stats.max_bytes)
        x->stats.max_bytes = nres;
    pthread_mutex_unlock(&x->mu);
    const int rc = load_shard(x, split, k, &bytes, &off, sl->err, sizeof(sl->err));
    pthread_mutex_lock(&x->mu);
    sl->bytes = bytes;
    sl->off = off;
    sl->state = rc ? SLOT_FAILED : SLOT_READY;
    pthread_cond_broadcast(&x->cv);
}

static void *loader_main(void *arg)
{
    struct shards_source *x = arg;

    pthread_mutex_lock(&x->mu);
    while (!x->stop) {
        while (x->bsplit >= 0 && x->next_load < x->nseq) { /* resident or read: not again */
            const int k = x->seq[x->next_load];
            if (!find_slot(x, x->bsplit, k) && x->released[k] < x->need[k])
                break;
            x->next_load++;
        }
        struct slot *sl = x->bsplit >= 0 && x->next_load < x->nseq ? take_slot(x, 0) : NULL;
        if (!sl) {
            const struct timespec t = hp_deadline_in_ms(1000); /* then look at stop again */
            pthread_cond_timedwait(&x->cv, &x->mu, &t);
            continue;
        }
        fill_slot(x, sl, x->bsplit, x->seq[x->next_load++]);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

static long shard_of(const struct hp_source *s, int split, long id)
{
    int lo = 0, hi = s->nshards[split] - 1; /* the last shard whose first id <= id */

    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (s->shard_first[split][mid] <= id)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static int shards_read(struct hp_source *src, int split, long id, struct hp_sample *out, char *err,
                       size_t errlen)
{
    struct shards_source *x = (struct shards_source *)src;
    const struct timespec until = hp_deadline_in_ms(WAIT_S * 1000L);
    struct slot *sl;
    char q[280], m[220];

    if ((split != HP_SPLIT_TRAIN && split != HP_SPLIT_VAL) || id < 0 || id >= src->n[split]) {
        snprintf(err, errlen, "%.400s: no sample %ld in split %d", src->root, id, split);
        return -HP_EINVAL;
    }
    const int k = (int)shard_of(src, split, id);
    hp_str_escape(src->shard_path[split][k], q, sizeof(q));
    pthread_mutex_lock(&x->mu);
    for (;;) {
        sl = find_slot(x, split, k);
        if (sl && sl->state == SLOT_READY)
            break;
        if (sl && sl->state == SLOT_FAILED) {
            snprintf(err, errlen, "%s", sl->err);
            pthread_mutex_unlock(&x->mu);
            return -HP_EDATA;
        }
        struct slot *free_sl = sl ? NULL : take_slot(x, 1);
        if (free_sl) {
            fill_slot(x, free_sl, split, k);
            continue;
        }
        /* being loaded, or both slots held by readers: wait for a change */
        if (pthread_cond_timedwait(&x->cv, &x->mu, &until) == ETIMEDOUT) {
            snprintf(err, errlen, "%s: not loaded after %d s (both shard slots busy)", q, WAIT_S);
            pthread_mutex_unlock(&x->mu);
            return -HP_ETIMEOUT;
        }
    }
    const long j = id - src->shard_first[split][k];
    sl->pins++;
    sl->last_use = ++x->tick;
    out->data = sl->bytes + sl->off[j];
    out->size = sl->off[j + 1] - sl->off[j];
    out->label = x->sp[split].label[id];
    out->hold = sl;
    snprintf(out->name, sizeof(out->name), "%s:%s", q,
             hp_str_escape(x->arena + x->sp[split].name[id], m, sizeof(m)));
    pthread_mutex_unlock(&x->mu);
    return 0;
}

static void shards_release(struct hp_source *src, struct hp_sample *smp)
{
    struct shards_source *x = (struct shards_source *)src;
    struct slot *sl = smp->hold;

    if (!sl)
        return;
    pthread_mutex_lock(&x->mu);
    sl->pins--;
    if (x->bsplit == sl->split && x->need) {
        x->released[sl->k]++;
        if (sl->pins == 0 && x->released[sl->k] >= x->need[sl->k]) {
            evict(sl); /* the order has passed all of it */
            pthread_cond_broadcast(&x->cv);
        }
    }
    if (sl->pins == 0)
        pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    smp->hold = NULL;
}

static void shards_begin(struct hp_source *src, int split, const long *ids, long n)
{
    struct shards_source *x = (struct shards_source *)src;

    pthread_mutex_lock(&x->mu);
    free(x->seq);
    free(x->need);
    free(x->released);
    x->seq = NULL;
    x->need = x->released = NULL;
    x->bsplit = -1;
    x->nseq = x->next_load = 0;
    if (ids && n > 0 && (split == HP_SPLIT_TRAIN || split == HP_SPLIT_VAL) &&
        src->nshards[split] > 0) {
        const size_t ns = (size_t)src->nshards[split];
        x->seq = malloc(ns * sizeof(int));
        x->need = calloc(ns, sizeof(long));
        x->released = calloc(ns, sizeof(long));
        if (x->seq && x->need && x->released) {
            for (long i = 0; i < n; i++) {
                if (ids[i] < 0 || ids[i] >= src->n[split])
                    continue;
                const int k = (int)shard_of(src, split, ids[i]);
                if (x->need[k]++ == 0)
                    x->seq[x->nseq++] = k;
            }
            x->bsplit = split;
        }
        if (x->bsplit >= 0 && !x->loader_started)
            x->loader_started = pthread_create(&x->loader, NULL, loader_main, x) == 0;
    }
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

static void shards_close(struct hp_source *src)
{
    struct shards_source *x = (struct shards_source *)src;

    pthread_mutex_lock(&x->mu);
    x->stop = 1;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    if (x->loader_started)
        pthread_join(x->loader, NULL);
    for (int i = 0; i < 2; i++)
        evict(&x->slot[i]);
    for (int sp = 0; sp < 2; sp++) {
        free(x->sp[sp].label);
        free(x->sp[sp].size);
        free(x->sp[sp].name);
        free(x->sp[sp].bytes);
    }
    free(x->seq);
    free(x->need);
    free(x->released);
    free(x->arena);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    hp_source_free_common(src);
    free(x);
}

static const struct hp_source_ops shards_ops = {shards_read, shards_release, shards_begin,
                                                shards_close};

int hp_source_shard_stats(struct hp_source *s, struct hp_shard_stats *out)
{
    struct shards_source *x = (struct shards_source *)s;

    if (!s || s->kind != HP_SOURCE_SHARDS)
        return -HP_EINVAL;
    pthread_mutex_lock(&x->mu);
    *out = x->stats;
    pthread_mutex_unlock(&x->mu);
    return 0;
}

int hp_source_open_shards(const char *dir, int need_val, struct hp_source **out)
{
    struct shards_source *x = calloc(1, sizeof(*x));
    pthread_condattr_t ca;
    char q[600];
    DIR *d;
    int rc;

    if (!x)
        return -HP_ENOMEM;
    x->s.ops = &shards_ops;
    x->s.kind = HP_SOURCE_SHARDS;
    x->s.encoded = 1;
    x->bsplit = -1;
    x->slot[0].k = x->slot[1].k = -1;
    snprintf(x->s.root, sizeof(x->s.root), "%s", dir);
    pthread_mutex_init(&x->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&x->cv, &ca);
    pthread_condattr_destroy(&ca);
    d = opendir(dir);
    if (!d) {
        rc = -errno;
        hp_error("cannot open the shard directory '%s': %s", hp_str_escape(dir, q, sizeof(q)),
                 hp_strerror(rc));
    } else {
        rc = list_shards(x, d);
        closedir(d);
    }
    if (rc == 0 && x->s.nshards[HP_SPLIT_TRAIN] == 0) {
        hp_error("'%s' holds no training shard (train-000000.tar, ...)",
                 hp_str_escape(dir, q, sizeof(q)));
        rc = -HP_EDATA;
    }
    if (rc == 0)
        rc = read_classes(x);
    if (rc == 0)
        rc = scan_all(x, need_val);
    if (rc) {
        shards_close(&x->s);
        return rc;
    }
    *out = &x->s;
    return 0;
}
