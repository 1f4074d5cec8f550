/* log.h - the one logger of hetpipe.
 *
 * Messages go to stderr as "hetpipe: <level>: <message>" (a prefix can be set, e.g. a rank).
 * The threshold comes from hp_log_set_level() or, if never set, from HETPIPE_LOG
 * (error|warn|info|debug: its row in common/options.def, whose words are in the order of
 * enum hp_log_level). Library code logs an error once, where it is first known, and
 * returns a code; main() decides what to do.
 */
#ifndef HP_LOG_H
#define HP_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum hp_log_level {
    HP_LOG_ERROR = 0,
    HP_LOG_WARN = 1,
    HP_LOG_INFO = 2,
    HP_LOG_DEBUG = 3,
};

/* Set the threshold; messages above it are dropped. */
void hp_log_set_level(enum hp_log_level level);

/* Set the prefix printed before the level ("hetpipe" by default). The string is copied. */
void hp_log_set_prefix(const char *prefix);

/* While on, drop every message (a search that tries what may fail, and reports once). */
void hp_log_set_quiet(int on);

/* While `buf` is not NULL, nothing is printed: the first error message is kept in buf (size n;
 * "" when none), the rest dropped, for a caller that reports a failure in its own words
 * (hetpipe doctor). The caller owns buf; hp_log_capture(NULL, 0) ends the capture. */
void hp_log_capture(char *buf, size_t n);

void hp_log(enum hp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* hp_log with the arguments in a va_list (the CUDA backend module logs through it: the host
 * hands it over in struct hp_backend_host, runtime/backend_module.h). */
void hp_vlog(enum hp_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#define hp_error(...) hp_log(HP_LOG_ERROR, __VA_ARGS__)
#define hp_warn(...) hp_log(HP_LOG_WARN, __VA_ARGS__)
#define hp_info(...) hp_log(HP_LOG_INFO, __VA_ARGS__)
#define hp_debug(...) hp_log(HP_LOG_DEBUG, __VA_ARGS__)

#endif
