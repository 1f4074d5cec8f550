/* feed.h - the data a virtual worker trains and evaluates on, as its first stage takes it:
 * minibatch j of this VW in an epoch, and the validation split's batches. The data set is a
 * source (source.h: Fashion-MNIST's IDX files, an image folder, tar shards); images are
 * decoded and augmented by image.h in a pool of threads, a bounded queue of minibatches ahead
 * of the pipeline. A text model's data set is a corpus (text.h: plain text, llm.c's token
 * files; --data, else HP_TEXT_DEFAULT_DIR), its sequences cut in the asking thread (a copy).
 *
 * The order is hetpipe train's, so a job, a resumed job and hetpipe train see the same
 * samples in the same order, and every random choice (crop, flip) is a function of (seed,
 * epoch, sample):
 *   - IDX and image folders: a permutation of the training samples seeded by (seed, epoch);
 *     VW v of V takes minibatches v, v + V, v + 2V, ... of it (dp's R replicas together take
 *     hetpipe train's minibatch at R x B);
 *   - tar shards: the shards permuted by (seed, epoch), each shard's samples by (seed, epoch,
 *     shard), one after the other; VW v takes minibatches [v x my_mb, (v + 1) x my_mb) of that
 *     order, so that its input rank reads about 1/V of the shards, each from start to end.
 * Every stage of a VW opens a feed for the counts (the index only; FEED_COUNTS); the first
 * stage opens it for input (FEED_INPUT: the pool and the queue), VW 0's first stage also for
 * the validation split (FEED_TEST). The other stages get the labels with the activations.
 *
 * Memory of an input rank, whatever the data set's size: the queue (--data-queue minibatches
 * of the model's input, floats, and a test batch), each thread's decoding buffers (one image
 * at its decoded size), what the source holds (tar shards: two shards' bytes; an image
 * folder: its file names; IDX: the whole set, 220 MB), and the epoch's order (8 bytes a
 * sample).
 */
#ifndef HP_FEED_H
#define HP_FEED_H

#include <stddef.h>
#include <stdint.h>

struct hp_model;

struct hp_feed_counts {
    int ntrain;    /* training samples used (--train-limit) */
    int ntest;     /* validation samples evaluated (--test-limit) */
    long total_mb; /* minibatches of the training samples per epoch (the last partial one
                      dropped) */
    long my_mb;    /* each VW's share: floor(total_mb / nvws), the same for every VW (the last
                      total_mb % nvws minibatches of an epoch's order are left out) */
    int test_batches;
    int text; /* the data set: 0 images; HP_FEED_BYTES plain text, a byte a token (bits per
                 byte = loss / ln 2); HP_FEED_TOKENS token files (bytes per token unknown) */
};
enum { HP_FEED_BYTES = 1, HP_FEED_TOKENS = 2 };

/* The counts for a data set of avail_train training and avail_test validation samples,
 * --train-limit, --test-limit (0: all), minibatch `batch` and nvws VWs. 0, or -HP_EINVAL
 * (logged) when a VW would get no minibatch. */
int hp_feed_counts(long avail_train, long avail_test, long train_limit, long test_limit, int batch,
                   int nvws, struct hp_feed_counts *out);

enum { HP_FEED_COUNTS = 0, HP_FEED_INPUT = 1, HP_FEED_TEST = 2 };

struct hp_feed_config {
    const char *dir;              /* --data (NULL: the model's data set's default) */
    const struct hp_model *model; /* its data set, input shape and classes */
    int mode;                     /* HP_FEED_* */
    int batch, nvws, v;
    long train_limit, test_limit;
    uint64_t seed;
    int threads;        /* --data-threads (0: the cores this process may use) */
    int queue;          /* --data-queue */
    int augment;        /* --data-augment: 0 standard, 1 none */
    int skip_errors;    /* --data-on-error skip */
    double error_limit; /* --data-error-limit */
    int timeout_ms;     /* the longest wait for one minibatch */
    int epochs; /* the job's epochs (0: not known): the queue prepares the next epoch's first
                   minibatches while one ends, never past the last */
};

struct hp_feed;

/* Open the data set for the model: its classes must be the model's, an IDX set's shape the
 * model's input, an image set's the model's channels (1 or 3); errors name both. 0, or a
 * negative code (logged, naming the path). */
int hp_feed_open(const struct hp_feed_config *c, struct hp_feed **out);
void hp_feed_close(struct hp_feed *f);

const struct hp_feed_counts *hp_feed_n(const struct hp_feed *f);

/* What the data set is, for messages and the report: "image folder /data/imagenet". */
const char *hp_feed_describe(const struct hp_feed *f);

/* Epoch `epoch`'s order; the queue starts preparing its minibatch j0 (where the VW starts:
 * 0, or a resumed job's position). */
int hp_feed_epoch(struct hp_feed *f, int epoch, long j0);

/* The VW's minibatch j of the epoch (0 <= j < my_mb): its input [batch, sample] in host
 * memory of the feed (valid until the next call) and its labels into lab [batch x P], P =
 * hp_model_positions (a text model: a sample is a sequence of T token ids as floats, its
 * labels the T next tokens; text.h's order: the job's minibatch m = j V + v is sequences
 * m B .. m B + B - 1 of the epoch). Waits for
 * it at most timeout_ms; *wait_s: how long it waited. 0, or a negative code (logged: an image
 * that cannot be decoded, naming it; too many skipped; the wait's deadline). */
int hp_feed_train(struct hp_feed *f, long j, const float **x, int32_t *lab, double *wait_s);

/* Validation batch b (0 <= b < test_batches): its input (as above) and labels [batch x P]
 * (a text model: validation windows b B ..); *count: the
 * samples that count (the last batch is filled up with repeats of its first sample). */
int hp_feed_test(struct hp_feed *f, int b, const float **x, int32_t *lab, int32_t *count);

/* How well a model does, for progress lines, reports and metrics files, by its data set
 * (n->text): images "loss 0.4123 acc 85.10%"; text "loss 1.8234 ppl 6.19 bpb 2.631" (the
 * mean loss per token, its perplexity and, for plain text, bits per byte; text.h). */
void hp_feed_quality(const struct hp_feed_counts *n, double loss, double acc, char *buf,
                     size_t len);
/* The metrics CSV (hetpipe train's, a job's rank 0's; launcher/jobdata.c reads both): its
 * header for images and for text, the one of n's data set, and a row's quality values
 * (bits per byte empty for token files). */
#define HP_METRICS_HEADER "split,epoch,step,seconds,loss,accuracy,images_per_s"
#define HP_METRICS_HEADER_TEXT "split,epoch,step,seconds,loss,perplexity,bits_per_byte,tokens_per_s"
const char *hp_feed_metrics_header(const struct hp_feed_counts *n);
void hp_feed_quality_csv(const struct hp_feed_counts *n, double loss, double acc, char *buf,
                         size_t len);
/* "img/s" or "tok/s", and the samples' multiplier to count them (1, or T tokens a sample) */
const char *hp_feed_rate_unit(const struct hp_feed_counts *n);

/* What the input has done so far (an input feed; zeros otherwise). */
struct hp_feed_stats {
    int threads, queue;
    long decoded;        /* samples prepared */
    long skipped;        /* samples that could not be decoded, skipped */
    double decode_s;     /* the threads' time preparing samples (thread CPU time) */
    double wait_s;       /* the pipeline's time waiting for a minibatch */
    double wait_start_s; /* of it, for the first minibatch of an epoch or after a restart
                            (the queue empty: filling it, an IDX split's load) */
    double depth_mean;   /* minibatches ready when one was asked for, on average */
    long asks;           /* minibatches asked for */
};
void hp_feed_get_stats(const struct hp_feed *f, struct hp_feed_stats *out);

/* hetpipe data bench: prepare `samples` training samples (from epoch 0 on) of the data set in
 * `c` as fast as the feed can, none of them used. *images_per_s over the wall-clock time,
 * *cpu_s: the process's CPU time over it. 0 or a negative code (logged). */
int hp_feed_bench(const struct hp_feed_config *c, long samples, double *images_per_s,
                  double *wall_s, double *cpu_s, struct hp_feed_stats *st);

#endif
