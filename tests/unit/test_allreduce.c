/* test_allreduce.c - the ring allreduce between forked ranks: sums against a double-precision
 * reference for groups of 1 to 4 and vectors shorter than the group, uneven and empty; every
 * member with the same bits; bytes sent; no allocation per call; a group out of step and a
 * member that dies mid-way fail with an error, not a hang; arguments refused. */
#include "suites.h"
#include "clock.h"
#include "util.h"

#include "allreduce.h"
#include "bootstrap.h"
#include "comm.h"
#include "error.h"
#include "rng.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHILD_ALARM_S 30
#define OP_TIMEOUT_MS 10000
#define FAIL_TIMEOUT_MS 5000 /* the failure tests: an error must come well before this */
#define MAX_COUNT 100003
#define NCOUNTS 5

static const uint8_t job_token[HP_MSG_TOKEN_LEN] = "hetpipe-ring-job";

/* Member m's element i: a float in [-1, 1), the same in every process. */
static float value(int m, size_t i)
{
    return 2.0f * hp_rng_uniform(hp_rng_derive(42, (uint64_t)m), i) - 1.0f;
}

static void counts_for(int n, size_t counts[NCOUNTS])
{
    counts[0] = 0;
    counts[1] = 1;
    counts[2] = (size_t)n - 1; /* fewer floats than members: empty chunks */
    counts[3] = 1000;
    counts[4] = MAX_COUNT; /* prime: uneven chunks */
}

enum mode {
    MODE_SUM,      /* every count once, checked */
    MODE_STEPS,    /* one good sum, then rank 0 at step 5, the others at step 6 */
    MODE_EXIT_MID, /* one good sum; then rank 1 sends its first chunk of the next and exits */
};

struct arg {
    const char *dir;
    enum mode mode;
};

struct report {
    int stage;              /* where a rank failed (0: it did not) */
    int rc[NCOUNTS];        /* hp_allreduce_sum's result, per count (MODE_SUM), or [0] */
    uint64_t hash[NCOUNTS]; /* FNV-1a of the result's bytes */
    double err[NCOUNTS];    /* max over i of |got - exact| / sum over members of |x| */
    size_t sent[NCOUNTS];   /* hp_allreduce_sent_bytes */
    long allocations;       /* during all the sums */
    double seconds;         /* the failing call (MODE_STEPS, MODE_EXIT_MID) */
    char err_text[512];     /* what it logged then */
};

/* Ring order is not rank order: position i holds rank n - 1 - i, so that a mix-up of `self`
 * with a position would show. */
static void ring_of(int n, int *ranks)
{
    for (int i = 0; i < n; i++)
        ranks[i] = n - 1 - i;
}

static void fill(float *buf, int m, size_t count)
{
    for (size_t i = 0; i < count; i++)
        buf[i] = value(m, i);
}

/* Check buf against the double-precision sum over the n members. */
static double max_rel_err(const float *buf, int n, size_t count)
{
    double worst = 0.0;

    for (size_t i = 0; i < count; i++) {
        double exact = 0.0, mag = 0.0, e;
        for (int m = 0; m < n; m++) {
            exact += value(m, i);
            mag += fabs(value(m, i));
        }
        e = fabs(buf[i] - exact) / (mag > 0 ? mag : 1.0);
        if (!(e <= worst)) /* NaN counts as the worst */
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

static int rank_main(struct test_rank *self)
{
    const struct arg *a = self->arg;
    const int r = self->rank, n = self->n;
    static struct report rep;
    struct hp_boot *b = NULL;
    struct hp_comm *comm = NULL;
    struct hp_allreduce *ar = NULL;
    size_t counts[NCOUNTS];
    int ranks[TEST_MAX_RANKS];
    float *buf = malloc(MAX_COUNT * sizeof(float));
    double t0;

    memset(&rep, 0, sizeof(rep));
    counts_for(n, counts);
    ring_of(n, ranks);
    if (buf == NULL)
        rep.stage = 1;
    else if (hp_boot_local_open(a->dir, r, n, &b) < 0)
        rep.stage = 2;
    else if (hp_comm_create(r, n, job_token, &comm) < 0)
        rep.stage = 3;
    else if (hp_boot_wireup(b, comm, OP_TIMEOUT_MS) < 0)
        rep.stage = 4;
    else if (hp_allreduce_create(comm, ranks, n, r, MAX_COUNT, &ar) < 0)
        rep.stage = 5;
    if (rep.stage)
        goto out;

    if (a->mode == MODE_SUM) {
        const long before = test_allocations();
        for (int c = 0; c < NCOUNTS; c++) {
            fill(buf, r, counts[c]);
            rep.rc[c] = hp_allreduce_sum(ar, buf, counts[c], c, OP_TIMEOUT_MS);
            rep.hash[c] = hp_fnv1a(HP_FNV_OFFSET, buf, counts[c] * sizeof(float));
            rep.err[c] = max_rel_err(buf, n, counts[c]);
            rep.sent[c] = hp_allreduce_sent_bytes(ar);
        }
        rep.allocations = test_allocations() - before;
        goto out;
    }

    fill(buf, r, 1000);
    if (hp_allreduce_sum(ar, buf, 1000, 0, OP_TIMEOUT_MS) < 0) {
        rep.stage = 6;
        goto out;
    }
    fill(buf, r, 1000);
    if (a->mode == MODE_EXIT_MID && r == 1) {
        /* what rank 1 (ring position n - 2) sends first at step 6 (chunk n - 2 of 1000), then
         * gone without a word (like a crash) */
        const int pos = n - 2, q = 1000 / n, rest = 1000 % n;
        const size_t len = (size_t)q + (pos < rest),
                     off = (size_t)pos * q + (pos < rest ? pos : rest);
        const struct hp_msg_header h = {.type = HP_MSG_ALLREDUCE,
                                        .vw = -1,
                                        .stage = pos,
                                        .minibatch = 6,
                                        .clock = 0,
                                        .payload_bytes = len * sizeof(float)};
        hp_comm_send(comm, ranks[pos + 1], &h, buf + off, OP_TIMEOUT_MS);
        _exit(0);
    }
    t0 = hp_now_s();
    test_capture_begin();
    rep.rc[0] =
        hp_allreduce_sum(ar, buf, 1000, a->mode == MODE_STEPS && r == 0 ? 5 : 6, FAIL_TIMEOUT_MS);
    snprintf(rep.err_text, sizeof(rep.err_text), "%s", test_capture_end());
    rep.seconds = hp_now_s() - t0;
    /* a failed member leaves at once, as a replica would, so its peers see it go */
    test_rank_report(self, &rep, sizeof(rep));
    return 0;

out:
    test_rank_report(self, &rep, sizeof(rep));
    test_rank_barrier(self);
    hp_allreduce_destroy(comm, ar);
    hp_comm_destroy(comm);
    hp_boot_close(b);
    free(buf);
    return 0;
}

/* Fork n members in `mode`; every one must have reported and exited 0. */
static void run_group(enum mode mode, int n, struct report *reps)
{
    struct arg a = {.dir = test_fresh_dir(), .mode = mode};
    int reported[TEST_MAX_RANKS], codes[TEST_MAX_RANKS];

    test_ranks_run(n, rank_main, &a, CHILD_ALARM_S, reps, sizeof(*reps), reported, codes);
    test_remove_dir(a.dir);
    for (int r = 0; r < n; r++) {
        if (mode == MODE_EXIT_MID && r == 1)
            continue;
        ck_assert_msg(reported[r] && codes[r] == 0, "rank %d of %d: reported %d, exit code %d", r,
                      n, reported[r], codes[r]);
        ck_assert_msg(reps[r].stage == 0, "rank %d of %d failed to set up at stage %d", r, n,
                      reps[r].stage);
    }
}

/* Groups of 1 to 4. The reference is the sum in double precision; a float sum of n terms
 * differs from it by at most (n - 1) u sum|x| (u = 2^-24, about 6e-8), so 1e-6 n relative to
 * sum|x| has ample room yet catches a lost or doubled contribution (an error of order 1). */
START_TEST(sums_match_reference)
{
    const int n = _i;
    struct report reps[TEST_MAX_RANKS];
    size_t counts[NCOUNTS];

    counts_for(n, counts);
    run_group(MODE_SUM, n, reps);
    for (int c = 0; c < NCOUNTS; c++) {
        const double ideal = 2.0 * (n - 1) / n * (double)counts[c] * sizeof(float);
        for (int r = 0; r < n; r++) {
            ck_assert_msg(reps[r].rc[c] == 0, "%d ranks, %zu floats: rank %d got %s", n, counts[c],
                          r, hp_errname(reps[r].rc[c]));
            ck_assert_msg(reps[r].err[c] <= 1e-6 * n,
                          "%d ranks, %zu floats: rank %d is off by %.3g (relative)", n, counts[c],
                          r, reps[r].err[c]);
            ck_assert_msg(reps[r].hash[c] == reps[0].hash[c],
                          "%d ranks, %zu floats: rank %d's bits differ from rank 0's", n, counts[c],
                          r);
            /* each of the 2 (n - 1) chunks sent differs from count / n by under one float */
            ck_assert_msg(fabs((double)reps[r].sent[c] - ideal) < 2.0 * sizeof(float),
                          "%d ranks, %zu floats: rank %d sent %zu bytes, ideal %.1f", n, counts[c],
                          r, reps[r].sent[c], ideal);
        }
    }
    for (int r = 0; r < n; r++)
        ck_assert_msg(reps[r].allocations == 0, "rank %d allocated %ld times in the sums", r,
                      reps[r].allocations);
}
END_TEST

/* Rank 0 sums step 5 while ranks 1 and 2 sum step 6. The ring is 2 -> 1 -> 0 -> 2: rank 0
 * gets rank 1's step 6, rank 2 gets rank 0's step 5 (both -HP_EPROTOCOL naming the field and
 * the values); rank 1 gets rank 2's good first chunk, then sees rank 2 leave (-HP_EIO). */
START_TEST(group_out_of_step_fails)
{
    struct report reps[3];

    run_group(MODE_STEPS, 3, reps);
    ck_assert_msg(reps[0].rc[0] == -HP_EPROTOCOL, "rank 0 got %s: %s", hp_errname(reps[0].rc[0]),
                  reps[0].err_text);
    ck_assert_msg(strstr(reps[0].err_text, "from rank 1 has minibatch (step) 6, expected 5"),
                  "rank 0 logged: %s", reps[0].err_text);
    ck_assert_msg(reps[2].rc[0] == -HP_EPROTOCOL, "rank 2 got %s: %s", hp_errname(reps[2].rc[0]),
                  reps[2].err_text);
    ck_assert_msg(strstr(reps[2].err_text, "from rank 0 has minibatch (step) 5, expected 6"),
                  "rank 2 logged: %s", reps[2].err_text);
    ck_assert_msg(reps[1].rc[0] == -HP_EIO || reps[1].rc[0] == -HP_EPROTOCOL ||
                      reps[1].rc[0] == -HP_ETIMEOUT,
                  "rank 1 got %s", hp_errname(reps[1].rc[0]));
    for (int r = 0; r < 3; r++)
        ck_assert_msg(reps[r].seconds < FAIL_TIMEOUT_MS / 1000.0 + 1.0,
                      "rank %d took %.2f s to fail", r, reps[r].seconds);
}
END_TEST

/* Rank 1 of 4 sends its first chunk of the second sum, then exits. The others fail with a
 * transport error or a timeout, within the timeout plus a margin. */
START_TEST(member_exit_fails_the_others)
{
    struct report reps[4];

    run_group(MODE_EXIT_MID, 4, reps);
    for (int r = 0; r < 4; r++) {
        if (r == 1)
            continue;
        ck_assert_msg(reps[r].rc[0] == -HP_EIO || reps[r].rc[0] == -HP_ETIMEOUT,
                      "rank %d got %s: %s", r, hp_errname(reps[r].rc[0]), reps[r].err_text);
        ck_assert_msg(reps[r].seconds < FAIL_TIMEOUT_MS / 1000.0 + 1.0,
                      "rank %d took %.2f s to fail", r, reps[r].seconds);
        ck_assert_msg(reps[r].err_text[0] != '\0', "rank %d failed without a message", r);
    }
}
END_TEST

START_TEST(bad_arguments_refused)
{
    struct hp_comm *comm;
    struct hp_allreduce *ar = NULL;
    const int dup[2] = {0, 0}, one[1] = {0}, two[2] = {1, 0};
    float x[4] = {1, 2, 3, 4};
    const char *err;

    ck_assert_int_eq(hp_comm_create(0, 2, job_token, &comm), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_allreduce_create(comm, dup, 2, 0, 4, &ar), -HP_EINVAL);
    ck_assert_int_eq(hp_allreduce_create(comm, two, 2, 5, 4, &ar), -HP_EINVAL);
    ck_assert_int_eq(hp_allreduce_create(comm, two, 0, 0, 4, &ar), -HP_EINVAL);
    err = test_capture_end();
    ck_assert_ptr_null(ar);
    ck_assert_msg(strstr(err, "rank 0 is member 0 and 1") != NULL, "got: %s", err);
    ck_assert_msg(strstr(err, "rank 5 is not among its 2 members") != NULL, "got: %s", err);

    /* a group of one: the sum is the vector itself, nothing sent */
    ck_assert_int_eq(hp_allreduce_create(comm, one, 1, 0, 4, &ar), 0);
    ck_assert_int_eq(hp_allreduce_sum(ar, x, 4, 0, OP_TIMEOUT_MS), 0);
    ck_assert(x[0] == 1 && x[3] == 4);
    ck_assert_uint_eq(hp_allreduce_sent_bytes(ar), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_allreduce_sum(ar, x, 5, 0, OP_TIMEOUT_MS), -HP_EINVAL);
    ck_assert_int_eq(hp_allreduce_sum(ar, x, 4, -1, OP_TIMEOUT_MS), -HP_EINVAL);
    ck_assert_int_eq(hp_allreduce_sum(ar, NULL, 1, 0, OP_TIMEOUT_MS), -HP_EINVAL);
    err = test_capture_end();
    ck_assert_msg(strstr(err, "at most 4 floats") != NULL, "got: %s", err);
    hp_allreduce_destroy(comm, ar);
    hp_allreduce_destroy(comm, NULL);
    hp_comm_destroy(comm);
}
END_TEST

Suite *suite_allreduce(void)
{
    Suite *s = suite_create("allreduce");
    TCase *t = tcase_create("allreduce");

    tcase_set_timeout(t, 60);
    tcase_add_loop_test(t, sums_match_reference, 1, 5);
    tcase_add_test(t, group_out_of_step_fails);
    tcase_add_test(t, member_exit_fails_the_others);
    tcase_add_test(t, bad_arguments_refused);
    suite_add_tcase(s, t);
    return s;
}
