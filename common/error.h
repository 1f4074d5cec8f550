/* error.h - hetpipe's error codes and hp_strerror().
 *
 * Functions that can fail return int: 0 on success, a negative code on failure. A code is
 * either -errno (a system error) or one of the -HP_E* values below. hp_strerror() turns
 * either kind into a message. The list is written once, in HP_ERRNO_MAP, and both the enum
 * and the message table are generated from it (the libuv way).
 */
#ifndef HP_ERROR_H
#define HP_ERROR_H

#include <stddef.h>

/* X(name, message): our own codes; they start above any errno value. */
#define HP_ERRNO_MAP(X)                                                                            \
    X(INVAL, "invalid argument")                                                                   \
    X(CONFIG, "invalid configuration")                                                             \
    X(MODEL, "invalid model definition")                                                           \
    X(DATA, "invalid or missing data file")                                                        \
    X(NOMEM, "out of memory")                                                                      \
    X(BACKEND, "compute backend failure")                                                          \
    X(NODEV, "no compute device available")                                                        \
    X(UNSUPPORTED, "operation not supported by this build")                                        \
    X(SHAPE, "tensor shapes do not match")                                                         \
    X(IO, "input/output error")                                                                    \
    X(RANGE, "value out of range")                                                                 \
    X(NOTFOUND, "not found")                                                                       \
    X(TIMEOUT, "timed out")                                                                        \
    X(PROTOCOL, "invalid message")                                                             \
    X(NOTREG, "not a regular file")                                                            \
    X(BUSY, "in use by another job")

enum hp_errno {
    HP_EBASE = 10000,
#define HP_ERR_ENUM(name, msg) HP_E##name,
    HP_ERRNO_MAP(HP_ERR_ENUM)
#undef HP_ERR_ENUM
        HP_ELAST
};

/* Message for a return code (0, -errno or -HP_E*). The string is static; never NULL. */
const char *hp_strerror(int err);

/* Short symbolic name ("HP_ECONFIG", "ENOENT", ...) for a return code; static, never NULL. */
const char *hp_errname(int err);

/* s for a message, from a file or a command line: every control character (below 0x20, 0x7f)
 * as \xNN, so that nothing read from a file moves the cursor or sends a terminal escape; cut
 * with "..." to fit n (n >= 8). Returns buf. */
char *hp_str_escape(const char *s, char *buf, size_t n);

#endif
