/* train.h - training a model in one process (`hetpipe train`), on its data set (feed.h:
 * images, or a text model's corpus).
 *
 * The loop, top to bottom: load the data, build the net for the whole model, initialise from
 * the seed; per epoch, a seeded permutation of the training set in minibatches (the last
 * partial one dropped), forward, loss, backward, the tied embeddings' gradients summed, clipping,
 * SGD or AdamW; a progress line every log_every steps;
 * evaluation on the test set after each epoch; a metrics CSV. For a fixed seed, the CPU
 * backend and a fixed thread count the result is bit-for-bit the same.
 */
#ifndef HP_TRAIN_H
#define HP_TRAIN_H

#include "options.h"

#include <stdint.h>

struct hp_train_result {
    long steps;
    double seconds;             /* training time, evaluation excluded */
    double images_per_s;        /* training images (samples) per second */
    double tokens_per_s;        /* a text model: samples x T per second (else images_per_s) */
    double last_loss;           /* mean loss of the last logged interval */
    double test_loss, test_acc; /* after the last epoch */
    uint64_t param_hash;        /* FNV-1a of the final parameters' bytes */
    int text;                   /* the data set (hp_feed_counts.text): 0 images */
};

/* Run it with the options of hetpipe train (hp_options_init(o, HP_CMD_TRAIN), then the
 * command line): model, device, data, metrics, step_log, save_params, epochs, batch, lr,
 * momentum, weight_decay, schedule, optimizer (AdamW with beta1, beta2, eps), lr_warmup, clip,
 * seed, train_limit, test_limit, log_every. Progress goes to stdout; errors are logged. Returns
 * 0 or a negative code. */
int hp_train_run(const struct hp_options *o, struct hp_train_result *res);

#endif
