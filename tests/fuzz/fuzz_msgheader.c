/* fuzz_msgheader.c - the wire message header: hp_msg_header_check on arbitrary bytes.
 *
 * Input: the 64-byte header (zero-padded when shorter), then optional bytes: flags (bit 0: the
 * header carries the job's token, so that the checks behind it are reached), nranks (one
 * byte), max_payload (up to 8 bytes).
 */
#include "comm.h"
#include "fuzz.h"

static const uint8_t token[HP_MSG_TOKEN_LEN] = {0x68, 0x65, 0x74, 0x70, 0x69, 0x70, 0x65, 0x2d,
                                                0x66, 0x75, 0x7a, 0x7a, 0x2d, 0x6a, 0x6f, 0x62};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hp_msg_header h;
    const size_t hs = sizeof(h);
    uint8_t flags = size > hs ? data[hs] : 1;
    int nranks = size > hs + 1 ? data[hs + 1] : 4;
    uint64_t max_payload = 1u << 20;

    fuzz_begin();
    memset(&h, 0, sizeof(h));
    memcpy(&h, data, size < hs ? size : hs);
    if (size > hs + 2) {
        size_t k = size - hs - 2 < 8 ? size - hs - 2 : 8;
        max_payload = 0;
        memcpy(&max_payload, data + hs + 2, k);
    }
    if (flags & 1)
        memcpy(h.token, token, sizeof(token));
    int rc = hp_msg_header_check(&h, token, nranks, (size_t)max_payload);
    if (rc == 0) {
        /* what the check promises */
        if (h.magic != HP_MSG_MAGIC || h.version != HP_MSG_VERSION || h.type < 1 ||
            h.type > HP_MSG_TYPE_LAST || h.src < 0 || h.src >= nranks || h.vw < -1 ||
            h.stage < -1 || h.minibatch < -1 || h.clock < -1 || h.reserved != 0 ||
            h.payload_bytes > max_payload || memcmp(h.token, token, sizeof(token)) != 0)
            abort();
    } else if (!fuzz_log[0]) {
        abort(); /* refused without a message */
    }
    return 0;
}
