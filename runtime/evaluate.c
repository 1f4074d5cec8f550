/* evaluate.c - the test set through a virtual worker's pipeline (evaluate.h). */
#include "evaluate.h"

#include "comm.h"
#include "error.h"

#include <string.h>

/* Test batch b into the stage: from the feed (stage 0) or from the previous stage. */
static int batch_in(const struct hp_eval_parts *e, int b, const int32_t **lab, int32_t *m)
{
    const size_t in_bytes = e->in_floats * sizeof(float);
    const size_t lab_bytes = (size_t)e->batch * e->positions * sizeof(int32_t);
    const struct hp_link *peers = hp_link_peers(e->link);
    const void *p;
    int rc;

    if (e->s == 0) {
        const float *img;
        rc = hp_feed_test(e->feed, b, &img, e->lab, m);
        if (rc)
            return rc;
        *lab = e->lab;
        return e->be->ops->upload(e->be, hp_net_input(e->net, 0), img, in_bytes);
    }
    rc = hp_link_recv(e->link, peers->prev, HP_MSG_EVAL, b, in_bytes + lab_bytes + sizeof(*m),
                      "test batch", &p);
    if (rc)
        return rc;
    memcpy(e->lab, (const char *)p + in_bytes, lab_bytes);
    memcpy(m, (const char *)p + in_bytes + lab_bytes, sizeof(*m));
    *lab = e->lab;
    return e->be->ops->upload(e->be, hp_net_input(e->net, 0), p, in_bytes);
}

/* The stage's output of test batch b to the next stage, with its labels and count. */
static int batch_out(const struct hp_eval_parts *e, int b, const int32_t *lab, int32_t m)
{
    const size_t out_bytes = e->out_floats * sizeof(float);
    const size_t lab_bytes = (size_t)e->batch * e->positions * sizeof(int32_t);
    void *p;
    int rc = hp_link_take(e->link, HP_LINK_DOWN, &p);

    if (!rc)
        rc = e->be->ops->download(e->be, p, hp_net_output(e->net, 0), out_bytes);
    if (rc)
        return rc;
    memcpy((char *)p + out_bytes, lab, lab_bytes);
    memcpy((char *)p + out_bytes + lab_bytes, &m, sizeof(m));
    return hp_link_send(e->link, hp_link_peers(e->link)->next, HP_MSG_EVAL, b,
                        out_bytes + lab_bytes + sizeof(m));
}

/* The totals (loss sum, correct, samples) from the last stage to stage 0. */
static int totals(const struct hp_eval_parts *e, int tag, double tot[3])
{
    const struct hp_link *peers = hp_link_peers(e->link);
    const void *p;
    void *q;
    int rc = 0;

    if (e->k > 1 && peers->next < 0) {
        rc = hp_link_take(e->link, HP_LINK_UP, &q);
        if (!rc) {
            memcpy(q, tot, 3 * sizeof(double));
            rc = hp_link_send(e->link, peers->first, HP_MSG_EVAL, tag, 3 * sizeof(double));
        }
    } else if (e->k > 1 && e->s == 0) {
        rc = hp_link_recv(e->link, peers->last, HP_MSG_EVAL, tag, 3 * sizeof(double), "test result",
                          &p);
        if (!rc)
            memcpy(tot, p, 3 * sizeof(double));
    }
    return rc;
}

int hp_eval_test_set(const struct hp_eval_parts *e, int tag, double *loss, double *acc)
{
    double tot[3] = {0.0, 0.0, 0.0}; /* loss sum, correct, samples x positions */
    int rc = 0;

    for (int b = 0; b < e->test_batches && !rc; b++) {
        const int32_t *lab = NULL;
        int32_t m = 0;
        rc = batch_in(e, b, &lab, &m);
        if (!rc)
            rc = hp_net_forward(e->net, 0, 0, 0);
        if (!rc)
            rc = e->be->ops->sync(e->be);
        if (rc)
            break;
        if (hp_link_peers(e->link)->next >= 0) {
            rc = batch_out(e, b, lab, m);
        } else {
            double l;
            int c;
            rc = hp_net_loss(e->net, 0, lab, m, 0, &l, &c);
            tot[0] += l;
            tot[1] += c;
            tot[2] += (double)m * e->positions; /* loss and correct count every position */
        }
    }
    if (!rc)
        rc = totals(e, tag, tot);
    if (!rc && e->s == 0) {
        *loss = tot[2] > 0 ? tot[0] / tot[2] : 0.0;
        *acc = tot[2] > 0 ? tot[1] / tot[2] : 0.0;
    }
    return rc;
}
