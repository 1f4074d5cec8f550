/* util.h - helpers shared by the unit tests. */
#ifndef HP_TEST_UTIL_H
#define HP_TEST_UTIL_H

#include <stddef.h>

/* Write `text` to a new file in a fresh temporary directory; returns its path (static
 * buffer, valid until the next call). */
const char *test_write_file(const char *name, const char *text);

/* Write `n` bytes as a gzip file. */
const char *test_write_gz(const char *name, const void *data, size_t n);

/* Capture stderr into a buffer while running the next calls: test_capture_begin() then
 * test_capture_end() returns what was written (static buffer). */
void test_capture_begin(void);
const char *test_capture_end(void);

/* Heap allocations made so far by code linked into the test binary (malloc, calloc, realloc,
 * posix_memalign, counted through the linker's --wrap). */
long test_allocations(void);

#endif
