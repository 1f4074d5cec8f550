/* rundir.c - a job's private directory (rundir.h). */
#include "rundir.h"

#include "error.h"
#include "ini.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Create dir 0700, or accept an existing directory of ours (not a link) and make it 0700. */
static int make_private(const char *cmd, const char *dir)
{
    struct stat st;

    if (mkdir(dir, 0700) == 0)
        return 0;
    if (errno != EEXIST) {
        hp_error("%s: cannot create directory '%s': %s", cmd, dir, strerror(errno));
        return -1;
    }
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
        hp_error("%s: '%s' exists but is not a directory of this user (a symbolic link is not "
                 "followed); give another --run-dir",
                 cmd, dir);
        return -1;
    }
    if (chmod(dir, 0700) != 0) {
        hp_error("%s: directory '%s': %s", cmd, dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* A run directory the user gave that exists: it must hold nothing (files of an earlier run,
 * its address files above all, would be taken for this one's). */
static int empty(const char *cmd, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int rc = 0;

    if (!d) {
        hp_error("%s: cannot read directory '%s': %s", cmd, dir, strerror(errno));
        return -1;
    }
    while (rc == 0 && (e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            hp_error("%s: --run-dir '%s' exists and is not empty (it holds '%s'): give a new or "
                     "empty directory",
                     cmd, dir, e->d_name);
            rc = -1;
        }
    closedir(d);
    return rc;
}

static int create(const char *cmd, const char *given, const char *base, const char *name, char *out,
                  size_t n)
{
    if (given) {
        if ((size_t)snprintf(out, n, "%s", given) >= n) {
            hp_error("%s: the run directory's path is too long", cmd);
            return -1;
        }
        if (mkdir(out, 0700) == 0)
            return 0;
        return make_private(cmd, out) || empty(cmd, out) ? -1 : 0;
    }
    if (strstr(name, "XXXXXX")) {
        if ((size_t)snprintf(out, n, "%s/%s", base, name) >= n) {
            hp_error("%s: the run directory's path under '%s' is too long", cmd, base);
            return -1;
        }
        if (!mkdtemp(out)) {
            hp_error("%s: cannot create a run directory in %s: %s", cmd, base, strerror(errno));
            return -1;
        }
        return 0;
    }
    for (int k = 0; k < 1000; k++) {
        const int len = k == 0 ? snprintf(out, n, "%s/%s", base, name)
                               : snprintf(out, n, "%s/%s.%d", base, name, k);
        if (len < 0 || (size_t)len >= n) {
            hp_error("%s: the run directory's path under '%s' is too long", cmd, base);
            return -1;
        }
        if (mkdir(out, 0700) == 0)
            return 0;
        if (errno != EEXIST) {
            hp_error("%s: cannot create run directory '%s': %s (give one with --run-dir)", cmd, out,
                     strerror(errno));
            return -1;
        }
    }
    hp_error("%s: too many run directories %s/%s.*", cmd, base, name);
    return -1;
}

int hp_rundir_sub(const char *cmd, const char *dir, const char *sub, char *out, size_t n)
{
    if ((size_t)snprintf(out, n, "%s/%s", dir, sub) >= n) {
        hp_error("%s: the path of '%s' in '%s' is too long", cmd, sub, dir);
        return -1;
    }
    return make_private(cmd, out);
}

int hp_rundir_create(const char *cmd, const char *given, const char *base, const char *name,
                     char *out, size_t n)
{
    if (!out || n == 0) {
        hp_error("%s: no room for the run directory's path", cmd);
        return -1;
    }
    const int rc = create(cmd, given, base, name, out, n);

    if (rc)
        out[0] = '\0'; /* nothing was made: no path to report */
    return rc;
}

int hp_rundir_is_job(const char *dir)
{
    char plan[4200];
    struct stat st;

    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return 0;
    if ((size_t)snprintf(plan, sizeof(plan), "%s/plan.ini", dir) >= sizeof(plan))
        return 0;
    return lstat(plan, &st) == 0 && S_ISREG(st.st_mode);
}

int hp_rundir_restart(const char *cmd, const char *job_dir, int restart, char *out, size_t n,
                      int *k)
{
    char name[32], probe[4200];
    struct stat st;
    int K = restart;

    for (int i = 1; restart < 0 && i < 100000 && K < 0; i++) {
        snprintf(probe, sizeof(probe), "%s/run-%d", job_dir, i);
        if (lstat(probe, &st) != 0 && errno == ENOENT)
            K = i;
    }
    if (K < 1) {
        hp_error("%s: no free run-K directory in '%s'", cmd, job_dir);
        return -1;
    }
    snprintf(name, sizeof(name), "run-%d", K);
    if (hp_rundir_create(cmd, NULL, job_dir, name, out, n))
        return -1;
    if (k)
        *k = K;
    return 0;
}

double hp_runrec_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int hp_runrec_write(const char *dir, const struct hp_runrec *r)
{
    char path[4200], tmp[4300];
    FILE *f;
    int bad;

    snprintf(path, sizeof(path), "%s/run.ini", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (!(f = fopen(tmp, "w"))) {
        hp_error("cannot write the run's record '%s': %s", tmp, strerror(errno));
        return -HP_EIO;
    }
    fprintf(f,
            "# one run of a job (hetpipe launch or hetpipe run); hetpipe report reads it\n"
            "[run]\nrestart = %d\nstarted = %.3f\nended = %.3f\nstatus = %d\n"
            "resumed_seq = %ld\nresumed_samples = %ld\n",
            r->restart, r->started, r->ended, r->status, r->resumed_seq, r->resumed_samples);
    bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        hp_error("cannot write the run's record '%s': %s", path, strerror(errno ? errno : EIO));
        unlink(tmp);
        return -HP_EIO;
    }
    return 0;
}

int hp_runrec_read(const char *dir, struct hp_runrec *r)
{
    static const char *const keys[] = {"restart",     "started",         "ended", "status",
                                       "resumed_seq", "resumed_samples", NULL};
    char path[4200];
    struct stat st;
    struct hp_ini *ini;
    long restart, status;
    int rc;

    *r = (struct hp_runrec){.status = -1, .resumed_seq = -1, .resumed_samples = -1};
    snprintf(path, sizeof(path), "%s/run.ini", dir);
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 1; /* a run of an older hetpipe, or one still starting */
    if (hp_ini_load(path, &ini))
        return -HP_ECONFIG;
    rc = hp_ini_check_keys(ini, "run", keys) ||
         hp_ini_get_long(ini, "run", "restart", 1, 0, 0, 1L << 30, &restart) ||
         hp_ini_get_double(ini, "run", "started", 1, 0, 0, 1e11, &r->started) ||
         hp_ini_get_double(ini, "run", "ended", 0, 0, 0, 1e11, &r->ended) ||
         hp_ini_get_long(ini, "run", "status", 0, -1, -1, 255, &status) ||
         hp_ini_get_long(ini, "run", "resumed_seq", 0, -1, -1, 1L << 40, &r->resumed_seq) ||
         hp_ini_get_long(ini, "run", "resumed_samples", 0, -1, -1, 1L << 60, &r->resumed_samples);
    hp_ini_destroy(ini);
    if (rc)
        return -HP_ECONFIG;
    r->restart = (int)restart;
    r->status = (int)status;
    return 0;
}
