/* bootstrap.c - the ranks of a job find each other: address files or PMIx. All PMIx calls of
 * hetpipe live here. */
#include "bootstrap.h"
#include "clock.h"
#include "comm.h"
#include "rng.h"

#include "error.h"
#include "infile.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pmix.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BLOB_MAX (64 * 1024)
#define NRANKS_MAX (1 << 20)
#define FILE_MAGIC 0x48504241u /* "HPBA" */
#define FILE_VERSION 1
#define POLL_MIN_MS 2
#define POLL_MAX_MS 50
#define MISSING_NAMED 4 /* ranks named in a timeout message before "and N more" */
#define PMIX_KEY "hetpipe.addr"

/* The header of an address file (host byte order: a job's hosts share one architecture).
 * checksum is FNV-1a over the header (checksum field 0) and then the blob. */
struct file_header {
    uint32_t magic;    /* FILE_MAGIC */
    uint16_t version;  /* FILE_VERSION */
    uint16_t reserved; /* 0 */
    int32_t rank;      /* the writer, equal to the <r> in the file's name */
    int32_t nranks;    /* the job size the writer was given */
    uint64_t blob_len; /* bytes following the header, 1 .. BLOB_MAX */
    uint64_t checksum;
};

_Static_assert(sizeof(struct file_header) == 32, "file_header must be 32 bytes");

enum boot_kind { BOOT_LOCAL, BOOT_PMIX };

struct hp_boot {
    enum boot_kind kind;
    int rank; /* the position in the launcher's task order (PMIx rank, --rank) */
    int nranks;
    int *rank_of;   /* NULL, or [nranks]: the job rank of each task (hp_boot_set_ranks) */
    int gathered;   /* hp_boot_allgather succeeded */
    int attempted;  /* hp_boot_allgather was called */
    uint8_t **blob; /* [nranks], each malloc'ed once it arrives */
    size_t *len;    /* [nranks] */
    /* local */
    int dirfd;
    char *dir;
    /* pmix */
    pmix_proc_t proc;
};

/* ---- common ------------------------------------------------------------------------------ */

static int boot_alloc(enum boot_kind kind, int rank, int nranks, struct hp_boot **out)
{
    struct hp_boot *b = calloc(1, sizeof(*b));

    if (b != NULL) {
        b->blob = calloc((size_t)nranks, sizeof(*b->blob));
        b->len = calloc((size_t)nranks, sizeof(*b->len));
    }
    if (b == NULL || b->blob == NULL || b->len == NULL) {
        hp_error("cannot bootstrap %d ranks: out of memory", nranks);
        if (b != NULL) {
            free(b->blob);
            free(b->len);
        }
        free(b);
        return -HP_ENOMEM;
    }
    b->kind = kind;
    b->rank = rank;
    b->nranks = nranks;
    b->dirfd = -1;
    *out = b;
    return 0;
}

static int keep_blob(struct hp_boot *b, int r, const void *blob, size_t len)
{
    uint8_t *p = malloc(len);

    if (p == NULL) {
        hp_error("cannot keep rank %d's address of %zu bytes: out of memory", r, len);
        return -HP_ENOMEM;
    }
    memcpy(p, blob, len);
    b->blob[r] = p;
    b->len[r] = len;
    return 0;
}

int hp_boot_rank(const struct hp_boot *b)
{
    return b->rank_of ? b->rank_of[b->rank] : b->rank;
}

int hp_boot_set_ranks(struct hp_boot *b, const int *rank_of_task)
{
    int *seen = calloc((size_t)b->nranks, sizeof(int));
    int *map = malloc((size_t)b->nranks * sizeof(int));

    if (!seen || !map) {
        free(seen);
        free(map);
        return -HP_ENOMEM;
    }
    for (int t = 0; t < b->nranks; t++) {
        const int r = rank_of_task[t];
        if (r < 0 || r >= b->nranks || seen[r]++) {
            hp_error("task %d: rank %d is %s (ranks 0..%d, each once)", t, r,
                     r < 0 || r >= b->nranks ? "out of range" : "given twice", b->nranks - 1);
            free(seen);
            free(map);
            return -HP_EINVAL;
        }
        map[t] = r;
    }
    free(seen);
    free(b->rank_of);
    b->rank_of = map;
    return 0;
}

int hp_boot_size(const struct hp_boot *b)
{
    return b->nranks;
}

const char *hp_boot_kind(const struct hp_boot *b)
{
    return b->kind == BOOT_PMIX ? "pmix" : "local";
}

const void *hp_boot_blob(const struct hp_boot *b, int r, size_t *len)
{
    if (!b->gathered || r < 0 || r >= b->nranks)
        return NULL;
    *len = b->len[r];
    return b->blob[r];
}

/* ---- local: address files ---------------------------------------------------------------- */

int hp_boot_local_open(const char *dir, int rank, int nranks, struct hp_boot **out)
{
    struct hp_boot *b;
    struct stat st;
    int fd, ret;

    if (dir == NULL || dir[0] == '\0') {
        hp_error("cannot bootstrap: no address directory given");
        return -HP_EINVAL;
    }
    if (nranks < 1 || nranks > NRANKS_MAX || rank < 0 || rank >= nranks) {
        hp_error("cannot bootstrap rank %d of %d: the rank must be in [0, nranks) and nranks in "
                 "[1, %d]",
                 rank, nranks, NRANKS_MAX);
        return -HP_EINVAL;
    }
    /* Work through one descriptor of the directory checked here, so that the path cannot
     * be swapped for another directory between the check and the use. */
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        ret = -errno;
        if (errno == ENOTDIR || errno == ELOOP)
            hp_error("cannot use bootstrap directory '%s': not a directory (symbolic links are "
                     "refused)",
                     dir);
        else
            hp_error("cannot open bootstrap directory '%s': %s", dir, strerror(errno));
        return ret;
    }
    if (fstat(fd, &st) < 0) {
        ret = -errno;
        hp_error("cannot stat bootstrap directory '%s': %s", dir, strerror(errno));
        close(fd);
        return ret;
    }
    if (st.st_uid != geteuid()) {
        hp_error("cannot use bootstrap directory '%s': owned by uid %u, not by this user (uid %u)",
                 dir, (unsigned)st.st_uid, (unsigned)geteuid());
        close(fd);
        return -HP_EINVAL;
    }
    if ((st.st_mode & 07777) != 0700) {
        hp_error("cannot use bootstrap directory '%s': mode %04o, must be 0700 (private to its "
                 "owner)",
                 dir, (unsigned)(st.st_mode & 07777));
        close(fd);
        return -HP_EINVAL;
    }
    ret = boot_alloc(BOOT_LOCAL, rank, nranks, &b);
    if (ret == 0) {
        b->dir = strdup(dir);
        if (b->dir == NULL) {
            hp_error("cannot bootstrap through '%s': out of memory", dir);
            hp_boot_close(b);
            ret = -HP_ENOMEM;
        }
    }
    if (ret < 0) {
        close(fd);
        return ret;
    }
    b->dirfd = fd;
    *out = b;
    return 0;
}

static uint64_t file_checksum(const struct file_header *h, const void *blob, size_t len)
{
    struct file_header z = *h;

    z.checksum = 0;
    return hp_fnv1a(hp_fnv1a(HP_FNV_OFFSET, &z, sizeof(z)), blob, len);
}

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;

    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -HP_EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Write addr.<rank>: a temporary name in the same directory, fsync, rename, fsync the
 * directory. A reader sees the whole file or none. */
static int local_publish(struct hp_boot *b, const void *blob, size_t len)
{
    struct file_header h = {
        .magic = FILE_MAGIC,
        .version = FILE_VERSION,
        .rank = b->rank,
        .nranks = b->nranks,
        .blob_len = len,
    };
    char tmp[64], name[32];
    int fd, ret;

    h.checksum = file_checksum(&h, blob, len);
    snprintf(tmp, sizeof(tmp), ".addr.%d.tmp.%ld", b->rank, (long)getpid());
    snprintf(name, sizeof(name), "addr.%d", b->rank);
    fd = openat(b->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        ret = -errno;
        hp_error("cannot create '%s/%s': %s", b->dir, tmp, strerror(errno));
        return ret;
    }
    ret = write_all(fd, &h, sizeof(h));
    if (ret == 0)
        ret = write_all(fd, blob, len);
    if (ret == 0 && fsync(fd) < 0)
        ret = -errno;
    if (close(fd) < 0 && ret == 0)
        ret = -errno;
    if (ret < 0) {
        hp_error("cannot write '%s/%s': %s", b->dir, tmp, hp_strerror(ret));
        unlinkat(b->dirfd, tmp, 0);
        return ret;
    }
    if (renameat(b->dirfd, tmp, b->dirfd, name) < 0) {
        ret = -errno;
        hp_error("cannot rename '%s/%s' to '%s': %s", b->dir, tmp, name, strerror(errno));
        unlinkat(b->dirfd, tmp, 0);
        return ret;
    }
    fsync(b->dirfd); /* best effort: the rename is visible to readers either way */
    return 0;
}

/* Read and validate dir/addr.<r> through dirfd (dir names it in messages): 1 with *out (the
 * blob, malloc'ed) and *outlen, 0 when it is not there yet, or a negative code (-HP_EPROTOCOL
 * for a malformed file). */
static int addr_read(int dirfd, const char *dir, int r, int nranks, uint8_t **out, size_t *outlen)
{
    struct file_header h;
    struct stat st;
    char name[32];
    uint8_t *blob = NULL;
    ssize_t n;
    int fd, ret;

    snprintf(name, sizeof(name), "addr.%d", r);
    fd = hp_infile_openat(dirfd, name, HP_INFILE_NOFOLLOW, &st);
    if (fd == -ENOENT)
        return 0;
    if (fd < 0) {
        hp_error("%s address file '%s/%s': %s", fd == -HP_ENOTREG ? "invalid" : "cannot open", dir,
                 name, hp_infile_why(fd, &st));
        return fd == -HP_ENOTREG ? -HP_EPROTOCOL : fd;
    }
    ret = -HP_EPROTOCOL;
    if ((size_t)st.st_size < sizeof(h)) {
        hp_error("invalid address file '%s/%s': truncated header (%lld of %zu bytes)", dir, name,
                 (long long)st.st_size, sizeof(h));
        goto out;
    }
    n = pread(fd, &h, sizeof(h), 0);
    if (n != (ssize_t)sizeof(h)) {
        hp_error("invalid address file '%s/%s': truncated header (read %zd of %zu bytes)", dir,
                 name, n, sizeof(h));
        goto out;
    }
    if (h.magic != FILE_MAGIC) {
        hp_error("invalid address file '%s/%s': magic 0x%08x is not 0x%08x", dir, name,
                 (unsigned)h.magic, FILE_MAGIC);
        goto out;
    }
    if (h.version != FILE_VERSION) {
        hp_error("invalid address file '%s/%s': version %u is not %d", dir, name,
                 (unsigned)h.version, FILE_VERSION);
        goto out;
    }
    if (h.reserved != 0) {
        hp_error("invalid address file '%s/%s': reserved field %u is not 0", dir, name,
                 (unsigned)h.reserved);
        goto out;
    }
    if (h.rank != r) {
        hp_error("invalid address file '%s/%s': rank %d, expected %d", dir, name, (int)h.rank, r);
        goto out;
    }
    if (h.nranks != nranks) {
        hp_error("invalid address file '%s/%s': nranks %d, expected %d (another job?)", dir, name,
                 (int)h.nranks, nranks);
        goto out;
    }
    if (h.blob_len < 1 || h.blob_len > BLOB_MAX) {
        hp_error("invalid address file '%s/%s': blob length %llu, allowed 1 .. %d", dir, name,
                 (unsigned long long)h.blob_len, BLOB_MAX);
        goto out;
    }
    if ((uint64_t)st.st_size != sizeof(h) + h.blob_len) {
        hp_error("invalid address file '%s/%s': %lld bytes, header says %llu (%s)", dir, name,
                 (long long)st.st_size, (unsigned long long)(sizeof(h) + h.blob_len),
                 (uint64_t)st.st_size < sizeof(h) + h.blob_len ? "truncated" : "trailing bytes");
        goto out;
    }
    blob = malloc((size_t)h.blob_len);
    if (blob == NULL) {
        hp_error("cannot read address file '%s/%s': out of memory", dir, name);
        ret = -HP_ENOMEM;
        goto out;
    }
    n = pread(fd, blob, (size_t)h.blob_len, sizeof(h));
    if (n != (ssize_t)h.blob_len) {
        hp_error("invalid address file '%s/%s': truncated blob (read %zd of %llu bytes)", dir, name,
                 n, (unsigned long long)h.blob_len);
        goto out;
    }
    if (file_checksum(&h, blob, (size_t)h.blob_len) != h.checksum) {
        hp_error("invalid address file '%s/%s': checksum 0x%016llx does not match the contents",
                 dir, name, (unsigned long long)h.checksum);
        goto out;
    }
    *out = blob;
    *outlen = (size_t)h.blob_len;
    blob = NULL;
    ret = 1;
out:
    free(blob);
    close(fd);
    return ret;
}

static int local_take(struct hp_boot *b, int r)
{
    return addr_read(b->dirfd, b->dir, r, b->nranks, &b->blob[r], &b->len[r]);
}

int hp_boot_addr_read(const char *dir, int r, int nranks, void **blob, size_t *len)
{
    uint8_t *p = NULL;
    int fd, ret;

    if (nranks < 1 || nranks > NRANKS_MAX || r < 0 || r >= nranks) {
        hp_error("cannot read the address of rank %d of %d: the rank must be in [0, nranks) and "
                 "nranks in [1, %d]",
                 r, nranks, NRANKS_MAX);
        return -HP_EINVAL;
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        ret = -errno;
        hp_error("cannot open bootstrap directory '%s': %s", dir, strerror(errno));
        return ret;
    }
    ret = addr_read(fd, dir, r, nranks, &p, len);
    close(fd);
    *blob = p;
    return ret;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* One error naming the first few missing ranks and how many are missing. */
static void report_missing(const struct hp_boot *b, int timeout_ms)
{
    char list[128];
    size_t used = 0;
    int missing = 0;

    list[0] = '\0';
    for (int r = 0; r < b->nranks; r++) {
        if (b->blob[r] != NULL)
            continue;
        if (missing < MISSING_NAMED && used < sizeof(list)) {
            int n = snprintf(list + used, sizeof(list) - used, "%s%d", missing ? ", " : "", r);
            used += n > 0 ? (size_t)n : 0;
        }
        missing++;
    }
    hp_error("bootstrap timed out after %d ms in '%s': no address from rank%s %s%s (%d of %d "
             "missing)",
             timeout_ms, b->dir, missing == 1 ? "" : "s", list,
             missing > MISSING_NAMED ? ", ..." : "", missing, b->nranks);
}

static int local_allgather(struct hp_boot *b, const void *blob, size_t len, int timeout_ms)
{
    const double deadline = hp_now_s() + timeout_ms / 1000.0;
    int have, ret, wait_ms = POLL_MIN_MS;

    ret = local_publish(b, blob, len);
    if (ret == 0)
        ret = keep_blob(b, b->rank, blob, len);
    if (ret < 0)
        return ret;
    have = 1;
    for (;;) {
        for (int r = 0; r < b->nranks; r++) {
            if (b->blob[r] != NULL)
                continue;
            ret = local_take(b, r);
            if (ret < 0)
                return ret;
            have += ret;
        }
        if (have == b->nranks)
            return 0;
        double left_ms = (deadline - hp_now_s()) * 1000.0;
        if (left_ms <= 0) {
            report_missing(b, timeout_ms);
            return -HP_ETIMEOUT;
        }
        sleep_ms(wait_ms < left_ms ? wait_ms : (int)left_ms + 1);
        wait_ms = wait_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : wait_ms * 2;
    }
}

/* ---- pmix -------------------------------------------------------------------------------- */

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HP_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(HP_ASAN)
/* libpmix 4.2.2 leaks 7 bytes in a bare PMIx_Init + PMIx_Finalize (strdup in pmix_rte_init
 * and pmix_bfrops_base_value_load); without this an ASan build of every program that
 * bootstraps through PMIx exits 1. LeakSanitizer reads these hooks (LSAN_OPTIONS still
 * overrides the options). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libpmix.so\n";
}

const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
    return "print_suppressions=0";
}
#endif

int hp_boot_pmix_present(void)
{
    return getenv("PMIX_NAMESPACE") != NULL && getenv("PMIX_RANK") != NULL;
}

void hp_boot_self_check(FILE *f)
{
    const char *v = PMIx_Get_version();

    fprintf(f, "pmix.version = %s\n", v ? v : "");
}

static int from_pmix(pmix_status_t st)
{
    switch (st) {
    case PMIX_SUCCESS:
        return 0;
    case PMIX_ERR_TIMEOUT:
        return -HP_ETIMEOUT;
    case PMIX_ERR_NOMEM:
        return -HP_ENOMEM;
    case PMIX_ERR_NOT_FOUND:
        return -HP_ENOTFOUND;
    case PMIX_ERR_BAD_PARAM:
        return -HP_EINVAL;
    case PMIX_ERR_NOT_SUPPORTED:
        return -HP_EUNSUPPORTED;
    default:
        return -HP_EIO;
    }
}

int hp_boot_pmix_open(struct hp_boot **out)
{
    pmix_proc_t proc, wild;
    pmix_value_t *val = NULL;
    pmix_status_t st;
    uint32_t size;
    struct hp_boot *b;
    int ret;

    if (!hp_boot_pmix_present()) {
        hp_error("cannot bootstrap through PMIx: no PMIx server started this process "
                 "(PMIX_NAMESPACE and PMIX_RANK are unset); start it with srun --mpi=pmix");
        return -HP_EUNSUPPORTED;
    }
    st = PMIx_Init(&proc, NULL, 0);
    if (st != PMIX_SUCCESS) {
        hp_error("cannot bootstrap through PMIx: PMIx_Init failed: %s", PMIx_Error_string(st));
        return from_pmix(st);
    }
    PMIX_LOAD_PROCID(&wild, proc.nspace, PMIX_RANK_WILDCARD);
    st = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val);
    if (st != PMIX_SUCCESS) {
        hp_error("cannot bootstrap through PMIx: no job size (%s): %s", PMIX_JOB_SIZE,
                 PMIx_Error_string(st));
        ret = from_pmix(st);
        goto fail;
    }
    if (val->type != PMIX_UINT32) {
        hp_error("cannot bootstrap through PMIx: job size has PMIx type %d, expected uint32",
                 (int)val->type);
        ret = -HP_EPROTOCOL;
        goto fail;
    }
    size = val->data.uint32;
    if (size < 1 || size > NRANKS_MAX || proc.rank >= size) {
        hp_error("cannot bootstrap through PMIx: rank %u of job size %u (allowed 1 .. %d ranks)",
                 (unsigned)proc.rank, (unsigned)size, NRANKS_MAX);
        ret = -HP_EPROTOCOL;
        goto fail;
    }
    PMIX_VALUE_RELEASE(val);
    val = NULL;
    ret = boot_alloc(BOOT_PMIX, (int)proc.rank, (int)size, &b);
    if (ret < 0)
        goto fail;
    b->proc = proc;
    *out = b;
    return 0;
fail:
    if (val != NULL)
        PMIX_VALUE_RELEASE(val);
    PMIx_Finalize(NULL, 0);
    return ret;
}

static int pmix_allgather(struct hp_boot *b, const void *blob, size_t len, int timeout_ms)
{
    const double deadline = hp_now_s() + timeout_ms / 1000.0;
    pmix_value_t v, *val;
    pmix_info_t info[2];
    pmix_status_t st;
    pmix_proc_t peer;
    bool collect = true;
    int tmo_s, ret;

    /* PMIx timeouts are whole seconds and 0 means none: round up, at least 1. */
    tmo_s = timeout_ms / 1000 + (timeout_ms % 1000 != 0);
    if (tmo_s < 1)
        tmo_s = 1;

    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)blob; /* PMIx_Put copies */
    v.data.bo.size = len;
    st = PMIx_Put(PMIX_GLOBAL, PMIX_KEY, &v);
    if (st == PMIX_SUCCESS)
        st = PMIx_Commit();
    if (st != PMIX_SUCCESS) {
        hp_error("cannot publish rank %d's address through PMIx: %s", b->rank,
                 PMIx_Error_string(st));
        return from_pmix(st);
    }

    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &tmo_s, PMIX_INT);
    st = PMIx_Fence(NULL, 0, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (st != PMIX_SUCCESS) {
        /* PMIx does not say which ranks did not reach the fence. */
        if (st == PMIX_ERR_TIMEOUT)
            hp_error("bootstrap timed out after %d s in the PMIx fence of %d ranks: some rank did "
                     "not publish its address",
                     tmo_s, b->nranks);
        else
            hp_error("cannot exchange addresses through the PMIx fence of %d ranks: %s", b->nranks,
                     PMIx_Error_string(st));
        return from_pmix(st);
    }

    for (int r = 0; r < b->nranks; r++) {
        int left_s = (int)(deadline - hp_now_s() + 0.999);

        if (left_s < 1)
            left_s = 1;
        PMIX_INFO_CONSTRUCT(&info[0]);
        PMIX_INFO_LOAD(&info[0], PMIX_TIMEOUT, &left_s, PMIX_INT);
        PMIX_LOAD_PROCID(&peer, b->proc.nspace, (pmix_rank_t)r);
        val = NULL;
        st = PMIx_Get(&peer, PMIX_KEY, info, 1, &val);
        PMIX_INFO_DESTRUCT(&info[0]);
        if (st != PMIX_SUCCESS) {
            hp_error("cannot get rank %d's address ('%s') through PMIx: %s", r, PMIX_KEY,
                     PMIx_Error_string(st));
            return from_pmix(st);
        }
        if (val->type != PMIX_BYTE_OBJECT || val->data.bo.size < 1 ||
            val->data.bo.size > BLOB_MAX) {
            hp_error("invalid address of rank %d through PMIx: type %d, %zu bytes (expected a "
                     "byte object of 1 .. %d bytes)",
                     r, (int)val->type, val->type == PMIX_BYTE_OBJECT ? val->data.bo.size : 0,
                     BLOB_MAX);
            PMIX_VALUE_RELEASE(val);
            return -HP_EPROTOCOL;
        }
        ret = keep_blob(b, r, val->data.bo.bytes, val->data.bo.size);
        PMIX_VALUE_RELEASE(val);
        if (ret < 0)
            return ret;
    }
    return 0;
}

/* ---- both -------------------------------------------------------------------------------- */

int hp_boot_allgather(struct hp_boot *b, const void *blob, size_t len, int timeout_ms)
{
    int ret;

    if (b->attempted) {
        hp_error("cannot exchange addresses twice: hp_boot_allgather is called once per job");
        return -HP_EINVAL;
    }
    if (blob == NULL || len < 1 || len > BLOB_MAX) {
        hp_error("cannot publish an address of %zu bytes: allowed 1 .. %d", len, BLOB_MAX);
        return -HP_EINVAL;
    }
    if (timeout_ms < 0) {
        hp_error("cannot exchange addresses with a timeout of %d ms: must be >= 0", timeout_ms);
        return -HP_EINVAL;
    }
    b->attempted = 1;
    ret = b->kind == BOOT_PMIX ? pmix_allgather(b, blob, len, timeout_ms)
                               : local_allgather(b, blob, len, timeout_ms);
    if (ret == 0)
        b->gathered = 1;
    return ret;
}

int hp_boot_wireup(struct hp_boot *b, struct hp_comm *comm, int timeout_ms)
{
    const void *addr;
    size_t len;
    int ret;

    ret = hp_comm_address(comm, &addr, &len);
    if (ret == 0)
        ret = hp_boot_allgather(b, addr, len, timeout_ms);
    for (int t = 0; ret == 0 && t < b->nranks; t++)
        ret = hp_comm_connect(comm, b->rank_of ? b->rank_of[t] : t, b->blob[t], b->len[t]);
    return ret;
}

void hp_boot_close(struct hp_boot *b)
{
    if (b == NULL)
        return;
    if (b->kind == BOOT_PMIX)
        PMIx_Finalize(NULL, 0);
    if (b->dirfd >= 0)
        close(b->dirfd);
    for (int r = 0; r < b->nranks; r++)
        free(b->blob[r]);
    free(b->blob);
    free(b->len);
    free(b->rank_of);
    free(b->dir);
    free(b);
}
