/* test_bootstrap.c - how ranks find each other: address files between forked ranks, wire-up
 * of the transport through them, timeouts naming the missing ranks, refused directories and
 * malformed files, PMIx outside a PMIx job. */
#include "suites.h"
#include "clock.h"
#include "util.h"

#include "bootstrap.h"
#include "comm.h"
#include "error.h"

#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHILD_ALARM_S 30
#define OP_TIMEOUT_MS 10000

static const uint8_t job_token[HP_MSG_TOKEN_LEN] = "hetpipe-boot-job";

/* Rank r's test blob: 1 + 777 * r bytes (one rank with a near-maximal blob), a pattern of r. */
static size_t blob_len(int r)
{
    return r == 3 ? 64 * 1024 : 1 + 777 * (size_t)r;
}

static void blob_fill(uint8_t *p, size_t n, int r)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 7u + (unsigned)r * 31u + (i >> 8));
}

static int blob_ok(const uint8_t *p, size_t n, int r)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (uint8_t)(i * 7u + (unsigned)r * 31u + (i >> 8)))
            return 0;
    return 1;
}

/* ---- forked ranks ------------------------------------------------------------------------ */

enum rank_mode { RANK_BLOBS, RANK_WIREUP, RANK_WIREUP_PERMUTED };

/* The blob exchange of rank r: every blob checked. Returns an exit code. */
static int rank_blobs(struct test_rank *self)
{
    const char *dir = self->arg;
    const int r = self->rank, n = self->n;
    static uint8_t mine[64 * 1024];
    struct hp_boot *b = NULL;
    int code = 0;

    if (hp_boot_local_open(dir, r, n, &b) < 0)
        return 10;
    if (hp_boot_rank(b) != r || hp_boot_size(b) != n || strcmp(hp_boot_kind(b), "local") != 0) {
        code = 11;
        goto out;
    }
    blob_fill(mine, blob_len(r), r);
    if (hp_boot_allgather(b, mine, blob_len(r), OP_TIMEOUT_MS) < 0) {
        code = 12;
        goto out;
    }
    for (int p = 0; p < n; p++) {
        size_t len = 0;
        const uint8_t *blob = hp_boot_blob(b, p, &len);
        if (blob == NULL || len != blob_len(p) || !blob_ok(blob, len, p)) {
            code = 20 + p;
            goto out;
        }
    }
out:
    hp_boot_close(b);
    return code;
}

/* Wire-up through the directory, then a ring: send our rank to r + 1, receive r - 1's. */
static int rank_wireup_as(struct test_rank *self, int permuted)
{
    const char *dir = self->arg;
    const int task = self->rank, n = self->n;
    int r = task;
    struct hp_boot *b = NULL;
    struct hp_comm *comm = NULL;
    struct hp_msg_header h = {
        .type = HP_MSG_CONTROL, .vw = -1, .stage = -1, .minibatch = -1, .clock = -1};
    int32_t value, got = -1;
    int code = 0;

    if (hp_boot_local_open(dir, task, n, &b) < 0)
        return 10;
    if (permuted) {
        /* task t runs rank (n - 1 - t + 1) % n: neither identity nor a plain reversal */
        int rank_of[TEST_MAX_RANKS];
        for (int t = 0; t < n; t++)
            rank_of[t] = (n - t) % n;
        if (hp_boot_set_ranks(b, rank_of) < 0) {
            code = 16;
            goto out;
        }
        r = hp_boot_rank(b);
        if (r != (n - task) % n) {
            code = 17;
            goto out;
        }
    }
    value = r;
    if (hp_comm_create(r, n, job_token, &comm) < 0) {
        code = 11;
        goto out;
    }
    if (hp_boot_wireup(b, comm, OP_TIMEOUT_MS) < 0) {
        code = 12;
        goto out;
    }
    h.payload_bytes = sizeof(value);
    if (hp_comm_send(comm, (r + 1) % n, &h, &value, OP_TIMEOUT_MS) < 0) {
        code = 13;
        goto out;
    }
    if (hp_comm_recv(comm, (r - 1 + n) % n, HP_MSG_CONTROL, &h, &got, sizeof(got), OP_TIMEOUT_MS) <
        0) {
        code = 14;
        goto out;
    }
    if (got != (r - 1 + n) % n || h.src != (r - 1 + n) % n)
        code = 15;
out:
    /* no rank leaves while a peer may still talk to it */
    test_rank_report(self, NULL, 0);
    test_rank_barrier(self);
    hp_comm_destroy(comm);
    hp_boot_close(b);
    return code;
}

static int rank_wireup(struct test_rank *self)
{
    return rank_wireup_as(self, 0);
}

static int rank_wireup_permuted(struct test_rank *self)
{
    return rank_wireup_as(self, 1);
}

/* Fork n ranks in `mode` through `dir` and assert every one exits 0. */
static void run_ranks(enum rank_mode mode, const char *dir, int n)
{
    int codes[TEST_MAX_RANKS];

    test_ranks_run(n,
                   mode == RANK_BLOBS    ? rank_blobs
                   : mode == RANK_WIREUP ? rank_wireup
                                         : rank_wireup_permuted,
                   (void *)dir, CHILD_ALARM_S, NULL, 0, NULL, codes);
    for (int r = 0; r < n; r++)
        ck_assert_msg(codes[r] == 0, "rank %d of %d exited with %d", r, n, codes[r]);
}

START_TEST(four_ranks_exchange_blobs)
{
    const char *dir = test_fresh_dir();
    char path[128];
    struct stat st;

    run_ranks(RANK_BLOBS, dir, 4);
    /* what stays behind: exactly the four whole files, no temporaries */
    for (int r = 0; r < 4; r++) {
        snprintf(path, sizeof(path), "%s/addr.%d", dir, r);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq((long)st.st_size, 32 + (long)blob_len(r));
    }
    test_remove_dir(dir);
}
END_TEST

START_TEST(wireup_ring_over_comm)
{
    const char *dir = test_fresh_dir();

    run_ranks(RANK_WIREUP, dir, 3);
    test_remove_dir(dir);
}
END_TEST

/* Tasks that run other ranks than their position (hetpipe launch's binding file): the ring
 * goes by rank, so every message must reach the task that holds the rank. */
START_TEST(wireup_with_permuted_ranks)
{
    const char *dir = test_fresh_dir();

    run_ranks(RANK_WIREUP_PERMUTED, dir, 4);
    test_remove_dir(dir);
}
END_TEST

START_TEST(set_ranks_refuses_non_permutations)
{
    const char *dir = test_fresh_dir();
    struct hp_boot *b = NULL;
    const int twice[3] = {0, 1, 1}, range[3] = {0, 3, 1}, negative[3] = {-1, 0, 1};
    const int good[3] = {2, 0, 1};

    ck_assert_int_eq(hp_boot_local_open(dir, 1, 3, &b), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_boot_set_ranks(b, twice), -HP_EINVAL);
    ck_assert_int_eq(hp_boot_set_ranks(b, range), -HP_EINVAL);
    ck_assert_int_eq(hp_boot_set_ranks(b, negative), -HP_EINVAL);
    const char *err = test_capture_end();
    ck_assert_ptr_nonnull(strstr(err, "task 2: rank 1 is given twice"));
    ck_assert_ptr_nonnull(strstr(err, "task 1: rank 3 is out of range"));
    ck_assert_int_eq(hp_boot_rank(b), 1); /* refused maps change nothing */
    ck_assert_int_eq(hp_boot_set_ranks(b, good), 0);
    ck_assert_int_eq(hp_boot_rank(b), 0);
    hp_boot_close(b);
    test_remove_dir(dir);
}
END_TEST

/* ---- one rank in this process ------------------------------------------------------------ */

START_TEST(timeout_names_missing_ranks)
{
    const char *dir = test_fresh_dir();
    struct hp_boot *b;
    const uint8_t blob[4] = {1, 2, 3, 4};
    const char *err;
    double t0, dt;
    int ret;

    ck_assert_int_eq(hp_boot_local_open(dir, 0, 3, &b), 0);
    t0 = hp_now_s();
    test_capture_begin();
    ret = hp_boot_allgather(b, blob, sizeof(blob), 300);
    err = test_capture_end();
    dt = hp_now_s() - t0;
    ck_assert_msg(ret == -HP_ETIMEOUT, "got %s: %s", hp_errname(ret), err);
    ck_assert_msg(strstr(err, "ranks 1, 2 (2 of 3 missing)") != NULL, "not named in: %s", err);
    ck_assert_msg(strstr(err, "300 ms") != NULL && strstr(err, dir) != NULL, "got: %s", err);
    ck_assert_msg(dt >= 0.29 && dt < 2.0, "timeout took %.3f s", dt);
    ck_assert_ptr_null(hp_boot_blob(b, 0, &(size_t){0}));
    hp_boot_close(b);

    test_remove_dir(dir);

    /* many missing: the first few, then a count */
    dir = test_fresh_dir();
    ck_assert_int_eq(hp_boot_local_open(dir, 7, 8, &b), 0);
    test_capture_begin();
    ret = hp_boot_allgather(b, blob, sizeof(blob), 20);
    err = test_capture_end();
    ck_assert_int_eq(ret, -HP_ETIMEOUT);
    ck_assert_msg(strstr(err, "ranks 0, 1, 2, 3, ... (7 of 8 missing)") != NULL, "got: %s", err);
    hp_boot_close(b);
    test_remove_dir(dir);
}
END_TEST

START_TEST(one_rank_alone)
{
    const char *dir = test_fresh_dir();
    struct hp_boot *b;
    const uint8_t blob[3] = {7, 8, 9};
    const uint8_t *got;
    size_t len = 0;

    ck_assert_int_eq(hp_boot_local_open(dir, 0, 1, &b), 0);
    ck_assert_int_eq(hp_boot_allgather(b, blob, sizeof(blob), 0), 0);
    got = hp_boot_blob(b, 0, &len);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(len, 3);
    ck_assert_int_eq(memcmp(got, blob, 3), 0);
    ck_assert_ptr_null(hp_boot_blob(b, 1, &len));
    /* once only */
    test_capture_begin();
    ck_assert_int_eq(hp_boot_allgather(b, blob, sizeof(blob), 0), -HP_EINVAL);
    test_capture_end();
    hp_boot_close(b);
    test_remove_dir(dir);
}
END_TEST

START_TEST(bad_arguments_refused)
{
    const char *dir = test_fresh_dir();
    static uint8_t big[64 * 1024 + 1];
    struct hp_boot *b = NULL;
    const char *err;

    test_capture_begin();
    ck_assert_int_eq(hp_boot_local_open(dir, 2, 2, &b), -HP_EINVAL);
    ck_assert_int_eq(hp_boot_local_open(dir, -1, 2, &b), -HP_EINVAL);
    ck_assert_int_eq(hp_boot_local_open(dir, 0, 0, &b), -HP_EINVAL);
    ck_assert_int_eq(hp_boot_local_open(NULL, 0, 1, &b), -HP_EINVAL);
    err = test_capture_end();
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(err, "rank 2 of 2") != NULL, "got: %s", err);

    ck_assert_int_eq(hp_boot_local_open(dir, 0, 1, &b), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_boot_allgather(b, big, 0, 100), -HP_EINVAL);
    ck_assert_int_eq(hp_boot_allgather(b, big, sizeof(big), 100), -HP_EINVAL);
    ck_assert_int_eq(hp_boot_allgather(b, big, 1, -1), -HP_EINVAL);
    err = test_capture_end();
    ck_assert_msg(strstr(err, "65537 bytes: allowed 1 .. 65536") != NULL, "got: %s", err);
    /* the refusals did not use up the one call */
    ck_assert_int_eq(hp_boot_allgather(b, big, 1, 0), 0);
    hp_boot_close(b);
    test_remove_dir(dir);
}
END_TEST

START_TEST(unsafe_directories_refused)
{
    const char *dir = test_fresh_dir();
    struct hp_boot *b = NULL;
    char path[128];
    const char *err;
    int fd;

    ck_assert_int_eq(chmod(dir, 0755), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_boot_local_open(dir, 0, 1, &b), -HP_EINVAL);
    err = test_capture_end();
    ck_assert_msg(strstr(err, dir) != NULL && strstr(err, "mode 0755, must be 0700") != NULL,
                  "got: %s", err);
    ck_assert_int_eq(chmod(dir, 0700), 0);

    snprintf(path, sizeof(path), "%s/file", dir);
    fd = open(path, O_WRONLY | O_CREAT, 0700);
    ck_assert_int_ge(fd, 0);
    close(fd);
    test_capture_begin();
    ck_assert_int_lt(hp_boot_local_open(path, 0, 1, &b), 0);
    err = test_capture_end();
    ck_assert_msg(strstr(err, "not a directory") != NULL, "got: %s", err);

    snprintf(path, sizeof(path), "%s/missing", dir);
    test_capture_begin();
    ck_assert_int_lt(hp_boot_local_open(path, 0, 1, &b), 0);
    err = test_capture_end();
    ck_assert_msg(strstr(err, path) != NULL, "got: %s", err);
    ck_assert_ptr_null(b);
    test_remove_dir(dir);
}
END_TEST

/* Have rank 1 of `nranks_writer` write its real address file into dir (it times out at once
 * waiting for the others; its file stays). */
static void write_rank1(const char *dir, int nranks_writer)
{
    static uint8_t blob[100];
    struct hp_boot *b;

    blob_fill(blob, sizeof(blob), 1);
    ck_assert_int_eq(hp_boot_local_open(dir, 1, nranks_writer, &b), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_boot_allgather(b, blob, sizeof(blob), 0), -HP_ETIMEOUT);
    test_capture_end();
    hp_boot_close(b);
}

enum corruption { CORRUPT_MAGIC, CORRUPT_TRUNCATE, CORRUPT_BLOB, CORRUPT_RENAME };

/* Rank 0 of 2 reads rank 1's file after `how`: -HP_EPROTOCOL naming the file and `what`. */
static void expect_corrupt(enum corruption how, int nranks_writer, const char *what)
{
    const char *dir = test_fresh_dir();
    const uint8_t blob[1] = {0};
    struct hp_boot *b;
    char path[128], other[128];
    const char *err;
    uint8_t byte;
    int fd, ret;

    write_rank1(dir, nranks_writer);
    snprintf(path, sizeof(path), "%s/addr.1", dir);
    fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    if (how == CORRUPT_MAGIC || how == CORRUPT_BLOB) {
        off_t at = how == CORRUPT_MAGIC ? 0 : lseek(fd, 0, SEEK_END) - 1;
        ck_assert_int_eq(pread(fd, &byte, 1, at), 1);
        byte ^= 0x40;
        ck_assert_int_eq(pwrite(fd, &byte, 1, at), 1);
    } else if (how == CORRUPT_TRUNCATE) {
        ck_assert_int_eq(ftruncate(fd, lseek(fd, 0, SEEK_END) - 10), 0);
    }
    close(fd);
    if (how == CORRUPT_RENAME) { /* rank 1's file where rank 0 expects rank 2's */
        snprintf(other, sizeof(other), "%s/addr.2", dir);
        ck_assert_int_eq(rename(path, other), 0);
    }

    ck_assert_int_eq(hp_boot_local_open(dir, 0, how == CORRUPT_RENAME ? 3 : 2, &b), 0);
    test_capture_begin();
    ret = hp_boot_allgather(b, blob, sizeof(blob), OP_TIMEOUT_MS);
    err = test_capture_end();
    hp_boot_close(b);
    ck_assert_int_eq(ret, -HP_EPROTOCOL);
    ck_assert_msg(strstr(err, how == CORRUPT_RENAME ? "addr.2" : "addr.1") != NULL &&
                      strstr(err, what) != NULL,
                  "'%s' not named in: %s", what, err);
    test_remove_dir(dir);
}

START_TEST(malformed_files_refused)
{
    double t0 = hp_now_s();

    expect_corrupt(CORRUPT_MAGIC, 2, "magic 0x");
    expect_corrupt(CORRUPT_TRUNCATE, 2, "truncated");
    expect_corrupt(CORRUPT_BLOB, 2, "checksum");
    expect_corrupt(CORRUPT_RENAME, 3, "rank 1, expected 2");
    /* another job's file: nranks differ (checked before the rest of the contents) */
    {
        const char *dir = test_fresh_dir();
        const uint8_t blob[1] = {0};
        struct hp_boot *b;
        const char *err;

        write_rank1(dir, 4);
        ck_assert_int_eq(hp_boot_local_open(dir, 0, 2, &b), 0);
        test_capture_begin();
        ck_assert_int_eq(hp_boot_allgather(b, blob, sizeof(blob), OP_TIMEOUT_MS), -HP_EPROTOCOL);
        err = test_capture_end();
        hp_boot_close(b);
        ck_assert_msg(strstr(err, "nranks 4, expected 2") != NULL, "got: %s", err);
        test_remove_dir(dir);
    }
    /* refused at once, not after the timeout */
    ck_assert_msg(hp_now_s() - t0 < 2.0, "took %.3f s", hp_now_s() - t0);
}
END_TEST

START_TEST(pmix_outside_pmix_unsupported)
{
    struct hp_boot *b = NULL;
    const char *err;

    unsetenv("PMIX_NAMESPACE");
    unsetenv("PMIX_RANK");
    ck_assert_int_eq(hp_boot_pmix_present(), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_boot_pmix_open(&b), -HP_EUNSUPPORTED);
    err = test_capture_end();
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(err, "srun --mpi=pmix") != NULL, "got: %s", err);
    setenv("PMIX_NAMESPACE", "x", 1);
    ck_assert_int_eq(hp_boot_pmix_present(), 0);
    setenv("PMIX_RANK", "0", 1);
    ck_assert_int_eq(hp_boot_pmix_present(), 1);
    unsetenv("PMIX_NAMESPACE");
    unsetenv("PMIX_RANK");
}
END_TEST

Suite *suite_bootstrap(void)
{
    Suite *s = suite_create("bootstrap");
    TCase *t = tcase_create("bootstrap");

    tcase_set_timeout(t, 60);
    tcase_add_test(t, four_ranks_exchange_blobs);
    tcase_add_test(t, wireup_ring_over_comm);
    tcase_add_test(t, wireup_with_permuted_ranks);
    tcase_add_test(t, set_ranks_refuses_non_permutations);
    tcase_add_test(t, timeout_names_missing_ranks);
    tcase_add_test(t, one_rank_alone);
    tcase_add_test(t, bad_arguments_refused);
    tcase_add_test(t, unsafe_directories_refused);
    tcase_add_test(t, malformed_files_refused);
    tcase_add_test(t, pmix_outside_pmix_unsupported);
    suite_add_tcase(s, t);
    return s;
}
