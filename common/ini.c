/* ini.c - strict INI reading on top of iniparser. */
#include "ini.h"

#include "error.h"
#include "infile.h"
#include "log.h"
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <iniparser/iniparser.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

struct hp_ini {
    dictionary *dict;
    char *path;
};

/* The longest line iniparser 4.1 reads: ASCIILINESZ (1024) less its newline and NUL. */
#define INIPARSER_LINE_MAX 1022

/* iniparser reports syntax errors through a global callback; we collect the first one. */
static char parse_error[512];

static int capture_error(const char *fmt, ...)
{
    va_list ap;

    if (parse_error[0])
        return 0;
    va_start(ap, fmt);
    vsnprintf(parse_error, sizeof(parse_error), fmt, ap);
    va_end(ap);
    parse_error[strcspn(parse_error, "\n")] = '\0';
    return 0;
}

/* A section name as iniparser keys it: the text between '[' and ']', trimmed, lower case. */
static int header_name(char *line, char *out, size_t n)
{
    char *p = line, *end;
    size_t len;

    while (isspace((unsigned char)*p))
        p++;
    len = strlen(p);
    while (len > 0 && isspace((unsigned char)p[len - 1]))
        p[--len] = '\0';
    if (len < 2 || p[0] != '[' || p[len - 1] != ']')
        return 0;
    p[len - 1] = '\0';
    p++;
    while (isspace((unsigned char)*p))
        p++;
    end = p + strlen(p);
    while (end > p && isspace((unsigned char)end[-1]))
        *--end = '\0';
    snprintf(out, n, "%s", p);
    for (char *q = out; *q; q++)
        *q = (char)tolower((unsigned char)*q);
    return 1;
}

/* The key of a "key = value" line (trimmed, lower case, as iniparser keys it); 0 if the line
 * is blank, a comment, a section header or has no '='. */
static int key_name(const char *line, char *out, size_t n)
{
    const char *p = line, *eq;
    size_t len;

    while (isspace((unsigned char)*p))
        p++;
    if (!*p || *p == ';' || *p == '#' || *p == '[')
        return 0;
    eq = strchr(p, '=');
    if (!eq)
        return 0;
    len = (size_t)(eq - p);
    while (len > 0 && isspace((unsigned char)p[len - 1]))
        len--;
    if (len == 0 || len >= n)
        return 0;
    for (size_t i = 0; i < len; i++)
        out[i] = (char)tolower((unsigned char)p[i]);
    out[len] = '\0';
    return 1;
}

struct seen {
    char name[128];
    int line;
};

/* Add name at line to the list, or report the line it was first seen at (> 0). */
static int seen_add(struct seen **list, int *n, int *cap, const char *name, int line)
{
    for (int i = 0; i < *n; i++)
        if (strcmp((*list)[i].name, name) == 0)
            return (*list)[i].line;
    if (*n == *cap) {
        const int ncap = *cap ? 2 * *cap : 32;
        struct seen *grown = realloc(*list, (size_t)ncap * sizeof(**list));
        if (!grown)
            return -HP_ENOMEM;
        *list = grown;
        *cap = ncap;
    }
    snprintf((*list)[*n].name, sizeof((*list)[*n].name), "%s", name);
    (*list)[(*n)++].line = line;
    return 0;
}

/* The first control character of a line (a tab, and a carriage return before its line break,
 * are text): its column from 1, or 0 for none. Names and values are printed (a plan's table,
 * messages), and an escape sequence must not reach a terminal from a file. */
static int control_column(const char *line)
{
    for (const unsigned char *p = (const unsigned char *)line; *p; p++)
        if ((*p < 0x20 && *p != '\t' && *p != '\n' && !(*p == '\r' && p[1] == '\n')) ||
            *p == 0x7f)
            return (int)(p - (const unsigned char *)line) + 1;
    return 0;
}

/* What iniparser gets wrong silently: a section given twice (it merges them), a ':' in a
 * section name (its key separator: the section vanishes), a key given twice in a section
 * (the last wins) and keys before the first section (ignored). */
static int check_sections(FILE *f, const char *path)
{
    struct seen *secs = NULL, *keys = NULL;
    int nsecs = 0, csecs = 0, nkeys = 0, ckeys = 0, lineno = 0, rc = 0, in_section = 0;
    char line[4096], cur[128] = "";

    while (rc == 0 && fgets(line, sizeof(line), f)) {
        char name[128];
        int first;

        lineno++;
        if (strcspn(line, "\n") > INIPARSER_LINE_MAX) {
            hp_error("%s: line %d is longer than %d characters, which iniparser cannot read", path,
                     lineno, INIPARSER_LINE_MAX);
            rc = -HP_ECONFIG;
            break;
        }
        const int col = control_column(line);
        if (col) {
            hp_error("%s: line %d, column %d: a control character (0x%02x); the file must be "
                     "text (a tab is allowed)",
                     path, lineno, col, (unsigned char)line[col - 1]);
            rc = -HP_ECONFIG;
            break;
        }
        if (key_name(line, name, sizeof(name))) {
            if (!in_section) {
                hp_error("%s: line %d: key '%s' before any [section]", path, lineno, name);
                rc = -HP_ECONFIG;
                break;
            }
            first = seen_add(&keys, &nkeys, &ckeys, name, lineno);
            if (first > 0) {
                hp_error("%s: line %d: [%s]: key '%s' appears again (first at line %d); each "
                         "key may appear once per section",
                         path, lineno, cur, name, first);
                rc = -HP_ECONFIG;
            } else if (first < 0) {
                rc = first;
            }
            continue;
        }
        if (!header_name(line, name, sizeof(name)))
            continue;
        if (strchr(name, ':')) {
            hp_error("%s: line %d: section [%s]: ':' is not allowed in a section name", path,
                     lineno, name);
            rc = -HP_ECONFIG;
            break;
        }
        first = seen_add(&secs, &nsecs, &csecs, name, lineno);
        if (first > 0) {
            hp_error("%s: line %d: section [%s] appears again (first at line %d); each "
                     "section may appear once",
                     path, lineno, name, first);
            rc = -HP_ECONFIG;
        } else if (first < 0) {
            rc = first;
        }
        in_section = 1;
        nkeys = 0;
        snprintf(cur, sizeof(cur), "%s", name);
    }
    free(secs);
    free(keys);
    return rc;
}

/* iniparser 4.1 reads a file by its name only: it is given the descriptor that was checked
 * (/proc/self/fd/N opens that same file again), so a FIFO swapped in after the check is never
 * opened; the path itself only where /proc is not mounted. */
static dictionary *load_checked(FILE *f, const char *path)
{
    char fdpath[64], said[sizeof(parse_error)];
    dictionary *d;
    char *at;

    snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fileno(f));
    d = iniparser_load(access(fdpath, R_OK) == 0 ? fdpath : path);
    if ((at = strstr(parse_error, fdpath))) { /* its message names the file as the user did */
        snprintf(said, sizeof(said), "%.*s%s%s", (int)(at - parse_error), parse_error, path,
                 at + strlen(fdpath));
        memcpy(parse_error, said, sizeof(said));
    }
    return d;
}

int hp_ini_load(const char *path, struct hp_ini **out)
{
    struct hp_ini *ini;
    struct stat st;
    int rc;
    FILE *f = hp_infile_fopen(path, 0, &st, &rc);

    if (!f) {
        hp_error("cannot open '%s': %s", path, hp_infile_why(rc, &st));
        return rc;
    }
    /* iniparser merges a repeated section and drops one with ':' in its name: refuse both */
    rc = check_sections(f, path);
    if (rc) {
        fclose(f);
        return rc;
    }

    ini = calloc(1, sizeof(*ini));
    if (!ini || !(ini->path = strdup(path))) {
        fclose(f);
        free(ini);
        return -HP_ENOMEM;
    }

    parse_error[0] = '\0';
    iniparser_set_error_callback(capture_error);
    ini->dict = load_checked(f, path);
    fclose(f);
    iniparser_set_error_callback(NULL);
    if (!ini->dict || parse_error[0]) {
        hp_error("cannot parse '%s': %s", path, parse_error[0] ? parse_error : "syntax error");
        goto err_dict;
    }
    *out = ini;
    return 0;

err_dict:
    if (ini->dict)
        iniparser_freedict(ini->dict);
    free(ini->path);
    free(ini);
    return parse_error[0] ? -HP_ECONFIG : -HP_ENOMEM;
}

void hp_ini_destroy(struct hp_ini *ini)
{
    if (!ini)
        return;
    iniparser_freedict(ini->dict);
    free(ini->path);
    free(ini);
}

const char *hp_ini_path(const struct hp_ini *ini)
{
    return ini->path;
}

int hp_ini_nsections(const struct hp_ini *ini)
{
    int n = iniparser_getnsec(ini->dict);
    return n < 0 ? 0 : n;
}

const char *hp_ini_section(const struct hp_ini *ini, int i)
{
    return iniparser_getsecname(ini->dict, i);
}

int hp_ini_has_section(const struct hp_ini *ini, const char *section)
{
    return iniparser_find_entry(ini->dict, section) != 0;
}

static const char *lookup(const struct hp_ini *ini, const char *section, const char *key)
{
    char full[512];

    snprintf(full, sizeof(full), "%s:%s", section, key);
    return iniparser_getstring(ini->dict, full, NULL);
}

int hp_ini_has(const struct hp_ini *ini, const char *section, const char *key)
{
    return lookup(ini, section, key) != NULL;
}

/* Key k as the list key `base` (its first n characters): 0 for the key itself, i for its
 * continuation "base.i" (i >= 1 in decimal, no leading zero), -1 for neither. */
static long continuation(const char *k, const char *base, size_t n)
{
    long i = 0;

    if (strncasecmp(k, base, n) != 0)
        return -1;
    k += n;
    if (!*k)
        return 0;
    if (*k++ != '.' || *k < '1' || *k > '9')
        return -1;
    for (; *k; k++) {
        if (!isdigit((unsigned char)*k) || i > 100000000)
            return -1;
        i = 10 * i + (*k - '0');
    }
    return i;
}

int hp_ini_check_keys(const struct hp_ini *ini, const char *section, const char *const *allowed)
{
    int n = iniparser_getsecnkeys(ini->dict, section);
    const char **keys;
    int rc = 0;

    if (n <= 0)
        return 0;
    keys = calloc((size_t)n, sizeof(*keys));
    if (!keys)
        return -HP_ENOMEM;
    iniparser_getseckeys(ini->dict, section, keys);
    for (int i = 0; i < n && rc == 0; i++) {
        const char *k = strchr(keys[i], ':');
        int found = 0;

        k = k ? k + 1 : keys[i];
        for (int j = 0; allowed[j]; j++) {
            const size_t len = strlen(allowed[j]);
            if (len > 0 && allowed[j][len - 1] == '+')
                found |= continuation(k, allowed[j], len - 1) >= 0;
            else
                found |= strcasecmp(k, allowed[j]) == 0;
        }
        if (!found) {
            char list[512] = "";
            for (int j = 0; allowed[j]; j++) {
                const size_t len = strcspn(allowed[j], "+"), room = sizeof(list) - strlen(list) - 1;
                strncat(list, j ? ", " : "", room);
                strncat(list, allowed[j],
                        len < sizeof(list) - strlen(list) - 1 ? len
                                                              : sizeof(list) - strlen(list) - 1);
            }
            hp_error("%s: [%s]: unknown key '%s' (allowed: %s)", ini->path, section, k, list);
            rc = -HP_ECONFIG;
        }
    }
    free(keys);
    return rc;
}

static int missing(const struct hp_ini *ini, const char *section, const char *key)
{
    hp_error("%s: [%s]: missing required key '%s'", ini->path, section, key);
    return -HP_ECONFIG;
}

int hp_ini_get_str(const struct hp_ini *ini, const char *section, const char *key, int required,
                   const char *def, const char **out)
{
    const char *v = lookup(ini, section, key);

    if (!v) {
        if (required)
            return missing(ini, section, key);
        *out = def;
        return 0;
    }
    *out = v;
    return 0;
}

int hp_ini_get_long(const struct hp_ini *ini, const char *section, const char *key, int required,
                    long def, long min, long max, long *out)
{
    const char *v = lookup(ini, section, key);
    int rc;

    if (!v) {
        if (required)
            return missing(ini, section, key);
        *out = def;
        return 0;
    }
    rc = hp_parse_long(v, min, max, out);
    if (rc == -HP_EINVAL)
        hp_error("%s: [%s]: key '%s': '%s' is not an integer", ini->path, section, key, v);
    else if (rc == -HP_ERANGE)
        hp_error("%s: [%s]: key '%s': %s is out of range (allowed: %ld to %ld)", ini->path, section,
                 key, v, min, max);
    return rc ? -HP_ECONFIG : 0;
}

int hp_ini_get_double(const struct hp_ini *ini, const char *section, const char *key, int required,
                      double def, double min, double max, double *out)
{
    const char *v = lookup(ini, section, key);
    int rc;

    if (!v) {
        if (required)
            return missing(ini, section, key);
        *out = def;
        return 0;
    }
    rc = hp_parse_double(v, min, max, out);
    if (rc == -HP_EINVAL)
        hp_error("%s: [%s]: key '%s': '%s' is not a number", ini->path, section, key, v);
    else if (rc == -HP_ERANGE)
        hp_error("%s: [%s]: key '%s': %s is out of range (allowed: %g to %g)", ini->path, section,
                 key, v, min, max);
    return rc ? -HP_ECONFIG : 0;
}

int hp_ini_get_bool(const struct hp_ini *ini, const char *section, const char *key, int required,
                    int def, int *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1", NULL};
    static const char *const no[] = {"false", "no", "off", "0", NULL};
    const char *v = lookup(ini, section, key);

    if (!v) {
        if (required)
            return missing(ini, section, key);
        *out = def;
        return 0;
    }
    for (int i = 0; yes[i]; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    hp_error("%s: [%s]: key '%s': '%s' is not a boolean (allowed: true, false, yes, no, on, "
             "off, 1, 0)",
             ini->path, section, key, v);
    return -HP_ECONFIG;
}

int hp_ini_get_enum(const struct hp_ini *ini, const char *section, const char *key, int required,
                    int def, const char *const *words, int *out)
{
    const char *v = lookup(ini, section, key);
    char list[512] = "";

    if (!v) {
        if (required)
            return missing(ini, section, key);
        *out = def;
        return 0;
    }
    for (int i = 0; words[i]; i++) {
        if (strcasecmp(v, words[i]) == 0) {
            *out = i;
            return 0;
        }
        strncat(list, i ? ", " : "", sizeof(list) - strlen(list) - 1);
        strncat(list, words[i], sizeof(list) - strlen(list) - 1);
    }
    hp_error("%s: [%s]: key '%s': unknown value '%s' (allowed: %s)", ini->path, section, key, v,
             list);
    return -HP_ECONFIG;
}

int hp_ini_get_list(const struct hp_ini *ini, const char *section, const char *key, int required,
                    char **out)
{
    const size_t n = strlen(key);
    int nkeys = iniparser_getsecnkeys(ini->dict, section);
    const char **keys = NULL;
    long parts = 0;
    const char *v = NULL;
    size_t len;
    char *s;

    *out = NULL;
    if (hp_ini_get_str(ini, section, key, required, NULL, &v))
        return -HP_ECONFIG; /* required and missing: named */
    if (!v)
        return 0;
    if (nkeys > 0 && !(keys = calloc((size_t)nkeys, sizeof(*keys))))
        return -HP_ENOMEM;
    if (keys)
        iniparser_getseckeys(ini->dict, section, keys);
    for (int i = 0; i < nkeys; i++) {
        const char *k = strchr(keys[i], ':');
        parts += continuation(k ? k + 1 : keys[i], key, n) > 0;
    }
    free(keys);
    len = strlen(v) + 1;
    for (long i = 1; i <= parts; i++) {
        char part[256];
        const char *pv;
        snprintf(part, sizeof(part), "%s.%ld", key, i);
        if (!(pv = lookup(ini, section, part))) {
            hp_error("%s: [%s]: key '%s' is continued in %ld more keys, but '%s' is missing "
                     "(continuations are numbered 1, 2, ...)",
                     ini->path, section, key, parts, part);
            return -HP_ECONFIG;
        }
        len += strlen(pv) + 1;
    }
    if (!(s = malloc(len)))
        return -HP_ENOMEM;
    strcpy(s, v);
    for (long i = 1; i <= parts; i++) {
        char part[256];
        snprintf(part, sizeof(part), "%s.%ld", key, i);
        strcat(s, ",");
        strcat(s, lookup(ini, section, part));
    }
    *out = s;
    return 0;
}

int hp_ini_write_str(FILE *f, const char *key, const char *value, const char *what, char *err,
                     size_t errlen)
{
    const size_t n = strlen(value);
    const int dq = strchr(value, '"') != NULL, sq = strchr(value, '\'') != NULL;
    int quote = n > 0 && (isspace((unsigned char)value[0]) || isspace((unsigned char)value[n - 1]));

    for (const char *c = value; *c; c++) {
        if (iscntrl((unsigned char)*c) && *c != '\t') {
            snprintf(err, errlen,
                     "%s holds a control character (0x%02x), which a file of "
                     "key = value lines cannot hold",
                     what, (unsigned)(unsigned char)*c);
            return -1;
        }
        quote |= strchr(";#=\\\"'", *c) != NULL;
    }
    if (dq && sq) {
        snprintf(err, errlen,
                 "%s holds both a single and a double quote, which an INI value "
                 "(iniparser) cannot hold",
                 what);
        return -1;
    }
    if (strlen(key) + n + 5 > HP_INI_LINE_MAX) {
        snprintf(err, errlen,
                 "%s is %zu characters long: an INI line (iniparser) holds at most "
                 "%d",
                 what, n, HP_INI_LINE_MAX);
        return -1;
    }
    if (!quote && n > 0)
        fprintf(f, "%s = %s\n", key, value);
    else
        fprintf(f, "%s = %c%s%c\n", key, dq ? '\'' : '"', value, dq ? '\'' : '"');
    return 0;
}

void hp_ini_list_begin(struct hp_ini_list *l, FILE *f, const char *key)
{
    *l = (struct hp_ini_list){.f = f, .key = key};
}

void hp_ini_list_add(struct hp_ini_list *l, const char *item)
{
    const size_t n = strlen(item);

    if (l->count > 0 && l->len + 1 + n > HP_INI_LINE_MAX) {
        fprintf(l->f, "\n");
        l->count = 0;
        l->part++;
    }
    if (l->count == 0) {
        int w =
            l->part ? fprintf(l->f, "%s.%d = ", l->key, l->part) : fprintf(l->f, "%s = ", l->key);
        l->len = w > 0 ? (size_t)w : 0;
    } else {
        fputc(',', l->f);
        l->len++;
    }
    fputs(item, l->f);
    l->len += n;
    l->count++;
}

void hp_ini_list_end(struct hp_ini_list *l)
{
    if (l->count == 0 && l->part == 0)
        fprintf(l->f, "%s = ", l->key);
    fprintf(l->f, "\n");
}
