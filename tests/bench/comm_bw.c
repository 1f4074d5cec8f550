/* comm_bw.c - activation transfer bandwidth through hp_comm_send / hp_comm_recv.
 *
 *   bench_comm_bw [-a copy|buf] [-s SIZE[,SIZE...]] [-n ITERS] [-w WARMUP]
 *
 * Two processes (forked; rank 0 sends, rank 1 receives) stream one-directional ACTIVATION
 * messages, as stage s does to stage s + 1: per size, WARMUP messages, a barrier (rank 1 sends
 * a CONTROL message once it has them all), then ITERS timed messages and a final CONTROL ack
 * from rank 1. Transports follow UCX's environment (UCX_TLS, UCX_NET_DEVICES).
 *
 * What is measured, and why it compares with `ucx_perftest -t tag_bw -O 1`: hp_comm_send
 * returns only when its buffer is reusable, so our stream has one send in flight at a time;
 * tag_bw with a window of 1 (-O 1) does the same, and its client (the sender) reports
 * payload bytes / time from the start of the timed loop until the receiver's final ack has
 * arrived. send_mb_s is exactly that figure for us (the ack's one-way latency is inside both).
 * recv_mb_s is the receiver's view (from the barrier until the last message is in), for
 * information. Bytes are payload bytes (our 64-byte header is not counted); MB is 2^20 bytes,
 * as ucx_perftest prints it.
 *
 * Without -n, ITERS is chosen per size from the warmup so that the timed loop lasts about
 * 0.25 s; without -w, WARMUP is 64 MiB worth of messages (8 to 2000).
 *
 * -a copy (the default) goes through hp_comm_send / hp_comm_recv, which stage every message
 * through the comm's own buffers; -a buf through hp_comm_send_start + hp_comm_send_wait and
 * hp_comm_recv_buf on struct hp_msg_buf (no staging copy; what the pipeline stages use), still
 * one send in flight. Prints one line per size:
 *   api=copy|buf size=BYTES iters=N warmup=W send_mb_s=X recv_mb_s=Y
 */
#include "clock.h"
#include "comm.h"
#include "error.h"
#include "log.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_SIZES 32
#define OP_TIMEOUT_MS 30000
#define CHILD_ALARM_S 600
#define TARGET_S 0.25
#define MB (1024.0 * 1024.0)

static const uint8_t job_token[HP_MSG_TOKEN_LEN] = "hetpipe-bench-bw";
static const size_t default_sizes[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};

struct opts {
    int msg_buf; /* -a buf */
    size_t sizes[MAX_SIZES];
    int nsizes;
    long iters;  /* 0: automatic */
    long warmup; /* -1: automatic */
};

/* ---- arguments -------------------------------------------------------------------------- */

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_sizes(const char *arg, struct opts *o)
{
    char buf[512];
    char *save = NULL;
    long v;

    if (strlen(arg) >= sizeof(buf))
        return -1;
    strcpy(buf, arg);
    o->nsizes = 0;
    for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == MAX_SIZES || parse_long(t, 1, 1L << 30, &v) < 0)
            return -1;
        o->sizes[o->nsizes++] = (size_t)v;
    }
    return o->nsizes > 0 ? 0 : -1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_comm_bw [-a copy|buf] [-s SIZE[,SIZE...]] [-n ITERS] [-w WARMUP]\n"
               "  -a, --api     copy: hp_comm_send/recv (default); buf: hp_msg_buf, no staging\n"
               "  -s, --sizes   payload bytes per message (default 65536,262144,1048576,"
               "4194304,16777216)\n"
               "  -n, --iters   timed messages per size (default: about 0.25 s worth)\n"
               "  -w, --warmup  untimed messages before them (default: 64 MiB worth, 8-2000)\n");
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"api", required_argument, NULL, 'a'},   {"sizes", required_argument, NULL, 's'},
        {"iters", required_argument, NULL, 'n'}, {"warmup", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    int c;

    memcpy(o->sizes, default_sizes, sizeof(default_sizes));
    o->nsizes = (int)(sizeof(default_sizes) / sizeof(default_sizes[0]));
    o->iters = 0;
    o->warmup = -1;
    o->msg_buf = 0;
    while ((c = getopt_long(argc, argv, "a:s:n:w:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'a':
            if (strcmp(optarg, "copy") != 0 && strcmp(optarg, "buf") != 0) {
                hp_error("invalid api '%s': want copy or buf", optarg);
                return -1;
            }
            o->msg_buf = strcmp(optarg, "buf") == 0;
            break;
        case 's':
            if (parse_sizes(optarg, o) < 0) {
                hp_error("invalid sizes '%s': want comma-separated byte counts in [1, 2^30]",
                         optarg);
                return -1;
            }
            break;
        case 'n':
            if (parse_long(optarg, 1, 100000000, &o->iters) < 0) {
                hp_error("invalid iterations '%s': want an integer in [1, 10^8]", optarg);
                return -1;
            }
            break;
        case 'w':
            if (parse_long(optarg, 0, 100000000, &o->warmup) < 0) {
                hp_error("invalid warmup '%s': want an integer in [0, 10^8]", optarg);
                return -1;
            }
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        hp_error("unexpected argument '%s'", argv[optind]);
        return -1;
    }
    return 0;
}

/* ---- the address exchange (as tests/unit/test_comm.c) ----------------------------------- */

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
        read_all(rfd, buf, plen) < 0) {
        hp_error("cannot read the peer's address: the peer is gone");
        return -1;
    }
    return hp_comm_connect(comm, peer, buf, plen) < 0 ? -1 : 0;
}

/* ---- the stream ------------------------------------------------------------------------- */

static struct hp_msg_header header(int type, int64_t index, int64_t count, size_t bytes)
{
    return (struct hp_msg_header){.type = (uint16_t)type,
                                  .vw = 0,
                                  .stage = 0,
                                  .minibatch = index,
                                  .clock = count,
                                  .payload_bytes = bytes};
}

static uint8_t pattern(size_t i, size_t size)
{
    return (uint8_t)(i * 131u + (i >> 12) + size);
}

static long auto_warmup(size_t size)
{
    long w = (long)((64u << 20) / size);

    return w < 8 ? 8 : w > 2000 ? 2000 : w;
}

/* One side's payload: a plain buffer (-a copy) or a message buffer (-a buf). */
struct side {
    struct hp_comm *comm;
    uint8_t *buf;          /* cap bytes: mb's payload, or plain */
    struct hp_msg_buf *mb; /* NULL with -a copy */
    size_t cap;
};

static int side_init(struct side *d, const struct opts *o)
{
    d->cap = 0;
    for (int k = 0; k < o->nsizes; k++)
        d->cap = o->sizes[k] > d->cap ? o->sizes[k] : d->cap;
    d->comm = NULL;
    d->mb = NULL;
    if (o->msg_buf) {
        if (hp_msg_buf_create(d->cap, &d->mb) < 0)
            return -1;
        d->buf = hp_msg_buf_payload(d->mb);
    } else {
        d->buf = malloc(d->cap);
        if (d->buf == NULL) {
            hp_error("cannot allocate a %zu-byte buffer: out of memory", d->cap);
            return -1;
        }
    }
    memset(d->buf, 0, d->cap); /* fault the pages in before anything is timed */
    return 0;
}

static void side_release(struct side *d)
{
    if (d->mb != NULL)
        hp_msg_buf_destroy(d->comm, d->mb);
    else
        free(d->buf);
    hp_comm_destroy(d->comm);
}

/* Send `count` messages of `size` bytes; message i carries minibatch = i and clock = count,
 * so that the receiver knows where the run ends. */
static int send_run(struct side *d, size_t size, long count)
{
    for (long i = 0; i < count; i++) {
        const struct hp_msg_header h = header(HP_MSG_ACTIVATION, i, count, size);
        int ret;

        if (d->mb != NULL) {
            ret = hp_comm_send_start(d->comm, 1, &h, d->mb);
            if (ret == 0)
                ret = hp_comm_send_wait(d->comm, d->mb, OP_TIMEOUT_MS);
        } else {
            ret = hp_comm_send(d->comm, 1, &h, d->buf, OP_TIMEOUT_MS);
        }
        if (ret < 0)
            return ret;
    }
    return 0;
}

/* Receive one run of messages (its length comes with them); check their order and size. */
static int recv_run(struct side *d, size_t size)
{
    struct hp_msg_header h;
    int64_t count = 1;

    for (int64_t i = 0; i < count; i++) {
        int ret;

        if (d->mb != NULL) {
            ret = hp_comm_recv_buf(d->comm, 0, HP_MSG_ACTIVATION, d->mb, OP_TIMEOUT_MS);
            h = *hp_msg_buf_header(d->mb);
        } else {
            ret = hp_comm_recv(d->comm, 0, HP_MSG_ACTIVATION, &h, d->buf, d->cap, OP_TIMEOUT_MS);
        }
        if (ret < 0)
            return ret;
        if (h.minibatch != i || h.clock < 1 || h.payload_bytes != size) {
            hp_error("message %" PRId64 " of size %zu arrived as minibatch %" PRId64 " of %" PRId64
                     " with %" PRIu64 " bytes",
                     i, size, h.minibatch, h.clock, h.payload_bytes);
            return -HP_EPROTOCOL;
        }
        count = h.clock;
    }
    return 0;
}

static int control(struct hp_comm *comm, int peer, int sending)
{
    struct hp_msg_header h = header(HP_MSG_CONTROL, -1, -1, 0);

    if (sending)
        return hp_comm_send(comm, peer, &h, NULL, OP_TIMEOUT_MS);
    return hp_comm_recv(comm, peer, HP_MSG_CONTROL, &h, NULL, 0, OP_TIMEOUT_MS);
}

/* Rank 1: per size, a warmup run, the barrier, the timed run, the ack; its time for the timed run
 * goes to rank 0 over `wfd`. Returns the process's exit code. */
static int receiver_main(const struct opts *o, int rfd, int wfd)
{
    struct side d;
    int code = 1;

    if (side_init(&d, o) < 0)
        return 1;
    if (hp_comm_create(1, 2, job_token, &d.comm) < 0 || exchange(d.comm, 0, rfd, wfd) < 0)
        goto out;
    for (int k = 0; k < o->nsizes; k++) {
        const size_t size = o->sizes[k];
        double t0, rx_s;

        if (recv_run(&d, size) < 0 || control(d.comm, 0, 1) < 0)
            goto out;
        t0 = hp_now_s();
        if (recv_run(&d, size) < 0)
            goto out;
        rx_s = hp_now_s() - t0; /* rank 0 knows the count and turns this into MB/s */
        if (control(d.comm, 0, 1) < 0)
            goto out;
        for (size_t i = 0; i < size; i++) {
            if (d.buf[i] != pattern(i, size)) {
                hp_error("payload of size %zu differs at byte %zu", size, i);
                goto out;
            }
        }
        if (write_all(wfd, &rx_s, sizeof(rx_s)) < 0)
            goto out;
    }
    code = 0;
out:
    side_release(&d);
    return code;
}

/* Rank 0: per size, the warmup run (which also sizes the timed run), the barrier, the timed
 * run up to the ack; prints one line per size. */
static int sender_main(const struct opts *o, int rfd, int wfd)
{
    struct side d;
    int ret = -1;

    if (side_init(&d, o) < 0)
        return -1;
    if (hp_comm_create(0, 2, job_token, &d.comm) < 0 || exchange(d.comm, 1, rfd, wfd) < 0)
        goto out;
    for (int k = 0; k < o->nsizes; k++) {
        const size_t size = o->sizes[k];
        const long warmup = o->warmup >= 0 ? o->warmup : auto_warmup(size);
        long iters = o->iters;
        double t0, dt, rx_s;

        for (size_t i = 0; i < size; i++)
            d.buf[i] = pattern(i, size);
        t0 = hp_now_s();
        /* a run of 0 messages cannot tell the receiver its length: send at least one */
        if (send_run(&d, size, warmup > 0 ? warmup : 1) < 0 || control(d.comm, 1, 0) < 0)
            goto out;
        dt = hp_now_s() - t0;
        if (iters == 0) {
            const double per_msg = dt / (double)(warmup > 0 ? warmup : 1);
            const double n = TARGET_S / (per_msg > 1e-7 ? per_msg : 1e-7);
            iters = n < 16 ? 16 : n > 1e7 ? 10000000 : (long)n;
        }
        t0 = hp_now_s();
        if (send_run(&d, size, iters) < 0 || control(d.comm, 1, 0) < 0)
            goto out;
        dt = hp_now_s() - t0;
        if (read_all(rfd, &rx_s, sizeof(rx_s)) < 0) {
            hp_error("cannot read the receiver's time: the receiver is gone");
            goto out;
        }
        printf("api=%s size=%zu iters=%ld warmup=%ld send_mb_s=%.1f recv_mb_s=%.1f\n",
               o->msg_buf ? "buf" : "copy", size, iters, warmup,
               (double)size * (double)iters / dt / MB, (double)size * (double)iters / rx_s / MB);
        fflush(stdout);
    }
    ret = 0;
out:
    side_release(&d);
    return ret;
}

int main(int argc, char **argv)
{
    int to_child[2], to_parent[2];
    struct opts o;
    int status = 0, ret;
    pid_t pid;

    if (parse_args(argc, argv, &o) < 0)
        return 2;
    if (pipe(to_child) < 0 || pipe(to_parent) < 0) {
        hp_error("cannot create the address pipes: %s", strerror(errno));
        return 1;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        hp_error("cannot fork the receiver: %s", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        alarm(CHILD_ALARM_S); /* a stuck receiver dies rather than lingers */
        _exit(receiver_main(&o, to_child[0], to_parent[1]));
    }
    close(to_child[0]);
    close(to_parent[1]);
    ret = sender_main(&o, to_parent[0], to_child[1]);
    close(to_child[1]);
    close(to_parent[0]);
    if (ret < 0)
        kill(pid, SIGTERM); /* it may wait in a receive that will never complete */
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (ret == 0)
            hp_error("the receiver failed (wait status 0x%x)", status);
        return 1;
    }
    return ret < 0 ? 1 : 0;
}
