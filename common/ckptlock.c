/* ckptlock.c - the lock and the owner's name of a checkpoint directory (ckptlock.h). */
#include "ckptlock.h"

#include "clock.h"
#include "error.h"
#include "infile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOCK_NAME "hetpipe.lock"
#define OWNER_NAME "hetpipe.job"
#define OWNER_HEAD "# hetpipe: the job that writes checkpoints into this directory\n"

static int held_fd = -1;

/* PARENT/NAME into out; -HP_EINVAL when it does not fit. */
static int child(const char *parent, const char *name, char *out, size_t n)
{
    const int w = snprintf(out, n, "%s/%s", parent, name);

    return w < 0 || (size_t)w >= n ? -HP_EINVAL : 0;
}

/* PARENT itself: missing (1), a directory (0), or anything else (-HP_EINVAL, why). */
static int parent_kind(const char *parent, char *why, size_t n)
{
    struct stat st;

    if (stat(parent, &st) != 0) {
        if (errno == ENOENT)
            return 1;
        snprintf(why, n, "cannot use it: %s", strerror(errno));
        return -errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, n, "it is %s, not a directory", hp_infile_kind(&st));
        return -HP_EINVAL;
    }
    return 0;
}

/* The lock file's descriptor (made with `create`); -ENOENT when there is none. */
static int lock_open(const char *parent, int create, char *why, size_t n)
{
    char path[4200];
    struct stat st;
    int fd;

    if (child(parent, LOCK_NAME, path, sizeof(path))) {
        snprintf(why, n, "the path is too long");
        return -HP_EINVAL;
    }
    fd =
        open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (create ? O_CREAT : 0),
             0600);
    if (fd < 0) {
        const int e = errno;
        if (e != ENOENT || create)
            snprintf(why, n, "cannot open its lock file %s: %s", LOCK_NAME,
                     e == ELOOP ? "a symbolic link" : strerror(e));
        return -e;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, n, "its lock file %s is not a regular file (not one hetpipe made)",
                 LOCK_NAME);
        close(fd);
        return -HP_EINVAL;
    }
    return fd;
}

/* The whole file, locked for writing through this open file description: 0, or -HP_EBUSY. */
static int lock_try(int fd)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};

    if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
        return 0;
    return errno == EAGAIN || errno == EACCES ? -HP_EBUSY : -errno;
}

/* The owner that PARENT/hetpipe.job names, for a message ("job J, pid P on H, started T, Slurm
 * job S"; its values escaped: the file may hold anything), and its SLURM_JOB_ID. */
static void owner_read(const char *parent, char *who, size_t n, char *slurm, size_t sn)
{
    char path[4200], text[2048], job[40] = "?", host[300] = "?", pid[24] = "?", at[40] = "?";
    FILE *f = child(parent, OWNER_NAME, path, sizeof(path))
                  ? NULL
                  : hp_infile_fopen(path, HP_INFILE_NOFOLLOW, NULL, NULL);

    snprintf(slurm, sn, "%s", "");
    snprintf(who, n, "a job that has not named itself in %s", OWNER_NAME);
    if (!f)
        return;
    while (fgets(text, sizeof(text), f)) {
        char key[32], val[300], shown[sizeof(val) * 4];
        text[strcspn(text, "\n")] = '\0';
        if (sscanf(text, "%31s = %299[^\n]", key, val) != 2)
            continue;
        hp_str_escape(val, shown, sizeof(shown));
        if (!strcmp(key, "job"))
            snprintf(job, sizeof(job), "%.32s", shown);
        else if (!strcmp(key, "host"))
            snprintf(host, sizeof(host), "%.256s", shown);
        else if (!strcmp(key, "pid"))
            snprintf(pid, sizeof(pid), "%.20s", shown);
        else if (!strcmp(key, "started"))
            snprintf(at, sizeof(at), "%.32s", shown);
        else if (!strcmp(key, "slurm_job_id") && strcmp(val, "-"))
            snprintf(slurm, sn, "%.60s", shown);
    }
    fclose(f);
    snprintf(who, n, "job %s, pid %s on %s, started %s%s%s", job, pid, host, at,
             slurm[0] ? ", Slurm job " : "", slurm);
}

/* Whether the lock's holder is an earlier run of this Slurm job (a requeued job). */
static int same_slurm_job(const char *slurm)
{
    const char *mine = getenv("SLURM_JOB_ID");

    return mine && *mine && slurm[0] && !strcmp(mine, slurm);
}

static int busy(const char *parent, char *why, size_t n, int *same)
{
    char who[800], slurm[64];

    owner_read(parent, who, sizeof(who), slurm, sizeof(slurm));
    *same = same_slurm_job(slurm);
    snprintf(why, n,
             "it is in use by another job (%s): two jobs would remove each other's checkpoints; "
             "give this job another --checkpoint-dir, or wait until that job ends",
             who);
    return -HP_EBUSY;
}

/* A job that has just been killed holds its lock until the kernel has closed its files, a
 * moment after its processes have left the process table: a lock is taken to be another job's
 * only once it has been held for this long. */
#define GONE_MS 2000

int hp_ckpt_parent_check(const char *parent, char *why, size_t n)
{
    const double deadline = hp_now_s() + GONE_MS / 1000.0;
    int rc = parent_kind(parent, why, n), fd, same = 0;

    if (rc)
        return rc > 0 ? 0 : rc;
    fd = lock_open(parent, 0, why, n);
    if (fd == -ENOENT)
        return 0;
    if (fd < 0)
        return fd;
    while ((rc = lock_try(fd)) == -HP_EBUSY && hp_now_s() < deadline)
        usleep(100 * 1000);
    close(fd); /* a probe: the lock (if taken) goes with the descriptor */
    if (rc == -HP_EBUSY && (rc = busy(parent, why, n, &same)) && same)
        rc = 0; /* the rank waits for its own job's earlier run */
    else if (rc && rc != -HP_EBUSY)
        snprintf(why, n, "cannot lock %s: %s", LOCK_NAME, hp_strerror(rc));
    return rc;
}

/* Name this process's job in PARENT/hetpipe.job (written to a temporary file, renamed over an
 * earlier job's; anything else of that name is left alone and refused). */
static int owner_write(const char *parent, char *why, size_t n)
{
    char path[4200], tmp[4200], host[256] = "?", at[40] = "?";
    const char *slurm = getenv("SLURM_JOB_ID");
    uint64_t id = 0;
    struct stat st;
    struct tm tm;
    const time_t now = time(NULL);
    FILE *f;
    int fd;

    if (child(parent, OWNER_NAME, path, sizeof(path)) ||
        child(parent, OWNER_NAME ".tmp", tmp, sizeof(tmp)))
        return snprintf(why, n, "the path is too long"), -HP_EINVAL;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return snprintf(why, n, "%s there is %s, not the file hetpipe names the job in", OWNER_NAME,
                        hp_infile_kind(&st)),
               -HP_EINVAL;
    if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
        id = (uint64_t)now ^ ((uint64_t)getpid() << 32);
    gethostname(host, sizeof(host) - 1);
    if (gmtime_r(&now, &tm))
        strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm);
    unlink(tmp); /* an earlier job's, cut short */
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || !(f = fdopen(fd, "w"))) {
        snprintf(why, n, "cannot write %s: %s", tmp, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -HP_EIO;
    }
    fprintf(f, OWNER_HEAD "job = %016" PRIx64 "\nhost = %s\npid = %ld\nstarted = %s\n", id, host,
            (long)getpid(), at);
    fprintf(f, "slurm_job_id = %s\n", slurm && *slurm ? slurm : "-");
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        snprintf(why, n, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -HP_EIO;
    }
    return 0;
}

int hp_ckpt_parent_lock(const char *parent, int wait_ms, char *why, size_t n)
{
    const double deadline = hp_now_s() + wait_ms / 1000.0, gone = hp_now_s() + GONE_MS / 1000.0;
    int rc = parent_kind(parent, why, n), fd, same = 0;

    if (rc < 0)
        return rc;
    if (rc > 0 && mkdir(parent, 0700) != 0 && errno != EEXIST) {
        snprintf(why, n, "cannot create it: %s", strerror(errno));
        return -errno;
    }
    if ((fd = lock_open(parent, 1, why, n)) < 0)
        return fd;
    while ((rc = lock_try(fd)) == -HP_EBUSY) {
        busy(parent, why, n, &same);
        if ((!same && hp_now_s() >= gone) || hp_now_s() >= deadline)
            break;
        usleep(100 * 1000); /* the earlier run of this Slurm job is ending */
    }
    if (rc == 0)
        rc = owner_write(parent, why, n);
    else if (rc != -HP_EBUSY)
        snprintf(why, n, "cannot lock %s: %s", LOCK_NAME, hp_strerror(rc));
    if (rc) {
        close(fd);
        return rc;
    }
    hp_ckpt_parent_unlock();
    held_fd = fd;
    return 0;
}

void hp_ckpt_parent_unlock(void)
{
    if (held_fd >= 0)
        close(held_fd);
    held_fd = -1;
}
