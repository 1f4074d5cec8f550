/* evaluate.c - evaluation: the test set forward through VW 0's pipeline on the global weights,
 * the verdict every other worker waits for, and the parameter hash along the pipeline. */
#include "stage.h"

#include "clock.h"
#include "error.h"
#include "log.h"
#include "rng.h"

#include <inttypes.h>
#include <string.h>

/* The test set forward through the pipeline (VW 0); stage 0 gets the totals. Not emulated:
 * evaluation is not training time (the job's time leaves it out, and nothing trains
 * meanwhile: hp_eval_gather), so padding it would only lengthen the run. */
static int evaluate_test_set(struct stage *g, int tag, double *loss, double *acc)
{
    const int batch = g->batch;
    const int n =
        g->s == 0 ? (g->o->test_limit > 0 && g->o->test_limit < g->data.test.n ? g->o->test_limit
                                                                               : g->data.test.n)
                  : 0;
    int nb;
    double lsum = 0.0, csum = 0.0, count = 0.0;
    int rc = 0;
    const size_t in_bytes = g->link.in_floats * sizeof(float),
                 out_bytes = g->link.out_floats * sizeof(float);
    const size_t lab_bytes = (size_t)batch * sizeof(int32_t);

    /* every stage knows the number of test batches from the same options */
    {
        const int nt = g->o->test_limit > 0 && g->o->test_limit < FASHION_TEST_N ? g->o->test_limit
                                                                                 : FASHION_TEST_N;
        nb = (nt + batch - 1) / batch;
        if (g->s == 0 && n != nt) {
            hp_error("test set has %d samples, expected %d", g->data.test.n, nt);
            return -HP_EDATA;
        }
    }
    for (int b = 0; b < nb && !rc; b++) {
        int32_t m = 0;
        if (g->s == 0) {
            m = n - b * batch < batch ? n - b * batch : batch;
            for (int i = 0; i < batch; i++)
                g->data.idx[i] = b * batch + (i < m ? i : 0);
            hp_dataset_gather(&g->data.test, g->data.idx, batch, g->data.himg, g->data.hlab);
            rc = g->be->ops->upload(g->be, hp_net_input(g->net, 0), g->data.himg, in_bytes);
        } else {
            rc = hp_stage_recv(g, g->link.prev, HP_MSG_EVAL, g->link.act_in, b,
                               in_bytes + lab_bytes + sizeof(int32_t), "test batch");
            if (!rc) {
                const char *p = hp_msg_buf_payload(g->link.act_in);
                memcpy(g->sched.labels, p + in_bytes, lab_bytes);
                memcpy(&m, p + in_bytes + lab_bytes, sizeof(m));
                rc = g->be->ops->upload(g->be, hp_net_input(g->net, 0), p, in_bytes);
            }
        }
        const int32_t *lab = g->s == 0 ? g->data.hlab : g->sched.labels;
        const double t0 = hp_now_s();
        if (!rc)
            rc = hp_net_forward(g->net, 0, 0, 0);
        if (!rc)
            rc = hp_stage_sync_compute(g, t0);
        if (rc)
            break;
        if (g->link.next >= 0) {
            struct hp_msg_buf *mb;
            rc = hp_stage_send_buf(g, g->link.act_out, &g->link.act_i, &mb);
            if (!rc) {
                char *p = hp_msg_buf_payload(mb);
                rc = g->be->ops->download(g->be, p, hp_net_output(g->net, 0), out_bytes);
                memcpy(p + out_bytes, lab, lab_bytes);
                memcpy(p + out_bytes + lab_bytes, &m, sizeof(m));
            }
            if (!rc)
                rc = hp_stage_send(g, g->link.next, HP_MSG_EVAL, mb, b,
                                   out_bytes + lab_bytes + sizeof(m), 0.0);
        } else {
            double l;
            int c;
            rc = hp_net_loss(g->net, 0, lab, m, 0, &l, &c);
            lsum += l;
            csum += c;
            count += m;
        }
    }
    if (rc)
        return rc;
    if (g->k > 1 && g->link.next < 0) { /* last stage: the totals to stage 0 */
        struct hp_msg_buf *mb;
        rc = hp_stage_send_buf(g, g->link.grad_out, &g->link.grad_i, &mb);
        if (!rc) {
            const double tot[3] = {lsum, csum, count};
            memcpy(hp_msg_buf_payload(mb), tot, sizeof(tot));
            rc = hp_stage_send(g, g->link.first, HP_MSG_EVAL, mb, tag, sizeof(tot), 0.0);
        }
    } else if (g->k > 1 && g->s == 0) {
        rc = hp_stage_recv(g, g->link.last, HP_MSG_EVAL, g->link.grad_in, tag, 3 * sizeof(double),
                           "test result");
        if (!rc) {
            double tot[3];
            memcpy(tot, hp_msg_buf_payload(g->link.grad_in), sizeof(tot));
            lsum = tot[0];
            csum = tot[1];
            count = tot[2];
        }
    }
    if (!rc && g->s == 0) {
        *loss = count > 0 ? lsum / count : 0.0;
        *acc = count > 0 ? csum / count : 0.0;
    }
    return rc;
}

/* Evaluate (VW 0, every stage) on the global weights: each stage pulls its units (the final
 * evaluation waits for every VW's last wave, the others take what the shards hold), runs the
 * test set on them and goes back to its local weights. With one VW the global weights are the
 * VW's own minus the wave in progress, so it evaluates its local weights, as plain pipelining
 * does. Batch norm's running statistics are not synchronised: VW 0's own are used. */
static int evaluate(struct stage *g, int final, double *loss, double *acc)
{
    const size_t bytes = g->nparams * sizeof(float);
    const int global = g->wsp.ps && g->nvws > 1;
    int rc = 0;

    if (global) {
        for (int x = 0; x < g->nvws; x++)
            g->wsp.thr[x] = final ? g->wsp.final_waves[x] : 0;
        const double t0 = hp_now_s();
        rc = hp_ps_pull(g->wsp.ps, g->wsp.thr, -1);
        hp_tl_add(g->tl, HP_TL_PULL, t0, hp_now_s(), -1, -1, (int64_t)bytes, -1);
        if (!rc && g->nparams)
            rc = g->be->ops->download(g->be, g->wsp.hsave, hp_net_params(g->net), bytes);
        if (!rc && g->nparams)
            rc = g->be->ops->upload(g->be, hp_net_params(g->net), hp_ps_global(g->wsp.ps), bytes);
        if (rc)
            return rc;
    }
    rc = evaluate_test_set(g, g->wsp.nevals++, loss, acc);
    if (global && g->nparams) {
        int rc2 = g->be->ops->upload(g->be, hp_net_params(g->net), g->wsp.hsave, bytes);
        rc = rc ? rc : rc2;
    }
    return rc;
}

/* Evaluate (VW 0) and report on stage 0: within an epoch (after nb of its my_mb minibatches)
 * or at its end (nb < 0); step: the job's, train_s: training seconds so far. */
int hp_eval_report(struct stage *g, struct hp_worker_result *res, int epoch, long nb, long my_mb,
                   long step, double train_s, int final, double *tl, double *ta)
{
    const double c0 = g->time.compute_s, p0 = g->time.pad_s, m0 = g->time.comm_s;
    int rc = evaluate(g, final, tl, ta);

    /* evaluation is outside the training phase's accounting */
    g->time.compute_s = c0;
    g->time.pad_s = p0;
    g->time.comm_s = m0;
    if (rc || g->s != 0)
        return rc;
    hp_stage_progress_clear(g);
    if (nb >= 0)
        printf("epoch %d/%ld step %ld/%ld test loss %.4f accuracy %.2f%%\n", epoch + 1,
               g->o->epochs, nb, my_mb, *tl, 100.0 * *ta);
    else
        printf("epoch %d/%ld test loss %.4f accuracy %.2f%%\n", epoch + 1, g->o->epochs, *tl,
               100.0 * *ta);
    if (g->logs.metrics) { /* flushed: whoever follows the run sees each evaluation as it comes */
        fprintf(g->logs.metrics, "test,%d,%ld,%.3f,%.6f,%.6f,\n", epoch + 1, step, train_s, *tl,
                *ta);
        fflush(g->logs.metrics);
    }
    fflush(stdout);
    res->test_loss = *tl;
    res->test_acc = *ta;
    return 0;
}

/* Whether this rank's evaluation (VW 0's stage 0 has the accuracy) reached --stop-at. */
int hp_eval_reached(const struct stage *g, double acc)
{
    return g->v == 0 && g->s == 0 && g->o->stop_at > 0.0 && 100.0 * acc >= g->o->stop_at;
}

/* Job points. At the job's start (n = -1), at every evaluation point (n = 0, 1, ...) and at
 * the end (n = the evaluation points before it) every worker rank has drained its pipeline
 * and stops at the same point of its data (every VW and replica has the same share).
 * hp_eval_gather: each tells stage 0 of VW 0 (the reporter) that it is there; the reporter
 * waits for all of them, so on it *t_all is when the last arrived: from then on nothing trains
 * anywhere. Then VW 0 evaluates, and hp_eval_verdict: the reporter tells every other worker
 * whether to go on or to stop (*stop: its verdict in, everyone's out; --stop-at). So
 * evaluation pauses every VW, the slower ones included, and the job's training time is its
 * wall clock less exactly those pauses (from the last arrival to the verdict); a job that
 * reached --stop-at stops everywhere at the same point. No deadlock under WSP: at a point P
 * every VW has pushed waves 0 .. P / Nm - 1, and reaching P needs at most waves
 * (P - 1) / Nm - 1 - D of the others (wave_gate); dp's replicas are in step anyway. */
int hp_eval_gather(struct stage *g, long n, double *t_all, int *req)
{
    const int to = hp_plan_stage_rank(g->plan, 0, 0);
    const int workers = g->plan->nranks - g->plan->nshards;
    struct hp_msg_header h = {
        .type = HP_MSG_CONTROL, .vw = g->v, .stage = g->s, .minibatch = n, .clock = *req != 0};
    int rc = 0;

    if (g->rank != to) {
        rc = hp_comm_send(g->comm, to, &h, NULL, g->timeout_ms);
    } else {
        /* a slower VW may take long to get here (long_wait_ms); a dead peer ends the wait */
        for (int r = 0; r < workers && !rc; r++) {
            if (r == to)
                continue;
            rc = hp_comm_recv(g->comm, r, HP_MSG_CONTROL, &h, NULL, 0, g->long_wait_ms);
            if (!rc && (h.minibatch != n || h.clock < 0 || h.clock > 1)) {
                hp_error("vw %d stage %d: protocol error: expected rank %d at job point %ld, got "
                         "%" PRId64 " (%" PRId64 ")",
                         g->v, g->s, r, n, h.minibatch, h.clock);
                rc = -HP_EPROTOCOL;
            }
            if (!rc)
                *req |= (int)h.clock;
            else if (rc == -HP_ETIMEOUT)
                hp_error("vw %d stage %d: rank %d did not reach job point %ld within %.0f s", g->v,
                         g->s, r, n, g->long_wait_ms / 1000.0);
        }
        *t_all = hp_now_s();
    }
    if (rc)
        hp_error("vw %d stage %d: at job point %ld: %s", g->v, g->s, n, hp_strerror(rc));
    return rc;
}

int hp_eval_verdict(struct stage *g, long n, unsigned *flags, long *seq)
{
    const int from = hp_plan_stage_rank(g->plan, 0, 0);
    const int workers = g->plan->nranks - g->plan->nshards;
    struct hp_msg_header h = {.type = HP_MSG_CONTROL,
                              .vw = g->v,
                              .stage = g->s,
                              .minibatch = n,
                              .clock = -1,
                              .payload_bytes = 2 * sizeof(int64_t)};
    int64_t pay[2] = {(int64_t)*flags, *seq};
    int rc = 0;

    if (g->rank == from) {
        for (int r = 0; r < workers && !rc; r++)
            if (r != from)
                rc = hp_comm_send(g->comm, r, &h, pay, g->timeout_ms);
    } else {
        /* VW 0's evaluation may take long (long_wait_ms); a dead peer ends the wait */
        rc = hp_comm_recv(g->comm, from, HP_MSG_CONTROL, &h, pay, sizeof(pay), g->long_wait_ms);
        if (!rc && (h.minibatch != n || h.payload_bytes != sizeof(pay) || pay[0] < 0 ||
                    (pay[0] & ~(int64_t)HP_VERDICT_ALL) || pay[1] < 0)) {
            hp_error("vw %d stage %d: protocol error: expected the verdict of job point %ld from "
                     "rank %d, got %" PRId64 " (%" PRId64 ")",
                     g->v, g->s, n, from, h.minibatch, pay[0]);
            rc = -HP_EPROTOCOL;
        }
        if (!rc) {
            *flags = (unsigned)pay[0];
            *seq = pay[1];
        }
    }
    if (rc)
        hp_error("vw %d stage %d: after job point %ld: %s", g->v, g->s, n, hp_strerror(rc));
    return rc;
}

/* FNV-1a over the VW's parameters in model order, chained stage to stage; the last stage
 * sends the total to stage 0. */
int hp_stage_param_hash(struct stage *g, uint64_t *out)
{
    uint64_t h = HP_FNV_OFFSET;
    struct hp_msg_buf *b;
    int rc = 0;

    if (g->s > 0) {
        rc = hp_stage_recv(g, g->link.prev, HP_MSG_CONTROL, g->link.act_in, 0, sizeof(h),
                           "parameter hash");
        if (rc)
            return rc;
        memcpy(&h, hp_msg_buf_payload(g->link.act_in), sizeof(h));
    }
    if (g->nparams) {
        rc = g->be->ops->download(g->be, g->hparams, hp_net_params(g->net),
                                  g->nparams * sizeof(float));
        if (rc)
            return rc;
        h = hp_fnv1a(h, g->hparams, g->nparams * sizeof(float));
    }
    *out = h;
    if (g->link.next >= 0 || (g->k > 1 && g->link.next < 0)) {
        const int to = g->link.next >= 0 ? g->link.next : g->link.first;
        rc = hp_stage_send_buf(g, g->link.act_out, &g->link.act_i, &b);
        if (!rc) {
            memcpy(hp_msg_buf_payload(b), &h, sizeof(h));
            rc = hp_stage_send(g, to, HP_MSG_CONTROL, b, g->link.next >= 0 ? 0 : 1, sizeof(h), 0.0);
        }
    }
    if (!rc && g->s == 0 && g->k > 1) {
        rc = hp_stage_recv(g, g->link.last, HP_MSG_CONTROL, g->link.grad_in, 1, sizeof(h),
                           "parameter hash");
        if (!rc)
            memcpy(out, hp_msg_buf_payload(g->link.grad_in), sizeof(h));
    }
    return rc;
}
