/* jobopts.c - the --hetpipe-* job options and their validation (libc only: the SPANK plugin
 * links this file). */
#include "jobopts.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef HP_DATADIR
#define MODELS_DIR HP_DATADIR "/models"
#else
#define MODELS_DIR "/usr/local/share/hetpipe/models"
#endif
#ifdef HP_SYSCONFDIR
#define CONFIG_PATH HP_SYSCONFDIR "/hetpipe.conf"
#else
#define CONFIG_PATH "/etc/hetpipe/hetpipe.conf"
#endif

const struct hp_jobopt_info hp_jobopts[HP_JOBOPT_COUNT] = {
    [HP_JOBOPT_POLICY] = {"policy", "HETPIPE_POLICY", "auto|np|ed|hd|dp",
                          "how the GPUs are grouped into virtual workers"},
    [HP_JOBOPT_PLACEMENT] = {"placement", "HETPIPE_PLACEMENT", "local|default",
                             "where the parameter-server shards go"},
    [HP_JOBOPT_STALENESS] = {"staleness", "HETPIPE_STALENESS", "D",
                             "WSP staleness bound D, in waves"},
    [HP_JOBOPT_NM] = {"nm", "HETPIPE_NM", "auto|N", "minibatches in flight per virtual worker"},
    [HP_JOBOPT_MODEL] = {"model", "HETPIPE_MODEL", "NAME|PATH", "the model to train"},
    [HP_JOBOPT_BATCH] = {"batch", "HETPIPE_BATCH", "N", "minibatch size"},
    [HP_JOBOPT_EPOCHS] = {"epochs", "HETPIPE_EPOCHS", "N", "epochs to train"},
    [HP_JOBOPT_DRY_RUN] = {"dry-run", "HETPIPE_DRY_RUN", NULL,
                           "plan and print the predicted throughput; use no GPU time"},
};

/* In the order users read them; bit = 1u << enum hp_policy value. */
static const struct {
    const char *name;
    unsigned bit;
} policies[] = {
    {"auto", HP_JOBOPT_POLICY_AUTO}, {"np", HP_JOBOPT_POLICY_NP}, {"ed", HP_JOBOPT_POLICY_ED},
    {"hd", HP_JOBOPT_POLICY_HD},     {"dp", HP_JOBOPT_POLICY_DP},
};
#define NPOLICIES (sizeof(policies) / sizeof(policies[0]))

static const char *const arg_keys =
    "config, models, max_staleness, max_nm, max_batch, max_epochs, policies, default_policy, "
    "default_placement, default_staleness, default_nm, default_model, default_batch, "
    "default_epochs, default_dry-run";

void hp_joblimits_init(struct hp_joblimits *l)
{
    memset(l, 0, sizeof(*l));
    l->policies = HP_JOBOPT_POLICY_ALL;
    l->max_staleness = 64;
    l->max_nm = 64;
    l->max_batch = HP_JOBOPT_BATCH_LIMIT;
    l->max_epochs = HP_JOBOPT_EPOCHS_LIMIT;
    snprintf(l->models_dir, sizeof(l->models_dir), "%s", MODELS_DIR);
    snprintf(l->config, sizeof(l->config), "%s", CONFIG_PATH);
}

/* Strict decimal: an optional '-', then 1..19 digits, nothing else; 0 or -1 (not a number, or
 * beyond what a long long holds). */
static int parse_int(const char *s, long long *out)
{
    unsigned long long v = 0;
    int neg = 0;

    if (*s == '-') {
        neg = 1;
        s++;
    }
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        if (v > (9223372036854775807ULL - (unsigned)(*s - '0')) / 10)
            return -1;
        v = v * 10 + (unsigned)(*s - '0');
    }
    *out = neg ? -(long long)v : (long long)v;
    return 0;
}

static int int_in(const char *s, long long lo, long long hi, long long *out)
{
    long long v;

    if (parse_int(s, &v) || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static size_t policy_list(unsigned mask, char *buf, size_t n)
{
    size_t len = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < NPOLICIES; i++) {
        if (!(mask & policies[i].bit))
            continue;
        int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", policies[i].name);
        if (w < 0 || (size_t)w >= n - len)
            return len;
        len += (size_t)w;
    }
    return len;
}

void hp_jobopt_allowed(enum hp_jobopt o, const struct hp_joblimits *l, char *buf, size_t n)
{
    if (n == 0)
        return;
    switch (o) {
    case HP_JOBOPT_POLICY:
        policy_list(l->policies, buf, n);
        break;
    case HP_JOBOPT_PLACEMENT:
        snprintf(buf, n, "local, default");
        break;
    case HP_JOBOPT_STALENESS:
        snprintf(buf, n, "an integer from 0 to %d", l->max_staleness);
        break;
    case HP_JOBOPT_NM:
        snprintf(buf, n, "auto or an integer from 1 to %d", l->max_nm);
        break;
    case HP_JOBOPT_MODEL:
        snprintf(buf, n,
                 "a model name (letters, digits, '_', '.', '-') from %s, or a path to an "
                 ".ini file",
                 l->models_dir);
        break;
    case HP_JOBOPT_BATCH:
        snprintf(buf, n, "an integer from 1 to %d", l->max_batch);
        break;
    case HP_JOBOPT_EPOCHS:
        snprintf(buf, n, "an integer from 1 to %d", l->max_epochs);
        break;
    case HP_JOBOPT_DRY_RUN:
        snprintf(buf, n, "given without a value");
        break;
    default:
        snprintf(buf, n, "(unknown option)");
        break;
    }
}

static int is_model_path(const char *v)
{
    size_t len = strlen(v);

    return strchr(v, '/') || (len > 4 && strcmp(v + len - 4, ".ini") == 0);
}

static int is_model_file(const struct dirent *e)
{
    size_t nl = strlen(e->d_name);

    return nl > 4 && e->d_name[0] != '.' && strcmp(e->d_name + nl - 4, ".ini") == 0;
}

/* The models of dir in name order ("cnn, mlp"), cut with "..." to fit n >= 8 bytes; "none"
 * if there are none. */
static void model_list(const char *dir, char *buf, size_t n)
{
    struct dirent **names = NULL;
    int nn = scandir(dir, &names, is_model_file, alphasort);
    size_t len = 0;
    int cut = 0;

    buf[0] = '\0';
    for (int i = 0; i < nn; i++) {
        size_t nl = strlen(names[i]->d_name) - 4;
        if (!cut && len + 2 + nl + 4 < n) {
            len += (size_t)snprintf(buf + len, n - len, "%s%.*s", len ? ", " : "", (int)nl,
                                    names[i]->d_name);
        } else if (!cut) {
            snprintf(buf + len, n - len, "%s...", len ? ", " : "");
            cut = 1;
        }
        free(names[i]);
    }
    free(names);
    if (!buf[0])
        snprintf(buf, n, "none");
}

static int check_model(const char *what, const char *v, const struct hp_joblimits *l,
                       int check_files, char *err, size_t errlen)
{
    char path[2048], allowed[1200];
    struct stat st;

    hp_jobopt_allowed(HP_JOBOPT_MODEL, l, allowed, sizeof(allowed));
    if (!*v) {
        snprintf(err, errlen, "%s=: empty; must be %s", what, allowed);
        return -1;
    }
    if (!is_model_path(v)) {
        if (strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") !=
            strlen(v)) {
            snprintf(err, errlen, "%s=%s: not a model name; must be %s", what, v, allowed);
            return -1;
        }
        if (!check_files)
            return 0;
        if ((size_t)snprintf(path, sizeof(path), "%s/%s.ini", l->models_dir, v) >= sizeof(path) ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode) || access(path, R_OK) != 0) {
            char known[512];
            model_list(l->models_dir, known, sizeof(known));
            snprintf(err, errlen,
                     "%s=%s: unknown model: no %s.ini in %s (models there: %s); give a model "
                     "name from there, or a path to an .ini file",
                     what, v, v, l->models_dir, known);
            return -1;
        }
        return 0;
    }
    if (!check_files)
        return 0;
    if (stat(v, &st) != 0 || access(v, R_OK) != 0) {
        snprintf(err, errlen, "%s=%s: cannot read the model file: %s", what, v, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s=%s: the model file is not a regular file", what, v);
        return -1;
    }
    return 0;
}

int hp_jobopt_check(enum hp_jobopt o, const char *what, const char *value,
                    const struct hp_joblimits *l, int check_files, char *err, size_t errlen)
{
    char allowed[1200];
    long long v;
    int max = 0;

    if (errlen)
        err[0] = '\0';
    if ((unsigned)o >= HP_JOBOPT_COUNT) {
        snprintf(err, errlen, "%s: not a hetpipe option", what);
        return -1;
    }
    if (o == HP_JOBOPT_DRY_RUN) {
        if (!value || !*value || strcmp(value, "1") == 0)
            return 0;
        snprintf(err, errlen, "%s=%s: takes no value", what, value);
        return -1;
    }
    if (!value) {
        snprintf(err, errlen, "%s: needs a value", what);
        return -1;
    }
    hp_jobopt_allowed(o, l, allowed, sizeof(allowed));
    switch (o) {
    case HP_JOBOPT_POLICY:
        for (size_t i = 0; i < NPOLICIES; i++) {
            if (strcmp(value, policies[i].name) != 0)
                continue;
            if (l->policies & policies[i].bit)
                return 0;
            snprintf(err, errlen, "%s=%s: policy not allowed on this cluster; allowed: %s", what,
                     value, allowed);
            return -1;
        }
        snprintf(err, errlen, "%s=%s: unknown policy; allowed: %s", what, value, allowed);
        return -1;
    case HP_JOBOPT_PLACEMENT:
        if (strcmp(value, "local") == 0 || strcmp(value, "default") == 0)
            return 0;
        snprintf(err, errlen, "%s=%s: unknown placement; allowed: %s", what, value, allowed);
        return -1;
    case HP_JOBOPT_NM:
        if (strcmp(value, "auto") == 0 || int_in(value, 1, l->max_nm, &v) == 0)
            return 0;
        snprintf(err, errlen, "%s=%s: must be %s", what, value, allowed);
        return -1;
    case HP_JOBOPT_MODEL:
        return check_model(what, value, l, check_files, err, errlen);
    case HP_JOBOPT_STALENESS:
    case HP_JOBOPT_BATCH:
    case HP_JOBOPT_EPOCHS:
        max = o == HP_JOBOPT_STALENESS ? l->max_staleness
              : o == HP_JOBOPT_BATCH   ? l->max_batch
                                       : l->max_epochs;
        if (int_in(value, o == HP_JOBOPT_STALENESS ? 0 : 1, max, &v) == 0)
            return 0;
        snprintf(err, errlen, "%s=%s: must be %s", what, value, allowed);
        return -1;
    default:
        break;
    }
    snprintf(err, errlen, "%s: not a hetpipe option", what);
    return -1;
}

/* policies=a,b,...: the mask, or -1 with err. */
static int parse_policies(const char *arg, const char *list, unsigned *out, char *err,
                          size_t errlen)
{
    unsigned mask = 0;
    const char *p = list;
    char all[64];

    policy_list(HP_JOBOPT_POLICY_ALL, all, sizeof(all));
    while (1) {
        size_t len = strcspn(p, ",");
        size_t i;
        for (i = 0; i < NPOLICIES; i++)
            if (strlen(policies[i].name) == len && strncmp(p, policies[i].name, len) == 0)
                break;
        if (i == NPOLICIES) {
            snprintf(err, errlen,
                     "'%s': '%.*s' is not a policy; policies= takes a comma-separated list of "
                     "%s",
                     arg, (int)(len > 64 ? 64 : len), p, all);
            return -1;
        }
        mask |= policies[i].bit;
        if (!p[len])
            break;
        p += len + 1;
    }
    *out = mask;
    return 0;
}

int hp_joblimits_arg(struct hp_joblimits *l, const char *arg, char *err, size_t errlen)
{
    static const struct {
        const char *key;
        long long lo, hi;
        size_t off;
    } maxima[] = {
        {"max_staleness", 0, HP_JOBOPT_STALENESS_LIMIT,
         offsetof(struct hp_joblimits, max_staleness)},
        {"max_nm", 1, HP_JOBOPT_NM_LIMIT, offsetof(struct hp_joblimits, max_nm)},
        {"max_batch", 1, HP_JOBOPT_BATCH_LIMIT, offsetof(struct hp_joblimits, max_batch)},
        {"max_epochs", 1, HP_JOBOPT_EPOCHS_LIMIT, offsetof(struct hp_joblimits, max_epochs)},
    };
    const char *eq = strchr(arg, '=');
    const char *val = eq ? eq + 1 : NULL;
    size_t klen = eq ? (size_t)(eq - arg) : strlen(arg);
    long long v;

    if (errlen)
        err[0] = '\0';
#define KEY_IS(k) (klen == strlen(k) && strncmp(arg, (k), klen) == 0)
    if (KEY_IS("config") || KEY_IS("models")) {
        char *dst = KEY_IS("config") ? l->config : l->models_dir;
        if (!val || !*val) {
            snprintf(err, errlen, "'%s': needs a path (%.*s=PATH)", arg, (int)klen, arg);
            return -1;
        }
        if (strlen(val) >= sizeof(l->config)) {
            snprintf(err, errlen, "'%.*s=...': the path is longer than %zu bytes", (int)klen, arg,
                     sizeof(l->config) - 1);
            return -1;
        }
        snprintf(dst, sizeof(l->config), "%s", val);
        if (KEY_IS("config"))
            l->config_given = 1;
        return 0;
    }
    for (size_t i = 0; i < sizeof(maxima) / sizeof(maxima[0]); i++) {
        if (!KEY_IS(maxima[i].key))
            continue;
        if (!val || int_in(val, maxima[i].lo, maxima[i].hi, &v)) {
            snprintf(err, errlen, "'%s': %s must be an integer from %lld to %lld", arg,
                     maxima[i].key, maxima[i].lo, maxima[i].hi);
            return -1;
        }
        *(int *)((char *)l + maxima[i].off) = (int)v;
        return 0;
    }
    if (KEY_IS("policies")) {
        unsigned mask;
        if (!val || parse_policies(arg, val, &mask, err, errlen))
            return val ? -1
                       : (snprintf(err, errlen, "'%s': needs a list (policies=ed,hd)", arg), -1);
        l->policies = mask;
        return 0;
    }
    if (klen > 8 && strncmp(arg, "default_", 8) == 0) {
        for (int o = 0; o < HP_JOBOPT_COUNT; o++) {
            const char *n = hp_jobopts[o].name;
            size_t j;
            if (strlen(n) != klen - 8)
                continue;
            for (j = 0; j < klen - 8; j++) {
                char c = arg[8 + j];
                if (c != n[j] && !(c == '_' && n[j] == '-'))
                    break;
            }
            if (j < klen - 8)
                continue;
            if (!val) {
                snprintf(err, errlen, "'%s': needs a value (%.*s=VALUE)", arg, (int)klen, arg);
                return -1;
            }
            char what[64], why[1600];
            snprintf(what, sizeof(what), "%.*s", (int)klen, arg);
            /* the models directory is the site's, so a default NAME must be in it */
            if (hp_jobopt_check((enum hp_jobopt)o, what, val, l, 1, why, sizeof(why))) {
                snprintf(err, errlen, "%s", why);
                return -1;
            }
            l->defaults[o] = val;
            return 0;
        }
    }
#undef KEY_IS
    snprintf(err, errlen, "'%s': unknown argument; known: %s (each key=value)", arg, arg_keys);
    return -1;
}
