/* binding.c - reading and writing binding files (binding.h); libc only. */
#include "binding.h"

#include "infile.h"
#include "parse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ROLE_INDEX_MAX (1 << 20)

/* A decimal index 0..ROLE_INDEX_MAX at s, followed by `after` (a string, "" for the end);
 * 0 or -1. */
static int role_index(const char *s, const char *after, int *out)
{
    char digits[16];
    size_t len = strspn(s, "0123456789");
    long v;

    if (len == 0 || len >= sizeof(digits) || strcmp(s + len, after) != 0)
        return -1;
    memcpy(digits, s, len);
    digits[len] = '\0';
    if (hp_parse_long(digits, 0, ROLE_INDEX_MAX, &v))
        return -1;
    *out = (int)v;
    return 0;
}

int hp_binding_role_parse(const char *role, int *vw, int *stage)
{
    const char *dot;
    int v, s;

    if (strncmp(role, "ps", 2) == 0) {
        if (role_index(role + 2, "", &v))
            return -1;
        *vw = v;
        *stage = -1;
        return 0;
    }
    dot = strstr(role, ".stage");
    if (strncmp(role, "vw", 2) != 0 || !dot || dot - role > 12)
        return -1;
    {
        char head[16];
        snprintf(head, sizeof(head), "%.*s", (int)(dot - role - 2), role + 2);
        if (role_index(head, "", &v) || role_index(dot + 6, "", &s))
            return -1;
    }
    *vw = v;
    *stage = s;
    return 0;
}

int hp_binding_write(const char *path, const struct hp_binding *b, int n, char *err, size_t errlen)
{
    char tmp[4200];
    FILE *f;
    int ok, e;

    for (int i = 0; i < n; i++) {
        const char *node = b[i].node;
        /* read back as the line's second word: no blank, no control character, no '#' first */
        int plain = *node && *node != '#' && strlen(node) < HP_BINDING_NODE_MAX;
        for (const char *c = node; plain && *c; c++)
            plain = (unsigned char)*c > ' ' && *c != 0x7f;
        if (!plain) {
            snprintf(err, errlen,
                     "cannot write '%s': task %d's node name '%.63s' is empty, starts with '#' or "
                     "holds a blank or control character (a binding line is TASK NODE DEVICE "
                     "ROLE)",
                     path, b[i].task, node);
            return -1;
        }
    }
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= sizeof(tmp)) {
        snprintf(err, errlen, "cannot write '%s': the path is too long", path);
        return -1;
    }
    f = fopen(tmp, "wx");
    if (!f) {
        snprintf(err, errlen, "cannot write '%s': %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "# hetpipe binding: TASK NODE DEVICE ROLE (written by hetpipe launch)\n");
    for (int i = 0; i < n; i++) {
        if (b[i].device >= 0)
            fprintf(f, "%d %s %d %s\n", b[i].task, b[i].node, b[i].device, b[i].role);
        else
            fprintf(f, "%d %s - %s\n", b[i].task, b[i].node, b[i].role);
    }
    errno = 0;
    ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    if (!ok || chmod(tmp, 0644) != 0 || rename(tmp, path) != 0) {
        e = errno ? errno : EIO;
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(e));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* One line of f into buf (size n, without the newline): 1, 0 at the end of the file, -2 for
 * a line longer than n - 1, -3 for a NUL byte in it. */
static int read_line(FILE *f, char *buf, size_t n)
{
    size_t len = 0;
    int c;

    while ((c = getc(f)) != EOF && c != '\n') {
        if (c == '\0')
            return -3;
        if (len + 1 >= n)
            return -2;
        buf[len++] = (char)c;
    }
    buf[len] = '\0';
    return c == EOF && len == 0 ? 0 : 1;
}

/* Parse one non-comment line into e; 0, or -1 with why. */
static int parse_line(char *line, int lineno, struct hp_binding *e, char *err, size_t errlen)
{
    char *tok[5], *save = NULL;
    int nt = 0, v, s;
    long t, d = -1;

    for (char *p = strtok_r(line, " \t\r", &save); p && nt < 5; p = strtok_r(NULL, " \t\r", &save))
        tok[nt++] = p;
    if (nt != 4) {
        snprintf(err, errlen, "line %d: expected 'TASK NODE DEVICE ROLE'", lineno);
        return -1;
    }
    if (hp_parse_long(tok[0], 0, HP_BINDING_TASKS_MAX - 1, &t)) {
        snprintf(err, errlen, "line %d: task '%.20s' is not an integer 0..%d", lineno, tok[0],
                 HP_BINDING_TASKS_MAX - 1);
        return -1;
    }
    if (strlen(tok[1]) >= HP_BINDING_NODE_MAX) {
        snprintf(err, errlen, "line %d: the node name is longer than %d characters", lineno,
                 HP_BINDING_NODE_MAX - 1);
        return -1;
    }
    if (strcmp(tok[2], "-") != 0 && hp_parse_long(tok[2], 0, 4095, &d)) {
        snprintf(err, errlen, "line %d: device '%.20s' is neither '-' nor an index 0..4095", lineno,
                 tok[2]);
        return -1;
    }
    if (strlen(tok[3]) >= HP_BINDING_ROLE_MAX || hp_binding_role_parse(tok[3], &v, &s)) {
        snprintf(err, errlen, "line %d: role '%.40s' is neither vwV.stageS nor psP", lineno,
                 tok[3]);
        return -1;
    }
    e->task = (int)t;
    e->device = (int)d;
    e->line = lineno;
    snprintf(e->node, sizeof(e->node), "%s", tok[1]);
    snprintf(e->role, sizeof(e->role), "%s", tok[3]);
    return 0;
}

/* Read every entry of f into a growing array (file order). */
static int read_entries(FILE *f, struct hp_binding **out, int *count, char *err, size_t errlen)
{
    char line[HP_BINDING_LINE_MAX];
    struct hp_binding *b = NULL;
    int lineno = 0, n = 0, cap = 0, got;

    while ((got = read_line(f, line, sizeof(line))) != 0) {
        lineno++;
        if (got < 0) {
            if (got == -2)
                snprintf(err, errlen, "line %d is longer than %d bytes", lineno,
                         HP_BINDING_LINE_MAX - 1);
            else
                snprintf(err, errlen, "line %d contains a NUL byte (not a binding file?)", lineno);
            goto bad;
        }
        const char *first = line + strspn(line, " \t\r");
        if (!*first || *first == '#')
            continue;
        if (n == cap) {
            struct hp_binding *nb;
            cap = cap ? 2 * cap : 64;
            if (cap > HP_BINDING_TASKS_MAX || !(nb = realloc(b, (size_t)cap * sizeof(*b)))) {
                snprintf(err, errlen, "line %d: too many tasks (or out of memory)", lineno);
                goto bad;
            }
            b = nb;
        }
        if (parse_line(line, lineno, &b[n], err, errlen))
            goto bad;
        n++;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "cannot read it: %s", strerror(errno));
        goto bad;
    }
    *out = b;
    *count = n;
    return 0;
bad:
    free(b);
    return -1;
}

/* Put entries in task order, checking that tasks are 0 .. n-1 each once. */
static int by_task(struct hp_binding *b, int n, struct hp_binding **out, char *err, size_t errlen)
{
    struct hp_binding *t = calloc((size_t)(n ? n : 1), sizeof(*t));

    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++)
        t[i].task = -1;
    for (int i = 0; i < n; i++) {
        if (b[i].task >= n || t[b[i].task].task >= 0) {
            if (b[i].task >= n)
                snprintf(err, errlen,
                         "line %d: task %d is out of range (the file lists %d task%s: "
                         "tasks 0 to %d, each once)",
                         b[i].line, b[i].task, n, n == 1 ? "" : "s", n - 1);
            else
                snprintf(err, errlen, "line %d: task %d is given a second time", b[i].line,
                         b[i].task);
            free(t);
            return -1;
        }
        t[b[i].task] = b[i];
    }
    *out = t;
    return 0;
}

int hp_binding_read(const char *path, struct hp_binding **out, int *n, char *err, size_t errlen)
{
    struct hp_binding *b = NULL;
    struct stat st;
    int rc, count = 0;
    FILE *f = hp_infile_fopen(path, 0, &st, &rc);

    if (!f) {
        snprintf(err, errlen, "cannot open it: %s", hp_infile_why(rc, &st));
        return -1;
    }
    rc = read_entries(f, &b, &count, err, errlen);
    fclose(f);
    if (!rc && count == 0) {
        snprintf(err, errlen, "it lists no task");
        rc = -1;
    }
    if (!rc)
        rc = by_task(b, count, out, err, errlen);
    free(b);
    if (!rc)
        *n = count;
    return rc;
}

int hp_binding_visible_device(const char *step_gpus, const char *cvd, int device, char *out,
                              size_t n, char *err, size_t errlen)
{
    const int pos = step_gpus && *step_gpus ? hp_list_find(step_gpus, device) : -1;

    if (pos < 0) {
        snprintf(err, errlen, "the step has %s%s", step_gpus && *step_gpus ? "GPU(s) " : "no GPUs",
                 step_gpus && *step_gpus ? step_gpus : " (SLURM_STEP_GPUS is unset)");
        return -1;
    }
    if (!cvd || !*cvd || hp_list_entry(cvd, pos, out, n))
        snprintf(out, n, "%d", device);
    return 0;
}
