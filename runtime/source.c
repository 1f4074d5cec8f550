/* source.c - opening a data set by what its directory holds (source.h); what the formats
 * share. */
#include "source.h"
#include "data.h"

#include "error.h"
#include "log.h"
#include "options.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IMAGENET_HINT "an image folder (DIR/train/CLASS/*.jpg) or tar shards (DIR/train-000000.tar)"

/* 1 when dir holds an entry named PREFIX*SUFFIX (train-*.tar). */
static int has_entry(const char *dir, const char *prefix, const char *suffix)
{
    DIR *d = opendir(dir);
    const size_t lp = strlen(prefix), ls = strlen(suffix);
    struct dirent *e;
    int found = 0;

    if (!d)
        return 0;
    while (!found && (e = readdir(d)) != NULL) {
        const size_t n = strlen(e->d_name);
        found = n >= lp + ls && strncmp(e->d_name, prefix, lp) == 0 &&
                strcmp(e->d_name + n - ls, suffix) == 0;
    }
    closedir(d);
    return found;
}

int hp_source_open(const char *dir, const char *dataset, int need_val, struct hp_source **out)
{
    struct hp_options e = {.data = NULL};
    char err[512], path[4200], q[300];
    struct stat st;

    if (!dir || !*dir) {
        if (hp_opt_env(&e, HP_OPT_DATA, err, sizeof(err)) == 0 && e.data)
            dir = e.data;
        else if (!dataset || strcmp(dataset, "fashion-mnist") == 0)
            dir = HP_FASHION_MNIST_DIR;
        else if (strcmp(dataset, "imagenet") == 0) {
            hp_error("a model with dataset = imagenet needs --data DIR: " IMAGENET_HINT);
            return -HP_EINVAL;
        } else {
            hp_error("a model with dataset = %s has no default data set: give --data DIR",
                     hp_str_escape(dataset, q, sizeof(q)));
            return -HP_EINVAL;
        }
    }
    const int fashion = !dataset || strcmp(dataset, "fashion-mnist") == 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        if (fashion) /* the model's own data set: say how to install it */
            hp_error("data set '%s' is not a directory, so there is no "
                     "'%s/train-images-idx3-ubyte.gz': install Fashion-MNIST with: apt-get "
                     "install dataset-fashion-mnist, or give --data DIR (IDX files, " IMAGENET_HINT
                     ")",
                     hp_str_escape(dir, q, sizeof(q)), q);
        else
            hp_error("data set '%s' is not a directory: give --data DIR, a directory holding the "
                     "IDX files (train-images-idx3-ubyte.gz), " IMAGENET_HINT,
                     hp_str_escape(dir, q, sizeof(q)));
        return -HP_EDATA;
    }
    snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte.gz", dir);
    if (access(path, F_OK) == 0)
        return hp_source_open_idx(dir, need_val, out);
    snprintf(path, sizeof(path), "%s/train", dir);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return hp_source_open_folder(dir, need_val, out);
    if (has_entry(dir, "train-", ".tar"))
        return hp_source_open_shards(dir, need_val, out);
    hp_error("data set '%s' holds none of: IDX files (train-images-idx3-ubyte.gz), " IMAGENET_HINT,
             hp_str_escape(dir, q, sizeof(q)));
    return -HP_EDATA;
}

void hp_source_close(struct hp_source *s)
{
    if (s)
        s->ops->close(s);
}

const char *hp_source_kind_name(const struct hp_source *s)
{
    switch (s->kind) {
    case HP_SOURCE_IDX:
        return "idx";
    case HP_SOURCE_FOLDER:
        return "image folder";
    case HP_SOURCE_SHARDS:
        return "tar shards";
    }
    return "?";
}

void hp_source_free_common(struct hp_source *s)
{
    if (s->classes)
        for (int k = 0; k < s->nclasses; k++)
            free(s->classes[k]);
    free(s->classes);
    for (int sp = 0; sp < 2; sp++) {
        if (s->shard_path[sp])
            for (int k = 0; k < s->nshards[sp]; k++)
                free(s->shard_path[sp][k]);
        free(s->shard_path[sp]);
        free(s->shard_first[sp]);
        free(s->shard_n[sp]);
    }
}

int32_t hp_source_class_of(const long *first, int nclasses, long id)
{
    int lo = 0, hi = nclasses - 1; /* the last k with first[k] <= id */

    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (first[mid] <= id)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

int hp_source_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    size_t c = *cap ? *cap : 64;
    void *q;

    if (need <= *cap)
        return 0;
    while (c < need)
        c *= 2;
    q = realloc(*p, c * elem);
    if (!q)
        return -HP_ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

int hp_source_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int hp_source_list_dir(int dirfd, const char *disp, int (*keep)(int, const struct dirent *),
                       int max, const char *what, char ***names, int *n, long *skipped)
{
    const int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    size_t cap = 0;
    int rc = 0;

    *names = NULL;
    *n = 0;
    if (!d) {
        rc = -errno;
        if (fd >= 0)
            close(fd);
        hp_error("cannot list '%s': %s", disp, hp_strerror(rc));
        return rc;
    }
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (keep && !keep(dirfd, e)) {
            if (skipped)
                (*skipped)++;
            continue;
        }
        if (*n >= max) {
            hp_error("'%s' holds more than %d %s", disp, max, what);
            rc = -HP_EDATA;
        } else if ((rc = hp_source_grow((void **)names, &cap, (size_t)*n + 1, sizeof(char *))) ==
                       0 &&
                   !((*names)[*n] = strdup(e->d_name)))
            rc = -HP_ENOMEM;
        else if (rc == 0)
            (*n)++;
    }
    closedir(d);
    if (*n > 1)
        qsort(*names, (size_t)*n, sizeof(char *), hp_source_cmp_str);
    return rc;
}
