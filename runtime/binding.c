/* binding.c - reading and writing binding files (binding.h). */
#include "binding.h"

#include "error.h"
#include "ini.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int hp_binding_role_rank(const struct hp_plan *p, const char *role)
{
    int v, s, n = 0;

    if (sscanf(role, "vw%d.stage%d%n", &v, &s, &n) == 2 && role[n] == '\0') {
        if (v < 0 || v >= p->nvws || s < 0 || s >= p->vws[v].nstages)
            return -1;
        return hp_plan_stage_rank(p, v, s);
    }
    if (sscanf(role, "ps%d%n", &s, &n) == 1 && role[n] == '\0' && s >= 0 && s < p->nshards)
        return p->nranks - p->nshards + s;
    return -1;
}

int hp_binding_save(const char *path, const struct hp_binding *b, int n)
{
    char tmp[4200];
    FILE *f;
    int ok;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    f = fopen(tmp, "w");
    if (!f) {
        int e = errno;
        hp_error("cannot write '%s': %s", tmp, strerror(e));
        return -e;
    }
    fprintf(f, "# hetpipe binding: TASK NODE DEVICE ROLE (written by hetpipe launch)\n");
    for (int i = 0; i < n; i++) {
        if (b[i].device >= 0)
            fprintf(f, "%d %s %d %s\n", b[i].task, b[i].node, b[i].device, b[i].role);
        else
            fprintf(f, "%d %s - %s\n", b[i].task, b[i].node, b[i].role);
    }
    ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    if (!ok || chmod(tmp, 0644) != 0 || rename(tmp, path) != 0) {
        int e = errno ? errno : EIO;
        hp_error("cannot write '%s': %s", path, strerror(e));
        unlink(tmp);
        return -e;
    }
    return 0;
}

int hp_binding_load(const char *path, const struct hp_plan *p, struct hp_binding **out)
{
    FILE *f = fopen(path, "r");
    struct hp_binding *b = NULL;
    int *rank_used = NULL, lineno = 0, count = 0;
    char line[512];

    if (!f) {
        hp_error("cannot read the binding file '%s': %s", path, strerror(errno));
        return -HP_ECONFIG;
    }
    b = calloc((size_t)p->nranks, sizeof(*b));
    rank_used = calloc((size_t)p->nranks, sizeof(int));
    if (!b || !rank_used)
        goto nomem;
    for (int t = 0; t < p->nranks; t++)
        b[t].task = -1;
    while (fgets(line, sizeof(line), f)) {
        char node[HP_NODE_NAME_MAX], dev[16], role[32], extra[2];
        int task, n;
        long d = -1;

        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            hp_error("%s:%d: line too long", path, lineno);
            goto bad;
        }
        n = sscanf(line, "%d %63s %15s %31s %1s", &task, node, dev, role, extra);
        if (n <= 0 && strspn(line, " \t\r\n") == strlen(line))
            continue;
        if (line[strspn(line, " \t")] == '#')
            continue;
        if (n != 4) {
            hp_error("%s:%d: expected 'TASK NODE DEVICE ROLE'", path, lineno);
            goto bad;
        }
        if (strcmp(dev, "-") != 0 && hp_parse_long(dev, 0, 4095, &d)) {
            hp_error("%s:%d: device '%s' is neither '-' nor an index 0..4095", path, lineno, dev);
            goto bad;
        }
        if (task < 0 || task >= p->nranks || b[task].task >= 0) {
            hp_error("%s:%d: task %d is %s (the plan has %d ranks)", path, lineno, task,
                     task < 0 || task >= p->nranks ? "out of range" : "given twice", p->nranks);
            goto bad;
        }
        const int r = hp_binding_role_rank(p, role);
        if (r < 0 || rank_used[r]++) {
            hp_error("%s:%d: role '%s' is %s", path, lineno, role,
                     r < 0 ? "not in the plan (vwV.stageS or psP)" : "given twice");
            goto bad;
        }
        b[task] = (struct hp_binding){.task = task, .rank = r, .device = (int)d};
        snprintf(b[task].node, sizeof(b[task].node), "%s", node);
        snprintf(b[task].role, sizeof(b[task].role), "%s", role);
        count++;
    }
    if (count != p->nranks) {
        hp_error("%s: %d tasks, but the plan has %d ranks", path, count, p->nranks);
        goto bad;
    }
    fclose(f);
    free(rank_used);
    *out = b;
    return 0;
nomem:
    hp_error("cannot read the binding file '%s': out of memory", path);
bad:
    fclose(f);
    free(rank_used);
    free(b);
    return -HP_ECONFIG;
}
