/* proc.c - other programs and files without a shell (proc.h). */
#include "proc.h"

#include "clock.h"
#include "error.h"
#include "infile.h"
#include "log.h"
#include "options.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define KILL_GRACE_S 2.0

/* Start argv with stdout and stderr into fd `out`, stdin from /dev/null, in its own process
 * group, with default signal handling. 0 or an errno value. */
static int spawn(const char *const *argv, int out, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, dflt;
    int rc;

    sigemptyset(&none);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigaddset(&dflt, SIGTERM);
    sigaddset(&dflt, SIGINT);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out, 1);
    posix_spawn_file_actions_adddup2(&fa, out, 2);
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &dflt);
    rc = posix_spawnp(pid, argv[0], &fa, &at, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return rc;
}

/* Read what the child writes until the pipe closes and the child has exited, or the deadline
 * (then its group is killed). Returns 1 when it ran past the deadline. */
static int collect(int fd, pid_t pid, double timeout_s, char *buf, size_t cap, size_t *len,
                   int *status)
{
    const double deadline = hp_now_s() + timeout_s;
    double kill_at = 0.0, gone_at = 0.0;
    int killed = 0, open_fd = 1, exited = 0;

    while (open_fd || !exited) {
        const double now = hp_now_s();
        if (!killed && now > deadline) {
            kill(-pid, SIGTERM);
            killed = 1;
            kill_at = now + KILL_GRACE_S;
        } else if (killed && kill_at > 0.0 && now > kill_at) {
            kill(-pid, SIGKILL);
            kill_at = 0.0;
        }
        if (!exited && waitpid(pid, status, WNOHANG) == pid) {
            exited = 1;
            gone_at = now + 1.0; /* a grandchild may keep the pipe: not past a second */
        }
        if (exited && open_fd && now > gone_at)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (open_fd && poll(&p, 1, 50) > 0) {
            char sink[4096];
            char *dst = *len + 1 < cap ? buf + *len : sink;
            const size_t room = *len + 1 < cap ? cap - 1 - *len : sizeof(sink);
            ssize_t got = read(fd, dst, room);
            if (got <= 0 && !(got < 0 && errno == EINTR))
                open_fd = 0;
            else if (got > 0 && dst != sink)
                *len += (size_t)got;
        } else if (!open_fd) {
            usleep(20000);
        }
    }
    if (!exited)
        waitpid(pid, status, 0); /* killed above, or exited between the checks */
    return killed;
}

int hp_proc_run(const char *const *argv, double timeout_s, size_t max_out, struct hp_proc_result *r)
{
    int fds[2], rc, st = 0;
    size_t len = 0;
    pid_t pid;

    r->status = -1;
    r->out = malloc(max_out + 1);
    if (!r->out)
        return -HP_ENOMEM;
    r->out[0] = '\0';
    if (pipe2(fds, O_CLOEXEC) != 0) {
        rc = -errno;
        hp_error("cannot run '%s': %s", argv[0], strerror(errno));
        free(r->out);
        r->out = NULL;
        return rc;
    }
    fflush(stdout);
    rc = spawn(argv, fds[1], &pid);
    close(fds[1]);
    if (rc) {
        snprintf(r->out, max_out + 1, "cannot execute %s: %s", argv[0], strerror(rc));
        r->status = 127;
        close(fds[0]);
        return 0;
    }
    const int late = collect(fds[0], pid, timeout_s, r->out, max_out + 1, &len, &st);
    close(fds[0]);
    r->out[len] = '\0';
    r->status = late ? 124 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return 0;
}

int hp_rank_binary(const char *cmd, char *buf, size_t n)
{
    struct hp_options e = {.rank_bin = NULL};
    char err[512];
    ssize_t len = readlink("/proc/self/exe", buf, n > 16 ? n - 16 : 0);

    if (hp_opt_env(&e, HP_OPT_RANK_BIN, err, sizeof(err)) == 0)
        snprintf(buf, n, "%s", e.rank_bin);
    else if (len > 0) {
        buf[len] = 0;
        char *slash = strrchr(buf, '/');
        strcpy(slash ? slash + 1 : buf, "hetpipe-rank");
    } else
        snprintf(buf, n, "hetpipe-rank");
    if (access(buf, X_OK) != 0) {
        hp_error("%s: cannot execute the rank program '%s' (build it with make, or set "
                 "HETPIPE_RANK_BIN)",
                 cmd, buf);
        return -1;
    }
    return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if ((flag == FTW_DP ? rmdir(path) : unlink(path)) != 0) {
        const int e = errno;
        hp_error("cannot remove '%s': %s", path, strerror(e));
        return e; /* stops the walk; nftw returns it */
    }
    return 0;
}

int hp_remove_tree(const char *dir)
{
    /* depth first, physical: a symbolic link is removed, never followed */
    int rc = nftw(dir, remove_one, 32, FTW_DEPTH | FTW_PHYS);

    if (rc < 0) {
        rc = errno;
        hp_error("cannot remove '%s': %s", dir, strerror(rc));
    }
    return -rc;
}

void hp_tail_file(const char *path, int lines, FILE *f)
{
    FILE *in = hp_infile_fopen(path, 0, NULL, NULL);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int c, seen = 0;

    if (!in)
        return;
    while ((c = getc(in)) != EOF) {
        if (len + 1 >= cap) {
            char *bigger = realloc(buf, cap ? 2 * cap : 4096);
            if (!bigger)
                break;
            buf = bigger;
            cap = cap ? 2 * cap : 4096;
        }
        buf[len++] = (char)c;
    }
    fclose(in);
    if (!buf)
        return;
    size_t start = len;
    if (start > 0 && buf[start - 1] == '\n')
        start--;
    while (start > 0 && seen < lines)
        if (buf[--start] == '\n' && ++seen == lines)
            start++;
    fwrite(buf + start, 1, len - start, f);
    fflush(f);
    free(buf);
}
