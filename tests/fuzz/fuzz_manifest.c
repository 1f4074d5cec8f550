/* fuzz_manifest.c - the checkpoint manifest (DIR/manifest): hp_ckpt_check on the scratch
 * directory, with contents checked.
 *
 * The input is the manifest without its last line: the harness appends "checksum = CRC32" of
 * it (a newline first, if it lacks one), so that mutations reach the parser behind the
 * checksum. An input that starts with "#raw\n" is written as it is (checksum lines fuzzed
 * too). The directory holds three files for "file = NAME BYTES CRC32" lines to name (their
 * contents and CRC-32s: README.md): plan.ini, rank-0.part and rank-1.part.
 */
#include "ckptfile.h"
#include "fuzz.h"

#include <zlib.h>

static const char *const files[][2] = {
    {"plan.ini", "[plan]\nversion = 2\n"},
    {"rank-0.part", "HPCKPART rank 0\n"},
    {"rank-1.part", "HPCKPART rank 1\n"},
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char path[512];

    fuzz_setup();
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        fuzz_write(files[i][0], files[i][1], strlen(files[i][1]), path, sizeof(path));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hp_ckpt_info ci;
    char path[512], why[1024];
    const int raw = size >= 5 && memcmp(data, "#raw\n", 5) == 0;
    char *text = malloc(size + 32);
    size_t len = size;

    if (!text)
        abort();
    fuzz_begin();
    memcpy(text, data, size);
    if (!raw) {
        if (len > 0 && text[len - 1] != '\n')
            text[len++] = '\n';
        uLong crc = crc32(0L, Z_NULL, 0);
        if (len > 0)
            crc = crc32(crc, (const Bytef *)text, (uInt)len);
        len += (size_t)snprintf(text + len, 32, "checksum = %08lx\n", (unsigned long)crc);
    }
    fuzz_write("manifest", text, len, path, sizeof(path));
    free(text);
    why[0] = '\0';
    if (hp_ckpt_check(fuzz_dir, 1, &ci, why, sizeof(why)) == 0)
        hp_ckpt_info_release(&ci);
    else if (!why[0] && !fuzz_log[0])
        abort(); /* refused without saying why */
    else if (!fuzz_log[0])
        snprintf(fuzz_log, sizeof(fuzz_log), "%s", why);
    return 0;
}
