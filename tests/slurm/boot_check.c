/* boot_check.c - a bootstrap smoke test for one rank of a job: bootstrap (PMIx when a PMIx
 * server started us, else address files), wire up the transport, pass the rank numbers
 * around a ring (rank r sends r to r + 1 and expects r - 1 from r - 1), then once between
 * every pair of ranks (so that no rank exits while a peer still connects to it).
 *
 *   srun --mpi=pmix -n N boot_check
 *   boot_check --dir D --rank R --nranks N        (one process per rank; D private, 0700)
 *
 * Prints "rank R of N: ok (pmix|local)" and exits 0; any failure exits 1 after the error.
 */
#include "bootstrap.h"
#include "comm.h"
#include "error.h"
#include "log.h"

#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_MS 30000

static const uint8_t token[HP_MSG_TOKEN_LEN] = "hetpipe-bootchk!";

static int parse_int(const char *opt, const char *v, int *out)
{
    char *end;
    long x;

    x = strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < 0 || x > INT_MAX) {
        hp_error("option '--%s': '%s' is not a whole number >= 0", opt, v);
        return -HP_EINVAL;
    }
    *out = (int)x;
    return 0;
}

/* Send our rank to the next rank, receive the previous rank's; 0 when it is the right one. */
static int ring(struct hp_comm *comm, int rank, int n)
{
    struct hp_msg_header h = {.type = HP_MSG_CONTROL,
                              .vw = -1,
                              .stage = -1,
                              .minibatch = -1,
                              .clock = -1,
                              .payload_bytes = sizeof(int32_t)};
    const int next = (rank + 1) % n, prev = (rank - 1 + n) % n;
    int32_t mine = rank, got = -1;
    int ret;

    ret = hp_comm_send(comm, next, &h, &mine, TIMEOUT_MS);
    if (ret == 0)
        ret = hp_comm_recv(comm, prev, HP_MSG_CONTROL, &h, &got, sizeof(got), TIMEOUT_MS);
    if (ret == 0 && got != prev) {
        hp_error("ring: rank %d sent %d, expected %d", prev, (int)got, prev);
        ret = -HP_EPROTOCOL;
    }
    return ret;
}

/* Before exiting, every rank sends to and hears from every other one: wireup connected each
 * pair eagerly, and a rank that exited while a peer's connection to it was still being set up
 * would fail that peer ("connection refused"), a race seen in CI. */
static int all_to_all(struct hp_comm *comm, int rank, int n)
{
    struct hp_msg_header h = {.type = HP_MSG_CONTROL,
                              .vw = -1,
                              .stage = -1,
                              .minibatch = -1,
                              .clock = -1,
                              .payload_bytes = sizeof(int32_t)};
    int32_t mine = rank, got = -1;
    int ret = 0;

    for (int r = 0; r < n && ret == 0; r++)
        if (r != rank)
            ret = hp_comm_send(comm, r, &h, &mine, TIMEOUT_MS);
    for (int r = 0; r < n && ret == 0; r++) {
        if (r == rank)
            continue;
        ret = hp_comm_recv(comm, r, HP_MSG_CONTROL, &h, &got, sizeof(got), TIMEOUT_MS);
        if (ret == 0 && got != r) {
            hp_error("all-to-all: rank %d sent %d", r, (int)got);
            ret = -HP_EPROTOCOL;
        }
    }
    return ret;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"dir", required_argument, NULL, 'd'},
                                         {"rank", required_argument, NULL, 'r'},
                                         {"nranks", required_argument, NULL, 'n'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *dir = NULL;
    struct hp_boot *boot = NULL;
    struct hp_comm *comm = NULL;
    char prefix[64];
    int rank = -1, nranks = -1, c, ret;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            dir = optarg;
            break;
        case 'r':
            if (parse_int("rank", optarg, &rank) < 0)
                return 1;
            break;
        case 'n':
            if (parse_int("nranks", optarg, &nranks) < 0)
                return 1;
            break;
        case 'h':
            printf("usage: boot_check [--dir D --rank R --nranks N]  (or under srun --mpi=pmix)\n");
            return 0;
        default:
            return 1;
        }
    }
    if (hp_boot_pmix_present()) {
        ret = hp_boot_pmix_open(&boot);
    } else if (dir == NULL || rank < 0 || nranks < 1) {
        hp_error("not started by a PMIx server: give --dir D --rank R --nranks N (or run under "
                 "srun --mpi=pmix)");
        return 1;
    } else {
        ret = hp_boot_local_open(dir, rank, nranks, &boot);
    }
    if (ret < 0)
        return 1;
    rank = hp_boot_rank(boot);
    nranks = hp_boot_size(boot);
    snprintf(prefix, sizeof(prefix), "boot_check: rank %d", rank);
    hp_log_set_prefix(prefix);

    ret = hp_comm_create(rank, nranks, token, &comm);
    if (ret == 0)
        ret = hp_boot_wireup(boot, comm, TIMEOUT_MS);
    if (ret == 0)
        ret = ring(comm, rank, nranks);
    if (ret == 0)
        ret = all_to_all(comm, rank, nranks);
    if (ret == 0)
        printf("rank %d of %d: ok (%s)\n", rank, nranks, hp_boot_kind(boot));
    else
        hp_error("bootstrap check failed: %s", hp_strerror(ret));
    fflush(stdout);
    hp_comm_destroy(comm);
    hp_boot_close(boot);
    return ret == 0 ? 0 : 1;
}
