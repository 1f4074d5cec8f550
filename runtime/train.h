/* train.h - training a model on Fashion-MNIST in one process (`hetpipe train`).
 *
 * The loop, top to bottom: load the data, build the net for the whole model, initialise from
 * the seed; per epoch, a seeded permutation of the training set in minibatches (the last
 * partial one dropped), forward, loss, backward, SGD; a progress line every log_every steps;
 * evaluation on the test set after each epoch; a metrics CSV. For a fixed seed, the CPU
 * backend and a fixed thread count the result is bit-for-bit the same.
 */
#ifndef HP_TRAIN_H
#define HP_TRAIN_H

#include <stdint.h>

struct hp_train_opts {
    const char *model;       /* name or path */
    const char *device;      /* cpu | cuda | auto */
    const char *data_dir;    /* NULL: hp_dataset_dir() */
    const char *metrics;     /* CSV path, NULL: none */
    const char *step_log;    /* "step,loss" of every step (mean loss, %.9e), NULL: none */
    const char *save_params; /* the final parameters, raw float32 in model order, NULL: none */
    int epochs;
    int batch;
    float lr, momentum, weight_decay;
    int cosine; /* cosine learning-rate decay to 0 over the run (else constant) */
    uint64_t seed;
    int train_limit; /* use only the first N training samples (0: all) */
    int test_limit;  /* evaluate on the first N test samples (0: all) */
    int log_every;   /* steps between progress lines (0: none) */
};

struct hp_train_result {
    long steps;
    double seconds;             /* training time, evaluation excluded */
    double images_per_s;        /* training images per second */
    double last_loss;           /* mean loss of the last logged interval */
    double test_loss, test_acc; /* after the last epoch */
    uint64_t param_hash;        /* FNV-1a of the final parameters' bytes */
};

/* Defaults for every field (cnn, auto device, 5 epochs, batch 64, lr 0.05, momentum 0.9,
 * weight decay 5e-4, cosine, seed 1, log every 100 steps). */
void hp_train_opts_init(struct hp_train_opts *o);

/* Run it. Progress goes to stdout; errors are logged. Returns 0 or a negative code. */
int hp_train_run(const struct hp_train_opts *o, struct hp_train_result *res);

#endif
