/* source_folder.c - an image folder in torchvision's ImageFolder layout as a source (source.h):
 * ROOT/train/CLASS/FILE and ROOT/val/CLASS/FILE.
 *
 * Classes: train's subdirectories in strcmp order (the label is the index); val's must be
 * among them. Samples: the .jpg/.jpeg/.png files (extension in any case) of each class folder,
 * in strcmp order, class by class: the ids of class k are first[k] .. first[k+1] - 1. Entries
 * whose name starts with '.' are passed over; other files and directories inside class
 * folders too (counted in nskipped). A class folder may be a symbolic link to a directory, and
 * an image a symbolic link to a file (a user's folder may link to images kept elsewhere): it
 * is resolved when read, and must then be a regular file (hp_infile_openat refuses anything
 * else). An image name that is a FIFO, a device or a socket is an error at open.
 *
 * Memory: the file names (not paths) in one arena, and one 8-byte offset per sample: ImageNet's
 * 1.28 M files take about 40 MB. A read opens CLASS/FILE relative to the split's directory
 * descriptor and reads it into a new buffer (sample.hold; release frees it): thread-safe, no
 * shared state changes after open.
 */
#include "source.h"

#include "error.h"
#include "infile.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const split_names[2] = {"train", "val"};

struct folder_split {
    int fd; /* ROOT/SPLIT, or -1 */
    long *first;
    uint64_t *off; /* [n]: the file's name in the arena */
    size_t cap;
};

struct folder_source {
    struct hp_source s;
    struct folder_split sp[2];
    char *arena;
    size_t alen, acap;
};

static int is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');

    return dot && dot != name &&
           (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 ||
            strcasecmp(dot, ".png") == 0);
}

/* What an entry is: its d_type, or (unknown) fstatat's without following a link. */
static int entry_type(int dirfd, const struct dirent *e, struct stat *st)
{
    if (e->d_type != DT_UNKNOWN)
        return e->d_type;
    if (fstatat(dirfd, e->d_name, st, AT_SYMLINK_NOFOLLOW) != 0)
        return DT_UNKNOWN;
    return S_ISREG(st->st_mode)   ? DT_REG
           : S_ISDIR(st->st_mode) ? DT_DIR
           : S_ISLNK(st->st_mode) ? DT_LNK
                                  : DT_FIFO; /* FIFO, device, socket: not an image */
}

/* 1 when the entry is a directory, following a link. */
static int is_dir_entry(int dirfd, const struct dirent *e)
{
    struct stat st;

    if (e->d_type == DT_DIR)
        return 1;
    if (e->d_type != DT_LNK && e->d_type != DT_UNKNOWN)
        return 0;
    return fstatat(dirfd, e->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

static int cmp_off(const void *a, const void *b, void *arena)
{
    return strcmp((const char *)arena + *(const uint64_t *)a,
                  (const char *)arena + *(const uint64_t *)b);
}

/* Class folder `cls` of split sp: its images appended to sp's ids (sorted among themselves). */
static int list_class(struct folder_source *x, int split, const char *cls, const char *disp)
{
    struct folder_split *sp = &x->sp[split];
    const int cfd = openat(sp->fd, cls, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = cfd >= 0 ? fdopendir(cfd) : NULL;
    const long start = x->s.n[split];
    char q[600];
    struct dirent *e;
    struct stat st;
    int rc = 0;

    if (!d) {
        rc = -errno;
        if (cfd >= 0)
            close(cfd);
        hp_error("cannot open class folder '%s': %s", disp, hp_strerror(rc));
        return rc;
    }
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        const int t = entry_type(cfd, e, &st);
        if (!is_image_name(e->d_name) || t == DT_DIR) {
            x->s.nskipped[split]++;
            continue;
        }
        if (t != DT_REG && t != DT_LNK) {
            char whole[4800];
            snprintf(whole, sizeof(whole), "%.4400s/%s", disp, e->d_name);
            if (fstatat(cfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                memset(&st, 0, sizeof(st));
            hp_error("'%s' is %s, not a regular file (an image folder holds image files)",
                     hp_str_escape(whole, q, sizeof(q)), hp_infile_kind(&st));
            rc = -HP_EDATA;
            break;
        }
        const size_t len = strlen(e->d_name) + 1;
        const long id = x->s.n[split];
        if ((rc = hp_source_grow((void **)&x->arena, &x->acap, x->alen + len, 1)) == 0 &&
            (rc = hp_source_grow((void **)&sp->off, &sp->cap, (size_t)id + 1, sizeof(uint64_t))) ==
                0) {
            memcpy(x->arena + x->alen, e->d_name, len);
            sp->off[id] = x->alen;
            x->alen += len;
            x->s.n[split]++;
        }
    }
    closedir(d);
    if (rc == 0 && split == HP_SPLIT_TRAIN && x->s.n[split] == start) {
        hp_error("class folder %s holds no .jpg/.jpeg/.png image",
                 hp_str_escape(disp, q, sizeof(q)));
        rc = -HP_EDATA;
    }
    if (rc == 0 && x->s.n[split] - start > 1)
        qsort_r(sp->off + start, (size_t)(x->s.n[split] - start), sizeof(uint64_t), cmp_off,
                x->arena);
    return rc;
}

/* ROOT/SPLIT's class folders and their images. */
static int open_split(struct folder_source *x, int rootfd, int split, int need)
{
    struct folder_split *sp = &x->sp[split];
    char disp[4200], cdisp[4400], q[600], **names = NULL;
    int n = 0, rc;

    snprintf(disp, sizeof(disp), "%s/%s", x->s.root, split_names[split]);
    sp->fd = openat(rootfd, split_names[split], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sp->fd < 0) {
        rc = -errno;
        if (rc == -ENOENT && !need)
            return 0;
        hp_error("cannot open the %s split '%s': %s (an image folder holds "
                 "ROOT/%s/CLASS/*.jpg)",
                 split == HP_SPLIT_TRAIN ? "training" : "validation",
                 hp_str_escape(disp, q, sizeof(q)), hp_strerror(rc), split_names[split]);
        return rc;
    }
    rc = hp_source_list_dir(sp->fd, disp, is_dir_entry, HP_SOURCE_MAX_CLASSES, "class folders",
                            &names, &n, &x->s.nskipped[split]);
    if (rc == 0 && split == HP_SPLIT_TRAIN) {
        x->s.classes = names;
        x->s.nclasses = n;
        names = NULL;
    }
    if (rc == 0 && !(sp->first = calloc((size_t)x->s.nclasses + 1, sizeof(long))))
        rc = -HP_ENOMEM;
    /* first[k + 1] counts class k's images, then the sums make it the next class's first id
     * (val's folders, in strcmp order as train's, are met in label order) */
    for (int i = 0; rc == 0 && i < (split == HP_SPLIT_TRAIN ? x->s.nclasses : n); i++) {
        const char *cls = split == HP_SPLIT_TRAIN ? x->s.classes[i] : names[i];
        char **hit = (char **)bsearch(&cls, x->s.classes, (size_t)x->s.nclasses, sizeof(char *),
                                      hp_source_cmp_str);
        const long before = x->s.n[split];
        snprintf(cdisp, sizeof(cdisp), "%s/%s", disp, cls);
        if (!hit) {
            hp_error("class folder %s is not a class of %s/train (the validation split's "
                     "classes must be among the training split's)",
                     hp_str_escape(cdisp, q, sizeof(q)), x->s.root);
            rc = -HP_EDATA;
            break;
        }
        rc = list_class(x, split, cls, cdisp);
        sp->first[hit - x->s.classes + 1] = x->s.n[split] - before;
    }
    for (int k = 0; rc == 0 && k < x->s.nclasses; k++)
        sp->first[k + 1] += sp->first[k];
    if (rc == 0 && (x->s.n[split] == 0 && (need || split == HP_SPLIT_TRAIN))) {
        hp_error("the %s split %s holds no image (an image folder holds ROOT/%s/CLASS/*.jpg)",
                 split == HP_SPLIT_TRAIN ? "training" : "validation",
                 hp_str_escape(disp, q, sizeof(q)), split_names[split]);
        rc = -HP_EDATA;
    }
    for (int i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

static int folder_read(struct hp_source *src, int split, long id, struct hp_sample *out, char *err,
                       size_t errlen)
{
    struct folder_source *x = (struct folder_source *)src;
    char rel[600], whole[4800], q[480];
    struct stat st;
    unsigned char *buf;
    size_t got = 0;
    int fd, rc = 0;

    if ((split != HP_SPLIT_TRAIN && split != HP_SPLIT_VAL) || id < 0 || id >= src->n[split]) {
        snprintf(err, errlen, "%.400s: no sample %ld in split %d", src->root, id, split);
        return -HP_EINVAL;
    }
    const struct folder_split *sp = &x->sp[split];
    const int32_t k = hp_source_class_of(sp->first, src->nclasses, id);
    snprintf(rel, sizeof(rel), "%.290s/%.290s", src->classes[k], x->arena + sp->off[id]);
    snprintf(whole, sizeof(whole), "%.4095s/%s/%s", src->root, split_names[split], rel);
    hp_str_escape(whole, q, sizeof(q));
    fd = hp_infile_openat(sp->fd, rel, 0, &st);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open '%s': %s", q, hp_infile_why(fd, &st));
        return fd;
    }
    if (st.st_size > HP_SOURCE_MAX_SAMPLE) {
        snprintf(err, errlen, "'%s' is %lld bytes, more than an image may be (%ld)", q,
                 (long long)st.st_size, (long)HP_SOURCE_MAX_SAMPLE);
        close(fd);
        return -HP_EDATA;
    }
    buf = malloc(st.st_size > 0 ? (size_t)st.st_size : 1);
    if (!buf) {
        close(fd);
        snprintf(err, errlen, "'%s': out of memory", q);
        return -HP_ENOMEM;
    }
    while (rc == 0 && got < (size_t)st.st_size) {
        const ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -errno : -HP_EDATA;
            snprintf(err, errlen, "cannot read '%s': %s", q,
                     r < 0 ? hp_strerror(rc) : "it became shorter while read");
        }
        got += r > 0 ? (size_t)r : 0;
    }
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    out->data = buf;
    out->size = got;
    out->label = k;
    out->hold = buf;
    snprintf(out->name, sizeof(out->name), "%s", q);
    return 0;
}

static void folder_release(struct hp_source *src, struct hp_sample *smp)
{
    (void)src;
    free(smp->hold);
    smp->hold = NULL;
}

static void folder_begin(struct hp_source *src, int split, const long *ids, long n)
{
    (void)src, (void)split, (void)ids, (void)n; /* random access costs the same in any order */
}

static void folder_close(struct hp_source *src)
{
    struct folder_source *x = (struct folder_source *)src;

    for (int i = 0; i < 2; i++) {
        if (x->sp[i].fd >= 0)
            close(x->sp[i].fd);
        free(x->sp[i].first);
        free(x->sp[i].off);
    }
    free(x->arena);
    hp_source_free_common(src);
    free(x);
}

static const struct hp_source_ops folder_ops = {folder_read, folder_release, folder_begin,
                                                folder_close};

int hp_source_open_folder(const char *dir, int need_val, struct hp_source **out)
{
    struct folder_source *x = calloc(1, sizeof(*x));
    char q[600];
    int rootfd, rc;

    if (!x)
        return -HP_ENOMEM;
    x->s.ops = &folder_ops;
    x->s.kind = HP_SOURCE_FOLDER;
    x->s.encoded = 1;
    x->sp[0].fd = x->sp[1].fd = -1;
    snprintf(x->s.root, sizeof(x->s.root), "%s", dir);
    rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        rc = -errno;
        hp_error("cannot open the image folder '%s': %s", hp_str_escape(dir, q, sizeof(q)),
                 hp_strerror(rc));
    } else {
        rc = open_split(x, rootfd, HP_SPLIT_TRAIN, 1);
        if (rc == 0)
            rc = open_split(x, rootfd, HP_SPLIT_VAL, need_val);
        close(rootfd);
    }
    if (rc) {
        folder_close(&x->s);
        return rc;
    }
    *out = &x->s;
    return 0;
}
