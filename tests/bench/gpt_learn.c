/* gpt_learn.c - the inputs of the learning comparison with PyTorch (tests/bench/gpt_learn/):
 * what `hetpipe train --model MODEL --seed SEED --batch B --train-limit N --test-limit M
 * --epochs E` trains and evaluates on, taken from the same code (runtime/feed.h's feed,
 * opened as runtime/train.c opens it; runtime/net.h's hp_net_init_params), written into DIR:
 *   meta.txt      B T V d blocks heads tie steps nval, one line (steps: E x the minibatches
 *                 of an epoch)
 *   params0.bin   the initial parameters, float32 in hetpipe's layout (a tied head's copy
 *                 of the token matrix last, as in tests/cli/gpt_equiv.py)
 *   train_x.bin   every step's input token ids in training order, int32 [steps, B, T]
 *   train_y.bin   their labels (the next tokens), int32 [steps, B, T]
 *   val_x.bin     the validation windows hetpipe train evaluates, int32 [nval, T]
 *   val_y.bin     their labels, int32 [nval, T]
 * Usage: gpt_learn DIR SEED TRAIN_LIMIT TEST_LIMIT BATCH [EPOCHS] [MODEL]
 * (the corpus: $HETPIPE_DATA, else text.h's default, as hetpipe train without --data)
 */
#include "backend.h"
#include "feed.h"
#include "model.h"
#include "net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* n x T floats (token ids) and labels appended to the files x and y */
static int put(FILE *x, FILE *y, const float *in, const int32_t *lab, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const int32_t t = (int32_t)in[i];
        if (fwrite(&t, sizeof(t), 1, x) != 1)
            return -1;
    }
    return fwrite(lab, sizeof(int32_t), n, y) == n ? 0 : -1;
}

static FILE *open_in(const char *dir, const char *name)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (!(f = fopen(path, "wb")))
        perror(path);
    return f;
}

/* Every training step's minibatch of `epochs` epochs, then the validation windows. */
static int dump_data(const char *dir, struct hp_feed *feed, int epochs, int B, int T)
{
    const struct hp_feed_counts *n = hp_feed_n(feed);
    FILE *f[4] = {open_in(dir, "train_x.bin"), open_in(dir, "train_y.bin"),
                  open_in(dir, "val_x.bin"), open_in(dir, "val_y.bin")};
    int32_t *lab = malloc((size_t)B * T * sizeof(int32_t));
    int rc = lab && f[0] && f[1] && f[2] && f[3] ? 0 : -1;

    for (int e = 0; e < epochs && !rc; e++) {
        rc = hp_feed_epoch(feed, e, 0);
        for (long j = 0; j < n->total_mb && !rc; j++) {
            const float *x;
            double waited;
            rc = hp_feed_train(feed, j, &x, lab, &waited) || put(f[0], f[1], x, lab, (size_t)B * T);
        }
    }
    for (int b = 0; b < n->test_batches && !rc; b++) {
        const float *x;
        int32_t m;
        rc = hp_feed_test(feed, b, &x, lab, &m) || put(f[2], f[3], x, lab, (size_t)m * T);
    }
    for (int i = 0; i < 4; i++)
        if (f[i] && fclose(f[i]))
            rc = -1;
    free(lab);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr,
                "usage: gpt_learn DIR SEED TRAIN_LIMIT TEST_LIMIT BATCH [EPOCHS] [MODEL]\n");
        return 2;
    }
    const char *dir = argv[1], *name = argc > 7 ? argv[7] : "gpt-tiny";
    const int B = atoi(argv[5]), epochs = argc > 6 ? atoi(argv[6]) : 1;
    struct hp_model *m = NULL;
    struct hp_backend *be = NULL;
    struct hp_net *net = NULL;
    struct hp_feed *feed = NULL;
    const struct hp_net_config cfg = {.batch = B, .nslots = 1, .optimizer = HP_OPTIMIZER_ADAMW};
    char text[256];
    FILE *f;

    hp_backend_cpu_set_threads(1);
    if (B < 1 || epochs < 1 || hp_model_load(name, &m) || !m->positions)
        return 1;
    const struct hp_feed_config fc = {.model = m,
                                      .mode = HP_FEED_INPUT | HP_FEED_TEST,
                                      .batch = B,
                                      .nvws = 1,
                                      .train_limit = atol(argv[3]),
                                      .test_limit = atol(argv[4]),
                                      .seed = strtoull(argv[2], NULL, 10),
                                      .threads = 1,
                                      .queue = 2,
                                      .epochs = epochs};
    const struct hp_op *att = &m->units[1].ops[2], *head = &m->units[m->nunits - 1].ops[1];
    if (att->type != HP_OP_ATTENTION || hp_feed_open(&fc, &feed) || hp_backend_cpu_create(&be) ||
        hp_net_create(be, m, 0, m->nunits, &cfg, &net) || hp_net_init_params(net, fc.seed) ||
        dump_data(dir, feed, epochs, B, m->positions) || !(f = open_in(dir, "params0.bin")))
        return 1;
    const size_t np = hp_net_nparams(net);
    const struct hp_feed_counts *n = hp_feed_n(feed);
    if (fwrite(hp_net_params(net), sizeof(float), np, f) != np || fclose(f) ||
        !(f = open_in(dir, "meta.txt")))
        return 1;
    snprintf(text, sizeof(text), "%d %d %d %d %d %d %d %ld %d\n", B, m->positions, m->classes,
             m->units[0].out.w, m->nunits - 2, att->heads, head->tie, n->total_mb * epochs,
             n->ntest);
    if (fputs(text, f) < 0 || fclose(f))
        return 1;
    printf("gpt_learn: %s, %zu parameters, %ld steps of %d sequences, %d validation windows, "
           "written to %s\n",
           m->name, np, n->total_mb * epochs, B, n->ntest, dir);
    hp_feed_close(feed);
    hp_net_destroy(net);
    hp_backend_destroy(be);
    hp_model_destroy(m);
    return 0;
}
