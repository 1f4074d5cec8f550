/* cmd_train.c - `hetpipe train`: train a model in one process (train.h). */
#include "commands.h"
#include "train.h"

#include <math.h>
#include <stdio.h>

static const char synopsis[] =
    "usage: hetpipe train [options]\n"
    "Train a model in one process, on the data set --data names (Fashion-MNIST by default).\n";

int hp_cmd_train(int argc, char **argv)
{
    struct hp_options o;
    struct hp_train_result r;
    int rc = hp_cmd_options(HP_CMD_TRAIN, synopsis, argc, argv, &o, 0, NULL);

    if (rc >= 0)
        return rc;
    rc = hp_train_run(&o, &r);
    if (rc) {
        hp_cmd_report("train", rc);
        return 1;
    }
    if (r.text)
        printf("hetpipe train: done: %ld steps in %.1f s (%.0f tok/s), validation loss %.4f, "
               "perplexity %.2f, parameter hash %016llx\n",
               r.steps, r.seconds, r.tokens_per_s, r.test_loss, exp(r.test_loss),
               (unsigned long long)r.param_hash);
    else
        printf("hetpipe train: done: %ld steps in %.1f s (%.0f img/s), test accuracy %.2f%%, "
               "test loss %.4f, parameter hash %016llx\n",
               r.steps, r.seconds, r.images_per_s, 100.0 * r.test_acc, r.test_loss,
               (unsigned long long)r.param_hash);
    return 0;
}
