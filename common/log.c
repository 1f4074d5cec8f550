/* log.c - the logger. */
#include "log.h"

#include "error.h"
#include "options.h"

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

/* The threshold from HETPIPE_LOG (options.def); a bad value is said once, and ignored. */
static void level_from_env(void)
{
    struct hp_options e = {.log_level = HP_LOG_INFO};
    char err[512];

    if (hp_opt_env(&e, HP_OPT_LOG_LEVEL, err, sizeof(err)) == 0)
        threshold = (enum hp_log_level)e.log_level;
    else if (err[0])
        fprintf(stderr, "%s: warning: %s; ignored\n", prefix, err);
    level_set = 1;
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

/* msg with every control character but a tab as \xNN into out (size n): a message quotes
 * names and values read from files, which must not reach a terminal raw (an escape sequence,
 * a carriage return over the line, a line break that forges another message). */
static void escape_controls(const char *msg, char *out, size_t n)
{
    size_t len = 0;

    for (const unsigned char *p = (const unsigned char *)msg; *p && len + 5 < n; p++) {
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
            len += (size_t)snprintf(out + len, n - len, "\\x%02x", *p);
        else
            out[len++] = (char)*p;
    }
    out[len] = '\0';
}

void hp_vlog(enum hp_log_level level, const char *fmt, va_list ap)
{
    char buf[2048], shown[4 * 2048 + 1];

    if (!level_set)
        level_from_env();
    if (capture) {
        if (level == HP_LOG_ERROR && capture[0] == '\0') {
            vsnprintf(buf, sizeof(buf), fmt, ap);
            escape_controls(buf, capture, capture_len);
        }
        return;
    }
    if (level > threshold || quiet)
        return;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    escape_controls(buf, shown, sizeof(shown));
    /* One write per message, so lines from several processes do not interleave. */
    fprintf(stderr, "%s: %s: %s\n", prefix, level_names[level], shown);
}

void hp_log(enum hp_log_level level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    hp_vlog(level, fmt, ap);
    va_end(ap);
}
