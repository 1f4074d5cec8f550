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

/* A fresh private directory under /tmp (mkdtemp: mode 0700, as the local bootstrap wants);
 * path in a static buffer, valid until the next call. */
const char *test_fresh_dir(void);

/* Remove the files in `dir`, then `dir` (not recursive). */
void test_remove_dir(const char *dir);

/* ---- forked ranks ----------------------------------------------------------------------
 * test_ranks_run forks n processes; rank r runs fn(self) and exits with its return value.
 * A rank hands the parent a report (a fixed-size struct of the test's choosing) through a
 * pipe of its own, and may wait in test_rank_barrier until every rank has reported or died,
 * so that none closes its endpoints while a peer may still talk to it. */
#define TEST_MAX_RANKS 8

struct test_rank {
    int rank, n;
    void *arg;          /* test_ranks_run's arg */
    size_t report_size; /* test_ranks_run's report_size */
    int report_fd;      /* write end of this rank's report pipe */
    int barrier_fd;     /* read end of the barrier pipe: EOF once every rank has reported */
};

typedef int (*test_rank_fn)(struct test_rank *self);

/* Send rank's report (len <= report_size bytes; the rest is zeroed). Call at most once. */
void test_rank_report(struct test_rank *self, const void *report, size_t len);

/* Wait until every rank has reported (or exited). Call after test_rank_report. */
void test_rank_barrier(struct test_rank *self);

/* Fork n <= TEST_MAX_RANKS ranks running fn under alarm(alarm_s) (a stuck rank dies rather
 * than hangs the suite) and wait for all. reports (n * report_size bytes, may be NULL when
 * report_size is 0): rank r's report at r * report_size, all zero when it did not report;
 * reported[r] (may be NULL) says whether it did; codes[r]: its exit code, or 128 + signal. */
void test_ranks_run(int n, test_rank_fn fn, void *arg, int alarm_s, void *reports,
                    size_t report_size, int *reported, int *codes);

#endif
