/* ini.h - strict INI reading on top of iniparser.
 *
 * iniparser parses the file; this module adds what iniparser leaves out: unknown keys are
 * rejected, numbers are parsed strictly (no "12x", no "08" read as 0), ranges are checked,
 * and every error names the file, the section and the key, and says what is allowed.
 * Section and key names are case-insensitive (iniparser lower-cases them).
 */
#ifndef HP_INI_H
#define HP_INI_H

#include <stddef.h>

#include <stdio.h>

struct hp_ini;

/* Load `path`. On success *out is a new object (free with hp_ini_destroy) and 0 is returned.
 * A missing or unreadable file gives -errno, a syntax error -HP_ECONFIG; both are logged.
 * Also refused (-HP_ECONFIG, with the file, line and section), because iniparser would get
 * them wrong silently: a section given twice (it merges them key by key; names compared
 * trimmed and case-insensitively), a ':' in a section name (its key separator), a key given
 * twice in one section (the last would win) and keys before the first section (ignored). */
int hp_ini_load(const char *path, struct hp_ini **out);
void hp_ini_destroy(struct hp_ini *ini);

/* The path the file was loaded from (owned by ini). */
const char *hp_ini_path(const struct hp_ini *ini);

/* Sections in file order. hp_ini_section() returns a pointer owned by ini, or NULL. */
int hp_ini_nsections(const struct hp_ini *ini);
const char *hp_ini_section(const struct hp_ini *ini, int i);
int hp_ini_has_section(const struct hp_ini *ini, const char *section);

/* 1 if `section` holds `key`, else 0. */
int hp_ini_has(const struct hp_ini *ini, const char *section, const char *key);

/* Reject keys of `section` not in the NULL-terminated list `allowed`: logs
 * "<file>: [section]: unknown key 'k' (allowed: a, b, c)" and returns -HP_ECONFIG. An allowed
 * name that ends in '+' is a list key: its continuations KEY.1, KEY.2, ... are allowed too. */
int hp_ini_check_keys(const struct hp_ini *ini, const char *section, const char *const *allowed);

/* Getters. If the key is absent: with required != 0 it is an error (-HP_ECONFIG, logged),
 * otherwise *out = def and 0 is returned. A present value must parse completely and lie in
 * [min, max]; otherwise the error names file, section, key, the value and the range. *out is
 * set only on success. The string returned by hp_ini_get_str is owned by ini. */
int hp_ini_get_str(const struct hp_ini *ini, const char *section, const char *key, int required,
                   const char *def, const char **out);
int hp_ini_get_long(const struct hp_ini *ini, const char *section, const char *key, int required,
                    long def, long min, long max, long *out);
int hp_ini_get_double(const struct hp_ini *ini, const char *section, const char *key, int required,
                      double def, double min, double max, double *out);
/* Booleans: true/false, yes/no, on/off, 1/0. */
int hp_ini_get_bool(const struct hp_ini *ini, const char *section, const char *key, int required,
                    int def, int *out);
/* One of a NULL-terminated list of words; *out is its index. */
int hp_ini_get_enum(const struct hp_ini *ini, const char *section, const char *key, int required,
                    int def, const char *const *words, int *out);

/* A list key (see hp_ini_check_keys): KEY, then KEY.1, KEY.2, ... when the writer continued
 * it, joined with ','. *out is a new string (free it); NULL when absent and not required.
 * Continuations must be numbered 1, 2, ... without a gap. */
int hp_ini_get_list(const struct hp_ini *ini, const char *section, const char *key, int required,
                    char **out);

/* ---- writing what hp_ini reads back ---- */

/* The longest line iniparser reads (its ASCIILINESZ, 1024, less a margin). */
#define HP_INI_LINE_MAX 1000

/* Write "key = value\n" so that hp_ini_get_str reads `value` back exactly: in double quotes
 * when it holds ';', '#', '=', '\\', a quote or space at its ends (single quotes when it holds
 * a double one). -1 with the reason in err (naming what) when no spelling reads back: a line
 * break or other control character, both quote kinds, or a line over HP_INI_LINE_MAX. */
int hp_ini_write_str(FILE *f, const char *key, const char *value, const char *what, char *err,
                     size_t errlen);

/* A list written as KEY = a,b,... continued in KEY.1, KEY.2, ... so that no line exceeds
 * HP_INI_LINE_MAX; items must not hold ',' or characters hp_ini_write_str would quote. */
struct hp_ini_list {
    FILE *f;
    const char *key;
    int part;   /* continuation lines written */
    size_t len; /* of the current line */
    int count;  /* items on it */
};
void hp_ini_list_begin(struct hp_ini_list *l, FILE *f, const char *key);
void hp_ini_list_add(struct hp_ini_list *l, const char *item);
void hp_ini_list_end(struct hp_ini_list *l);

#endif
