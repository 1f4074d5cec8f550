/* error.c - messages for hetpipe's error codes. */
#include "error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const messages[] = {
#define HP_ERR_MSG(name, msg) msg,
    HP_ERRNO_MAP(HP_ERR_MSG)
#undef HP_ERR_MSG
};

static const char *const names[] = {
#define HP_ERR_NAME(name, msg) "HP_E" #name,
    HP_ERRNO_MAP(HP_ERR_NAME)
#undef HP_ERR_NAME
};

const char *hp_strerror(int err)
{
    int code = err < 0 ? -err : err;

    if (err == 0)
        return "success";
    if (code > HP_EBASE && code < HP_ELAST)
        return messages[code - HP_EBASE - 1];
    return strerror(code);
}

const char *hp_errname(int err)
{
    int code = err < 0 ? -err : err;

    if (err == 0)
        return "OK";
    if (code > HP_EBASE && code < HP_ELAST)
        return names[code - HP_EBASE - 1];
    switch (code) {
    case ENOENT:
        return "ENOENT";
    case EACCES:
        return "EACCES";
    case ENOMEM:
        return "ENOMEM";
    case EINVAL:
        return "EINVAL";
    case EIO:
        return "EIO";
    default:
        return "ERRNO";
    }
}

char *hp_str_escape(const char *s, char *buf, size_t n)
{
    size_t len = 0;

    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (len + 8 >= n) {
            memcpy(buf + len, "...", 4);
            return buf;
        }
        if (*p < 0x20 || *p == 0x7f)
            len += (size_t)snprintf(buf + len, n - len, "\\x%02x", *p);
        else
            buf[len++] = (char)*p;
    }
    buf[len] = '\0';
    return buf;
}
