/* source.h - a data set on disk as its format reads it: the samples of its two splits
 * (training, validation), their labels, the classes, and each sample's bytes. One module per
 * format: source_idx.c (Fashion-MNIST's gzip IDX files, held in memory as floats),
 * source_folder.c (an image folder in torchvision's ImageFolder layout:
 * ROOT/train/CLASS/NAME.jpg|jpeg|png, ROOT/val/CLASS/..., classes in sorted order) and
 * source_shards.c (tar shards in the WebDataset convention: ROOT/train-NNNNNN.tar,
 * ROOT/val-NNNNNN.tar, members KEY.jpg|jpeg|png + KEY.cls, read through libarchive with large
 * sequential reads). feed.c turns a source into minibatches (the order, decoding, the queue).
 *
 * A sample is named by its id in its split, 0 <= id < n[split]. Shards number their samples
 * shard by shard (the shards in name order, each's members in the tar's order), so that the
 * ids of one shard are the contiguous range shard_first[k] .. shard_first[k] + shard_n[k] - 1.
 */
#ifndef HP_SOURCE_H
#define HP_SOURCE_H

#include <stddef.h>
#include <stdint.h>

enum hp_split { HP_SPLIT_TRAIN = 0, HP_SPLIT_VAL = 1 };

enum hp_source_kind { HP_SOURCE_IDX, HP_SOURCE_FOLDER, HP_SOURCE_SHARDS };

#define HP_SOURCE_MAX_CLASSES 100000
#define HP_SOURCE_MAX_SAMPLE (64L << 20) /* bytes of one encoded image at most */

/* One sample as read: its bytes (encoded JPEG or PNG; for an IDX source c*h*w floats), its
 * label, and its name for messages ("ROOT/train/CLASS/x.jpg", "ROOT/train-000003.tar:KEY.jpg"). */
struct hp_sample {
    const void *data;
    size_t size;
    int32_t label;
    char name[512];
    void *hold; /* the source's: what hp_source_release frees or unpins */
};

struct hp_source;

struct hp_source_ops {
    /* Sample `id` of `split` into *out (thread-safe: decoding threads call it at once).
     * 0, or a negative code with a message in err naming the file (the sample is not
     * decodable data, a read failed); *out is then untouched. */
    int (*read)(struct hp_source *s, int split, long id, struct hp_sample *out, char *err,
                size_t errlen);
    void (*release)(struct hp_source *s, struct hp_sample *smp); /* after a successful read */
    /* The ids the feed will read next, in order (a hint: shards load ahead along it; may
     * be NULL). ids stays valid until the next begin or close. */
    void (*begin)(struct hp_source *s, int split, const long *ids, long n);
    void (*close)(struct hp_source *s);
};

struct hp_source {
    const struct hp_source_ops *ops;
    enum hp_source_kind kind;
    char root[4096];
    int encoded; /* 1: JPEG/PNG bytes (decoded by image.c); 0: floats of c x h x w */
    int c, h, w; /* an IDX source's sample shape (0 for images: any size) */
    int nclasses;
    char **classes; /* [nclasses] names (folders' names; shards: ROOT/classes.txt's lines, else
                       "0", "1", ...) */
    long n[2];      /* samples of each split (n[HP_SPLIT_VAL] 0: no validation split) */
    /* shards only (else 0 / NULL): each split's shards, in name order */
    int nshards[2];
    char **shard_path[2]; /* [nshards] */
    long *shard_first[2]; /* [nshards]: the first id */
    long *shard_n[2];     /* [nshards]: samples */
    /* entries that are not samples, passed over (for `hetpipe data check`): a folder's files
     * without a .jpg/.jpeg/.png extension and directories inside class folders, a shard's
     * members of other extensions and its directories */
    long nskipped[2];
};

/* A shard source's cache (source_shards.c: at most 2 whole shards in memory, the one being
 * read and the next, loaded ahead along begin()'s order by one thread), for tests and
 * `hetpipe data`: shards loaded so far, the most resident at once, their most bytes at once. */
struct hp_shard_stats {
    long loads;
    int max_resident;
    size_t max_bytes;
};
/* 0, or -HP_EINVAL when s is not a shard source. */
int hp_source_shard_stats(struct hp_source *s, struct hp_shard_stats *out);

/* Open the data set at `dir` for a model whose `dataset =` is `dataset` (fashion-mnist,
 * imagenet): what is there decides the format: IDX files (train-images-idx3-ubyte.gz, ...),
 * a folder ROOT/train/, or shards ROOT/train-*.tar. dir NULL: $HETPIPE_DATA, else the
 * dataset's default (Fashion-MNIST's /usr/share/datasets/fashion-mnist; none for imagenet:
 * an error that says to give --data). Reads the index only (file names, tar headers, .cls
 * labels), no image. `need_val`: a missing or empty validation split is an error. Errors name
 * the path and what is wrong (a missing class folder, an empty split, a member without its
 * label, a path escaping the shard, ...). 0, or a negative code (logged). */
int hp_source_open(const char *dir, const char *dataset, int need_val, struct hp_source **out);
void hp_source_close(struct hp_source *s);

/* The format's word: "idx", "image folder", "tar shards". */
const char *hp_source_kind_name(const struct hp_source *s);

/* ---- helpers the format modules (and runtime/text.c) share ---- */

/* *p, an array of *cap elements of elem bytes, grown (doubling, from 64) to hold at least
 * need. 0 or -HP_ENOMEM (*p is then as it was). */
int hp_source_grow(void **p, size_t *cap, size_t need, size_t elem);

/* strcmp of two char * (qsort, bsearch). */
int hp_source_cmp_str(const void *a, const void *b);

/* The entries of directory dirfd whose names do not start with '.', sorted by strcmp, into
 * *names (new strings: free each and the array; also after a failure) and *n. keep (NULL: every
 * entry) decides which are listed; the others are counted in *skipped (may be NULL). More than
 * max entries kept is an error naming the directory (`disp`) and `what` they are. 0, or a
 * negative code (logged). */
struct dirent;
int hp_source_list_dir(int dirfd, const char *disp, int (*keep)(int, const struct dirent *),
                       int max, const char *what, char ***names, int *n, long *skipped);

/* Per-format openers (hp_source_open dispatches; tests call them directly). */
int hp_source_open_idx(const char *dir, int need_val, struct hp_source **out);
int hp_source_open_folder(const char *dir, int need_val, struct hp_source **out);
int hp_source_open_shards(const char *dir, int need_val, struct hp_source **out);

/* For the format modules: free what struct hp_source's common fields point to (classes,
 * shard arrays); not s itself. */
void hp_source_free_common(struct hp_source *s);
/* The class of sample `id` in a split whose ids are grouped by class: first[k] is class k's
 * first id (first[nclasses] = n). */
int32_t hp_source_class_of(const long *first, int nclasses, long id);

#endif
