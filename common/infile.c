/* infile.c - opening a file for reading only if it is a regular file (infile.h). */
#include "infile.h"

#include "error.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int hp_infile_openat(int dirfd, const char *path, int flags, struct stat *st)
{
    struct stat own;
    int oflags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, fd;

    if (!st)
        st = &own;
    if (flags & HP_INFILE_NOFOLLOW)
        oflags |= O_NOFOLLOW;
    fd = openat(dirfd, path, oflags);
    if (fd < 0) {
        const int e = errno;
        /* O_NOFOLLOW's ELOOP: the last component is a link (or a loop of them) */
        if (e == ELOOP && (flags & HP_INFILE_NOFOLLOW) &&
            fstatat(dirfd, path, st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st->st_mode))
            return -HP_ENOTREG;
        return -e;
    }
    if (fstat(fd, st) != 0) {
        const int e = errno;
        close(fd);
        return -e;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return -HP_ENOTREG;
    }
    const int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        const int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int hp_infile_open(const char *path, int flags, struct stat *st)
{
    return hp_infile_openat(AT_FDCWD, path, flags, st);
}

FILE *hp_infile_fopen(const char *path, int flags, struct stat *st, int *err)
{
    const int fd = hp_infile_open(path, flags, st);
    FILE *f;

    if (fd < 0) {
        if (err)
            *err = fd;
        errno = fd == -HP_ENOTREG ? EINVAL : -fd;
        return NULL;
    }
    if (!(f = fdopen(fd, "r"))) {
        const int e = errno;
        close(fd);
        if (err)
            *err = -e;
        errno = e;
        return NULL;
    }
    return f;
}

const char *hp_infile_kind(const struct stat *st)
{
    const mode_t m = st->st_mode & S_IFMT;

    return m == S_IFREG    ? "a regular file"
           : m == S_IFIFO  ? "a FIFO"
           : m == S_IFDIR  ? "a directory"
           : m == S_IFCHR  ? "a character device"
           : m == S_IFBLK  ? "a block device"
           : m == S_IFSOCK ? "a socket"
           : m == S_IFLNK  ? "a symbolic link"
                           : "a special file";
}

const char *hp_infile_why(int err, const struct stat *st)
{
    static const char *const why[] = {
        "it is a FIFO, not a regular file",
        "it is a directory, not a regular file",
        "it is a character device, not a regular file",
        "it is a block device, not a regular file",
        "it is a socket, not a regular file",
        "it is a symbolic link, not a regular file",
        "it is not a regular file",
    };
    static const mode_t kinds[] = {S_IFIFO, S_IFDIR, S_IFCHR, S_IFBLK, S_IFSOCK, S_IFLNK};

    if (err != -HP_ENOTREG)
        return hp_strerror(err);
    for (int i = 0; st && i < (int)(sizeof(kinds) / sizeof(kinds[0])); i++)
        if ((st->st_mode & S_IFMT) == kinds[i])
            return why[i];
    return why[6];
}
