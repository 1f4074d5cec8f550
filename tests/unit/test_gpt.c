/* test_gpt.c - the GPT ops and units (layers.h's sequence ops, backend_cpu.c, net.c): every
 * op against a naive double-precision second implementation (forward) and against central
 * finite differences of it (backward); whole nets of blocks against finite differences of
 * their loss; the planner's memory of GPT nets to the byte; the loader's refusals. */
#include "suites.h"
#include "util.h"

#include "backend.h"
#include "cost.h"
#include "error.h"
#include "gpudb.h"
#include "model.h"
#include "net.h"
#include "rng.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- naive double-precision references ---------------------------------------------------- */

/* Shapes of one op check: n sequences of T positions, width d, heads, vocabulary. */
enum { N = 2, T = 5, D = 8, H = 2, V = 7 };

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* layer norm of rows of d: y = g (x - mean) / sqrt(var + 1e-5) + b */
static void layernorm_ref(const double *x, const double *g, const double *b, double *y, int rows,
                          int d)
{
    for (int r = 0; r < rows; r++) {
        double m = 0.0, v = 0.0;
        for (int j = 0; j < d; j++)
            m += x[r * d + j] / d;
        for (int j = 0; j < d; j++)
            v += (x[r * d + j] - m) * (x[r * d + j] - m) / d;
        for (int j = 0; j < d; j++)
            y[r * d + j] = g[j] * (x[r * d + j] - m) / sqrt(v + 1e-5) + b[j];
    }
}

/* attention, written as the formula: for each query i, the keys j <= i, one head at a time */
static void attention_ref(const double *qkv, double *y, int n, int t, int d, int heads)
{
    const int dh = d / heads;

    for (int b = 0; b < n; b++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < t; i++) {
                const double *q = qkv + ((size_t)(b * t + i) * 3 * d) + h * dh;
                double s[64], mx = -1e300, sum = 0.0;
                for (int j = 0; j <= i; j++) {
                    const double *k = qkv + ((size_t)(b * t + j) * 3 * d) + d + h * dh;
                    s[j] = 0.0;
                    for (int e = 0; e < dh; e++)
                        s[j] += q[e] * k[e] / sqrt((double)dh);
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int j = 0; j <= i; j++)
                    sum += exp(s[j] - mx);
                for (int e = 0; e < dh; e++) {
                    double acc = 0.0;
                    for (int j = 0; j <= i; j++)
                        acc += exp(s[j] - mx) / sum *
                               qkv[(size_t)(b * t + j) * 3 * d + 2 * d + h * dh + e];
                    y[(size_t)(b * t + i) * d + h * dh + e] = acc;
                }
            }
}

static void fill(float *x, size_t n, uint64_t seed, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (2.0f * hp_rng_uniform(seed, i) - 1.0f) * scale;
}

static void to_double(const float *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
}

/* |a - b| <= atol + rtol |b| */
static void near(double a, double b, double atol, double rtol, const char *what, size_t i)
{
    ck_assert_msg(fabs(a - b) <= atol + rtol * fabs(b), "%s[%zu]: %.9g, reference %.9g", what, i, a,
                  b);
}

/* ---- ops ---------------------------------------------------------------------------------- */

/* The loss of the finite differences: sum r . y, r fixed random weights. */
static double proj(const double *y, const float *r, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += y[i] * r[i];
    return s;
}

/* GELU: forward against the formula in double, backward against central differences of it. */
START_TEST(gelu_op)
{
    struct hp_backend *be;
    float x[64], y[64], dy[64], dx[64];

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    fill(x, 64, 1, 4.0f);
    fill(dy, 64, 2, 1.0f);
    ck_assert_int_eq(be->ops->gelu_forward(be, x, y, 64), 0);
    ck_assert_int_eq(be->ops->gelu_backward(be, x, dy, dx, 64), 0);
    for (size_t i = 0; i < 64; i++) {
        const double e = 1e-6, fd = (gelu_ref(x[i] + e) - gelu_ref(x[i] - e)) / (2 * e);
        near(y[i], gelu_ref(x[i]), 1e-6, 1e-6, "gelu y", i);
        near(dx[i], dy[i] * fd, 1e-6, 1e-5, "gelu dx", i);
    }
    /* in place, as the backend allows */
    ck_assert_int_eq(be->ops->gelu_forward(be, x, x, 64), 0);
    ck_assert_mem_eq(x, y, sizeof(y));
    hp_backend_destroy(be);
}
END_TEST

START_TEST(layernorm_op)
{
    enum { R = N * T };
    struct hp_backend *be;
    float x[R * D], g[D], b[D], y[R * D], mean[R], rstd[R], dy[R * D], dx[R * D], dg[D], db[D];
    double xd[R * D], gd[D], bd[D], yd[R * D], yp[R * D], ym[R * D];

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    fill(x, R * D, 3, 2.0f);
    fill(g, D, 4, 1.0f);
    fill(b, D, 5, 1.0f);
    fill(dy, R * D, 6, 1.0f);
    ck_assert_int_eq(be->ops->layernorm_forward(be, x, g, b, y, mean, rstd, R, D, 1e-5f), 0);
    ck_assert_int_eq(be->ops->layernorm_backward(be, x, dy, g, mean, rstd, dx, dg, db, R, D), 0);
    to_double(x, xd, R * D);
    to_double(g, gd, D);
    to_double(b, bd, D);
    layernorm_ref(xd, gd, bd, yd, R, D);
    for (size_t i = 0; i < R * D; i++)
        near(y[i], yd[i], 1e-5, 1e-5, "layernorm y", i);
    /* every input and parameter against central differences of the double reference */
    double *vars[3] = {xd, gd, bd};
    const size_t nv[3] = {R * D, D, D};
    const float *grads[3] = {dx, dg, db};
    for (int v = 0; v < 3; v++)
        for (size_t i = 0; i < nv[v]; i++) {
            const double e = 1e-6, keep = vars[v][i];
            vars[v][i] = keep + e;
            layernorm_ref(xd, gd, bd, yp, R, D);
            vars[v][i] = keep - e;
            layernorm_ref(xd, gd, bd, ym, R, D);
            vars[v][i] = keep;
            const double fd = (proj(yp, dy, R * D) - proj(ym, dy, R * D)) / (2 * e);
            near(grads[v][i], fd, 1e-4, 1e-4, v == 0 ? "layernorm dx" : "layernorm dgamma/dbeta",
                 i);
        }
    /* dx is optional: the parameter gradients alone */
    float dg2[D], db2[D];
    ck_assert_int_eq(be->ops->layernorm_backward(be, x, dy, g, mean, rstd, NULL, dg2, db2, R, D),
                     0);
    ck_assert_mem_eq(dg, dg2, sizeof(dg));
    ck_assert_mem_eq(db, db2, sizeof(db));
    hp_backend_destroy(be);
}
END_TEST

START_TEST(attention_op)
{
    enum { X = N * T * 3 * D, Y = N * T * D };
    struct hp_backend *be;
    const struct hp_attn_desc a = {N, T, D, H};
    float qkv[X], y[Y], probs[N * H * T * T], dy[Y], dqkv[X], ws[T * T];
    double xd[X], yd[Y], yp[Y], ym[Y];

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    fill(qkv, X, 7, 2.0f);
    fill(dy, Y, 8, 1.0f);
    ck_assert_int_eq(be->ops->attention_forward(be, &a, qkv, y, probs), 0);
    ck_assert_int_eq(be->ops->attention_backward(be, &a, qkv, probs, dy, dqkv, ws), 0);
    to_double(qkv, xd, X);
    attention_ref(xd, yd, N, T, D, H);
    for (size_t i = 0; i < Y; i++)
        near(y[i], yd[i], 1e-5, 1e-5, "attention y", i);
    /* causal: nothing above the diagonal; every row sums to 1 */
    for (int r = 0; r < N * H * T; r++) {
        double s = 0.0;
        for (int j = 0; j < T; j++) {
            s += probs[r * T + j];
            if (j > r % T)
                ck_assert_float_eq(probs[r * T + j], 0.0f);
        }
        near(s, 1.0, 1e-6, 0.0, "attention row sum", (size_t)r);
    }
    for (size_t i = 0; i < X; i++) {
        const double e = 1e-6, keep = xd[i];
        xd[i] = keep + e;
        attention_ref(xd, yp, N, T, D, H);
        xd[i] = keep - e;
        attention_ref(xd, ym, N, T, D, H);
        xd[i] = keep;
        near(dqkv[i], (proj(yp, dy, Y) - proj(ym, dy, Y)) / (2 * e), 1e-4, 1e-4, "attention dqkv",
             i);
    }
    /* the future does not leak: changing the last position's keys and values leaves every
     * earlier output as it was */
    float y2[Y];
    for (int b = 0; b < N; b++)
        for (int j = D; j < 3 * D; j++)
            qkv[((size_t)b * T + T - 1) * 3 * D + j] += 1.0f;
    ck_assert_int_eq(be->ops->attention_forward(be, &a, qkv, y2, probs), 0);
    for (int b = 0; b < N; b++)
        ck_assert_mem_eq(y2 + b * T * D, y + b * T * D, (T - 1) * D * sizeof(float));
    hp_backend_destroy(be);
}
END_TEST

START_TEST(embed_op)
{
    struct hp_backend *be;
    float ids[N * T], wte[V * D], wpe[T * D], y[N * T * D], dy[N * T * D], dwte[V * D], dwpe[T * D];

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    for (int i = 0; i < N * T; i++)
        ids[i] = (float)((i * 3) % V); /* token 0 repeats: the scatter-add adds */
    fill(wte, V * D, 9, 1.0f);
    fill(wpe, T * D, 10, 1.0f);
    fill(dy, N * T * D, 11, 1.0f);
    ck_assert_int_eq(be->ops->embed_forward(be, ids, wte, wpe, y, N, T, D, V), 0);
    ck_assert_int_eq(be->ops->embed_backward(be, ids, dy, dwte, dwpe, N, T, D, V), 0);
    for (int r = 0; r < N * T; r++)
        for (int j = 0; j < D; j++)
            ck_assert_float_eq(y[r * D + j], wte[(int)ids[r] * D + j] + wpe[(r % T) * D + j]);
    /* the loss sum dy . y is linear in the tables: its gradient, by the definition, is the
     * sum of dy over the rows that read each entry */
    for (int k = 0; k < V * D; k++) {
        double s = 0.0;
        for (int r = 0; r < N * T; r++)
            s += (int)ids[r] == k / D ? dy[r * D + k % D] : 0.0;
        near(dwte[k], s, 1e-6, 1e-6, "embed dwte", (size_t)k);
    }
    for (int k = 0; k < T * D; k++)
        near(dwpe[k], (double)dy[k / D * D + k % D] + dy[(T + k / D) * D + k % D], 1e-6, 1e-6,
             "embed dwpe", (size_t)k);
    /* token ids out of range or not integers are refused */
    const float bad[3] = {-1.0f, (float)V, 1.5f};
    for (int k = 0; k < 3; k++) {
        ids[3] = bad[k];
        test_capture_begin();
        ck_assert_int_eq(be->ops->embed_forward(be, ids, wte, wpe, y, N, T, D, V), -HP_EINVAL);
        ck_assert_ptr_nonnull(strstr(test_capture_end(), "token id"));
    }
    hp_backend_destroy(be);
}
END_TEST

/* ---- nets of GPT units ---------------------------------------------------------------------- */

/* A micro GPT: T = 5, width 8, 2 heads, vocabulary 11, 2 blocks, dropout, a tied head. */
static const char micro[] = "[model]\ndataset = text\ninput = 5x1x1\nclasses = 11\n"
                            "[embed]\ntype = embed\nwidth = 8\ndropout = 0.1\n"
                            "[block]\ntype = block\nheads = 2\nrepeat = 2\ndropout = 0.2\n"
                            "[head]\ntype = head\ntie = true\n";

static struct hp_model *load_text(const char *text)
{
    struct hp_model *m = NULL;
    ck_assert_int_eq(hp_model_load(test_write_file("gpt.ini", text), &m), 0);
    return m;
}

/* Loss (mean over tokens) of the net on its slot 0 input and labels, the same step seed. */
static double net_loss(struct hp_net *net, const int32_t *labels, int batch, int grad)
{
    double sum = 0.0;
    int correct = 0;

    ck_assert_int_eq(hp_net_forward(net, 0, 1, 77), 0);
    ck_assert_int_eq(hp_net_loss_tokens(net, 0, labels, batch, grad, &sum, &correct), 0);
    return sum / (batch * T);
}

/* Every parameter gradient of the micro GPT (and the input gradient of a net starting at a
 * block) against central differences of the loss, in float, dropout masks fixed by the step
 * seed: eps 1e-2 on parameters of size about 0.3, tolerance 1e-4 + 0.5% (the loss, summed in
 * double from float logits, is good to about 1e-7). */
static void check_net_grads(struct hp_model *m, int u0, int recompute)
{
    enum { B = 3 };
    struct hp_backend *be;
    struct hp_net *net;
    const struct hp_net_config cfg = {B, 1, u0 > 0, recompute, HP_OPTIMIZER_SGD};
    int32_t labels[B * T];

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(hp_net_create(be, m, u0, m->nunits, &cfg, &net), 0);
    ck_assert_int_eq(hp_net_init_params(net, 5), 0);
    const size_t np = hp_net_nparams(net), nin = (size_t)B * hp_shape_size(m->units[u0].in);
    float *p = hp_net_params(net), *in = hp_net_input(net, 0);
    fill(p, np, 12, 0.3f); /* larger than the init: gradients well above the noise */
    for (size_t i = 0; i < nin; i++)
        in[i] = u0 == 0 ? (float)(hp_rng_u64(13, i) % 11) : (2.0f * hp_rng_uniform(13, i) - 1.0f);
    for (int i = 0; i < B * T; i++)
        labels[i] = (int32_t)(hp_rng_u64(14, (uint64_t)i) % 11);
    float *x = malloc(nin * sizeof(float)), *g = malloc(np * sizeof(float)),
          *gin = malloc(nin * sizeof(float));
    memcpy(x, in, nin * sizeof(float));
    net_loss(net, labels, B, 1);
    ck_assert_int_eq(hp_net_backward(net, 0), 0);
    memcpy(g, hp_net_grads(net), np * sizeof(float));
    if (u0 > 0)
        memcpy(gin, hp_net_input_grad(net), nin * sizeof(float));
    size_t big = 0;
    for (size_t i = 0; i < np; i++)
        big += fabsf(g[i]) > 1e-3f;
    /* many gradients well above the tolerance, else the check says little */
    ck_assert_msg(big > np / 4, "%zu of %zu gradients above 1e-3", big, np);
    for (size_t i = 0; i < np; i++) {
        const float keep = p[i], e = 1e-2f;
        memcpy(in, x, nin * sizeof(float)); /* backward may have used the slot */
        p[i] = keep + e;
        const double lp = net_loss(net, labels, B, 0);
        p[i] = keep - e;
        const double lm = net_loss(net, labels, B, 0);
        p[i] = keep;
        near(g[i], (lp - lm) / (2.0 * e), 1e-4, 5e-3, "micro GPT parameter gradient", i);
    }
    for (size_t i = 0; u0 > 0 && i < nin; i++) {
        const float e = 1e-2f;
        memcpy(in, x, nin * sizeof(float));
        in[i] = x[i] + e;
        const double lp = net_loss(net, labels, B, 0);
        in[i] = x[i] - e;
        const double lm = net_loss(net, labels, B, 0);
        near(gin[i], (lp - lm) / (2.0 * e), 1e-4, 5e-3, "micro GPT input gradient", i);
    }
    free(x);
    free(g);
    free(gin);
    hp_net_destroy(net);
    hp_backend_destroy(be);
}

START_TEST(net_finite_differences)
{
    struct hp_model *m = load_text(micro);

    check_net_grads(m, 0, 0);
    check_net_grads(m, 1, 0);
    hp_model_destroy(m);
}
END_TEST

/* Gradients of a recomputing net are those of a net without, bit for bit; evaluation skips
 * dropout; a tied head starts equal to the embedding's token matrix. */
START_TEST(net_recompute_and_tie)
{
    enum { B = 2 };
    struct hp_model *m = load_text(micro);
    struct hp_backend *be;
    struct hp_net *net[2];
    int32_t labels[B * T];
    float *g0 = NULL;

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    for (int i = 0; i < B * T; i++)
        labels[i] = i % 11;
    for (int rc = 0; rc < 2; rc++) {
        const struct hp_net_config cfg = {B, 2, 0, rc, HP_OPTIMIZER_SGD};
        ck_assert_int_eq(hp_net_create(be, m, 0, m->nunits, &cfg, &net[rc]), 0);
        ck_assert_int_eq(hp_net_init_params(net[rc], 9), 0);
        float *in = hp_net_input(net[rc], 1);
        for (int i = 0; i < B * T; i++)
            in[i] = (float)((i * 7) % 11);
        double sum;
        int correct;
        ck_assert_int_eq(hp_net_forward(net[rc], 1, 1, 3), 0);
        ck_assert_int_eq(hp_net_loss_tokens(net[rc], 1, labels, B, 1, &sum, &correct), 0);
        ck_assert_int_eq(hp_net_backward(net[rc], 1), 0);
        if (!rc) {
            g0 = malloc(hp_net_nparams(net[0]) * sizeof(float));
            memcpy(g0, hp_net_grads(net[0]), hp_net_nparams(net[0]) * sizeof(float));
        }
    }
    ck_assert_mem_eq(g0, hp_net_grads(net[1]), hp_net_nparams(net[1]) * sizeof(float));
    /* the head's weights: its last 11 x 8 floats; the token matrix: the first */
    const float *p = hp_net_params(net[0]);
    ck_assert_mem_eq(p, p + hp_net_nparams(net[0]) - 11 * 8, 11 * 8 * sizeof(float));
    ck_assert_int_eq(m->ntied, 11 * 8);
    free(g0);
    hp_net_destroy(net[0]);
    hp_net_destroy(net[1]);
    hp_model_destroy(m);
    hp_backend_destroy(be);
}
END_TEST

/* gpt-tiny's gradients with recomputation (hetpipe's --recompute always) are those without,
 * bit for bit, at every split tried: the whole model (forward, the token loss, backward), a
 * first stage (embed and blocks), a middle stage of blocks and a last one (block and head),
 * the stages after the first with their input gradient; slot 1 of 2 slots, so that the kept
 * outputs and the work area are indexed by slot. A block is one unit of 12 ops: its
 * recomputed forward makes its attention probabilities and layer norm saves again. The
 * recomputing net keeps fewer bytes of activations, else nothing was recomputed. */
START_TEST(tiny_recompute_bit_for_bit)
{
    enum { B = 2, TT = 64, W = 128 };
    static const int splits[][2] = {{0, 6}, {0, 3}, {2, 5}, {4, 6}};
    struct hp_model *m = NULL;
    struct hp_backend *be;
    int32_t labels[B * TT];

    ck_assert_int_eq(hp_model_load("gpt-tiny", &m), 0);
    ck_assert_int_eq(m->nunits, 6);
    ck_assert_int_eq(hp_model_positions(m), TT);
    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    for (int i = 0; i < B * TT; i++)
        labels[i] = (int32_t)(hp_rng_u64(21, (uint64_t)i) % 256);
    for (size_t k = 0; k < sizeof(splits) / sizeof(splits[0]); k++) {
        const int u0 = splits[k][0], u1 = splits[k][1];
        float *grads[2] = {NULL, NULL}, *gin[2] = {NULL, NULL};
        size_t acts[2];
        size_t np = 0, nin = (size_t)B * hp_shape_size(m->units[u0].in);
        for (int rc = 0; rc < 2; rc++) {
            const struct hp_net_config cfg = {B, 2, u0 > 0, rc, HP_OPTIMIZER_ADAMW};
            struct hp_net *net;
            struct hp_net_memory mem;
            ck_assert_int_eq(hp_net_create(be, m, u0, u1, &cfg, &net), 0);
            ck_assert_int_eq(hp_net_init_params(net, 4), 0);
            hp_net_memory(net, &mem);
            acts[rc] = mem.activations;
            np = hp_net_nparams(net);
            float *in = hp_net_input(net, 1);
            for (size_t i = 0; i < nin; i++)
                in[i] = u0 == 0 ? (float)(hp_rng_u64(22, i) % 256)
                                : (2.0f * hp_rng_uniform(22, i) - 1.0f);
            ck_assert_int_eq(hp_net_forward(net, 1, 1, 8), 0);
            if (u1 == m->nunits) {
                double sum;
                int correct;
                ck_assert_int_eq(hp_net_loss_tokens(net, 1, labels, B, 1, &sum, &correct), 0);
                ck_assert(sum > 0.0);
            } else {
                float *dy = hp_net_output_grad(net);
                for (size_t i = 0; i < (size_t)B * TT * W; i++)
                    dy[i] = 1e-3f * (2.0f * hp_rng_uniform(23, i) - 1.0f);
            }
            ck_assert_int_eq(hp_net_backward(net, 1), 0);
            grads[rc] = malloc(np * sizeof(float));
            memcpy(grads[rc], hp_net_grads(net), np * sizeof(float));
            if (u0 > 0) {
                gin[rc] = malloc(nin * sizeof(float));
                memcpy(gin[rc], hp_net_input_grad(net), nin * sizeof(float));
            }
            hp_net_destroy(net);
        }
        size_t nonzero = 0;
        for (size_t i = 0; i < np; i++)
            nonzero += grads[0][i] != 0.0f;
        ck_assert_msg(nonzero > np / 2, "[%d, %d): %zu of %zu gradients nonzero", u0, u1, nonzero,
                      np);
        ck_assert_msg(memcmp(grads[0], grads[1], np * sizeof(float)) == 0,
                      "[%d, %d): gradients differ with recomputation", u0, u1);
        if (u0 > 0)
            ck_assert_mem_eq(gin[0], gin[1], nin * sizeof(float));
        ck_assert_msg(acts[1] < acts[0],
                      "[%d, %d): activations %zu with recomputation, %zu without", u0, u1, acts[1],
                      acts[0]);
        for (int rc = 0; rc < 2; rc++) {
            free(grads[rc]);
            free(gin[rc]);
        }
    }
    hp_model_destroy(m);
    hp_backend_destroy(be);
}
END_TEST

/* The per-position loss against the formula; refusals of bad labels. */
START_TEST(token_loss)
{
    enum { B = 2 };
    struct hp_model *m = load_text(micro);
    struct hp_backend *be;
    struct hp_net *net;
    const struct hp_net_config cfg = {B, 1, 0, 0, HP_OPTIMIZER_SGD};
    int32_t labels[B * T];
    double sum, ref = 0.0;
    int correct, ok = 0;

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(hp_net_create(be, m, 0, m->nunits, &cfg, &net), 0);
    ck_assert_int_eq(hp_net_init_params(net, 1), 0);
    fill(hp_net_params(net), hp_net_nparams(net), 2, 0.5f);
    for (int i = 0; i < B * T; i++) {
        hp_net_input(net, 0)[i] = (float)(i % 11);
        labels[i] = (i * 5) % 11;
    }
    ck_assert_int_eq(hp_net_forward(net, 0, 0, 0), 0);
    const float *z = hp_net_output(net, 0);
    for (int r = 0; r < B * T; r++) {
        double s = 0.0;
        int arg = 0;
        for (int k = 0; k < 11; k++) {
            s += exp((double)z[r * 11 + k]);
            arg = z[r * 11 + k] > z[r * 11 + arg] ? k : arg;
        }
        ref += log(s) - z[r * 11 + labels[r]];
        ok += arg == labels[r];
    }
    ck_assert_int_eq(hp_net_loss_tokens(net, 0, labels, B, 1, &sum, &correct), 0);
    near(sum, ref, 1e-5, 1e-6, "token loss", 0);
    ck_assert_int_eq(correct, ok);
    /* the gradient: (softmax - onehot) / (B T), each row summing to 0 */
    for (int r = 0; r < B * T; r++) {
        double s = 0.0;
        for (int k = 0; k < 11; k++)
            s += hp_net_output_grad(net)[r * 11 + k];
        near(s, 0.0, 1e-6, 0.0, "token loss gradient row sum", (size_t)r);
    }
    labels[7] = 11;
    test_capture_begin();
    ck_assert_int_eq(hp_net_loss_tokens(net, 0, labels, B, 1, &sum, &correct), -HP_EINVAL);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "sample 1, position 2"));
    hp_net_destroy(net);
    hp_model_destroy(m);
    hp_backend_destroy(be);
}
END_TEST

/* ---- the planner -------------------------------------------------------------------------- */

/* GPT-2 (124 M) at a context of 16 (with dropout): its units' shapes but for T. */
static const char gpt2_short[] = "[model]\ndataset = text\ninput = 16x1x1\nclasses = 50257\n"
                                 "[embed]\ntype = embed\nwidth = 768\ndropout = 0.1\n"
                                 "[block]\ntype = block\nheads = 12\nrepeat = 12\n"
                                 "dropout = 0.1\n[head]\ntype = head\ntie = true\n";

/* The planner's memory of a net is the runtime's allocation to the byte: every unit range (so
 * every stage of every split) of gpt-tiny, of the micro GPT (dropout: masks) and of GPT-2 at
 * a short context, batches 1, 3 and 8, slots and input gradients varied, each with and
 * without recomputation, under SGD and AdamW (its second moment); real nets of the two small
 * models for batch <= 3 (GPT-2's would take gigabytes). */
START_TEST(memory_matches_runtime)
{
    static const int batches[] = {1, 3, 8};
    struct hp_gpu_type type = {.tflops = 10.0, .bandwidth_gbs = 500.0, .memory_gib = 16.0};
    struct hp_gpudb db = {.types = &type, .ntypes = 1, .efficiency = 0.5};
    struct hp_backend *be;
    long checked = 0, real_nets = 0;

    snprintf(type.name, sizeof(type.name), "x");
    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    for (int mi = 0; mi < 3; mi++) {
        struct hp_model *m = NULL;
        if (mi == 0)
            ck_assert_int_eq(hp_model_load("gpt-tiny", &m), 0);
        else
            m = load_text(mi == 1 ? micro : gpt2_short);
        for (size_t bi = 0; bi < sizeof(batches) / sizeof(batches[0]); bi++) {
            struct hp_cost c;
            ck_assert_int_eq(hp_cost_init(&c, m, &db, batches[bi]), 0);
            for (int u0 = 0; u0 < m->nunits; u0++)
                for (int u1 = u0 + 1; u1 <= m->nunits; u1++)
                    for (int k = 0; k < 4; k++) {
                        const int nslots = 1 + (u0 + u1) % 3, ig = (u0 * 7 + u1) % 2, rc = k % 2;
                        const int opt = k < 2 ? HP_OPTIMIZER_SGD : HP_OPTIMIZER_ADAMW;
                        const struct hp_net_config cfg = {batches[bi], nslots, ig, rc, opt};
                        struct hp_net_memory mem, real;
                        struct hp_net *net;
                        ck_assert_int_eq(hp_net_plan_memory(be, m, u0, u1, &cfg, &mem), 0);
                        c.optimizer = opt;
                        const double want = hp_cost_net_memory(&c, u0, u1, nslots, ig, rc);
                        ck_assert_msg((double)mem.total == want,
                                      "%s [%d, %d) batch %d recompute %d optimizer %d: runtime "
                                      "%zu, planner %.0f",
                                      m->name, u0, u1, batches[bi], rc, opt, mem.total, want);
                        ck_assert_uint_eq(mem.moment2, opt == HP_OPTIMIZER_ADAMW ? mem.params : 0);
                        if (batches[bi] <= 3 && mi < 2) {
                            ck_assert_int_eq(hp_net_create(be, m, u0, u1, &cfg, &net), 0);
                            hp_net_memory(net, &real);
                            ck_assert_int_eq(real.total, mem.total);
                            hp_net_destroy(net);
                            real_nets++;
                        }
                        checked++;
                    }
            hp_cost_release(&c);
        }
        hp_model_destroy(m);
    }
    ck_assert_int_eq(checked, 3 * 4 * (21 + 10 + 105)); /* 6, 4 and 14 units */
    ck_assert_int_eq(real_nets, 2 * 4 * (21 + 10));
    hp_backend_destroy(be);
}
END_TEST

/* GPT-2's sizes: 124,439,808 parameters (+ the tied copy, 50257 x 768), and the FLOPs of a
 * block: 12 T d^2 MACs of the four linear layers and 2 T^2 d of attention; the T x T
 * probabilities kept per head; the head's projection and loss; the embedding's gather. */
START_TEST(gpt2_sizes)
{
    static const char *const names[] = {"gpt2", "gpt2-medium", "gpt2-xl"};
    static const int width[] = {768, 1024, 1600}, heads[] = {12, 16, 25}, blocks[] = {12, 24, 48};
    static const size_t distinct[] = {124439808, 354823168, 1557611200};

    for (int i = 0; i < 3; i++) {
        struct hp_model *m = NULL;
        const double t = 1024, d = width[i];
        ck_assert_int_eq(hp_model_load(names[i], &m), 0);
        ck_assert_int_eq(m->nunits, blocks[i] + 2);
        ck_assert_int_eq(m->positions, 1024);
        ck_assert_int_eq(m->ntied, (size_t)50257 * width[i]);
        ck_assert_int_eq(m->nparams - m->ntied, distinct[i]);
        const struct hp_unit *b = &m->units[1];
        ck_assert_str_eq(b->kind, "block");
        const double macs = 12.0 * t * d * d + 2.0 * t * t * d, probs = heads[i] * t * t;
        ck_assert_double_eq(b->cost.fwd_macs, macs);
        /* + biases (3d + d + 4d + d per position), 2 layer norms (8 each), softmax (5 per
         * probability), GELU (8 on 4d), 2 adds */
        ck_assert_double_eq(b->cost.fwd_flops, 2.0 * macs + 9.0 * t * d + 16.0 * t * d +
                                                   5.0 * probs + 32.0 * t * d + 2.0 * t * d);
        ck_assert_double_eq(b->cost.bwd_flops, 4.0 * macs + 9.0 * t * d + 22.0 * t * d +
                                                   5.0 * probs + 56.0 * t * d + 2.0 * t * d);
        ck_assert_uint_eq(b->cost.workspace_bytes, 1024 * 1024 * sizeof(float));
        ck_assert_uint_ge(b->cost.saved_bytes, (size_t)heads[i] * 1024 * 1024 * sizeof(float));
        const struct hp_unit *e = &m->units[0], *h = &m->units[m->nunits - 1];
        const double v = 50257;
        ck_assert_double_eq(h->cost.fwd_macs, t * d * v);
        /* the head: ln_f (8 and 11 per value), the projection, and the loss in its backward
         * (8 per logit) */
        ck_assert_double_eq(h->cost.fwd_flops, 8.0 * t * d + 2.0 * t * d * v);
        ck_assert_double_eq(h->cost.bwd_flops, 11.0 * t * d + 4.0 * t * d * v + 8.0 * t * v);
        /* the embedding's traffic: the ids, its output and the 2 T rows gathered, never its
         * vocab x d matrix; backward twice that */
        ck_assert_double_eq(e->cost.fwd_bytes, 4.0 * (t + 3.0 * t * d));
        ck_assert_double_eq(e->cost.bwd_bytes, 8.0 * (t + 3.0 * t * d));
        ck_assert_double_eq(e->cost.param_bytes, 4.0 * (v + t) * d);
        hp_model_destroy(m);
    }
}
END_TEST

/* ---- the loader --------------------------------------------------------------------------- */

struct bad {
    const char *text;
    const char *expect[2];
};

#define TEXT "[model]\ndataset = text\ninput = 8x1x1\nclasses = 16\n"
#define EMB "[e]\ntype = embed\nwidth = 8\n"
#define HD "[h]\ntype = head\n"

static const struct bad bad_models[] = {
    {"[model]\ninput = 8x1x1\nclasses = 16\n" EMB HD, {"[e]", "needs [model] dataset = text"}},
    {"[model]\ndataset = text\ninput = 1x1x8\nclasses = 16\n" EMB HD, {"key 'input'", "Tx1x1"}},
    {TEXT "[b]\ntype = block\nheads = 2\n" HD, {"[b]", "a text model starts with an embed"}},
    {TEXT EMB "[e2]\ntype = embed\nwidth = 8\n" HD, {"[e2]", "embed must be the first unit"}},
    {TEXT "[e]\ntype = embed\nwidth = 8\nrepeat = 2\n" HD, {"key 'repeat'", "repeat = 1"}},
    {TEXT EMB "[b]\ntype = block\nheads = 3\n" HD, {"[b]", "multiple of its heads (3)"}},
    {TEXT EMB "[b]\ntype = block\nheads = 2\nfilters = 8\n" HD, {"[b]", "unknown key 'filters'"}},
    {TEXT EMB "[b]\ntype = block\n" HD, {"[b]", "'heads'"}},
    {TEXT EMB "[b]\ntype = block\nheads = 2\ndropout = 1\n" HD, {"key 'dropout'", "range"}},
    {TEXT EMB "[b]\ntype = block\nheads = 2\n", {"ends with a head unit", "'b'"}},
    {TEXT EMB "[f]\ntype = linear\noutputs = 16\n", {"[f]", "not a unit of a text model"}},
    {TEXT EMB "[h]\ntype = head\ntie = maybe\n", {"[h]", "'tie'"}},
    {TEXT "[e]\ntype = embed\n" HD, {"[e]", "'width'"}},
    {"[model]\ndataset = text\ninput = 9000x1x1\nclasses = 16\n" EMB HD, {"T <= 8192", "'e'"}},
};

START_TEST(bad_model_files)
{
    const struct bad *b = &bad_models[_i];
    struct hp_model *m = NULL;
    const char *path = test_write_file("badgpt.ini", b->text), *err;

    test_capture_begin();
    ck_assert_int_eq(hp_model_load(path, &m), -HP_EMODEL);
    err = test_capture_end();
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err, "badgpt.ini") != NULL, "case %d: no file name in: %s", _i, err);
    for (int k = 0; k < 2 && b->expect[k]; k++)
        ck_assert_msg(strstr(err, b->expect[k]) != NULL, "case %d: '%s' not in: %s", _i,
                      b->expect[k], err);
}
END_TEST

Suite *suite_gpt(void)
{
    Suite *s = suite_create("gpt");
    TCase *t = tcase_create("gpt");

    tcase_set_timeout(t, 120);
    tcase_add_test(t, gelu_op);
    tcase_add_test(t, layernorm_op);
    tcase_add_test(t, attention_op);
    tcase_add_test(t, embed_op);
    tcase_add_test(t, net_finite_differences);
    tcase_add_test(t, net_recompute_and_tie);
    tcase_add_test(t, tiny_recompute_bit_for_bit);
    tcase_add_test(t, token_loss);
    tcase_add_test(t, memory_matches_runtime);
    tcase_add_test(t, gpt2_sizes);
    tcase_add_loop_test(t, bad_model_files, 0, (int)(sizeof(bad_models) / sizeof(bad_models[0])));
    suite_add_tcase(s, t);
    return s;
}
