/* parse.c - strict number and list parsing (parse.h). */
#include "parse.h"

#include "error.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int hp_parse_long(const char *s, long min, long max, long *out)
{
    const char *d = s && *s == '-' ? s + 1 : s;
    char *end;
    long v;

    /* digits only after the sign: strtol alone would take blanks, '+' and "-+1" */
    if (!d || *d < '0' || *d > '9')
        return -HP_EINVAL;
    errno = 0;
    v = strtol(s, &end, 10);
    if (*end != '\0')
        return -HP_EINVAL;
    if (errno == ERANGE || v < min || v > max)
        return -HP_ERANGE;
    *out = v;
    return 0;
}

int hp_parse_double(const char *s, double min, double max, double *out)
{
    const char *d = s && *s == '-' ? s + 1 : s;
    char *end;
    double v;

    if (!d || !((*d >= '0' && *d <= '9') || *d == '.') || strpbrk(s, "xX"))
        return -HP_EINVAL;
    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end != '\0' || isnan(v) || isinf(v))
        return -HP_EINVAL;
    if (errno == ERANGE || v < min || v > max)
        return -HP_ERANGE;
    *out = v;
    return 0;
}

int hp_list_find(const char *list, long dev)
{
    int pos = 0;

    for (const char *p = list; p && *p; pos++) {
        char tok[32];
        size_t len = strcspn(p, ",");
        long v;
        if (len < sizeof(tok)) {
            memcpy(tok, p, len);
            tok[len] = '\0';
            if (hp_parse_long(tok, 0, 1L << 30, &v) == 0 && v == dev)
                return pos;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return -1;
}

int hp_list_entry(const char *list, int pos, char *buf, size_t n)
{
    const char *p = list;
    size_t len;

    for (int i = 0; i < pos && p; i++) {
        p = strchr(p, ',');
        p = p ? p + 1 : NULL;
    }
    if (!p)
        return -1;
    len = strcspn(p, ",");
    if (len == 0 || len >= n)
        return -1;
    memcpy(buf, p, len);
    buf[len] = '\0';
    return 0;
}
