/* util.c - helpers shared by the unit tests. */
#include "util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static char dir[256];
static char path[512];

static const char *tmpdir(void)
{
    if (!dir[0]) {
        snprintf(dir, sizeof(dir), "/tmp/hp-unit-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
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
