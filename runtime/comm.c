/* comm.c - framed messages over the UCP tag API. All UCX calls of hetpipe live here. */
#include "comm.h"
#include "clock.h"

#include "error.h"
#include "infile.h"
#include "log.h"
#include "options.h"
#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#define HDR_BYTES sizeof(struct hp_msg_header)
#define TAG_MASK_ALL UINT64_MAX
#define TAG_MASK_TYPE UINT64_C(0xffffffff)
#define CLOSE_TIMEOUT_MS 1000
#define DATA_MIN_MS 250            /* a probed message's data: at least this long, */
#define DATA_MIN_BYTES_PER_MS 50e3 /* and the time its bytes take at 50 MB/s */
#define LIVENESS_MS 100
#define DRAIN_ROUNDS 10000 /* worker progress rounds before a failed peer is reported */
#define SPIN_S 100e-6      /* a wait polls this long before it sleeps on the worker's event fd */
#define NAP_MS 10          /* the longest such sleep: deadlines and liveness are checked after it */

/* What a rank publishes ahead of its UCP worker address (hp_comm_address): where it runs. UCX
 * 1.13's shared-memory transports (sysv, posix, cma) cannot report a peer's failure, so an
 * endpoint created with UCP_ERR_HANDLING_MODE_PEER never gets them and goes over TCP even to a
 * rank on the same host. A peer with our kernel (boot id) and pid namespace is connected
 * without UCX's peer error handling instead (shared memory), and its exit is seen through a
 * pidfd, so that a receive from it still fails at once when it dies. */
struct locator {
    char boot_id[40]; /* /proc/sys/kernel/random/boot_id, NUL-padded; "" when unknown */
    uint64_t pidns;   /* inode of /proc/self/ns/pid */
    int64_t pid;
};

struct peer {
    ucp_ep_h ep;          /* NULL until connected, and again after a failure */
    ucs_status_t failure; /* set by the error handler (UCS_OK while healthy) */
    int pidfd;            /* a peer on this host: readable once it has exited; -1 otherwise */
    pid_t pid;            /* a peer on this host: its process */
    int64_t next_check_ms;
    int64_t stopped_since_ms; /* a peer on this host seen stopped (SIGSTOP) since, 0 */
    int stopped;              /* failed: stopped longer than the comm's stop limit */
    int retired;              /* said goodbye: its exit does not fail a receive from any peer */
};

struct hp_comm {
    int rank;
    int nranks;
    int stop_limit_ms; /* a peer on this host stopped this long has failed */
    int silent;        /* the first peer a send or receive timed out on, -1 */
    int stalled;       /* a matched receive never finished: its buffer may still be written */
    int watch_stops;   /* stopped same-host peers fail (not with HETPIPE_LIVENESS=exit) */
    uint8_t token[HP_MSG_TOKEN_LEN];
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_address_t *address;
    size_t address_len;
    uint8_t *published; /* struct locator, then the UCP address */
    size_t published_len;
    struct peer *peers; /* [nranks] */
    uint8_t *sbuf;      /* send staging: header + payload */
    size_t sbuf_cap;
    int efd; /* the worker's event fd (UCP_FEATURE_WAKEUP), -1: waits only yield */
};

static int from_ucs(ucs_status_t status)
{
    switch (status) {
    case UCS_OK:
        return 0;
    case UCS_ERR_NO_MEMORY:
        return -HP_ENOMEM;
    case UCS_ERR_TIMED_OUT:
        return -HP_ETIMEOUT;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return -HP_EPROTOCOL;
    case UCS_ERR_INVALID_PARAM:
        return -HP_EINVAL;
    default:
        return -HP_EIO;
    }
}

static int64_t now_ms(void)
{
    return (int64_t)(hp_now_s() * 1000.0);
}

static int64_t deadline_of(int timeout_ms)
{
    return timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
}

/* Progress the worker once inside a wait that found nothing to do since *idle (0: until now).
 * Ranks share cores (hetpipe run --local puts every rank of a job on one machine, PS shards
 * share nodes with workers), and a waiting rank that spins takes CPU time from the ranks that
 * compute: after SPIN_S without progress it sleeps until UCX signals an event on the worker's
 * event fd (ucp_worker_arm, then poll), at most NAP_MS. */
static void progress(struct hp_comm *comm, double *idle)
{
    if (ucp_worker_progress(comm->worker) != 0) {
        *idle = 0.0;
        return;
    }
    const double now = hp_now_s();
    if (*idle == 0.0)
        *idle = now;
    if (comm->efd < 0 || now - *idle < SPIN_S) {
        sched_yield();
        return;
    }
    const ucs_status_t status = ucp_worker_arm(comm->worker);
    if (status == UCS_OK) {
        struct pollfd pfd = {.fd = comm->efd, .events = POLLIN};
        (void)poll(&pfd, 1, NAP_MS);
    } else if (status != UCS_ERR_BUSY) { /* UCS_ERR_BUSY: events are waiting to be progressed */
        sched_yield();
    }
}

/* Wait for a request until the deadline. UCS_INPROGRESS means the deadline passed. */
static ucs_status_t wait_request(struct hp_comm *comm, void *req, int64_t deadline)
{
    ucs_status_t status;
    double idle = 0.0;

    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        if (now_ms() >= deadline)
            return UCS_INPROGRESS;
        progress(comm, &idle);
    }
    return status;
}

/* Whether the process behind `pidfd` has exited (a zombie counts as exited). */
static int exited(int pidfd)
{
    struct pollfd pfd = {.fd = pidfd, .events = POLLIN};

    return poll(&pfd, 1, 0) > 0;
}

/* Has peer i failed? Polls a same-host peer's pidfd at most every LIVENESS_MS: exited, or
 * stopped (SIGSTOP) for longer than the stop limit (a stopped peer never answers). */
static int peer_failed(struct hp_comm *comm, int i, int64_t now)
{
    struct peer *p = &comm->peers[i];

    if (p->pidfd >= 0 && p->failure == UCS_OK && now >= p->next_check_ms) {
        /* checks further apart than the limit (a long computation, or this rank was stopped
         * too: a suspended job) do not show a continuous stop: it is timed from now */
        if (now - (p->next_check_ms - LIVENESS_MS) > comm->stop_limit_ms)
            p->stopped_since_ms = 0;
        p->next_check_ms = now + LIVENESS_MS;
        if (exited(p->pidfd)) {
            p->failure = UCS_ERR_ENDPOINT_TIMEOUT;
        } else if (!comm->watch_stops || !hp_pid_stopped((long)p->pid)) {
            p->stopped_since_ms = 0;
        } else if (!p->stopped_since_ms) {
            p->stopped_since_ms = now;
        } else if (now - p->stopped_since_ms >= comm->stop_limit_ms) {
            p->stopped = 1;
            p->failure = UCS_ERR_ENDPOINT_TIMEOUT;
        }
    }
    return p->failure != UCS_OK;
}

/* Why peer p failed, for messages. */
static const char *peer_cause(const struct hp_comm *comm, const struct peer *p, char *buf, size_t n)
{
    if (p->stopped)
        snprintf(buf, n, "stopped (SIGSTOP) for more than %.0f s", comm->stop_limit_ms / 1000.0);
    else
        snprintf(buf, n, "%s", ucs_status_string(p->failure));
    return buf;
}

void hp_comm_set_silent(struct hp_comm *comm, int peer)
{
    if (peer >= 0 && peer < comm->nranks)
        comm->silent = peer;
}

int hp_comm_blame(const struct hp_comm *comm, char *why, size_t n)
{
    if (comm->silent >= 0) { /* a timeout is fatal: it was the cause */
        snprintf(why, n, "silent (no message within the deadline)");
        return comm->silent;
    }
    for (int i = 0; i < comm->nranks; i++) {
        const struct peer *p = &comm->peers[i];
        if (i != comm->rank && !p->retired && p->failure != UCS_OK) {
            if (p->stopped)
                peer_cause(comm, p, why, n);
            else if (p->pidfd >= 0)
                snprintf(why, n, "exited");
            else
                snprintf(why, n, "lost (%s)", ucs_status_string(p->failure));
            return i;
        }
    }
    return -1;
}

void hp_comm_set_stop_limit(struct hp_comm *comm, int ms)
{
    comm->stop_limit_ms = ms > 0 ? ms : 1;
}

/* Progress the worker until it has nothing more to do (at most DRAIN_ROUNDS rounds): what a
 * peer that has just exited sent before it went (its sends flushed) may still wait in this
 * process's socket buffers or shared memory, and counts. */
static void drain(struct hp_comm *comm)
{
    for (int i = 0; i < DRAIN_ROUNDS && ucp_worker_progress(comm->worker) != 0; i++)
        ;
}

/* As wait_request, but give up early (UCS_ERR_CONNECTION_RESET) as soon as `peer` fails (its
 * endpoint reports a failure, or a peer on this host has exited: polled every LIVENESS_MS), as
 * a receive from a dead peer would otherwise wait out its timeout; with HP_COMM_ANY_PEER, as
 * soon as any connected peer fails (*failed says which). */
static ucs_status_t wait_request_peer(struct hp_comm *comm, void *req, int64_t deadline, int peer,
                                      int *failed)
{
    ucs_status_t status;
    int64_t now;
    double idle = 0.0;

    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        now = now_ms();
        if (now >= deadline)
            return UCS_INPROGRESS;
        for (int i = peer >= 0 ? peer : 0; i < (peer >= 0 ? peer + 1 : comm->nranks); i++)
            if (i != comm->rank && (peer >= 0 || !comm->peers[i].retired) &&
                peer_failed(comm, i, now)) {
                drain(comm);
                if ((status = ucp_request_check_status(req)) != UCS_INPROGRESS)
                    return status;
                *failed = i;
                return UCS_ERR_CONNECTION_RESET;
            }
        progress(comm, &idle);
    }
    return status;
}

/* Where this process runs; all zero (every peer counts as remote) when /proc cannot say. */
static void locator_init(struct locator *l)
{
    struct stat st;
    ssize_t n = -1;
    int fd;

    memset(l, 0, sizeof(*l));
    fd = hp_infile_open("/proc/sys/kernel/random/boot_id", 0, NULL);
    if (fd >= 0) {
        n = read(fd, l->boot_id, sizeof(l->boot_id) - 1);
        close(fd);
    }
    if (n <= 0 || stat("/proc/self/ns/pid", &st) < 0) {
        memset(l, 0, sizeof(*l));
        return;
    }
    l->pidns = (uint64_t)st.st_ino;
    l->pid = (int64_t)getpid();
}

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    uint8_t *p;

    if (need <= *cap)
        return 0;
    p = realloc(*buf, need);
    if (p == NULL) {
        hp_error("cannot grow the message buffer to %zu bytes: out of memory", need);
        return -HP_ENOMEM;
    }
    *buf = p;
    *cap = need;
    return 0;
}

static int valid_index(int64_t v)
{
    return v >= -1;
}

int hp_msg_header_check(const struct hp_msg_header *h, const uint8_t token[HP_MSG_TOKEN_LEN],
                        int nranks, size_t max_payload)
{
    if (h->magic != HP_MSG_MAGIC) {
        hp_error("invalid message: magic 0x%08" PRIx32 " is not 0x%08x", h->magic, HP_MSG_MAGIC);
        return -HP_EPROTOCOL;
    }
    if (h->version != HP_MSG_VERSION) {
        hp_error("invalid message: version %u is not %d", (unsigned)h->version, HP_MSG_VERSION);
        return -HP_EPROTOCOL;
    }
    if (h->type < HP_MSG_ACTIVATION || h->type > HP_MSG_TYPE_LAST) {
        hp_error("invalid message: type %u is unknown", (unsigned)h->type);
        return -HP_EPROTOCOL;
    }
    if (memcmp(h->token, token, HP_MSG_TOKEN_LEN) != 0) {
        hp_error("invalid message: token from rank %" PRId32 " is not this job's token", h->src);
        return -HP_EPROTOCOL;
    }
    if (h->src < 0 || h->src >= nranks) {
        hp_error("invalid message: src rank %" PRId32 " is out of range [0, %d)", h->src, nranks);
        return -HP_EPROTOCOL;
    }
    if (!valid_index(h->vw) || !valid_index(h->stage)) {
        hp_error("invalid message: %s %" PRId32 " is negative", valid_index(h->vw) ? "stage" : "vw",
                 valid_index(h->vw) ? h->stage : h->vw);
        return -HP_EPROTOCOL;
    }
    if (!valid_index(h->minibatch) || !valid_index(h->clock)) {
        hp_error("invalid message: %s %" PRId64 " is negative",
                 valid_index(h->minibatch) ? "clock" : "minibatch",
                 valid_index(h->minibatch) ? h->clock : h->minibatch);
        return -HP_EPROTOCOL;
    }
    if (h->reserved != 0) {
        hp_error("invalid message: reserved field 0x%08" PRIx32 " is not 0", h->reserved);
        return -HP_EPROTOCOL;
    }
    if (h->payload_bytes > max_payload) {
        hp_error("invalid message: payload bytes %" PRIu64 " exceed the limit %zu",
                 h->payload_bytes, max_payload);
        return -HP_EPROTOCOL;
    }
    return 0;
}

int hp_comm_create(int rank, int nranks, const uint8_t token[HP_MSG_TOKEN_LEN],
                   struct hp_comm **out)
{
    ucp_params_t params = {0};
    ucp_worker_params_t wparams = {0};
    struct locator loc;
    struct hp_comm *comm;
    ucs_status_t status;
    int ret;

    if (nranks < 1 || rank < 0 || rank >= nranks) {
        hp_error("cannot create the transport: rank %d of %d is out of range", rank, nranks);
        return -HP_EINVAL;
    }
    comm = calloc(1, sizeof(*comm));
    if (comm == NULL) {
        hp_error("cannot create the transport: out of memory");
        return -HP_ENOMEM;
    }
    comm->rank = rank;
    comm->nranks = nranks;
    comm->stop_limit_ms = 60000;
    comm->silent = -1;
    {
        struct hp_options e = {.liveness = HP_LIVENESS_WATCH};
        char err[512];
        if (hp_opt_env(&e, HP_OPT_LIVENESS, err, sizeof(err)) < 0) {
            hp_error("cannot create the transport: %s", err);
            free(comm);
            return -HP_EINVAL;
        }
        comm->watch_stops = e.liveness != HP_LIVENESS_EXIT;
    }
    memcpy(comm->token, token, HP_MSG_TOKEN_LEN);
    comm->peers = calloc((size_t)nranks, sizeof(*comm->peers));
    comm->sbuf_cap = 64 * 1024;
    comm->sbuf = malloc(comm->sbuf_cap);
    if (comm->peers == NULL || comm->sbuf == NULL) {
        hp_error("cannot create the transport: out of memory");
        ret = -HP_ENOMEM;
        goto err_free;
    }
    for (int i = 0; i < nranks; i++)
        comm->peers[i].pidfd = -1;
    comm->efd = -1;

    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    status = ucp_init(&params, NULL, &comm->context);
    if (status != UCS_OK) {
        hp_error("cannot create the transport: ucp_init: %s", ucs_status_string(status));
        ret = from_ucs(status);
        goto err_free;
    }

    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(comm->context, &wparams, &comm->worker);
    if (status != UCS_OK) {
        hp_error("cannot create the transport: ucp_worker_create: %s", ucs_status_string(status));
        ret = from_ucs(status);
        goto err_cleanup_context;
    }
    /* without an event fd waits keep polling (and yielding): slower to share, still correct */
    if (ucp_worker_get_efd(comm->worker, &comm->efd) != UCS_OK)
        comm->efd = -1;

    status = ucp_worker_get_address(comm->worker, &comm->address, &comm->address_len);
    if (status != UCS_OK) {
        hp_error("cannot get the worker address: %s", ucs_status_string(status));
        ret = from_ucs(status);
        goto err_destroy_worker;
    }
    comm->published_len = sizeof(loc) + comm->address_len;
    comm->published = malloc(comm->published_len);
    if (comm->published == NULL) {
        hp_error("cannot create the transport: out of memory");
        ret = -HP_ENOMEM;
        goto err_release_address;
    }
    locator_init(&loc);
    memcpy(comm->published, &loc, sizeof(loc));
    memcpy(comm->published + sizeof(loc), comm->address, comm->address_len);
    *out = comm;
    return 0;

err_release_address:
    ucp_worker_release_address(comm->worker, comm->address);
err_destroy_worker:
    ucp_worker_destroy(comm->worker);
err_cleanup_context:
    ucp_cleanup(comm->context);
err_free:
    free(comm->sbuf);
    free(comm->peers);
    free(comm);
    return ret;
}

int hp_comm_address(struct hp_comm *comm, const void **addr, size_t *len)
{
    *addr = comm->published;
    *len = comm->published_len;
    return 0;
}

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct peer *p = arg;

    p->failure = status;
}

int hp_comm_connect(struct hp_comm *comm, int peer, const void *addr, size_t len)
{
    ucp_ep_params_t params = {0};
    struct locator mine, theirs;
    struct peer *p;
    ucs_status_t status;

    if (peer < 0 || peer >= comm->nranks || addr == NULL || len <= sizeof(theirs)) {
        hp_error("cannot connect to rank %d: invalid rank or address", peer);
        return -HP_EINVAL;
    }
    p = &comm->peers[peer];
    if (p->ep != NULL || p->pidfd >= 0 || p->failure != UCS_OK) {
        hp_error("cannot connect to rank %d: already connected", peer);
        return -HP_EINVAL;
    }
    memcpy(&theirs, addr, sizeof(theirs));
    memcpy(&mine, comm->published, sizeof(mine));
    if (mine.boot_id[0] != '\0' &&
        memcmp(mine.boot_id, theirs.boot_id, sizeof(mine.boot_id)) == 0 &&
        mine.pidns == theirs.pidns && theirs.pid > 0)
        p->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)theirs.pid, 0); /* -1: as if remote */
    p->pid = (pid_t)theirs.pid;
    p->next_check_ms = 0;
    p->stopped_since_ms = 0;
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = (const ucp_address_t *)((const uint8_t *)addr + sizeof(theirs));
    params.err_mode = p->pidfd >= 0 ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = ep_error;
    params.err_handler.arg = p;
    p->failure = UCS_OK;
    status = p->pidfd >= 0 && exited(p->pidfd) ? UCS_ERR_UNREACHABLE
                                               : ucp_ep_create(comm->worker, &params, &p->ep);
    if (status != UCS_OK && p->pidfd >= 0) {
        /* A peer on this host whose shared memory is gone has left (a PS shard with nothing
         * to serve destroys its comm right after the wireup). As for an endpoint whose
         * connection fails later: this succeeds, and using the peer gives -HP_EIO. */
        hp_info("rank %d has left already (%s): sends to it and receives from it will fail", peer,
                ucs_status_string(status));
        p->ep = NULL;
        p->failure = status;
        return 0;
    }
    if (status != UCS_OK) {
        hp_error("cannot connect to rank %d: %s", peer, ucs_status_string(status));
        p->ep = NULL;
        return from_ucs(status);
    }
    return 0;
}

/* Close an endpoint now, dropping what is unsent; waits for the (local) completion. */
static void close_force(struct hp_comm *comm, struct peer *p)
{
    ucp_request_param_t param = {0};
    void *req;

    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    req = ucp_ep_close_nbx(p->ep, &param);
    if (UCS_PTR_IS_PTR(req)) {
        wait_request(comm, req, deadline_of(CLOSE_TIMEOUT_MS));
        ucp_request_free(req);
    }
    p->ep = NULL;
}

/* Check a send's arguments and the endpoint; stamp the header into hdr. */
static int send_prepare(struct hp_comm *comm, int peer, const struct hp_msg_header *h,
                        int have_payload, struct hp_msg_header *hdr, struct peer **pp)
{
    struct peer *p;

    if (peer < 0 || peer >= comm->nranks || h->type < HP_MSG_ACTIVATION ||
        h->type > HP_MSG_TYPE_LAST || (!have_payload && h->payload_bytes > 0) ||
        h->payload_bytes > SIZE_MAX - HDR_BYTES) {
        hp_error("cannot send to rank %d: invalid rank, type %u or payload", peer,
                 (unsigned)h->type);
        return -HP_EINVAL;
    }
    p = &comm->peers[peer];
    if (p->ep == NULL || p->failure != UCS_OK) {
        hp_error("cannot send to rank %d: %s", peer,
                 p->failure != UCS_OK ? ucs_status_string(p->failure) : "not connected");
        if (p->ep != NULL)
            close_force(comm, p);
        return -HP_EIO;
    }
    *hdr = *h;
    hdr->magic = HP_MSG_MAGIC;
    hdr->version = HP_MSG_VERSION;
    memcpy(hdr->token, comm->token, HP_MSG_TOKEN_LEN);
    hdr->src = comm->rank;
    hdr->reserved = 0;
    *pp = p;
    return 0;
}

/* Post a tag send of `bytes` at `data`: *req is NULL when it completed at once. */
static int send_post(struct hp_comm *comm, int peer, struct peer *p, const void *data, size_t bytes,
                     unsigned type, void **req)
{
    ucp_request_param_t param = {0};
    const ucp_tag_t tag = (ucp_tag_t)comm->rank << 32 | type;
    void *r = ucp_tag_send_nbx(p->ep, data, bytes, tag, &param);

    *req = NULL;
    if (UCS_PTR_IS_ERR(r)) {
        const ucs_status_t status = UCS_PTR_STATUS(r);
        hp_error("cannot send %zu bytes to rank %d: %s", bytes, peer, ucs_status_string(status));
        close_force(comm, p);
        return from_ucs(status);
    }
    *req = r;
    return 0;
}

/* Wait for a posted send; on a timeout or an error the endpoint is closed (a tag send cannot
 * be cancelled: closing completes it with an error and releases the buffer). Frees req. */
static int send_finish(struct hp_comm *comm, int peer, void *req, size_t bytes, int timeout_ms)
{
    struct peer *p = &comm->peers[peer];
    int failed = peer;
    ucs_status_t status = wait_request_peer(comm, req, deadline_of(timeout_ms), peer, &failed);

    if (status == UCS_ERR_CONNECTION_RESET) {
        char why[96];
        hp_error("cannot send %zu bytes to rank %d: the rank is gone (%s)", bytes, peer,
                 peer_cause(comm, p, why, sizeof(why)));
        close_force(comm, p);
        wait_request(comm, req, deadline_of(CLOSE_TIMEOUT_MS));
        ucp_request_free(req);
        return -HP_EIO;
    }
    if (status == UCS_INPROGRESS) {
        hp_error("cannot send %zu bytes to rank %d: timed out after %d ms", bytes, peer,
                 timeout_ms);
        if (comm->silent < 0) /* the first timeout is the cause; later ones are its echoes */
            comm->silent = peer;
        close_force(comm, p);
        wait_request(comm, req, deadline_of(CLOSE_TIMEOUT_MS));
        ucp_request_free(req);
        return -HP_ETIMEOUT;
    }
    ucp_request_free(req);
    if (status != UCS_OK) {
        hp_error("cannot send %zu bytes to rank %d: %s", bytes, peer, ucs_status_string(status));
        if (p->ep != NULL)
            close_force(comm, p);
        return from_ucs(status);
    }
    return 0;
}

int hp_comm_send(struct hp_comm *comm, int peer, const struct hp_msg_header *h, const void *payload,
                 int timeout_ms)
{
    struct hp_msg_header hdr;
    struct peer *p;
    size_t bytes;
    void *req = NULL;
    int ret;

    ret = send_prepare(comm, peer, h, payload != NULL, &hdr, &p);
    if (ret < 0)
        return ret;
    bytes = HDR_BYTES + (size_t)h->payload_bytes;
    ret = grow(&comm->sbuf, &comm->sbuf_cap, bytes);
    if (ret < 0)
        return ret;
    memcpy(comm->sbuf, &hdr, HDR_BYTES);
    if (h->payload_bytes > 0)
        memcpy(comm->sbuf + HDR_BYTES, payload, (size_t)h->payload_bytes);
    ret = send_post(comm, peer, p, comm->sbuf, bytes, h->type, &req);
    if (ret < 0 || req == NULL)
        return ret;
    return send_finish(comm, peer, req, bytes, timeout_ms);
}

/* Wait until a message matching (tag, mask) is announced (its header or first fragment has
 * arrived) and take it from UCX's unexpected queue, so that its sender is known before its
 * data flows: UCS_OK with *msg and *info; UCS_INPROGRESS at the deadline; or
 * UCS_ERR_CONNECTION_RESET when a peer that has not said goodbye failed (*failed). */
static ucs_status_t wait_probe(struct hp_comm *comm, ucp_tag_t tag, ucp_tag_t mask,
                               int64_t deadline, ucp_tag_message_h *msg, ucp_tag_recv_info_t *info,
                               int *failed)
{
    double idle = 0.0;

    for (;;) {
        *msg = ucp_tag_probe_nb(comm->worker, tag, mask, 1, info);
        if (*msg != NULL)
            return UCS_OK;
        const int64_t now = now_ms();
        if (now >= deadline)
            return UCS_INPROGRESS;
        for (int i = 0; i < comm->nranks; i++)
            if (i != comm->rank && !comm->peers[i].retired && peer_failed(comm, i, now)) {
                drain(comm);
                if ((*msg = ucp_tag_probe_nb(comm->worker, tag, mask, 1, info)) != NULL)
                    return UCS_OK;
                *failed = i;
                return UCS_ERR_CONNECTION_RESET;
            }
        progress(comm, &idle);
    }
}

/* A receive that was matched stalled: its sender stopped sending in the middle of the message
 * (stopped, hung or gone). A matched receive cannot be cancelled: close the sender's
 * endpoint, which fails its transfers, and give the request a bounded time to finish. 0 when
 * it finished (freed); otherwise it is left to UCX (the buffer must not be freed while the
 * process goes on, which it does not: every caller fails the rank). */
static int abandon_recv(struct hp_comm *comm, void *req, int sender)
{
    if (sender >= 0 && sender < comm->nranks && comm->peers[sender].ep != NULL)
        close_force(comm, &comm->peers[sender]);
    if (wait_request(comm, req, deadline_of(CLOSE_TIMEOUT_MS)) == UCS_INPROGRESS) {
        comm->stalled = 1;
        return -1;
    }
    ucp_request_free(req);
    return 0;
}

/* The deadline for the data of a probed message announced just now: the caller's, but no
 * later than the rank's --timeout (a sender silent that long in the middle of a message has
 * stopped, whatever the caller would wait for a new one) and no sooner than its bytes take at
 * a slow rate (DATA_MIN_MS + DATA_MIN_BYTES_PER_MS). A caller that waits on a deadline of its
 * own (a PS shard refusing stale pulls) is back at it soon after, and one that waits long
 * learns within --timeout that the sender stopped midway. */
static int64_t data_deadline(const struct hp_comm *comm, int64_t deadline,
                             const ucp_tag_recv_info_t *info)
{
    const int64_t now = now_ms();
    const int64_t need =
        now + DATA_MIN_MS + (int64_t)((double)info->length / DATA_MIN_BYTES_PER_MS);
    const int64_t limit = now + comm->stop_limit_ms;

    if (deadline > limit)
        deadline = limit;
    return deadline > need ? deadline : need;
}

/* A received message (its completion status and tag info) checked: its length, its header
 * (hp_msg_header_check) and that header against its tag. */
static int recv_check(struct hp_comm *comm, int peer, int type, ucs_status_t status,
                      const struct hp_msg_header *hdr, size_t cap, const ucp_tag_recv_info_t *ip)
{
    const ucp_tag_recv_info_t info = *ip;
    int ret;

    if (status == UCS_ERR_MESSAGE_TRUNCATED) {
        hp_error("invalid message from rank %d: longer than %zu bytes", peer, HDR_BYTES + cap);
        return -HP_EPROTOCOL;
    }
    if (status != UCS_OK) {
        hp_error("cannot receive from rank %d: %s", peer, ucs_status_string(status));
        return from_ucs(status);
    }
    if (info.length < HDR_BYTES) {
        hp_error("invalid message from rank %d: %zu bytes is shorter than a header", peer,
                 info.length);
        return -HP_EPROTOCOL;
    }
    ret = hp_msg_header_check(hdr, comm->token, comm->nranks, cap);
    if (ret < 0)
        return ret;
    if ((ucp_tag_t)hdr->src != info.sender_tag >> 32 ||
        (ucp_tag_t)hdr->type != (info.sender_tag & TAG_MASK_TYPE) ||
        (type != HP_MSG_ANY_TYPE && hdr->type != type)) {
        hp_error("invalid message: src rank %" PRId32
                 " or type %u does not match its tag 0x%016" PRIx64,
                 hdr->src, (unsigned)hdr->type, (uint64_t)info.sender_tag);
        return -HP_EPROTOCOL;
    }
    if (hdr->payload_bytes != info.length - HDR_BYTES) {
        hp_error("invalid message: payload bytes %" PRIu64 " but %zu bytes arrived",
                 hdr->payload_bytes, info.length - HDR_BYTES);
        return -HP_EPROTOCOL;
    }
    return 0;
}

/* Receive one message of (peer, type) into `count` elements of datatype `dt` at `buf`
 * (contiguous when dt is 0; HDR_BYTES + cap bytes in all, the header landing at `hdr`) and
 * validate it. From any peer, the message is probed first: its data then has a deadline of
 * its own, and a sender that stops midway is named. */
static int recv_into(struct hp_comm *comm, int peer, int type, void *buf, size_t count,
                     ucp_datatype_t dt, const struct hp_msg_header *hdr, size_t cap, int timeout_ms)
{
    ucp_request_param_t param = {0};
    ucp_tag_recv_info_t info = {0};
    ucp_tag_message_h msg = NULL;
    ucs_status_t status;
    const int64_t deadline = deadline_of(timeout_ms);
    ucp_tag_t tag, mask;
    int sender = peer;
    void *req;

    if (comm->stalled) {
        hp_error("cannot receive from rank %d: an earlier receive never finished", peer);
        return -HP_EIO;
    }
    tag = (peer == HP_COMM_ANY_PEER ? 0 : (ucp_tag_t)peer << 32) | (ucp_tag_t)type;
    mask = (peer == HP_COMM_ANY_PEER ? TAG_MASK_TYPE : TAG_MASK_ALL) &
           (type == HP_MSG_ANY_TYPE ? ~TAG_MASK_TYPE : TAG_MASK_ALL);

    /* No immediate completion: UCX before 1.16 leaves recv_info unfilled when a message that
     * was already waiting completes the receive at once (openucx/ucx#9425), so always take
     * a request and read the tag info from it. */
    param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    if (dt != 0) {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        param.datatype = dt;
    }
    if (peer == HP_COMM_ANY_PEER) {
        int failed = -1;
        status = wait_probe(comm, tag, mask, deadline, &msg, &info, &failed);
        if (status == UCS_ERR_CONNECTION_RESET) {
            char cause[96];
            hp_error("cannot receive from rank %d: the connection failed (%s): the rank is gone",
                     failed, peer_cause(comm, &comm->peers[failed], cause, sizeof(cause)));
            return -HP_EIO;
        }
        if (status != UCS_OK) {
            hp_error("cannot receive from any rank: no message of type %d within %d ms", type,
                     timeout_ms);
            return -HP_ETIMEOUT;
        }
        sender = (int)(info.sender_tag >> 32);
        if (sender >= comm->nranks)
            sender = HP_COMM_ANY_PEER; /* rejected below, once drained */
        req = ucp_tag_msg_recv_nbx(comm->worker, buf, count, msg, &param);
    } else {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_RECV_INFO;
        param.recv_info.tag_info = &info;
        req = ucp_tag_recv_nbx(comm->worker, buf, count, tag, mask, &param);
    }
    if (UCS_PTR_IS_ERR(req)) {
        status = UCS_PTR_STATUS(req);
        hp_error("cannot receive from rank %d: %s", sender, ucs_status_string(status));
        return from_ucs(status);
    }
    if (req != NULL) {
        int failed = sender;
        status = wait_request_peer(comm, req,
                                   msg != NULL ? data_deadline(comm, deadline, &info) : deadline,
                                   sender, &failed);
        const ucs_status_t why = status;
        if ((status == UCS_INPROGRESS || status == UCS_ERR_CONNECTION_RESET) && msg == NULL) {
            /* Cancel, then wait for the request to finish: it completes with
             * UCS_ERR_CANCELED, or with UCS_OK if the message landed meanwhile (kept). */
            ucp_request_cancel(comm->worker, req);
            status = wait_request(comm, req, deadline_of(CLOSE_TIMEOUT_MS));
        }
        if (status == UCS_INPROGRESS || (msg != NULL && why == UCS_ERR_CONNECTION_RESET)) {
            /* matched, and its data stopped coming */
            if (abandon_recv(comm, req, sender) == 0 || sender < 0) {
                hp_error("cannot receive from rank %d: the message stopped arriving midway",
                         sender);
            } else {
                hp_error("cannot receive from rank %d: the message stopped arriving midway "
                         "(%zu bytes announced; the rank stopped sending)",
                         sender, info.length);
            }
            if (sender >= 0 && comm->silent < 0)
                comm->silent = sender;
            return why == UCS_ERR_CONNECTION_RESET ? -HP_EIO : -HP_ETIMEOUT;
        }
        if (status != UCS_ERR_CANCELED && msg == NULL)
            status = ucp_tag_recv_request_test(req, &info);
        ucp_request_free(req);
        if (status == UCS_ERR_CANCELED && why == UCS_ERR_CONNECTION_RESET) {
            char cause[96];
            hp_error("cannot receive from rank %d: the connection failed (%s): the rank is gone",
                     failed, peer_cause(comm, &comm->peers[failed], cause, sizeof(cause)));
            return -HP_EIO;
        }
        if (status == UCS_ERR_CANCELED) {
            hp_error("cannot receive from rank %d: no message of type %d within %d ms", peer, type,
                     timeout_ms);
            if (peer >= 0 && comm->silent < 0)
                comm->silent = peer;
            return -HP_ETIMEOUT;
        }
    } else {
        status = UCS_OK;
    }
    return recv_check(comm, peer, type, status, hdr, cap, &info);
}

int hp_comm_probe(struct hp_comm *comm, int peer, int type)
{
    ucp_tag_recv_info_t info;
    const ucp_tag_t tag = (peer == HP_COMM_ANY_PEER ? 0 : (ucp_tag_t)peer << 32) | (ucp_tag_t)type;
    const ucp_tag_t mask = (peer == HP_COMM_ANY_PEER ? TAG_MASK_TYPE : TAG_MASK_ALL) &
                           (type == HP_MSG_ANY_TYPE ? ~TAG_MASK_TYPE : TAG_MASK_ALL);

    if (peer < HP_COMM_ANY_PEER || peer >= comm->nranks ||
        (type < HP_MSG_ACTIVATION && type != HP_MSG_ANY_TYPE) || type > HP_MSG_TYPE_LAST)
        return 0;
    while (ucp_worker_progress(comm->worker) != 0)
        ;
    return ucp_tag_probe_nb(comm->worker, tag, mask, 0, &info) != NULL;
}

static int recv_args_ok(const struct hp_comm *comm, int peer, int type, int have_buf, size_t cap)
{
    if (peer < HP_COMM_ANY_PEER || peer >= comm->nranks ||
        (type < HP_MSG_ACTIVATION && type != HP_MSG_ANY_TYPE) || type > HP_MSG_TYPE_LAST ||
        (!have_buf && cap > 0) || cap > SIZE_MAX - HDR_BYTES) {
        hp_error("cannot receive from rank %d: invalid rank, type %d or buffer", peer, type);
        return 0;
    }
    return 1;
}

int hp_comm_recv(struct hp_comm *comm, int peer, int type, struct hp_msg_header *h, void *payload,
                 size_t cap, int timeout_ms)
{
    struct hp_msg_header hdr = {0};
    ucp_dt_iov_t iov[2];
    int ret;

    if (!recv_args_ok(comm, peer, type, payload != NULL, cap))
        return -HP_EINVAL;
    /* scattered by UCX: the header here, the payload straight into the caller's buffer */
    iov[0].buffer = &hdr;
    iov[0].length = HDR_BYTES;
    iov[1].buffer = payload;
    iov[1].length = cap;
    ret =
        recv_into(comm, peer, type, iov, cap > 0 ? 2 : 1, ucp_dt_make_iov(), &hdr, cap, timeout_ms);
    if (ret < 0)
        return ret;
    *h = hdr;
    return 0;
}

/* Message buffers: the header and the payload in one allocation, so that sends and receives
 * need no staging copy; a send in flight keeps its request here. */
struct hp_msg_buf {
    uint8_t *data; /* HDR_BYTES + cap */
    size_t cap;
    void *req; /* the send in flight, or NULL */
    int peer;  /* its destination */
    size_t bytes;
};

int hp_msg_buf_create(size_t cap, struct hp_msg_buf **out)
{
    struct hp_msg_buf *b;

    if (cap > SIZE_MAX - HDR_BYTES - 64) {
        hp_error("cannot create a message buffer of %zu bytes", cap);
        return -HP_EINVAL;
    }
    b = calloc(1, sizeof(*b));
    if (b != NULL)
        b->data = aligned_alloc(64, (HDR_BYTES + cap + 63) & ~(size_t)63);
    if (b == NULL || b->data == NULL) {
        hp_error("cannot allocate a message buffer of %zu bytes: out of memory", cap);
        free(b);
        return -HP_ENOMEM;
    }
    b->cap = cap;
    b->peer = -1;
    *out = b;
    return 0;
}

void *hp_msg_buf_payload(struct hp_msg_buf *b)
{
    return b->data + HDR_BYTES;
}

const struct hp_msg_header *hp_msg_buf_header(const struct hp_msg_buf *b)
{
    return (const struct hp_msg_header *)b->data;
}

size_t hp_msg_buf_cap(const struct hp_msg_buf *b)
{
    return b->cap;
}

int hp_comm_send_start(struct hp_comm *comm, int peer, const struct hp_msg_header *h,
                       struct hp_msg_buf *b)
{
    struct hp_msg_header hdr;
    struct peer *p;
    int ret;

    if (b->req != NULL) {
        hp_error("cannot send to rank %d: the message buffer is still being sent", peer);
        return -HP_EINVAL;
    }
    if (h->payload_bytes > b->cap) {
        hp_error("cannot send to rank %d: payload of %" PRIu64 " bytes exceeds the buffer's %zu",
                 peer, h->payload_bytes, b->cap);
        return -HP_EINVAL;
    }
    ret = send_prepare(comm, peer, h, 1, &hdr, &p);
    if (ret < 0)
        return ret;
    memcpy(b->data, &hdr, HDR_BYTES);
    b->bytes = HDR_BYTES + (size_t)h->payload_bytes;
    b->peer = peer;
    return send_post(comm, peer, p, b->data, b->bytes, h->type, &b->req);
}

int hp_comm_send_wait(struct hp_comm *comm, struct hp_msg_buf *b, int timeout_ms)
{
    void *req = b->req;

    if (req == NULL)
        return 0;
    b->req = NULL;
    return send_finish(comm, b->peer, req, b->bytes, timeout_ms);
}

int hp_comm_recv_buf(struct hp_comm *comm, int peer, int type, struct hp_msg_buf *b, int timeout_ms)
{
    if (b->req != NULL) {
        hp_error("cannot receive into a message buffer that is still being sent");
        return -HP_EINVAL;
    }
    if (!recv_args_ok(comm, peer, type, 1, b->cap))
        return -HP_EINVAL;
    return recv_into(comm, peer, type, b->data, HDR_BYTES + b->cap, 0,
                     (const struct hp_msg_header *)b->data, b->cap, timeout_ms);
}

void hp_msg_buf_destroy(struct hp_comm *comm, struct hp_msg_buf *b)
{
    if (b == NULL)
        return;
    if (b->req != NULL)
        hp_comm_send_wait(comm, b, CLOSE_TIMEOUT_MS);
    free(b->data);
    free(b);
}

/* Flush then close an endpoint, each within CLOSE_TIMEOUT_MS; force the close if the flush
 * does not finish (the peer may be gone). */
static void close_peer(struct hp_comm *comm, struct peer *p)
{
    ucp_request_param_t param = {0};
    void *req;

    if (p->failure == UCS_OK) {
        req = ucp_ep_flush_nbx(p->ep, &param);
        if (UCS_PTR_IS_PTR(req)) {
            if (wait_request(comm, req, deadline_of(CLOSE_TIMEOUT_MS)) == UCS_INPROGRESS) {
                close_force(comm, p); /* completes the flush with an error */
                wait_request(comm, req, deadline_of(CLOSE_TIMEOUT_MS));
                ucp_request_free(req);
                return;
            }
            ucp_request_free(req);
        }
    }
    close_force(comm, p);
}

int hp_comm_self_check(FILE *f)
{
    const uint8_t token[HP_MSG_TOKEN_LEN] = "hetpipe-check";
    const char *tls = getenv("UCX_TLS");
    struct hp_comm *comm = NULL;
    char err[1024];
    int rc;

    fprintf(f, "ucx.version = %s\n", ucp_get_version_string());
    fprintf(f, "ucx.transports = %s%s\n", tls && *tls ? "UCX_TLS=" : "auto",
            tls && *tls ? tls : " (UCX_TLS unset)");
    hp_log_capture(err, sizeof(err));
    rc = hp_comm_create(0, 1, token, &comm);
    hp_log_capture(NULL, 0);
    if (rc) {
        fprintf(f, "ucx.context = failed: %s\n", err[0] ? err : hp_strerror(rc));
        return rc;
    }
    hp_comm_destroy(comm);
    fprintf(f, "ucx.context = ok\n");
    return 0;
}

void hp_comm_destroy(struct hp_comm *comm)
{
    if (comm == NULL)
        return;
    for (int i = 0; i < comm->nranks; i++) {
        if (comm->peers[i].ep != NULL)
            close_peer(comm, &comm->peers[i]);
        if (comm->peers[i].pidfd >= 0)
            close(comm->peers[i].pidfd);
    }
    ucp_worker_release_address(comm->worker, comm->address);
    ucp_worker_destroy(comm->worker);
    ucp_cleanup(comm->context);
    free(comm->published);
    free(comm->sbuf);
    free(comm->peers);
    free(comm);
}

int hp_comm_retire(struct hp_comm *comm, int peer)
{
    if (peer < 0 || peer >= comm->nranks) {
        hp_error("cannot retire rank %d: out of range", peer);
        return -HP_EINVAL;
    }
    comm->peers[peer].retired = 1;
    return 0;
}
