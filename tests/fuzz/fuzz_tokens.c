/* fuzz_tokens.c - llm.c's token files (runtime/text.c): hp_text_llmc_check on the header, then
 * the file opened as a corpus and every sequence read. The input:
 *   byte 0   flags: bit 0 keep the header's count as it is (else the harness writes the count
 *            the file's size gives, so that mutations get past the size check); bit 1
 *            need_val; bit 2 the same file also as the validation split; bits 3-7: T - 1
 *   bytes 1-2  the model's vocabulary (little-endian; 0: 65536)
 *   the rest   the file, written as tok/f_train_000000.bin (and tok/f_val_000000.bin)
 * An accepted corpus must hold what the file holds: its counts the header's, every sequence
 * read either the file's tokens at its offset (each below the vocabulary) or a refusal with a
 * message; a refused one must say why. */
#include "error.h"
#include "fuzz.h"
#include "text.h"

static char tok_dir[300], train_path[400], val_path[400];

static void tok_cleanup(void)
{
    unlink(train_path);
    unlink(val_path);
    rmdir(tok_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    snprintf(tok_dir, sizeof(tok_dir), "%s/tok", fuzz_dir);
    snprintf(train_path, sizeof(train_path), "%s/f_train_000000.bin", tok_dir);
    snprintf(val_path, sizeof(val_path), "%s/f_val_000000.bin", tok_dir);
    if (mkdir(tok_dir, 0700) != 0) {
        perror(tok_dir);
        exit(1);
    }
    atexit(tok_cleanup); /* before fuzz_cleanup removes fuzz_dir */
    return 0;
}

static void put(const char *path, const uint8_t *data, size_t n)
{
    FILE *f = fopen(path, "wb");

    if (!f || fwrite(data, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

/* Sequence tokens x[0..T] read at offset off of a file whose tokens are file[1024..]. */
static void check_seq(const int32_t *x, int T, int vocab, const uint8_t *file, int64_t off)
{
    for (int j = 0; j <= T; j++) {
        const uint8_t *p = file + HP_TEXT_LLMC_HEADER + 2 * (off + j);
        if (x[j] != (p[0] | p[1] << 8) || x[j] >= vocab)
            abort();
    }
}

static void read_all(const struct hp_text *t, const uint8_t *file)
{
    const struct hp_text_counts *c = hp_text_n(t);
    int32_t *x = malloc(sizeof(int32_t) * ((size_t)c->T + 1));

    if (!x)
        abort();
    for (long i = 0; i < c->nseq[0]; i++) {
        fuzz_log[0] = '\0';
        if (hp_text_train_seq(t, 1, 0, i, x) == 0)
            check_seq(x, c->T, c->vocab, file, hp_text_train_offset(t, 1, 0, i));
        else if (!fuzz_log[0])
            abort();
    }
    for (long i = 0; i < c->nseq[1]; i++) {
        fuzz_log[0] = '\0';
        if (hp_text_val_seq(t, i, x) == 0)
            check_seq(x, c->T, c->vocab, file, i * (int64_t)c->T);
        else if (!fuzz_log[0])
            abort();
    }
    free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hp_text *t;
    int64_t count;

    fuzz_begin();
    if (size < 3)
        return 0;
    const int flags = data[0], T = 1 + (flags >> 3);
    const int vocab = (data[1] | data[2] << 8) ? (data[1] | data[2] << 8) : 65536;
    const size_t n = size - 3;
    uint8_t *file = malloc(n ? n : 1);
    if (!file)
        abort();
    memcpy(file, data + 3, n);
    if (!(flags & 1) && n >= HP_TEXT_LLMC_HEADER) {
        const uint32_t c = (uint32_t)((n - HP_TEXT_LLMC_HEADER) / 2);
        for (int j = 0; j < 4; j++)
            file[8 + j] = (uint8_t)(c >> (8 * j));
    }
    if (n >= HP_TEXT_LLMC_HEADER) {
        fuzz_log[0] = '\0';
        if (hp_text_llmc_check(file, (int64_t)n, "f_train_000000.bin", &count) == 0) {
            if (count < 1 || HP_TEXT_LLMC_HEADER + 2 * count != (int64_t)n)
                abort();
        } else if (!fuzz_log[0]) {
            abort();
        }
    }
    put(train_path, file, n);
    unlink(val_path);
    if (flags & 4)
        put(val_path, file, n);
    fuzz_log[0] = '\0';
    if (hp_text_open(tok_dir, T, vocab, (flags >> 1) & 1, &t) == 0) {
        const struct hp_text_counts *c = hp_text_n(t);
        if (c->ntokens[0] != (int64_t)(n - HP_TEXT_LLMC_HEADER) / 2 || c->nseq[0] < 1 ||
            c->ntokens[1] != ((flags & 4) ? c->ntokens[0] : 0))
            abort();
        read_all(t, file);
        hp_text_close(t);
    } else if (!fuzz_log[0]) {
        abort();
    }
    free(file);
    return 0;
}
