/* output.c - results written without harm to what is there (output.h). */
#include "output.h"

#include "error.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_OPEN 64

/* The files open now: their target and, when renamed at the end, their temporary file. */
static struct open_out {
    FILE *f;
    char *path;
    char *tmp; /* NULL: written in place */
    char what[32];
} opened[MAX_OPEN];

static struct open_out *slot_of(const FILE *f)
{
    for (int i = 0; i < MAX_OPEN; i++)
        if (opened[i].f == f)
            return &opened[i];
    return NULL;
}

/* A device or FIFO: opened in place, without waiting for a FIFO's reader. */
static FILE *open_in_place(const char *path, const char *what, const struct stat *st)
{
    int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    FILE *f;

    if (fd < 0) {
        hp_error("cannot write the %s to '%s': %s (a %s, written in place)", what, path,
                 errno == ENXIO ? "no process reads it" : strerror(errno),
                 S_ISFIFO(st->st_mode) ? "FIFO" : "device");
        return NULL;
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (!(f = fdopen(fd, "w"))) {
        hp_error("cannot write the %s to '%s': %s", what, path, strerror(errno));
        close(fd);
    }
    return f;
}

FILE *hp_out_open(const char *path, const char *what, mode_t perms)
{
    struct open_out *s = slot_of(NULL);
    char *target = NULL, *tmp = NULL;
    struct stat st;
    mode_t mode = perms & 07777;
    FILE *f = NULL;
    int fd = -1;

    if (!path || !*path) {
        hp_error("cannot write the %s: no file name", what);
        return NULL;
    }
    if (!s) {
        hp_error("cannot write the %s to '%s': too many open results", what, path);
        return NULL;
    }
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT) {
            hp_error("cannot write the %s to '%s': %s", what, path, strerror(errno));
            return NULL;
        }
        st.st_mode = 0; /* nothing there yet */
    } else if (S_ISLNK(st.st_mode)) {
        if (!(target = realpath(path, NULL)) || stat(target, &st) != 0) {
            hp_error("cannot write the %s to '%s': a symbolic link to a missing file", what, path);
            free(target);
            return NULL;
        }
    }
    if (!target && !(target = strdup(path))) {
        hp_error("cannot write the %s to '%s': out of memory", what, path);
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        hp_error("cannot write the %s to '%s': it is a directory (give a file name)", what, path);
        free(target);
        return NULL;
    }
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode) ||
        S_ISSOCK(st.st_mode)) {
        if (S_ISSOCK(st.st_mode)) {
            hp_error("cannot write the %s to '%s': it is a socket", what, path);
            free(target);
            return NULL;
        }
        f = open_in_place(target, what, &st);
    } else {
        if (S_ISREG(st.st_mode))
            mode &= st.st_mode & 07777; /* the old file's, never beyond perms */
        else {
            const mode_t mask = umask(0);
            umask(mask);
            mode &= ~mask;
        }
        /* the temporary in the target's directory: rename() stays within one file system */
        const char *slash = strrchr(target, '/');
        const int dirlen = slash ? (int)(slash - target) + 1 : 0;
        if (asprintf(&tmp, "%.*s.%s.XXXXXX", dirlen, target, slash ? slash + 1 : target) < 0) {
            tmp = NULL;
            hp_error("cannot write the %s to '%s': out of memory", what, path);
        } else if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
            hp_error("cannot write the %s to '%s': cannot create a file in its directory: %s", what,
                     path, strerror(errno));
        } else if (fchmod(fd, mode) != 0 || !(f = fdopen(fd, "w"))) {
            hp_error("cannot write the %s to '%s': %s", what, path, strerror(errno));
            close(fd);
            unlink(tmp);
        }
        if (!f) {
            free(tmp);
            tmp = NULL;
        }
    }
    if (!f) {
        free(target);
        return NULL;
    }
    *s = (struct open_out){.f = f, .path = target, .tmp = tmp};
    snprintf(s->what, sizeof(s->what), "%s", what);
    return f;
}

int hp_out_close(FILE *f, int ok)
{
    struct open_out *s = f ? slot_of(f) : NULL;
    int rc = 0;

    if (!f)
        return 0;
    if (!s) { /* not ours: closed as fclose would */
        return fclose(f) == 0 ? 0 : -errno;
    }
    errno = 0;
    if (ok && (fflush(f) != 0 || ferror(f) || (s->tmp && fsync(fileno(f)) != 0)))
        rc = errno ? -errno : -EIO;
    if (fclose(f) != 0 && !rc && ok)
        rc = errno ? -errno : -EIO;
    if (ok && !rc && s->tmp && rename(s->tmp, s->path) != 0)
        rc = -errno;
    if (ok && rc)
        hp_error("cannot write the %s to '%s': %s", s->what, s->path, hp_strerror(rc));
    if (s->tmp && (!ok || rc))
        unlink(s->tmp);
    free(s->path);
    free(s->tmp);
    memset(s, 0, sizeof(*s));
    return ok ? rc : 0;
}
