/* options.c - the options table of record and its parsing (options.h); libc only. */
#include "options.h"

#include "error.h"
#include "parse.h"

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

#define IN(c) (1u << HP_CMD_##c)
#define JOB_CMDS (IN(PLAN) | IN(RUN) | IN(LAUNCH))
#define RANK_CMDS (IN(RUN) | IN(LAUNCH) | IN(RANK))
#define TRAIN_CMDS (IN(TRAIN) | RANK_CMDS)
#define ALL_CMDS ((1u << HP_CMD_COUNT) - 1)
/* a row's words, and its special words for numbers, in place (static storage) */
#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define SPECIALS(...) ((const struct hp_opt_special[]){__VA_ARGS__, {NULL, 0.0}})

const struct hp_opt_info hp_opts[HP_OPT_COUNT] = {
#define HP_OPTION(id, field, t, ...)                                                               \
    [HP_OPT_##id] = {.type = HP_OT_##t,                                                            \
                     .offset = offsetof(struct hp_options, field),                                 \
                     .size = sizeof(((struct hp_options *)0)->field),                              \
                     __VA_ARGS__},
#include "options.def"
#undef HP_OPTION
};

int hp_opt_is_job(enum hp_opt o)
{
    return (unsigned)o < HP_OPT_COUNT && (hp_opts[o].flags & HP_OPTF_JOB) != 0;
}

int hp_opt_find(const char *name, enum hp_cmd cmd)
{
    for (int o = 0; o < HP_OPT_COUNT; o++)
        if (hp_opts[o].flag && (hp_opts[o].cmds & (1u << cmd)) &&
            strcmp(name, hp_opts[o].flag) == 0)
            return o;
    return -1;
}

const char *hp_opt_default(enum hp_opt o, enum hp_cmd cmd)
{
    const struct hp_opt_info *r = &hp_opts[o];

    return (unsigned)cmd < HP_CMD_COUNT && r->cmd_def[cmd] ? r->cmd_def[cmd] : r->def;
}

const char *hp_opt_word(enum hp_opt o, long v)
{
    const char *const *w = hp_opts[o].words;

    for (long i = 0; w && w[i]; i++)
        if (i == v)
            return w[i];
    return "?";
}

void hp_optlimits_init(struct hp_optlimits *l, int site)
{
    memset(l, 0, sizeof(*l));
    for (int o = 0; o < HP_OPT_COUNT; o++) {
        const struct hp_opt_info *r = &hp_opts[o];
        l->max[o] = site && r->site_max > 0 ? r->site_max : r->max;
        l->words[o] = ~0u;
    }
    snprintf(l->models_dir, sizeof(l->models_dir), "%s", MODELS_DIR);
    snprintf(l->config, sizeof(l->config), "%s", CONFIG_PATH);
}

/* The words of option o that l allows, ", "-separated. */
static void word_list(enum hp_opt o, unsigned mask, char *buf, size_t n)
{
    size_t len = 0;

    buf[0] = '\0';
    for (int i = 0; hp_opts[o].words[i]; i++) {
        if (!(mask & (1u << i)))
            continue;
        int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", hp_opts[o].words[i]);
        if (w < 0 || (size_t)w >= n - len)
            return;
        len += (size_t)w;
    }
}

/* A duration's units (EVERY rows) and the bounds of its number in each. */
static const struct {
    const char *suffix;
    double scale;
} time_units[] = {{"s", 1.0}, {"min", 60.0}, {"h", 3600.0}};
#define TIME_MIN 1e-3
#define TIME_MAX 1e7
#define NUNITS (sizeof(time_units) / sizeof(time_units[0]))

void hp_opt_allowed(enum hp_opt o, const struct hp_optlimits *l, char *buf, size_t n)
{
    const struct hp_opt_info *r = &hp_opts[o];
    const double max = l ? l->max[o] : r->max;
    char words[128] = "";

    if (n == 0)
        return;
    for (int i = 0; r->special && r->special[i].word; i++)
        snprintf(words + strlen(words), sizeof(words) - strlen(words), "%s, ", r->special[i].word);
    if (words[0]) /* "auto, off, " -> "auto, off or " */
        memcpy(words + strlen(words) - 2, " or ", 5);
    switch (r->type) {
    case HP_OT_INT:
        snprintf(buf, n, "%san integer from %.0f to %.0f", words, r->min, max);
        break;
    case HP_OT_REAL:
        snprintf(buf, n, "%sa number from %g to %g", words, r->min, max);
        break;
    case HP_OT_WORD:
        word_list(o, l ? l->words[o] : ~0u, buf, n);
        break;
    case HP_OT_MODEL:
        snprintf(buf, n,
                 "a model name (letters, digits, '_', '.', '-') from %s, or a path to an .ini "
                 "file",
                 l ? l->models_dir : MODELS_DIR);
        break;
    case HP_OT_TEXT:
        snprintf(buf, n, "a non-empty %s", r->arg ? r->arg : "value");
        break;
    case HP_OT_FLAG:
        snprintf(buf, n, "given without a value");
        break;
    case HP_OT_EVERY:
        snprintf(buf, n,
                 "N training samples (an integer from %.0f to %.0f), or a training time: Nmin "
                 "(minutes), Nh (hours) or Ns (seconds), N a number from %g to %g",
                 r->min, r->max, TIME_MIN, TIME_MAX);
        break;
    case HP_OT_AUTOPATH:
        snprintf(buf, n, "auto, or a path (not empty, no control characters)");
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

static int check_model(const char *what, const char *v, const char *shown,
                       const struct hp_optlimits *l, int check_files, const char *allowed,
                       char *err, size_t errlen)
{
    const char *dir = l ? l->models_dir : MODELS_DIR;
    char path[2048];
    struct stat st;

    if (!is_model_path(v)) {
        if (strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") !=
            strlen(v)) {
            snprintf(err, errlen, "%s=%s: not a model name; must be %s", what, shown, allowed);
            return -1;
        }
        if (!check_files)
            return 0;
        if ((size_t)snprintf(path, sizeof(path), "%s/%s.ini", dir, v) >= sizeof(path) ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode) || access(path, R_OK) != 0) {
            char known[512];
            model_list(dir, known, sizeof(known));
            snprintf(err, errlen,
                     "%s=%s: unknown model: no %s.ini in %s (models there: %s); give a model "
                     "name from there, or a path to an .ini file",
                     what, v, v, dir, known);
            return -1;
        }
        return 0;
    }
    if (!check_files)
        return 0;
    if (stat(v, &st) != 0 || access(v, R_OK) != 0) {
        snprintf(err, errlen, "%s=%s: cannot read the model file: %s", what, shown,
                 strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s=%s: the model file is not a regular file", what, shown);
        return -1;
    }
    return 0;
}

union value {
    long i;
    double d;
    const char *s;
    struct hp_opt_every every;
    struct hp_opt_autopath autopath;
};

/* Where a value of type t is in v (hp_opt_set copies the row's size from there). */
static const void *value_of(const union value *v, enum hp_opt_type t)
{
    switch (t) {
    case HP_OT_REAL:
        return &v->d;
    case HP_OT_TEXT:
    case HP_OT_MODEL:
        return &v->s;
    case HP_OT_EVERY:
        return &v->every;
    case HP_OT_AUTOPATH:
        return &v->autopath;
    default:
        return &v->i;
    }
}

/* A number (or special word) for an INT or REAL row. */
static int parse_number(const struct hp_opt_info *r, double max, const char *v, union value *out)
{
    for (int i = 0; r->special && r->special[i].word; i++)
        if (strcmp(v, r->special[i].word) == 0) {
            if (r->type == HP_OT_INT)
                out->i = (long)r->special[i].value;
            else
                out->d = r->special[i].value;
            return 0;
        }
    if (r->type == HP_OT_INT)
        return hp_parse_long(v, (long)r->min, (long)max, &out->i) ? -1 : 0;
    return hp_parse_double(v, r->min, max, &out->d) ? -1 : 0;
}

/* An EVERY value: Nmin, Nh, Ns (N in [TIME_MIN, TIME_MAX]), else a count in [min, max]. */
static int parse_every(const struct hp_opt_info *r, const char *v, struct hp_opt_every *out)
{
    const size_t n = strlen(v);
    char num[64];
    long samples;

    for (size_t i = 0; i < NUNITS; i++) {
        const size_t k = strlen(time_units[i].suffix);
        double x;
        if (n <= k || n - k >= sizeof(num) || strcmp(v + n - k, time_units[i].suffix) != 0)
            continue;
        memcpy(num, v, n - k);
        num[n - k] = '\0';
        if (hp_parse_double(num, TIME_MIN, TIME_MAX, &x))
            return -1;
        *out = (struct hp_opt_every){.samples = 0, .seconds = x * time_units[i].scale};
        return 0;
    }
    if (hp_parse_long(v, (long)r->min, (long)r->max, &samples))
        return -1;
    *out = (struct hp_opt_every){.samples = samples, .seconds = 0.0};
    return 0;
}

static int has_control(const char *v)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 1;
    return 0;
}

/* v for a message: control characters as \xNN, cut with "..." to fit n (>= 8). */
static void shown_value(const char *v, char *buf, size_t n)
{
    hp_str_escape(v, buf, n);
}

/* A WORD value: its index, allowed by l. */
static int parse_word(enum hp_opt o, const char *what, const char *v, const char *shown,
                      const struct hp_optlimits *l, const char *allowed, long *out, char *err,
                      size_t errlen)
{
    const struct hp_opt_info *r = &hp_opts[o];
    const char *noun = r->flag ? r->flag : "value";

    for (int i = 0; r->words[i]; i++) {
        if (strcmp(v, r->words[i]) != 0)
            continue;
        if (l && !(l->words[o] & (1u << i))) {
            snprintf(err, errlen, "%s=%s: %s not allowed on this cluster; allowed: %s", what, shown,
                     noun, allowed);
            return -1;
        }
        *out = i;
        return 0;
    }
    snprintf(err, errlen, "%s=%s: unknown %s; allowed: %s", what, shown, noun, allowed);
    return -1;
}

static int parse(enum hp_opt o, const char *what, const char *v, const struct hp_optlimits *l,
                 int check_files, union value *out, char *err, size_t errlen)
{
    const struct hp_opt_info *r = &hp_opts[o];
    char allowed[1200], shown[1024];

    if (errlen)
        err[0] = '\0';
    if (v)
        shown_value(v, shown, sizeof(shown));
    if (r->type == HP_OT_FLAG) {
        if (!v || !*v || strcmp(v, "1") == 0) {
            out->i = 1;
            return 0;
        }
        snprintf(err, errlen, "%s=%s: takes no value", what, shown);
        return -1;
    }
    if (!v) {
        snprintf(err, errlen, "%s: needs a value", what);
        return -1;
    }
    hp_opt_allowed(o, l, allowed, sizeof(allowed));
    if (!*v) {
        snprintf(err, errlen, "%s=: empty; must be %s", what, allowed);
        return -1;
    }
    switch (r->type) {
    case HP_OT_INT:
    case HP_OT_REAL:
        if (parse_number(r, l ? l->max[o] : r->max, v, out) == 0)
            return 0;
        snprintf(err, errlen, "%s=%s: must be %s", what, shown, allowed);
        return -1;
    case HP_OT_EVERY:
        if (parse_every(r, v, &out->every) == 0)
            return 0;
        snprintf(err, errlen, "%s=%s: must be %s", what, shown, allowed);
        return -1;
    case HP_OT_WORD:
        return parse_word(o, what, v, shown, l, allowed, &out->i, err, errlen);
    case HP_OT_MODEL:
        if (check_model(what, v, shown, l, check_files, allowed, err, errlen))
            return -1;
        out->s = v;
        return 0;
    case HP_OT_AUTOPATH:
        if (strcmp(v, "auto") == 0) {
            out->autopath = (struct hp_opt_autopath){.path = NULL, .automatic = 1};
            return 0;
        }
        if (has_control(v)) {
            snprintf(err, errlen, "%s=%s: a control character in the path; must be %s", what, shown,
                     allowed);
            return -1;
        }
        out->autopath = (struct hp_opt_autopath){.path = v, .automatic = 0};
        return 0;
    default:
        out->s = v;
        return 0;
    }
}

int hp_opt_check(enum hp_opt o, const char *what, const char *value, const struct hp_optlimits *l,
                 int check_files, char *err, size_t errlen)
{
    union value v;

    if ((unsigned)o >= HP_OPT_COUNT) {
        snprintf(err, errlen, "%s: not a hetpipe option", what);
        return -1;
    }
    return parse(o, what, value, l, check_files, &v, err, errlen);
}

int hp_opt_set(struct hp_options *opts, enum hp_opt o, const char *what, const char *value,
               const struct hp_optlimits *l, int check_files, char *err, size_t errlen)
{
    union value v;

    if ((unsigned)o >= HP_OPT_COUNT) {
        snprintf(err, errlen, "%s: not a hetpipe option", what);
        return -1;
    }
    if (parse(o, what, value, l, check_files, &v, err, errlen))
        return -1;
    memcpy((char *)opts + hp_opts[o].offset, value_of(&v, hp_opts[o].type), hp_opts[o].size);
    opts->given[o] = 1;
    return 0;
}

int hp_opt_env(struct hp_options *opts, enum hp_opt o, char *err, size_t errlen)
{
    const char *v;

    if (errlen)
        err[0] = '\0';
    if ((unsigned)o >= HP_OPT_COUNT || !hp_opts[o].env)
        return 1;
    v = getenv(hp_opts[o].env);
    if (!v || !*v)
        return 1;
    return hp_opt_set(opts, o, hp_opts[o].env, v, NULL, 0, err, errlen) ? -1 : 0;
}

void hp_options_init(struct hp_options *o, enum hp_cmd cmd)
{
    char err[256];

    memset(o, 0, sizeof(*o));
    for (int i = 0; i < HP_OPT_COUNT; i++) {
        const char *d = hp_opt_default((enum hp_opt)i, cmd);
        if (d && *d && hp_opts[i].type != HP_OT_FLAG)
            hp_opt_set(o, (enum hp_opt)i, "default", d, NULL, 0, err, sizeof(err));
        o->given[i] = 0;
    }
}

/* The shortest %g form of x that reads back as x. */
static int format_real(double x, char *buf, size_t n)
{
    for (int digits = 6; digits <= 17; digits++) {
        int w = snprintf(buf, n, "%.*g", digits, x);
        if (w < 0 || (size_t)w >= n)
            return -1;
        if (strtod(buf, NULL) == x)
            return 0;
    }
    return 0;
}

/* x moved by k units in the last place (x > 0; no libm in the plugin). */
static double nudged(double x, int k)
{
    unsigned long long bits;

    memcpy(&bits, &x, sizeof(bits));
    bits += (unsigned long long)(long long)k;
    memcpy(&x, &bits, sizeof(x));
    return x;
}

/* A duration as NUMBER+unit that parse_every reads back as exactly `seconds`: the first unit
 * (s, min, h) with a number in range whose product is exact (one exists for every parsed
 * value: the number it was parsed from); else the nearest in the largest unit that fits. */
static int format_duration(double seconds, char *buf, size_t n)
{
    char num[64];
    int best = -1;

    for (size_t i = 0; i < NUNITS; i++) {
        const double x0 = seconds / time_units[i].scale;
        if (x0 < TIME_MIN / 2 || x0 > TIME_MAX * 2)
            continue;
        best = (int)i;
        for (int k = 0; k <= 4; k++) {
            const double x = nudged(x0, k % 2 ? (k + 1) / 2 : -k / 2);
            if (x < TIME_MIN || x > TIME_MAX || x * time_units[i].scale != seconds)
                continue;
            if (format_real(x, num, sizeof(num)))
                return -1;
            return (size_t)snprintf(buf, n, "%s%s", num, time_units[i].suffix) < n ? 0 : -1;
        }
    }
    if (best < 0 || format_real(seconds / time_units[best].scale, num, sizeof(num)))
        return -1;
    return (size_t)snprintf(buf, n, "%s%s", num, time_units[best].suffix) < n ? 0 : -1;
}

static int format_text(const char *s, char *buf, size_t n)
{
    if (!s)
        return 1;
    return (size_t)snprintf(buf, n, "%s", s) < n ? 0 : -1;
}

int hp_opt_format(const struct hp_options *opts, enum hp_opt o, char *buf, size_t n)
{
    const struct hp_opt_info *r = &hp_opts[o];
    const char *field = (const char *)opts + r->offset;
    struct hp_opt_every e;
    struct hp_opt_autopath a;
    long i;
    double d;
    const char *s;

    if (!buf || n == 0)
        return -1;
    buf[0] = '\0';
    switch (r->type) {
    case HP_OT_REAL:
        memcpy(&d, field, sizeof(d));
        for (int k = 0; r->special && r->special[k].word; k++)
            if (d == r->special[k].value)
                return format_text(r->special[k].word, buf, n);
        return format_real(d, buf, n);
    case HP_OT_TEXT:
    case HP_OT_MODEL:
        memcpy(&s, field, sizeof(s));
        return format_text(s, buf, n);
    case HP_OT_WORD:
        memcpy(&i, field, sizeof(i));
        return format_text(hp_opt_word(o, i), buf, n);
    case HP_OT_FLAG:
        memcpy(&i, field, sizeof(i));
        return format_text(i ? "1" : NULL, buf, n);
    case HP_OT_EVERY:
        memcpy(&e, field, sizeof(e));
        if (e.samples > 0)
            return (size_t)snprintf(buf, n, "%ld", e.samples) < n ? 0 : -1;
        return e.seconds > 0.0 ? format_duration(e.seconds, buf, n) : 1;
    case HP_OT_AUTOPATH:
        memcpy(&a, field, sizeof(a));
        if (a.automatic)
            return format_text("auto", buf, n);
        /* a directory named auto, set other than by parsing: as a path */
        return format_text(a.path && strcmp(a.path, "auto") == 0 ? "./auto" : a.path, buf, n);
    default:
        memcpy(&i, field, sizeof(i));
        for (int k = 0; r->special && r->special[k].word; k++)
            if ((double)i == r->special[k].value)
                return format_text(r->special[k].word, buf, n);
        return (size_t)snprintf(buf, n, "%ld", i) < n ? 0 : -1;
    }
}

/* ---- plugstack.conf arguments ---------------------------------------------------------- */

/* A job option's row from NAME as written after max_ or default_ ('_' for '-'), or -1. */
static int job_opt_named(const char *name, size_t len)
{
    for (int o = 0; o < HP_OPT_COUNT; o++) {
        const char *f = hp_opts[o].flag;
        size_t j;
        if (!hp_opt_is_job((enum hp_opt)o) || strlen(f) != len)
            continue;
        for (j = 0; j < len && (name[j] == f[j] || (name[j] == '_' && f[j] == '-')); j++)
            ;
        if (j == len)
            return o;
    }
    return -1;
}

/* policies=a,b,...: the mask, or -1 with err. */
static int parse_words(const char *arg, const char *list, enum hp_opt o, unsigned *out, char *err,
                       size_t errlen)
{
    unsigned mask = 0;
    const char *p = list;
    char all[128];

    word_list(o, ~0u, all, sizeof(all));
    while (1) {
        size_t len = strcspn(p, ",");
        int i;
        for (i = 0; hp_opts[o].words[i]; i++)
            if (strlen(hp_opts[o].words[i]) == len && strncmp(p, hp_opts[o].words[i], len) == 0)
                break;
        if (!hp_opts[o].words[i]) {
            snprintf(err, errlen,
                     "'%s': '%.*s' is not a %s; %ss= takes a comma-separated list of %s", arg,
                     (int)(len > 64 ? 64 : len), p, hp_opts[o].flag, hp_opts[o].flag, all);
            return -1;
        }
        mask |= 1u << i;
        if (!p[len])
            break;
        p += len + 1;
    }
    *out = mask;
    return 0;
}

static void known_args(char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "config, models");

    for (int o = 0; o < HP_OPT_COUNT && len < n; o++)
        if (hp_opt_is_job((enum hp_opt)o) && hp_opts[o].type == HP_OT_INT)
            len += (size_t)snprintf(buf + len, n - len, ", max_%s", hp_opts[o].flag);
    len += (size_t)snprintf(buf + len, n - len, ", policies");
    for (int o = 0; o < HP_OPT_COUNT && len < n; o++)
        if (hp_opt_is_job((enum hp_opt)o))
            len += (size_t)snprintf(buf + len, n - len, ", default_%s", hp_opts[o].flag);
}

static int limit_arg(struct hp_optlimits *l, const char *arg, int o, const char *val, char *err,
                     size_t errlen)
{
    long v;

    if (!val || hp_parse_long(val, (long)hp_opts[o].min, (long)hp_opts[o].max, &v)) {
        snprintf(err, errlen, "'%s': max_%s must be an integer from %.0f to %.0f", arg,
                 hp_opts[o].flag, hp_opts[o].min, hp_opts[o].max);
        return -1;
    }
    l->max[o] = (double)v;
    return 0;
}

static int default_arg(struct hp_optlimits *l, const char *arg, size_t klen, int o, const char *val,
                       char *err, size_t errlen)
{
    char what[64];

    if (!val) {
        snprintf(err, errlen, "'%s': needs a value (%.*s=VALUE)", arg, (int)klen, arg);
        return -1;
    }
    snprintf(what, sizeof(what), "%.*s", (int)klen, arg);
    /* the models directory is the site's, so a default NAME must be in it */
    if (hp_opt_check((enum hp_opt)o, what, val, l, 1, err, errlen))
        return -1;
    l->defaults[o] = val;
    return 0;
}

int hp_optlimits_arg(struct hp_optlimits *l, const char *arg, char *err, size_t errlen)
{
    const char *eq = strchr(arg, '=');
    const char *val = eq ? eq + 1 : NULL;
    const size_t klen = eq ? (size_t)(eq - arg) : strlen(arg);
    char known[512];
    int o;

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
        l->config_given |= KEY_IS("config");
        return 0;
    }
    if (KEY_IS("policies")) {
        unsigned mask;
        if (!val) {
            snprintf(err, errlen, "'%s': needs a list (policies=ed,hd)", arg);
            return -1;
        }
        if (parse_words(arg, val, HP_OPT_POLICY, &mask, err, errlen))
            return -1;
        l->words[HP_OPT_POLICY] = mask;
        return 0;
    }
#undef KEY_IS
    if (klen > 4 && strncmp(arg, "max_", 4) == 0 && (o = job_opt_named(arg + 4, klen - 4)) >= 0 &&
        hp_opts[o].type == HP_OT_INT)
        return limit_arg(l, arg, o, val, err, errlen);
    if (klen > 8 && strncmp(arg, "default_", 8) == 0 && (o = job_opt_named(arg + 8, klen - 8)) >= 0)
        return default_arg(l, arg, klen, o, val, err, errlen);
    known_args(known, sizeof(known));
    snprintf(err, errlen, "'%s': unknown argument; known: %s (each key=value)", arg, known);
    return -1;
}
