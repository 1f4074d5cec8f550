/* fuzz_folder.c - an image folder (runtime/source_folder.c): the input describes a small
 * directory tree, one entry a line, made in the scratch directory as ROOT:
 *   PATH         a file holding PATH (a trailing '/': a directory)
 *   L PATH TARGET  a symbolic link (TARGET relative, no "..")
 *   F PATH       a FIFO
 * PATHs are relative, without "." or ".." components (others are passed over), at most 6
 * deep and 64 lines; parents are made as needed. The tree is opened as a folder source (the
 * first byte's low bit: need_val) and every sample of both splits read. An accepted folder
 * must be ordered as promised: classes strictly sorted, ids class by class (labels never
 * decrease), every read the file's bytes or a message. */
#include "error.h"
#include "fuzz.h"
#include "source.h"

#include <errno.h>
#include <ftw.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    return 0;
}

/* 1 when p is a relative path of plain components. */
static int safe_path(const char *p)
{
    int depth = 0;

    if (!*p || *p == '/')
        return 0;
    for (const char *c = p; *c;) {
        const size_t n = strcspn(c, "/");
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.') || ++depth > 6)
            return 0;
        c += n;
        c += *c == '/';
    }
    return 1;
}

/* Make the parents of root/rel. */
static void parents(const char *root, const char *rel)
{
    char path[1200];

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        mkdir(path, 0700);
        *p = '/';
    }
}

static void make_entry(const char *root, char *line)
{
    char path[1200];
    int fd;

    if ((line[0] == 'L' || line[0] == 'F') && line[1] == ' ') {
        char *rel = line + 2, *target = line[0] == 'L' ? strchr(rel, ' ') : NULL;
        if (target)
            *target++ = '\0';
        if (!safe_path(rel) || (line[0] == 'L' && (!target || !safe_path(target))))
            return;
        parents(root, rel);
        snprintf(path, sizeof(path), "%s/%s", root, rel);
        if (line[0] == 'L')
            (void)!symlink(target, path);
        else
            mkfifo(path, 0600);
        return;
    }
    const size_t n = strlen(line);
    const int dir = n > 0 && line[n - 1] == '/';
    if (dir)
        line[n - 1] = '\0';
    if (!safe_path(line))
        return;
    parents(root, line);
    snprintf(path, sizeof(path), "%s/%s", root, line);
    if (dir) {
        mkdir(path, 0700);
        return;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        (void)!write(fd, line, strlen(line));
        close(fd);
    }
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static void check(struct hp_source *s)
{
    char err[512];

    for (int k = 1; k < s->nclasses; k++)
        if (strcmp(s->classes[k - 1], s->classes[k]) >= 0)
            abort();
    if (s->n[0] < 1 || s->nclasses < 1)
        abort();
    for (int sp = 0; sp < 2; sp++) {
        int32_t last = 0;
        for (long id = 0; id < s->n[sp]; id++) {
            struct hp_sample smp;
            err[0] = '\0';
            if (s->ops->read(s, sp, id, &smp, err, sizeof(err)) != 0) {
                if (!err[0])
                    abort();
                continue;
            }
            if (smp.label < last || smp.label >= s->nclasses || (smp.size && !smp.data))
                abort();
            last = smp.label;
            s->ops->release(s, &smp);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char root[512], *text, *save = NULL;
    struct hp_source *s;
    int lines = 0;

    fuzz_begin();
    if (size < 1)
        return 0;
    snprintf(root, sizeof(root), "%s/tree", fuzz_dir);
    mkdir(root, 0700);
    text = fuzz_str(data + 1, size - 1);
    for (char *line = strtok_r(text, "\n", &save); line && lines < 64;
         line = strtok_r(NULL, "\n", &save), lines++)
        make_entry(root, line);
    free(text);
    if (hp_source_open_folder(root, data[0] & 1, &s) == 0) {
        check(s);
        hp_source_close(s);
    } else if (!fuzz_log[0]) {
        abort();
    }
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
