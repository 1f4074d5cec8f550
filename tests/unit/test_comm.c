/* test_comm.c - the UCX transport: header validation, two processes over shared memory and
 * TCP loopback, receive timeouts, messages from another job. */
#include "suites.h"
#include "clock.h"
#include "util.h"

#include "comm.h"
#include "error.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OP_TIMEOUT_MS 10000
#define CHILD_ALARM_S 30

static const uint8_t job_token[HP_MSG_TOKEN_LEN] = "hetpipe-test-job";
static const uint8_t other_token[HP_MSG_TOKEN_LEN] = "another-test-job";
static const size_t sizes[] = {1, 64 * 1024, 8 * 1024 * 1024};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define MAX_PAYLOAD (8 * 1024 * 1024)

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 131u + (i >> 12) + seed);
}

static int matches(const uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (uint8_t)(i * 131u + (i >> 12) + seed))
            return 0;
    return 1;
}

static struct hp_msg_header good_header(void)
{
    struct hp_msg_header h = {
        .magic = HP_MSG_MAGIC,
        .version = HP_MSG_VERSION,
        .type = HP_MSG_ACTIVATION,
        .src = 1,
        .vw = 0,
        .stage = 1,
        .minibatch = 7,
        .clock = 2,
        .payload_bytes = 100,
    };
    memcpy(h.token, job_token, HP_MSG_TOKEN_LEN);
    return h;
}

/* Check `h` is rejected with a message naming `field`. */
static void expect_rejected(const struct hp_msg_header *h, const char *field)
{
    const char *err;
    int ret;

    test_capture_begin();
    ret = hp_msg_header_check(h, job_token, 2, 1000);
    err = test_capture_end();
    ck_assert_int_eq(ret, -HP_EPROTOCOL);
    ck_assert_msg(strstr(err, field) != NULL, "'%s' not named in: %s", field, err);
}

START_TEST(header_checks)
{
    struct hp_msg_header h = good_header();

    ck_assert_int_eq(hp_msg_header_check(&h, job_token, 2, 1000), 0);
    h.magic = 0x12345678;
    expect_rejected(&h, "magic 0x12345678");
    h = good_header();
    h.version = 9;
    expect_rejected(&h, "version 9");
    h = good_header();
    h.token[3] ^= 1;
    expect_rejected(&h, "token");
    h = good_header();
    h.src = 2;
    expect_rejected(&h, "src rank 2");
    h.src = -1;
    expect_rejected(&h, "src rank -1");
    h = good_header();
    h.payload_bytes = 1001;
    expect_rejected(&h, "payload bytes 1001");
    h = good_header();
    h.type = 42;
    expect_rejected(&h, "type 42");
    h = good_header();
    h.stage = -5;
    expect_rejected(&h, "stage -5");
    h = good_header();
    h.reserved = 1;
    expect_rejected(&h, "reserved");
}
END_TEST

/* ---- two processes ---------------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;

    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
    char *p = buf;

    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Publish our address on `wfd`, read the peer's from `rfd` and connect to it. */
static int exchange(struct hp_comm *comm, int peer, int rfd, int wfd)
{
    static uint8_t buf[4096];
    const void *addr;
    size_t len, plen;

    if (hp_comm_address(comm, &addr, &len) < 0 || write_all(wfd, &len, sizeof(len)) < 0 ||
        write_all(wfd, addr, len) < 0)
        return -1;
    if (read_all(rfd, &plen, sizeof(plen)) < 0 || plen > sizeof(buf) ||
        read_all(rfd, buf, plen) < 0)
        return -1;
    return hp_comm_connect(comm, peer, buf, plen) < 0 ? -1 : 0;
}

enum child_mode { CHILD_ECHO, CHILD_BAD_TOKEN };

static void set_tcp(int tcp)
{
    if (tcp) {
        setenv("UCX_TLS", "tcp,self", 1);
        setenv("UCX_NET_DEVICES", "lo", 1);
    }
}

/* Rank 1: returns its exit code (0 when every check passed). */
static int child_main(enum child_mode mode, int tcp, int rfd, int wfd)
{
    struct hp_comm *comm = NULL;
    struct hp_msg_header h;
    uint8_t *buf = malloc(MAX_PAYLOAD);
    char done;
    int code = 0;

    set_tcp(tcp);
    if (buf == NULL)
        return 10;
    if (hp_comm_create(1, 2, mode == CHILD_BAD_TOKEN ? other_token : job_token, &comm) < 0) {
        code = 11;
        goto out;
    }
    if (exchange(comm, 0, rfd, wfd) < 0) {
        code = 12;
        goto out;
    }
    if (mode == CHILD_BAD_TOKEN) {
        h = (struct hp_msg_header){.type = HP_MSG_CONTROL,
                                   .vw = -1,
                                   .stage = -1,
                                   .minibatch = -1,
                                   .clock = -1,
                                   .payload_bytes = 0};
        if (hp_comm_send(comm, 0, &h, NULL, OP_TIMEOUT_MS) < 0)
            code = 13;
        else if (read_all(rfd, &done, 1) < 0) /* wait until rank 0 has looked at it */
            code = 14;
        goto out;
    }
    for (size_t i = 0; i < NSIZES; i++) {
        memset(&h, 0, sizeof(h));
        if (hp_comm_recv(comm, 0, HP_MSG_ACTIVATION, &h, buf, MAX_PAYLOAD, OP_TIMEOUT_MS) < 0) {
            code = 20 + (int)i;
            goto out;
        }
        if (h.src != 0 || h.payload_bytes != sizes[i] || h.minibatch != (int64_t)i || h.vw != 0 ||
            h.stage != 0 || h.clock != 3 || !matches(buf, sizes[i], (unsigned)i)) {
            code = 30 + (int)i;
            goto out;
        }
    }
    fill(buf, sizes[1], 99);
    h = (struct hp_msg_header){.type = HP_MSG_GRADIENT,
                               .vw = 0,
                               .stage = 1,
                               .minibatch = 2,
                               .clock = 3,
                               .payload_bytes = sizes[1]};
    if (hp_comm_send(comm, 0, &h, buf, OP_TIMEOUT_MS) < 0)
        code = 40;
    /* stay until rank 0 has the reply, so that our flush at close never races its receive */
    else if (read_all(rfd, &done, 1) < 0)
        code = 41;
out:
    hp_comm_destroy(comm);
    free(buf);
    return code;
}

struct pair {
    pid_t pid;
    int rfd, wfd; /* parent's ends */
};

static void pair_start(struct pair *p, enum child_mode mode, int tcp)
{
    int to_child[2], to_parent[2];

    ck_assert_int_eq(pipe(to_child), 0);
    ck_assert_int_eq(pipe(to_parent), 0);
    fflush(NULL);
    p->pid = fork();
    ck_assert_int_ge(p->pid, 0);
    if (p->pid == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        alarm(CHILD_ALARM_S); /* a stuck child dies rather than hangs the suite */
        _exit(child_main(mode, tcp, to_child[0], to_parent[1]));
    }
    close(to_child[0]);
    close(to_parent[1]);
    p->rfd = to_parent[0];
    p->wfd = to_child[1];
}

/* Tell the child to finish, reap it, and return its exit code (-1 if it did not exit). */
static int pair_finish(struct pair *p)
{
    int status = 0;

    if (write(p->wfd, "x", 1) != 1) {
        /* the child is gone already; waitpid reports how */
    }
    close(p->wfd);
    close(p->rfd);
    if (waitpid(p->pid, &status, 0) != p->pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void run_exchange(int tcp)
{
    struct hp_comm *comm = NULL;
    struct hp_msg_header h;
    struct pair p;
    uint8_t *buf = malloc(MAX_PAYLOAD);
    double t0, t_big = 0, t_reply;
    int ret = 0, step = 0, code;

    ck_assert_ptr_nonnull(buf);
    set_tcp(tcp);
    pair_start(&p, CHILD_ECHO, tcp);
    /* collect a failure step instead of asserting, so that the child is always reaped */
    if (hp_comm_create(0, 2, job_token, &comm) < 0)
        step = 1;
    else if (exchange(comm, 1, p.rfd, p.wfd) < 0)
        step = 2;
    for (size_t i = 0; step == 0 && i < NSIZES; i++) {
        fill(buf, sizes[i], (unsigned)i);
        h = (struct hp_msg_header){.type = HP_MSG_ACTIVATION,
                                   .vw = 0,
                                   .stage = 0,
                                   .minibatch = (int64_t)i,
                                   .clock = 3,
                                   .payload_bytes = sizes[i]};
        t0 = hp_now_s();
        ret = hp_comm_send(comm, 1, &h, buf, OP_TIMEOUT_MS);
        if (i == NSIZES - 1)
            t_big = hp_now_s() - t0;
        if (ret < 0)
            step = 3;
    }
    t0 = hp_now_s();
    if (step == 0) {
        memset(buf, 0, sizes[1]);
        ret = hp_comm_recv(comm, 1, HP_MSG_GRADIENT, &h, buf, MAX_PAYLOAD, OP_TIMEOUT_MS);
        if (ret < 0)
            step = 4;
        else if (h.src != 1 || h.stage != 1 || h.payload_bytes != sizes[1] ||
                 !matches(buf, sizes[1], 99))
            step = 5;
    }
    t_reply = hp_now_s() - t0;
    code = pair_finish(&p);
    hp_comm_destroy(comm);
    free(buf);
    if (tcp) {
        unsetenv("UCX_TLS");
        unsetenv("UCX_NET_DEVICES");
    }
    ck_assert_msg(step == 0, "rank 0 failed at step %d: %s", step, hp_strerror(ret));
    ck_assert_msg(code == 0, "rank 1 exited with %d", code);
    printf("comm (%s): 8 MiB send %.2f ms (%.2f GB/s), wait for 64 KiB reply %.2f ms\n",
           tcp ? "tcp" : "default", t_big * 1e3, sizes[2] / t_big / 1e9, t_reply * 1e3);
}

START_TEST(two_ranks_shared_memory)
{
    run_exchange(0);
}
END_TEST

START_TEST(two_ranks_tcp_loopback)
{
    run_exchange(1);
}
END_TEST

START_TEST(recv_times_out)
{
    struct hp_comm *comm;
    struct hp_msg_header h;
    uint8_t buf[16];
    const char *err;
    double t0, dt;
    int ret;

    ck_assert_int_eq(hp_comm_create(0, 1, job_token, &comm), 0);
    t0 = hp_now_s();
    test_capture_begin();
    ret = hp_comm_recv(comm, 0, HP_MSG_CONTROL, &h, buf, sizeof(buf), 200);
    err = test_capture_end();
    dt = hp_now_s() - t0;
    ck_assert_int_eq(ret, -HP_ETIMEOUT);
    ck_assert_ptr_nonnull(strstr(err, "200 ms"));
    ck_assert_msg(dt >= 0.19 && dt < 1.0, "timeout took %.3f s", dt);
    /* the cancelled receive left nothing behind: a second one times out the same way */
    test_capture_begin();
    ret = hp_comm_recv(comm, 0, HP_MSG_CONTROL, &h, buf, sizeof(buf), 50);
    test_capture_end();
    ck_assert_int_eq(ret, -HP_ETIMEOUT);
    hp_comm_destroy(comm);
}
END_TEST

/* A receive that waits does not spin: after a short poll it sleeps on UCX's event fd, so
 * ranks sharing cores leave them to the ones that compute (before, polling with sched_yield
 * took a whole core for as long as the wait). */
START_TEST(waiting_recv_sleeps)
{
    struct hp_comm *comm;
    struct hp_msg_header h;
    struct timespec c0, c1;
    double t0, wall, cpu;
    int ret;

    ck_assert_int_eq(hp_comm_create(0, 1, job_token, &comm), 0);
    t0 = hp_now_s();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    test_capture_begin();
    ret = hp_comm_recv(comm, 0, HP_MSG_CONTROL, &h, NULL, 0, 1000);
    test_capture_end();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    wall = hp_now_s() - t0;
    cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    ck_assert_int_eq(ret, -HP_ETIMEOUT);
    ck_assert_msg(wall >= 0.99, "the wait took %.3f s", wall);
    ck_assert_msg(cpu < 0.1 * wall, "a 1 s wait used %.3f s of CPU", cpu);
    hp_comm_destroy(comm);
}
END_TEST

/* A message that is already waiting when the receive is posted (the receive completes at
 * once inside UCX) is returned whole, with its header and tag (openucx/ucx#9425: UCX 1.13
 * leaves the tag info of an immediate completion unfilled). */
START_TEST(recv_of_waiting_message)
{
    struct hp_comm *comm;
    struct hp_msg_header h = {.type = HP_MSG_CONTROL,
                              .vw = -1,
                              .stage = -1,
                              .minibatch = 5,
                              .clock = -1,
                              .payload_bytes = 4};
    const void *addr;
    uint8_t out[4] = {1, 2, 3, 4}, in[4] = {0};
    size_t len;

    ck_assert_int_eq(hp_comm_create(0, 1, job_token, &comm), 0);
    ck_assert_int_eq(hp_comm_address(comm, &addr, &len), 0);
    ck_assert_int_eq(hp_comm_connect(comm, 0, addr, len), 0);
    ck_assert_int_eq(hp_comm_send(comm, 0, &h, out, OP_TIMEOUT_MS), 0);
    /* progress until the message has landed in the unexpected queue */
    test_capture_begin();
    ck_assert_int_eq(hp_comm_recv(comm, 0, HP_MSG_PULL, &h, NULL, 0, 50), -HP_ETIMEOUT);
    test_capture_end();
    memset(&h, 0, sizeof(h));
    ck_assert_int_eq(hp_comm_recv(comm, 0, HP_MSG_CONTROL, &h, in, sizeof(in), OP_TIMEOUT_MS), 0);
    ck_assert_int_eq(h.src, 0);
    ck_assert_int_eq(h.minibatch, 5);
    ck_assert_uint_eq(h.payload_bytes, 4);
    ck_assert_int_eq(memcmp(in, out, 4), 0);
    hp_comm_destroy(comm);
}
END_TEST

START_TEST(wrong_token_refused)
{
    struct hp_comm *comm = NULL;
    struct hp_msg_header h;
    struct pair p;
    const char *err = "";
    int ret = -HP_EINVAL, code;

    pair_start(&p, CHILD_BAD_TOKEN, 0);
    ret = hp_comm_create(0, 2, job_token, &comm);
    if (ret == 0)
        ret = exchange(comm, 1, p.rfd, p.wfd) < 0 ? -HP_EIO : 0;
    if (ret == 0) {
        test_capture_begin();
        ret = hp_comm_recv(comm, 1, HP_MSG_CONTROL, &h, NULL, 0, OP_TIMEOUT_MS);
        err = test_capture_end();
    }
    code = pair_finish(&p);
    hp_comm_destroy(comm);
    ck_assert_int_eq(ret, -HP_EPROTOCOL);
    ck_assert_ptr_nonnull(strstr(err, "token"));
    ck_assert_int_eq(code, 0);
}
END_TEST

Suite *suite_comm(void)
{
    Suite *s = suite_create("comm");
    TCase *t = tcase_create("comm");

    tcase_set_timeout(t, 60);
    tcase_add_test(t, header_checks);
    tcase_add_test(t, two_ranks_shared_memory);
    tcase_add_test(t, two_ranks_tcp_loopback);
    tcase_add_test(t, recv_times_out);
    tcase_add_test(t, waiting_recv_sleeps);
    tcase_add_test(t, wrong_token_refused);
    tcase_add_test(t, recv_of_waiting_message);
    suite_add_tcase(s, t);
    return s;
}
