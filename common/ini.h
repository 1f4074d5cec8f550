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
 * "<file>: [section]: unknown key 'k' (allowed: a, b, c)" and returns -HP_ECONFIG. */
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

#endif
