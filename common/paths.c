/* paths.c - finding data files by name (paths.h). */
#include "paths.h"

#include "error.h"
#include "options.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int hp_path_is_file(const char *name)
{
    const size_t len = strlen(name);

    return strchr(name, '/') || (len > 4 && strcmp(name + len - 4, ".ini") == 0);
}

int hp_path_find(const char *kind, enum hp_opt env, const char *name, char *buf, size_t n)
{
    char exe[PATH_MAX], dirs[5][PATH_MAX], err[512];
    struct hp_options e;
    int nd = 0;
    ssize_t el;

    if (!buf || n == 0)
        return -HP_ENOTFOUND;
    if (hp_path_is_file(name))
        return (size_t)snprintf(buf, n, "%s", name) < n ? 0 : -HP_ENOTFOUND;
    memset(&e, 0, sizeof(e));
    if (hp_opt_env(&e, env, err, sizeof(err)) == 0 &&
        hp_opt_format(&e, env, dirs[nd], PATH_MAX) == 0)
        nd++;
    snprintf(dirs[nd++], PATH_MAX, "etc/%s", kind);
    el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (el > 0) {
        exe[el] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(dirs[nd++], PATH_MAX, "%.3000s/../etc/%s", exe, kind);
            snprintf(dirs[nd++], PATH_MAX, "%.3000s/../share/hetpipe/%s", exe, kind);
        }
    }
    snprintf(dirs[nd++], PATH_MAX, "%s/%s", HP_DATADIR, kind);
    for (int i = 0; i < nd; i++)
        if ((size_t)snprintf(buf, n, "%.3000s/%s.ini", dirs[i], name) < n && access(buf, R_OK) == 0)
            return 0;
    return -HP_ENOTFOUND;
}
