/* log.c - the logger. */
#include "log.h"

#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int level_set, quiet;
static enum hp_log_level threshold = HP_LOG_INFO;
static char prefix[64] = "hetpipe";
static char *capture;
static size_t capture_len;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

int hp_log_parse_level(const char *s, enum hp_log_level *out)
{
    static const char *const keys[] = {"error", "warn", "info", "debug"};

    for (int i = 0; i < 4; i++) {
        if (s && strcmp(s, keys[i]) == 0) {
            *out = (enum hp_log_level)i;
            return 0;
        }
    }
    return -HP_EINVAL;
}

void hp_log_set_level(enum hp_log_level level)
{
    threshold = level;
    level_set = 1;
}

void hp_log_set_quiet(int on)
{
    quiet = on;
}

void hp_log_capture(char *buf, size_t n)
{
    capture = n > 0 ? buf : NULL;
    capture_len = n;
    if (capture)
        capture[0] = '\0';
}

void hp_log_set_prefix(const char *p)
{
    snprintf(prefix, sizeof(prefix), "%s", p);
}

void hp_vlog(enum hp_log_level level, const char *fmt, va_list ap)
{
    char buf[2048];

    if (!level_set) {
        enum hp_log_level env;
        if (hp_log_parse_level(getenv("HETPIPE_LOG"), &env) == 0)
            threshold = env;
        level_set = 1;
    }
    if (capture) {
        if (level == HP_LOG_ERROR && capture[0] == '\0')
            vsnprintf(capture, capture_len, fmt, ap);
        return;
    }
    if (level > threshold || quiet)
        return;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    /* One write per message, so lines from several processes do not interleave. */
    fprintf(stderr, "%s: %s: %s\n", prefix, level_names[level], buf);
}

void hp_log(enum hp_log_level level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    hp_vlog(level, fmt, ap);
    va_end(ap);
}
