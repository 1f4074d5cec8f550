/* fuzz.h - what every libFuzzer harness of tests/fuzz shares (header-only: each harness is one
 * program): a private scratch directory, created once per process, into which the input is
 * written as the file a loader reads; the logger captured, so that error messages are still
 * formatted (a bad format argument shows) but nothing floods the terminal; stdout to
 * /dev/null (usage texts). With FUZZ_VERBOSE=1 in the environment, each input's first error
 * message is printed (to see why a seed is refused: fuzz_NAME FILE...).
 */
#ifndef HP_FUZZ_H
#define HP_FUZZ_H

#include "gpudb.h"
#include "log.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir[256];
static char fuzz_log[512]; /* the first error message of the current input */
static int fuzz_verbose;

/* With FUZZ_VERBOSE: the previous input's message. */
static inline void fuzz_report(void)
{
    if (fuzz_verbose)
        fprintf(stderr, "fuzz: %s\n", fuzz_log[0] ? fuzz_log : "(accepted, or refused silently)");
}

/* Remove the scratch directory's files, then the directory (at exit). */
static inline void fuzz_cleanup(void)
{
    static const char *const names[] = {
        "input",   "hetpipe.conf", "model.ini",   "cluster.ini", "plan.ini",
        "binding", "manifest",     "plan.ini.ck", "rank-0.part", "rank-1.part",
        "addr.0",  "timeline.0",   "timeline.1",  NULL};
    char path[512];

    if (!fuzz_dir[0])
        return;
    fuzz_report();
    for (int i = 0; names[i]; i++) {
        snprintf(path, sizeof(path), "%s/%s", fuzz_dir, names[i]);
        unlink(path);
    }
    for (int r = 0; r < 16; r++) {
        snprintf(path, sizeof(path), "%s/addr.%d", fuzz_dir, r);
        unlink(path);
    }
    rmdir(fuzz_dir);
}

/* Create the scratch directory (mode 0700) in /dev/shm when there is one, else $TMPDIR or
 * /tmp; silence the logger and stdout. Exits on failure (a harness that cannot set up). */
static inline void fuzz_setup(void)
{
    const char *base = getenv("TMPDIR");
    struct stat st;

    if (fuzz_dir[0])
        return;
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
        base = "/dev/shm";
    else if (!base || !*base)
        base = "/tmp";
    snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/hp-fuzz-XXXXXX", base);
    if (!mkdtemp(fuzz_dir)) {
        perror("fuzz: mkdtemp");
        exit(1);
    }
    atexit(fuzz_cleanup);
    if (!freopen("/dev/null", "w", stdout)) {
        perror("fuzz: /dev/null");
        exit(1);
    }
    fuzz_verbose = getenv("FUZZ_VERBOSE") && strcmp(getenv("FUZZ_VERBOSE"), "1") == 0;
    hp_log_set_level(HP_LOG_DEBUG); /* every message formatted (into the capture buffer) */
    hp_log_capture(fuzz_log, sizeof(fuzz_log));
}

/* Before each input: forget the previous input's message. */
static inline void fuzz_begin(void)
{
    static int started;

    fuzz_setup();
    if (started++)
        fuzz_report();
    hp_log_capture(fuzz_log, sizeof(fuzz_log));
}

/* Write n bytes to fuzz_dir/name; its path in path (size pn). Exits on failure. */
static inline void fuzz_write(const char *name, const void *data, size_t n, char *path, size_t pn)
{
    const char *p = data;
    int fd;

    snprintf(path, pn, "%s/%s", fuzz_dir, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(path);
        exit(1);
    }
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) {
            perror(path);
            exit(1);
        }
        p += w;
        n -= (size_t)w;
    }
    close(fd);
}

/* The repository's site config (found as hetpipe finds it: HETPIPE_CONF, ...) into *db, for
 * the harnesses whose files name GPU types. Exits when it cannot (set HETPIPE_CONF). */
static inline void fuzz_load_db(const char *who, struct hp_gpudb *db)
{
    char conf[4096];

    if (hp_gpudb_default_path(conf, sizeof(conf)) || hp_gpudb_load(conf, db)) {
        fprintf(stderr, "%s: cannot load the site config (set HETPIPE_CONF): %s\n", who, fuzz_log);
        exit(1);
    }
}

/* The input as a NUL-terminated string (malloc'ed; free it). Bytes after a NUL are kept. */
static inline char *fuzz_str(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
