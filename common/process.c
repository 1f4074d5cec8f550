/* process.c - facts about other processes on this host (process.h). */
#include "process.h"

#include "infile.h"

#include <errno.h>
#include <signal.h>
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
    const struct hp_rank_exit e = {.status = status, .blame = -1};

    return hp_rank_exit_save(dir, rank, &e);
}

/* Rank R's exit record, as text (at most cap - 1 bytes, NUL-terminated). 0 or -1. */
static int read_record(const char *dir, int rank, char *text, size_t cap)
{
    char path[4200];
    ssize_t n;
    int fd;

    if (exit_path(dir, rank, path, sizeof(path)))
        return -1;
    fd = hp_infile_open(path, HP_INFILE_NOFOLLOW, NULL);
    if (fd < 0)
        return -1;
    n = read(fd, text, cap - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    return 0;
}

int hp_rank_exit_read(const char *dir, int rank, int *status)
{
    char text[32];

    if (read_record(dir, rank, text, sizeof(text)))
        return -1;
    char *end;
    const long v = strtol(text, &end, 10);
    if (end == text || *end != '\n' || v < 0 || v > 255)
        return -1;
    *status = (int)v;
    return 0;
}

int hp_rank_exit_save(const char *dir, int rank, const struct hp_rank_exit *e)
{
    char path[4200], text[256];
    int len = snprintf(text, sizeof(text), "%d\n", e->status), fd, rc = 0;

    if (e->signal > 0)
        len += snprintf(text + len, sizeof(text) - (size_t)len, "signal %d\n", e->signal);
    if (e->blame >= 0) /* why: one line, cut to fit */
        len += snprintf(text + len, sizeof(text) - (size_t)len, "blame %d %.*s\n", e->blame,
                        (int)strcspn(e->why, "\n"), e->why);
    if (len >= (int)sizeof(text))
        len = (int)sizeof(text) - 1;
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

int hp_rank_exit_load(const char *dir, int rank, struct hp_rank_exit *e)
{
    char text[512];
    int v;

    *e = (struct hp_rank_exit){.blame = -1};
    if (hp_rank_exit_read(dir, rank, &e->status) || read_record(dir, rank, text, sizeof(text)))
        return -1;
    for (char *line = strchr(text, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        int used = 0;
        if (sscanf(line + 1, "signal %d", &v) == 1 && v > 0 && v < 65)
            e->signal = v;
        else if (sscanf(line + 1, "blame %d %n", &v, &used) == 1 && v >= 0 && used > 0) {
            e->blame = v;
            snprintf(e->why, sizeof(e->why), "%.*s", (int)strcspn(line + 1 + used, "\n"),
                     line + 1 + used);
        }
    }
    return 0;
}

const char *hp_signal_name(int sig, char *buf, size_t n)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
                 {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
                 {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
                 {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
                 {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
                 {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"},
                 {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"}};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].sig == sig)
            return names[i].name;
    snprintf(buf, n, "signal %d", sig);
    return buf;
}

int hp_rank_beat_create(const char *dir, int rank, char *path, size_t n)
{
    const int w = snprintf(path, n, "%s/rank-%d.alive", dir, rank);
    int fd;

    if (w < 0 || (size_t)w >= n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    return hp_rank_beat(path, 0);
}

int hp_rank_beat(const char *path, unsigned long count)
{
    char text[32];
    const int len = snprintf(text, sizeof(text), "%020lu\n", count);
    const int fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    int rc = 0;

    if (fd < 0)
        return -1;
    if (pwrite(fd, text, (size_t)len, 0) != len)
        rc = -1;
    if (close(fd) != 0)
        rc = -1;
    return rc;
}

int hp_rank_beat_read(const char *dir, int rank, unsigned long *count)
{
    char path[4200], text[32], *end;
    struct stat st;
    ssize_t n;
    int fd;

    if (snprintf(path, sizeof(path), "%s/rank-%d.alive", dir, rank) >= (int)sizeof(path))
        return -1;
    fd = hp_infile_open(path, HP_INFILE_NOFOLLOW, &st);
    if (fd < 0)
        return -1;
    n = pread(fd, text, sizeof(text) - 1, 0);
    close(fd);
    if (n != 21)
        return -1;
    text[n] = '\0';
    errno = 0;
    *count = strtoul(text, &end, 10);
    return errno || *end != '\n' ? -1 : 0;
}
