/* text.h - a token corpus for language models: a training and a validation split of tokens,
 * and the sequences a model of context T trains and evaluates on. Two formats:
 *
 * - Plain text, tokenized by bytes (vocabulary 256): one text file, or a directory of them
 *   (its regular files in strcmp order, not recursive; names starting with '.' and fortune's
 *   index files *.dat and *.u8 passed over, like subdirectories). Debian's `fortunes`
 *   (/usr/share/games/fortunes, 2.6 MB) is the corpus the tests use. A file is cut into
 *   entries: at lines holding only `%` (fortune's format) when it has one, else at empty
 *   lines (paragraphs). "\r\n" reads as "\n"; a last line without its newline gets one; an
 *   entry of blank space only is dropped. Entry E goes to the validation split when
 *   hp_rng_mix(FNV-1a(E)) % HP_TEXT_VAL_EVERY == 0 (E's bytes with their final newline, after
 *   the "\r\n" rewrite), else to training: about 5% of the entries, decided by the entry alone
 *   (not its place: adding a file moves nothing; a repeated entry never sits in both splits).
 *   A split's tokens are its entries in file order, each followed by the separator that ended
 *   it ("%\n" in fortune's format, "\n" after a paragraph), so that they read as the files
 *   did. Held in memory, a byte a token (HP_TEXT_MAX_BYTES of text at most). A
 *   file that starts with llm.c's magic is refused (token files are not text).
 *
 * - Token files in llm.c's layout (karpathy/llm.c, dev/data/data_common.py): a header of 256
 *   little-endian int32 (magic HP_TEXT_LLMC_MAGIC, version 1, the token count), then the
 *   tokens as little-endian uint16; a tokenizer of the user's (GPT-2's BPE). A directory
 *   holding files NAME_train_*.bin / NAME_train.bin and NAME_val_*.bin / NAME_val.bin (the
 *   names llm.c's scripts write): each split's files in strcmp order are one stream of tokens.
 *   The header and the size (1024 + 2 x count bytes) are checked at open; the tokens are read
 *   with pread when a sequence is asked for (nothing is held in memory: a file may be huge),
 *   and a token >= the model's vocabulary is refused then, naming the file and its position.
 *   The descriptors stay open (at most HP_TEXT_MAX_SHARDS files).
 *
 * Sequences (both formats): a sequence is T + 1 consecutive tokens: the model's inputs are
 * the first T, its targets the last T.
 * - training: sequence i of epoch e starts at offset
 *     hp_rng_u64(hp_rng_derive(hp_rng_derive(seed, HP_TEXT_RNG_TAG), e), i) % (ntokens - T)
 *   (common/rng.h; so in [0, ntokens - T - 1]): a pure function of (seed, epoch, i), the same
 *   on every rank and after a resume; an epoch has floor(ntokens / T) sequences.
 * - validation: window i starts at i x T: the floor((ntokens - 1) / T) non-overlapping
 *   windows in order (each window's last token is the next one's first input).
 * Reads are thread-safe (nothing changes after open).
 */
#ifndef HP_TEXT_H
#define HP_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* The corpus of a text model without --data: Debian's fortunes (package fortunes) */
#define HP_TEXT_DEFAULT_DIR "/usr/share/games/fortunes"
#define HP_TEXT_LLMC_MAGIC 20240520
#define HP_TEXT_LLMC_VERSION 1        /* uint16 tokens (version 2, uint32, is LLaMA 3's) */
#define HP_TEXT_LLMC_HEADER 1024      /* bytes: 256 int32 */
#define HP_TEXT_MAX_BYTES (1L << 30)  /* plain text held in memory, all files together */
#define HP_TEXT_MAX_SHARDS 1000       /* token files of both splits together */
#define HP_TEXT_MAX_T (1 << 20)       /* the longest context */
#define HP_TEXT_VAL_EVERY 20          /* about one entry in 20 is for validation */
#define HP_TEXT_RNG_TAG 0x74657874ULL /* "text": the training offsets' stream */

enum hp_text_kind { HP_TEXT_BYTES = 0, HP_TEXT_LLMC = 1 };
/* the splits, numbered as source.h's enum hp_split */
enum { HP_TEXT_TRAIN = 0, HP_TEXT_VAL = 1 };

struct hp_text_counts {
    int T, vocab;
    int64_t ntokens[2]; /* of each split */
    long nseq[2];       /* training: sequences an epoch; validation: windows (0: no split) */
    long entries[2];    /* plain text: the entries of each split; token files: 0 */
    int files[2];       /* plain text: the files read (both the same); token files: each split's */
};

struct hp_text;

/* Open the corpus at `path` (a directory or one text file) for a model of context T
 * (1..HP_TEXT_MAX_T) and vocabulary `vocab` (plain text needs 256 or more; token files any
 * from 1: tokens are checked when read). A directory holding *_train*.bin or *_val*.bin files
 * is token files, anything else plain text. need_val: a validation split without a window
 * (fewer than T + 1 tokens) is an error; a training split without one always is. Errors name
 * the path and what is wrong (a bad header, a size that is not the header's, a FIFO, no
 * files, too few tokens). 0 and *out (hp_text_close frees it), or a negative code (logged). */
int hp_text_open(const char *path, int T, int vocab, int need_val, struct hp_text **out);
void hp_text_close(struct hp_text *t);

const struct hp_text_counts *hp_text_n(const struct hp_text *t);
enum hp_text_kind hp_text_kind(const struct hp_text *t);

/* For messages and the report: "plain text /usr/share/games/fortunes (bytes)",
 * "llm.c token files /data/fineweb10B". */
const char *hp_text_describe(const struct hp_text *t);

/* Where training sequence i of epoch `epoch` starts (0 <= i < nseq[HP_TEXT_TRAIN]). */
int64_t hp_text_train_offset(const struct hp_text *t, uint64_t seed, long epoch, long i);

/* Training sequence i of epoch `epoch` (0 <= i < nseq[HP_TEXT_TRAIN]) into tokens[T + 1].
 * 0, or a negative code (logged: i out of range; a token file that is short or holds a token
 * >= vocab, naming it and the position). */
int hp_text_train_seq(const struct hp_text *t, uint64_t seed, long epoch, long i, int32_t *tokens);

/* Validation window i (0 <= i < nseq[HP_TEXT_VAL]) into tokens[T + 1]; as above. */
int hp_text_val_seq(const struct hp_text *t, long i, int32_t *tokens);

/* Tokens [off, off + n) of `split` into tokens[n] (what both above call). */
int hp_text_read(const struct hp_text *t, int split, int64_t off, long n, int32_t *tokens);

/* llm.c's header (HP_TEXT_LLMC_HEADER bytes) of the file `name` of `file_size` bytes: the
 * magic, version 1, a count >= 1 and file_size == 1024 + 2 x count. 0 and *count, or
 * -HP_EDATA (logged, naming the file and what is wrong). */
int hp_text_llmc_check(const unsigned char *header, int64_t file_size, const char *name,
                       int64_t *count);

/* Metrics of a mean loss per token (natural log): the perplexity exp(loss); bits per byte
 * loss x tokens_per_byte / ln 2 (a byte tokenizer: tokens_per_byte 1, so loss / ln 2; a model
 * that spreads its bets evenly over 256 bytes: loss ln 256, perplexity 256, 8 bits a byte). */
double hp_text_perplexity(double loss);
double hp_text_bits_per_byte(double loss, double tokens_per_byte);

#endif
