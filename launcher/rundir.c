/* rundir.c - a job's private directory (rundir.h). */
#include "rundir.h"

#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
