/* fuzz_address.c - the local bootstrap's address files (DIR/addr.<r>: a 32-byte header and a
 * blob): hp_boot_addr_read.
 *
 * Input: one flags byte, then the file. The rank read and the job size are taken from the
 * file's header where they are in range (else 0 of 1), so that the checks behind them are
 * reached; unless flags bit 0 is set, the harness also writes the right checksum (FNV-1a over
 * the header with checksum 0, then the blob) into the header, for the same reason.
 */
#include "bootstrap.h"
#include "fuzz.h"
#include "rng.h"

struct addr_header { /* as runtime/bootstrap.c writes it */
    uint32_t magic;
    uint16_t version, reserved;
    int32_t rank, nranks;
    uint64_t blob_len, checksum;
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct addr_header h;
    uint8_t *file;
    void *blob = NULL;
    size_t len = 0, n = size > 0 ? size - 1 : 0;
    char path[512], name[32];
    int r = 0, nranks = 1, rc;

    if (size == 0)
        return 0;
    fuzz_begin();
    file = malloc(n + 1);
    if (!file)
        abort();
    memcpy(file, data + 1, n);
    if (n >= sizeof(h)) {
        memcpy(&h, file, sizeof(h));
        if (h.nranks >= 1 && h.nranks <= 16 && h.rank >= 0 && h.rank < h.nranks) {
            r = h.rank;
            nranks = h.nranks;
        }
        if (!(data[0] & 1)) {
            h.checksum = 0;
            h.checksum =
                hp_fnv1a(hp_fnv1a(HP_FNV_OFFSET, &h, sizeof(h)), file + sizeof(h), n - sizeof(h));
            memcpy(file, &h, sizeof(h));
        }
    }
    snprintf(name, sizeof(name), "addr.%d", r);
    fuzz_write(name, file, n, path, sizeof(path));
    free(file);
    rc = hp_boot_addr_read(fuzz_dir, r, nranks, &blob, &len);
    if (rc == 1) {
        if (!blob || len < 1 || len + sizeof(h) != n)
            abort(); /* accepted a blob that is not the file's */
        free(blob);
    } else if (blob || (rc < 0 && !fuzz_log[0])) {
        abort();
    }
    unlink(path);
    return 0;
}
