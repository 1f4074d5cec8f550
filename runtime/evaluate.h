/* evaluate.h - the test set forward through a virtual worker's pipeline (VW 0 evaluates the
 * job): stage 0 takes the test batches from its feed, each stage runs them forward and hands
 * them on with their labels (HP_MSG_EVAL), the last stage sums the loss and the correct
 * answers and sends the totals to stage 0. Not emulated, not training time: nothing trains
 * meanwhile (jobpoint.h). On which weights is the caller's (wsp.h: the global ones).
 */
#ifndef HP_EVALUATE_H
#define HP_EVALUATE_H

#include "backend.h"
#include "feed.h"
#include "link.h"
#include "net.h"

#include <stddef.h>
#include <stdint.h>

struct hp_eval_parts {
    struct hp_net *net; /* the stage's, slot 0 used */
    struct hp_backend *be;
    struct hp_link_state *link;
    struct hp_feed *feed; /* stage 0's (NULL elsewhere) */
    int s, k, batch, test_batches;
    int positions;                /* labels a sample (hp_model_positions: text T) */
    size_t in_floats, out_floats; /* per batch */
    int32_t *lab;                 /* [batch x positions] scratch for the labels received */
};

/* Run the test set through; on stage 0 the mean loss and the accuracy. `tag` numbers the
 * evaluation (the totals' message). 0 or a negative code (logged). */
int hp_eval_test_set(const struct hp_eval_parts *e, int tag, double *loss, double *acc);

#endif
