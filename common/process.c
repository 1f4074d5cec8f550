/* process.c - facts about other processes on this host (process.h). */
#include "process.h"

#include "infile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int hp_pid_stopped(long pid)
{
    char path[64], buf[512];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    fd = hp_infile_open(path, 0, NULL);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the name may hold anything: the state follows it */
    return rp && rp[1] == ' ' && rp[2] == 'T';
}

static int exit_path(const char *dir, int rank, char *buf, size_t n)
{
    const int w = snprintf(buf, n, "%s/rank-%d.exit", dir, rank);

    return w < 0 || (size_t)w >= n ? -1 : 0;
}

int hp_rank_exit_write(const char *dir, int rank, int status)
{
    char path[4200], text[32];
    const int len = snprintf(text, sizeof(text), "%d\n", status);
    int fd, rc = 0;

    if (exit_path(dir, rank, path, sizeof(path))) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    if (write(fd, text, (size_t)len) != len)
        rc = -1;
    if (close(fd) != 0)
        rc = -1;
    return rc;
}

int hp_rank_exit_read(const char *dir, int rank, int *status)
{
    char path[4200], text[32];
    struct stat st;
    ssize_t n;
    int fd;

    if (exit_path(dir, rank, path, sizeof(path)))
        return -1;
    fd = hp_infile_open(path, HP_INFILE_NOFOLLOW, &st);
    if (fd < 0)
        return -1;
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    char *end;
    const long v = strtol(text, &end, 10);
    if (end == text || *end != '\n' || v < 0 || v > 255)
        return -1;
    *status = (int)v;
    return 0;
}
