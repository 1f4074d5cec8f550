/* util.c - helpers shared by the unit tests. */
#include "util.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static char dir[256];
static char path[512];

static void remove_tmpdir(void)
{
    if (dir[0])
        test_remove_dir(dir);
}

/* One directory per test process (Check forks one per test), removed when it exits. */
static const char *tmpdir(void)
{
    if (!dir[0]) {
        snprintf(dir, sizeof(dir), "/tmp/hp-unit-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        atexit(remove_tmpdir);
    }
    return dir;
}

const char *test_write_file(const char *name, const char *text)
{
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", tmpdir(), name);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

const char *test_write_gz(const char *name, const void *data, size_t n)
{
    gzFile f;

    snprintf(path, sizeof(path), "%s/%s", tmpdir(), name);
    f = gzopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (n)
        ck_assert_int_eq(gzwrite(f, data, (unsigned)n), (int)n);
    gzclose(f);
    return path;
}

const char *test_fresh_dir(void)
{
    static char fresh[64];

    snprintf(fresh, sizeof(fresh), "/tmp/hp-unit-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(fresh));
    return fresh;
}

void test_remove_dir(const char *d)
{
    char file[512];
    struct dirent *e;
    DIR *dd = opendir(d);

    if (dd == NULL)
        return;
    while ((e = readdir(dd)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(file, sizeof(file), "%s/%s", d, e->d_name);
        unlink(file);
    }
    closedir(dd);
    rmdir(d);
}

static int saved_fd = -1;
static FILE *capture;
static char captured[16384];

void test_capture_begin(void)
{
    fflush(stderr);
    capture = tmpfile();
    ck_assert_ptr_nonnull(capture);
    saved_fd = dup(2);
    dup2(fileno(capture), 2);
}

const char *test_capture_end(void)
{
    size_t n;

    fflush(stderr);
    dup2(saved_fd, 2);
    close(saved_fd);
    rewind(capture);
    n = fread(captured, 1, sizeof(captured) - 1, capture);
    captured[n] = '\0';
    fclose(capture);
    return captured;
}

/* Allocation counting: the unit test binary is linked with -Wl,--wrap for these functions,
 * so every call from our code (libhetpipe.a included) passes through here. */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
int __wrap_posix_memalign(void **p, size_t a, size_t n);

static long allocations;

void *__wrap_malloc(size_t n)
{
    allocations++;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    allocations++;
    return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    allocations++;
    return __real_realloc(p, n);
}

int __wrap_posix_memalign(void **p, size_t a, size_t n)
{
    allocations++;
    return __real_posix_memalign(p, a, n);
}

long test_allocations(void)
{
    return allocations;
}

/* ---- forked ranks ---------------------------------------------------------------------- */

#define REPORT_MARK 'R' /* first byte of a report: what follows is whole */

void test_rank_report(struct test_rank *self, const void *report, size_t len)
{
    unsigned char *msg = calloc(1, 1 + self->report_size);
    size_t off = 0, total = 1 + self->report_size;

    if (msg == NULL || self->report_fd < 0)
        goto out;
    msg[0] = REPORT_MARK;
    if (report != NULL)
        memcpy(msg + 1, report, len < self->report_size ? len : self->report_size);
    while (off < total) {
        ssize_t w = write(self->report_fd, msg + off, total - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    close(self->report_fd);
    self->report_fd = -1;
out:
    free(msg);
}

void test_rank_barrier(struct test_rank *self)
{
    char c;

    while (read(self->barrier_fd, &c, 1) > 0) {
    }
}

void test_ranks_run(int n, test_rank_fn fn, void *arg, int alarm_s, void *reports,
                    size_t report_size, int *reported, int *codes)
{
    int rep[TEST_MAX_RANKS][2], bar[2];
    pid_t pids[TEST_MAX_RANKS];
    unsigned char *msg = malloc(1 + report_size);

    ck_assert_ptr_nonnull(msg);
    ck_assert(n >= 1 && n <= TEST_MAX_RANKS);
    ck_assert_int_eq(pipe(bar), 0);
    for (int r = 0; r < n; r++)
        ck_assert_int_eq(pipe(rep[r]), 0);
    fflush(NULL);
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        ck_assert_int_ge(pids[r], 0);
        if (pids[r] == 0) {
            struct test_rank self = {.rank = r,
                                     .n = n,
                                     .arg = arg,
                                     .report_size = report_size,
                                     .report_fd = rep[r][1],
                                     .barrier_fd = bar[0]};
            /* only the parent may hold a write end, or EOF would never come */
            close(bar[1]);
            for (int q = 0; q < n; q++) {
                close(rep[q][0]);
                if (q != r)
                    close(rep[q][1]);
            }
            alarm((unsigned)alarm_s);
            _exit(fn(&self));
        }
    }
    close(bar[0]);
    for (int r = 0; r < n; r++)
        close(rep[r][1]);
    /* every rank's report, or its EOF (it exited without one) */
    for (int r = 0; r < n; r++) {
        size_t got = 0;
        while (got < 1 + report_size) {
            ssize_t k = read(rep[r][0], msg + got, 1 + report_size - got);
            if (k <= 0)
                break;
            got += (size_t)k;
        }
        const int ok = got == 1 + report_size && msg[0] == REPORT_MARK;
        if (report_size > 0) {
            unsigned char *dst = (unsigned char *)reports + (size_t)r * report_size;
            if (ok)
                memcpy(dst, msg + 1, report_size);
            else
                memset(dst, 0, report_size);
        }
        if (reported)
            reported[r] = ok;
        close(rep[r][0]);
    }
    close(bar[1]); /* the barrier opens */
    for (int r = 0; r < n; r++) {
        int status = 0;
        ck_assert_int_eq(waitpid(pids[r], &status, 0), pids[r]);
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    free(msg);
}
