/* profile.c - unit signatures and applying measured profiles to the cost model. */
#include "profile.h"

#include "error.h"
#include "ini.h"
#include "log.h"
#include "rng.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

void hp_profile_signature(const struct hp_unit *u, char *buf, size_t n)
{
    uint64_t h = HP_FNV_OFFSET;

    for (int i = 0; i < u->nops; i++) {
        const struct hp_op *op = &u->ops[i];
        const int f[9] = {(int)op->type, op->in[0], op->in[1], op->filters,        op->kernel,
                          op->stride,    op->pad,   op->bias,  (int)(op->p * 1e6f)};
        h = hp_fnv1a(h, f, sizeof(f));
    }
    snprintf(buf, n, "%s-%dx%dx%d-%016llx", u->kind, u->in.c, u->in.h, u->in.w,
             (unsigned long long)h);
}

int hp_profile_apply(const char *path, struct hp_cost *c, int *applied)
{
    static const char *const head_keys[] = {"version", "type", "device", "batch", NULL};
    static const char *const unit_keys[] = {"fwd_s", "bwd_s", "memory", NULL};
    struct hp_ini *ini;
    const char *tname;
    long version, batch;
    int rc, type;

    *applied = 0;
    rc = hp_ini_load(path, &ini);
    if (rc)
        return rc;
    rc = -HP_ECONFIG;
    if (hp_ini_check_keys(ini, "profile", head_keys) ||
        hp_ini_get_long(ini, "profile", "version", 1, 0, 1, 1, &version) ||
        hp_ini_get_long(ini, "profile", "batch", 1, 0, 1, 1 << 20, &batch) ||
        hp_ini_get_str(ini, "profile", "type", 1, NULL, &tname))
        goto out;
    type = hp_gpudb_find(c->db, tname);
    if (type < 0) {
        hp_error("%s: [profile]: key 'type': unknown GPU type '%s' (add a [gpu.%s] section to "
                 "the site config, or profile with --type NAME)",
                 path, tname, tname);
        goto out;
    }
    for (int i = 0; i < hp_ini_nsections(ini); i++) {
        const char *sec = hp_ini_section(ini, i);
        if (strcmp(sec, "profile") != 0 && strncmp(sec, "unit.", 5) != 0) {
            hp_error("%s: unknown section [%s] (allowed: [profile], [unit.SIGNATURE])", path, sec);
            goto out;
        }
        if (strncmp(sec, "unit.", 5) == 0 && hp_ini_check_keys(ini, sec, unit_keys))
            goto out;
    }
    for (int u = 0; u < c->nunits; u++) {
        char sig[128], sec[160];
        double f, b, mem;
        hp_profile_signature(&c->model->units[u], sig, sizeof(sig));
        snprintf(sec, sizeof(sec), "unit.%s", sig);
        if (!hp_ini_has_section(ini, sec))
            continue;
        if (hp_ini_get_double(ini, sec, "fwd_s", 1, 0, 0, 1e6, &f) ||
            hp_ini_get_double(ini, sec, "bwd_s", 1, 0, 0, 1e6, &b) ||
            hp_ini_get_double(ini, sec, "memory", 0, 0, 0, 1e18, &mem))
            goto out;
        const double scale = (double)c->batch / (double)batch;
        hp_cost_set(c, type, u, f * scale, b * scale);
        (*applied)++;
    }
    rc = 0;
out:
    hp_ini_destroy(ini);
    return rc;
}
