/* gpudb.c - the site configuration: GPU types, link speeds, planner defaults. */
#include "gpudb.h"

#include "error.h"
#include "ini.h"
#include "log.h"
#include "options.h"
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define GPU_PREFIX "gpu."
#define MAX_TYPES 1024

static const char *const keys_links[] = {"intra_node_gbs", "inter_node_gbs", "intra_latency_us",
                                         "inter_latency_us", NULL};
static const char *const keys_planner[] = {"efficiency", "nm_tolerance", NULL};
static const char *const keys_gpu[] = {"label",         "memory_gib",         "tflops",
                                       "bandwidth_gbs", "compute_capability", NULL};

/* The fixed sections the site config may hold, besides [gpu.NAME]. A new section ([defaults],
 * [limits], [paths]) is one more line here; its reader goes into hp_gpudb_load. */
static const struct {
    const char *name;
    const char *const *keys;
} fixed_sections[] = {
    {"links", keys_links},
    {"planner", keys_planner},
};

#define NFIXED ((int)(sizeof(fixed_sections) / sizeof(fixed_sections[0])))

static int is_gpu_section(const char *sec)
{
    return strncmp(sec, GPU_PREFIX, strlen(GPU_PREFIX)) == 0;
}

static int fixed_section(const char *sec)
{
    for (int i = 0; i < NFIXED; i++)
        if (strcmp(sec, fixed_sections[i].name) == 0)
            return i;
    return -1;
}

/* A double in (0, max]: the error says which of the two bounds was broken. */
static int get_positive(const struct hp_ini *ini, const char *sec, const char *key, int required,
                        double def, double max, double *out)
{
    double v;

    if (hp_ini_get_double(ini, sec, key, required, def, 0.0, max, &v))
        return -HP_ECONFIG;
    if (v <= 0.0) {
        hp_error("%s: [%s]: key '%s': must be greater than 0 (allowed: above 0 up to %g)",
                 hp_ini_path(ini), sec, key, max);
        return -HP_ECONFIG;
    }
    *out = v;
    return 0;
}

/* "MAJOR.MINOR", each part a plain integer (7.0, 8.6, 9.0, 10.0). */
static int get_cc(const struct hp_ini *ini, const char *sec, struct hp_gpu_type *t)
{
    const char *v;
    char buf[32], *dot;
    long major, minor;

    if (hp_ini_get_str(ini, sec, "compute_capability", 1, NULL, &v))
        return -HP_ECONFIG;
    snprintf(buf, sizeof(buf), "%s", v);
    dot = strchr(buf, '.');
    if (strlen(v) >= sizeof(buf) || !dot)
        goto bad;
    *dot = '\0';
    if (hp_parse_long(buf, 1, 99, &major) || hp_parse_long(dot + 1, 0, 9, &minor))
        goto bad;
    t->cc_major = (int)major;
    t->cc_minor = (int)minor;
    return 0;
bad:
    hp_error("%s: [%s]: key 'compute_capability': '%s' is not MAJOR.MINOR (e.g. 7.5; major "
             "1..99, minor 0..9)",
             hp_ini_path(ini), sec, v);
    return -HP_ECONFIG;
}

/* Type names are Slurm GRES types: lower-case letters, digits, '-', '_' and '.'. */
static int check_type_name(const struct hp_ini *ini, const char *sec, const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n >= HP_GPU_NAME_MAX) {
        hp_error("%s: [%s]: the GPU type name after 'gpu.' must have 1 to %d characters",
                 hp_ini_path(ini), sec, HP_GPU_NAME_MAX - 1);
        return -HP_ECONFIG;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (!islower(ch) && !isdigit(ch) && ch != '-' && ch != '_' && ch != '.') {
            hp_error("%s: [%s]: GPU type name '%s' has the character '%c' (allowed: a-z, 0-9, "
                     "'-', '_', '.')",
                     hp_ini_path(ini), sec, name, name[i]);
            return -HP_ECONFIG;
        }
    }
    return 0;
}

static int load_type(const struct hp_ini *ini, const char *sec, struct hp_gpu_type *t)
{
    const char *name = sec + strlen(GPU_PREFIX), *label;

    if (check_type_name(ini, sec, name) || hp_ini_check_keys(ini, sec, keys_gpu))
        return -HP_ECONFIG;
    snprintf(t->name, sizeof(t->name), "%s", name);
    if (hp_ini_get_str(ini, sec, "label", 0, name, &label))
        return -HP_ECONFIG;
    if (strlen(label) >= sizeof(t->label)) {
        hp_error("%s: [%s]: key 'label': longer than %d characters", hp_ini_path(ini), sec,
                 (int)sizeof(t->label) - 1);
        return -HP_ECONFIG;
    }
    snprintf(t->label, sizeof(t->label), "%s", label);
    if (get_positive(ini, sec, "memory_gib", 1, 0, 1 << 20, &t->memory_gib) ||
        get_positive(ini, sec, "tflops", 1, 0, 1e6, &t->tflops) ||
        get_positive(ini, sec, "bandwidth_gbs", 1, 0, 1e6, &t->bandwidth_gbs) ||
        get_cc(ini, sec, t))
        return -HP_ECONFIG;
    return 0;
}

static int load_fixed(const struct hp_ini *ini, struct hp_gpudb *db)
{
    if (get_positive(ini, "links", "intra_node_gbs", 0, 12.0, 1e6, &db->intra_node_gbs) ||
        get_positive(ini, "links", "inter_node_gbs", 0, 6.0, 1e6, &db->inter_node_gbs) ||
        hp_ini_get_double(ini, "links", "intra_latency_us", 0, 10.0, 0.0, 1e6,
                          &db->intra_latency_us) ||
        hp_ini_get_double(ini, "links", "inter_latency_us", 0, 20.0, 0.0, 1e6,
                          &db->inter_latency_us) ||
        get_positive(ini, "planner", "efficiency", 0, 0.5, 1.0, &db->efficiency) ||
        hp_ini_get_double(ini, "planner", "nm_tolerance", 0, 0.05, 0.0, 0.99, &db->nm_tolerance))
        return -HP_ECONFIG;
    return 0;
}

int hp_gpudb_load(const char *path, struct hp_gpudb *db)
{
    struct hp_ini *ini = NULL;
    int nsec, ntypes = 0, rc;

    memset(db, 0, sizeof(*db));
    rc = hp_ini_load(path, &ini);
    if (rc)
        return rc;
    rc = -HP_ECONFIG;
    nsec = hp_ini_nsections(ini);
    for (int s = 0; s < nsec; s++) {
        const char *sec = hp_ini_section(ini, s);
        int f = fixed_section(sec);

        if (is_gpu_section(sec)) {
            ntypes++;
        } else if (f >= 0) {
            if (hp_ini_check_keys(ini, sec, fixed_sections[f].keys))
                goto out;
        } else {
            char list[256] = "";
            for (int i = 0; i < NFIXED; i++) {
                size_t len = strlen(list);
                snprintf(list + len, sizeof(list) - len, "[%s], ", fixed_sections[i].name);
            }
            hp_error("%s: unknown section [%s] (allowed: %s[" GPU_PREFIX "NAME])", path, sec, list);
            goto out;
        }
    }
    if (ntypes == 0) {
        hp_error("%s: no GPU types (add a [" GPU_PREFIX "NAME] section per type: label, "
                 "memory_gib, tflops, bandwidth_gbs, compute_capability)",
                 path);
        goto out;
    }
    if (ntypes > MAX_TYPES) {
        hp_error("%s: %d GPU types, more than %d", path, ntypes, MAX_TYPES);
        goto out;
    }
    db->types = calloc((size_t)ntypes, sizeof(*db->types));
    if (!db->types) {
        rc = -HP_ENOMEM;
        goto out;
    }
    for (int s = 0; s < nsec; s++) {
        const char *sec = hp_ini_section(ini, s);

        if (!is_gpu_section(sec))
            continue;
        if (load_type(ini, sec, &db->types[db->ntypes]))
            goto out;
        db->ntypes++;
    }
    if (load_fixed(ini, db))
        goto out;
    rc = 0;
out:
    hp_ini_destroy(ini);
    if (rc)
        hp_gpudb_release(db);
    return rc;
}

void hp_gpudb_release(struct hp_gpudb *db)
{
    if (!db)
        return;
    free(db->types);
    memset(db, 0, sizeof(*db));
}

int hp_gpudb_find(const struct hp_gpudb *db, const char *name)
{
    if (!db || !name)
        return -1;
    for (int i = 0; i < db->ntypes; i++)
        if (strcasecmp(db->types[i].name, name) == 0)
            return i;
    return -1;
}

int hp_gpudb_default_path(char *buf, unsigned long n)
{
    struct hp_options e = {.config = NULL};
    char exe[PATH_MAX], tried[3][PATH_MAX], err[512];
    int nt = 0;
    ssize_t el;

    if (!buf || n == 0)
        return -HP_EINVAL;
    if (hp_opt_env(&e, HP_OPT_CONFIG, err, sizeof(err)) == 0) {
        if ((unsigned long)snprintf(buf, n, "%s", e.config) >= n)
            goto too_long;
        return 0;
    }
    snprintf(tried[nt++], PATH_MAX, "etc/hetpipe.conf");
    el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (el > 0) {
        char *slash;

        exe[el] = '\0';
        slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(tried[nt++], PATH_MAX, "%.3000s/../etc/hetpipe.conf", exe);
        }
    }
    snprintf(tried[nt++], PATH_MAX, "%s/hetpipe.conf", HP_SYSCONFDIR);
    for (int i = 0; i < nt; i++) {
        if (access(tried[i], R_OK) != 0)
            continue;
        if ((unsigned long)snprintf(buf, n, "%s", tried[i]) >= n)
            goto too_long;
        return 0;
    }
    hp_error("no site config: $HETPIPE_CONF is not set and none of %s%s%s%s%s is readable",
             tried[0], nt > 1 ? ", " : "", nt > 1 ? tried[1] : "", nt > 2 ? ", " : "",
             nt > 2 ? tried[2] : "");
    return -HP_ENOTFOUND;
too_long:
    hp_error("the site config's path is longer than %lu characters", n - 1);
    return -HP_ERANGE;
}
