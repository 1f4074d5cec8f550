/* test_layers.c - every layer's backward pass against central finite differences (CPU).
 *
 * For a net made of one unit (or a few), the loss is L = sum(out * R) for a fixed random R,
 * so dL/dout = R. The analytic gradients of the input and of every parameter are compared
 * with (L(x + e) - L(x - e)) / 2e at up to 40 coordinates per tensor, e = 1e-2 (float32
 * forward passes; L is accumulated in double). Tolerance per coordinate:
 * |analytic - numeric| <= 5e-3 + 2e-2 |numeric|. Inputs are drawn so that no two values of a
 * pooling window are within 4e so that no max changes within a step; ReLU inputs near 0
 * could still cross a kink, so each ReLU-bearing check also passes a directional-derivative
 * check over all coordinates at once.
 */
#include "suites.h"

#include "backend.h"
#include "error.h"
#include "layers.h"
#include "model.h"
#include "net.h"
#include "rng.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EPS 1e-3
#define ATOL 5e-3
#define RTOL 2e-2
#define BATCH 3

enum unit_kind {
    K_CONV,
    K_LINEAR,
    K_MAXPOOL,
    K_AVGPOOL,
    K_GAP,
    K_BN,
    K_RELU,
    K_FLATTEN,
    K_DROPOUT,
    K_BASIC,
    K_BOTTLENECK
};

struct spec {
    enum unit_kind kind;
    int filters, kernel, stride, pad, bias, bn, relu;
    float p;
};

/* A model with the given units, built in memory (no INI file). */
static struct hp_model *make_model(struct hp_shape in, const struct spec *specs, int n)
{
    struct hp_model *m = calloc(1, sizeof(*m));
    struct hp_shape cur = in;

    ck_assert_ptr_nonnull(m);
    m->units = calloc((size_t)n, sizeof(*m->units));
    m->input = in;
    m->nunits = n;
    snprintf(m->name, sizeof(m->name), "test");
    for (int i = 0; i < n; i++) {
        const struct spec *s = &specs[i];
        struct hp_unit *u = &m->units[i];
        struct hp_op op = {0};
        char name[16];
        int rc;

        snprintf(name, sizeof(name), "u%d", i);
        hp_unit_init(u, name, "test", cur);
        switch (s->kind) {
        case K_CONV:
            rc = hp_unit_build_conv(u, s->filters, s->kernel, s->stride, s->pad, s->bias, s->bn,
                                    s->relu);
            break;
        case K_LINEAR:
            rc = hp_unit_build_linear(u, s->filters, s->bias, s->relu);
            break;
        case K_BASIC:
            rc = hp_unit_build_basic(u, s->filters, s->stride);
            break;
        case K_BOTTLENECK:
            rc = hp_unit_build_bottleneck(u, s->filters, s->stride);
            break;
        default:
            op.type = s->kind == K_MAXPOOL   ? HP_OP_MAXPOOL
                      : s->kind == K_AVGPOOL ? HP_OP_AVGPOOL
                      : s->kind == K_GAP     ? HP_OP_AVGPOOL
                      : s->kind == K_BN      ? HP_OP_BN
                      : s->kind == K_RELU    ? HP_OP_RELU
                      : s->kind == K_FLATTEN ? HP_OP_FLATTEN
                                             : HP_OP_DROPOUT;
            op.kernel = s->kind == K_GAP ? 0 : s->kernel;
            op.stride = s->stride ? s->stride : 1;
            op.pad = s->pad;
            op.p = s->p;
            rc = hp_unit_add_op(u, &op, 0, -1);
            rc = rc < 0 ? rc : hp_unit_finish(u);
            break;
        }
        ck_assert_int_eq(rc, 0);
        cur = u->out;
        m->nparams += u->nparams;
        m->nstate += u->nstate;
    }
    m->classes = (int)hp_shape_size(cur);
    return m;
}

struct fixture {
    struct hp_backend *be;
    struct hp_model *m;
    struct hp_net *net;
    size_t nin, nout, np;
    float *x, *r, *params;
};

static double loss_at(struct fixture *f)
{
    float *out = malloc(f->nout * sizeof(float));
    double l = 0.0;

    ck_assert_int_eq(f->be->ops->upload(f->be, hp_net_input(f->net, 0), f->x, f->nin * 4), 0);
    ck_assert_int_eq(f->be->ops->upload(f->be, hp_net_params(f->net), f->params, f->np * 4), 0);
    /* train mode with a fixed step seed: batch statistics, the same dropout mask each time */
    ck_assert_int_eq(hp_net_forward(f->net, 0, 1, 42), 0);
    ck_assert_int_eq(f->be->ops->download(f->be, out, hp_net_output(f->net, 0), f->nout * 4), 0);
    for (size_t i = 0; i < f->nout; i++)
        l += (double)out[i] * f->r[i];
    free(out);
    return l;
}

/* Values for the input: a shuffled grid, so no two values are closer than 4 / n (for the
 * small tensors here, well above the finite-difference step). */
static void fill_input(float *x, size_t n, uint64_t seed)
{
    /* distinct values on a grid over [-2, 2], shuffled */
    for (size_t i = 0; i < n; i++)
        x[i] = -2.0f + 4.0f * ((float)i + 0.5f) / (float)n;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = hp_rng_u64(seed, i) % (i + 1);
        float t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}

static int check_vector(const char *what, const float *analytic, float *values, size_t n,
                        struct fixture *f)
{
    int bad = 0, checks = n < 40 ? (int)n : 40;

    for (int k = 0; k < checks; k++) {
        const size_t i = n <= 40 ? (size_t)k : hp_rng_u64(99, (uint64_t)k) % n;
        const float keep = values[i];
        values[i] = keep + (float)EPS;
        const double lp = loss_at(f);
        values[i] = keep - (float)EPS;
        const double lm = loss_at(f);
        values[i] = keep;
        const double num = (lp - lm) / (2.0 * EPS);
        const double err = fabs((double)analytic[i] - num);
        if (err > ATOL + RTOL * fabs(num)) {
            if (bad < 5)
                fprintf(stderr, "gradcheck %s[%zu]: analytic %.6f numeric %.6f\n", what, i,
                        (double)analytic[i], num);
            bad++;
        }
    }
    return bad;
}

/* Directional derivative over all coordinates of `values` at once. */
static int check_direction(const char *what, const float *analytic, float *values, size_t n,
                           struct fixture *f)
{
    float *keep = malloc(n * sizeof(float)), *v = malloc(n * sizeof(float));
    double dot = 0.0;
    const double e = 1e-4;

    memcpy(keep, values, n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        v[i] = 2.0f * hp_rng_uniform(1234, i) - 1.0f;
        dot += (double)analytic[i] * v[i];
    }
    for (size_t i = 0; i < n; i++)
        values[i] = keep[i] + (float)e * v[i];
    const double lp = loss_at(f);
    for (size_t i = 0; i < n; i++)
        values[i] = keep[i] - (float)e * v[i];
    const double lm = loss_at(f);
    memcpy(values, keep, n * sizeof(float));
    const double num = (lp - lm) / (2.0 * e);
    /* relative 3%, plus the float32 rounding of L amplified by 1 / 2e */
    const double tol = 3e-2 * fabs(num) + 20.0 * (fabs(lp) + fabs(lm)) * 6e-8 / (2.0 * e) + 1e-4;
    free(keep);
    free(v);
    if (fabs(num - dot) > tol) {
        fprintf(stderr, "gradcheck %s direction: analytic %.6f numeric %.6f (tolerance %.6f)\n",
                what, dot, num, tol);
        return 1;
    }
    return 0;
}

static void gradcheck(struct hp_shape in, const struct spec *specs, int n)
{
    struct fixture f = {0};
    struct hp_net_config cfg = {.batch = BATCH, .nslots = 1, .need_input_grad = 1};
    float *gx, *gp;
    int bad = 0;

    ck_assert_int_eq(hp_backend_cpu_create(&f.be), 0);
    f.m = make_model(in, specs, n);
    ck_assert_int_eq(hp_net_create(f.be, f.m, 0, f.m->nunits, &cfg, &f.net), 0);
    ck_assert_int_eq(hp_net_init_params(f.net, 7), 0);
    f.nin = (size_t)BATCH * hp_shape_size(in);
    f.nout = (size_t)BATCH * (size_t)f.m->classes;
    f.np = hp_net_nparams(f.net);
    f.x = malloc(f.nin * sizeof(float));
    f.r = malloc(f.nout * sizeof(float));
    f.params = malloc((f.np ? f.np : 1) * sizeof(float));
    gx = malloc(f.nin * sizeof(float));
    gp = malloc((f.np ? f.np : 1) * sizeof(float));
    fill_input(f.x, f.nin, 3);
    for (size_t i = 0; i < f.nout; i++)
        f.r[i] = 2.0f * hp_rng_uniform(5, i) - 1.0f;
    if (f.np)
        f.be->ops->download(f.be, f.params, hp_net_params(f.net), f.np * 4);
    /* Perturb batch norm gamma/beta and biases away from 1/0 so their gradients matter. */
    for (size_t i = 0; i < f.np; i++)
        f.params[i] += 0.1f * (2.0f * hp_rng_uniform(11, i) - 1.0f);

    /* analytic gradients */
    loss_at(&f);
    ck_assert_int_eq(f.be->ops->upload(f.be, hp_net_output_grad(f.net), f.r, f.nout * 4), 0);
    ck_assert_int_eq(hp_net_backward(f.net, 0), 0);
    f.be->ops->download(f.be, gx, hp_net_input_grad(f.net), f.nin * 4);
    if (f.np)
        f.be->ops->download(f.be, gp, hp_net_grads(f.net), f.np * 4);

    bad += check_vector("input", gx, f.x, f.nin, &f);
    bad += check_direction("input", gx, f.x, f.nin, &f);
    /* each op's parameters separately, so small tensors (biases, gamma) are all checked */
    size_t base = 0;
    for (int u = 0; u < f.m->nunits; u++) {
        for (int o = 0; o < f.m->units[u].nops; o++) {
            const struct hp_op *op = &f.m->units[u].ops[o];
            if (op->nparams) {
                char what[128];
                snprintf(what, sizeof(what), "%s.%s", f.m->units[u].name, hp_op_name(op->type));
                bad += check_vector(what, gp + base + op->param_off,
                                    f.params + base + op->param_off, op->nparams, &f);
                bad += check_direction(what, gp + base + op->param_off,
                                       f.params + base + op->param_off, op->nparams, &f);
            }
        }
        base += f.m->units[u].nparams;
    }
    ck_assert_msg(bad == 0, "%d gradient mismatches", bad);

    free(gx);
    free(gp);
    free(f.x);
    free(f.r);
    free(f.params);
    hp_net_destroy(f.net);
    hp_backend_destroy(f.be);
    hp_model_destroy(f.m);
}

#define SHAPE(c, h, w) ((struct hp_shape){c, h, w})

START_TEST(grad_conv_3x3_pad)
{
    const struct spec s[] = {
        {.kind = K_CONV, .filters = 4, .kernel = 3, .stride = 1, .pad = 1, .bias = 1}};
    gradcheck(SHAPE(2, 6, 6), s, 1);
}
END_TEST

START_TEST(grad_conv_stride2)
{
    const struct spec s[] = {
        {.kind = K_CONV, .filters = 3, .kernel = 3, .stride = 2, .pad = 1, .bias = 1}};
    gradcheck(SHAPE(2, 7, 7), s, 1);
}
END_TEST

START_TEST(grad_conv_1x1_nobias)
{
    const struct spec s[] = {{.kind = K_CONV, .filters = 5, .kernel = 1, .stride = 1}};
    gradcheck(SHAPE(3, 4, 4), s, 1);
}
END_TEST

START_TEST(grad_conv_7x7_stride2_pad3)
{
    const struct spec s[] = {
        {.kind = K_CONV, .filters = 2, .kernel = 7, .stride = 2, .pad = 3, .bias = 1}};
    gradcheck(SHAPE(1, 9, 9), s, 1);
}
END_TEST

START_TEST(grad_conv_bn_relu)
{
    const struct spec s[] = {
        {.kind = K_CONV, .filters = 3, .kernel = 3, .stride = 1, .pad = 1, .bn = 1, .relu = 1}};
    gradcheck(SHAPE(2, 5, 5), s, 1);
}
END_TEST

START_TEST(grad_linear)
{
    const struct spec s[] = {{.kind = K_LINEAR, .filters = 7, .bias = 1}};
    gradcheck(SHAPE(2, 3, 3), s, 1);
}
END_TEST

START_TEST(grad_linear_relu)
{
    const struct spec s[] = {{.kind = K_LINEAR, .filters = 6, .bias = 1, .relu = 1}};
    gradcheck(SHAPE(10, 1, 1), s, 1);
}
END_TEST

START_TEST(grad_relu)
{
    const struct spec s[] = {{.kind = K_RELU}};
    gradcheck(SHAPE(3, 4, 4), s, 1);
}
END_TEST

START_TEST(grad_maxpool)
{
    const struct spec s[] = {{.kind = K_MAXPOOL, .kernel = 2, .stride = 2}};
    gradcheck(SHAPE(2, 6, 6), s, 1);
}
END_TEST

START_TEST(grad_maxpool_3x3_s2_pad1)
{
    const struct spec s[] = {{.kind = K_MAXPOOL, .kernel = 3, .stride = 2, .pad = 1}};
    gradcheck(SHAPE(2, 7, 7), s, 1);
}
END_TEST

START_TEST(grad_avgpool)
{
    const struct spec s[] = {{.kind = K_AVGPOOL, .kernel = 3, .stride = 2, .pad = 1}};
    gradcheck(SHAPE(2, 6, 6), s, 1);
}
END_TEST

START_TEST(grad_gap)
{
    const struct spec s[] = {{.kind = K_GAP}};
    gradcheck(SHAPE(4, 5, 5), s, 1);
}
END_TEST

START_TEST(grad_batchnorm)
{
    const struct spec s[] = {{.kind = K_BN}};
    gradcheck(SHAPE(3, 4, 4), s, 1);
}
END_TEST

START_TEST(grad_flatten_linear)
{
    const struct spec s[] = {{.kind = K_FLATTEN}, {.kind = K_LINEAR, .filters = 4, .bias = 1}};
    gradcheck(SHAPE(2, 3, 3), s, 2);
}
END_TEST

START_TEST(grad_dropout)
{
    const struct spec s[] = {{.kind = K_DROPOUT, .p = 0.3f}};
    gradcheck(SHAPE(2, 4, 4), s, 1);
}
END_TEST

START_TEST(grad_basic_identity)
{
    const struct spec s[] = {{.kind = K_BASIC, .filters = 3, .stride = 1}};
    gradcheck(SHAPE(3, 5, 5), s, 1);
}
END_TEST

START_TEST(grad_basic_projection)
{
    const struct spec s[] = {{.kind = K_BASIC, .filters = 4, .stride = 2}};
    gradcheck(SHAPE(2, 6, 6), s, 1);
}
END_TEST

START_TEST(grad_bottleneck_projection)
{
    const struct spec s[] = {{.kind = K_BOTTLENECK, .filters = 2, .stride = 2}};
    gradcheck(SHAPE(3, 6, 6), s, 1);
}
END_TEST

START_TEST(grad_bottleneck_identity)
{
    const struct spec s[] = {{.kind = K_BOTTLENECK, .filters = 2, .stride = 1}};
    gradcheck(SHAPE(8, 4, 4), s, 1);
}
END_TEST

START_TEST(grad_small_cnn)
{
    /* a chain across units: conv-bn-relu, pool, residual block, gap, linear */
    const struct spec s[] = {
        {.kind = K_CONV, .filters = 4, .kernel = 3, .stride = 1, .pad = 1, .bn = 1, .relu = 1},
        {.kind = K_MAXPOOL, .kernel = 2, .stride = 2},
        {.kind = K_BASIC, .filters = 4, .stride = 1},
        {.kind = K_GAP},
        {.kind = K_LINEAR, .filters = 3, .bias = 1},
    };
    gradcheck(SHAPE(2, 8, 8), s, 5);
}
END_TEST

START_TEST(grad_residual_chain)
{
    /* units enough for gradients to lie both in dead activations of the slot and in the
     * gradient region (hp_grad_place), every unit's inner region shared by liveness, with
     * ReLU and add in place, transient batch norm outputs made again, and skip connections
     * accumulating */
    const struct spec s[] = {
        {.kind = K_CONV, .filters = 4, .kernel = 3, .stride = 1, .pad = 1, .bn = 1, .relu = 1},
        {.kind = K_RELU},
        {.kind = K_BOTTLENECK, .filters = 2, .stride = 1},
        {.kind = K_BASIC, .filters = 4, .stride = 2},
        {.kind = K_GAP},
        {.kind = K_LINEAR, .filters = 3, .bias = 1},
    };
    gradcheck(SHAPE(2, 6, 6), s, 6);
}
END_TEST

/* One training step (forward of x, backward of dy) of `m` with parameters `params`: output,
 * parameter gradients, input gradient and batch norm state into the caller's buffers. */
static void one_step(const struct hp_model *m, const float *params, const float *x, const float *dy,
                     float *y, float *g, float *dx, float *st)
{
    struct hp_backend *be;
    struct hp_net *net;
    const struct hp_net_config cfg = {.batch = BATCH, .nslots = 1, .need_input_grad = 1};
    const size_t nin = (size_t)BATCH * hp_shape_size(m->input);
    const size_t nout = (size_t)BATCH * hp_shape_size(m->units[m->nunits - 1].out);

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(hp_net_create(be, m, 0, m->nunits, &cfg, &net), 0);
    ck_assert_int_eq(hp_net_init_params(net, 1), 0);
    memcpy(hp_net_params(net), params, hp_net_nparams(net) * sizeof(float));
    memcpy(hp_net_input(net, 0), x, nin * sizeof(float));
    ck_assert_int_eq(hp_net_forward(net, 0, 1, 5), 0);
    memcpy(y, hp_net_output(net, 0), nout * sizeof(float));
    memcpy(hp_net_output_grad(net), dy, nout * sizeof(float));
    ck_assert_int_eq(hp_net_backward(net, 0), 0);
    memcpy(g, hp_net_grads(net), hp_net_nparams(net) * sizeof(float));
    memcpy(dx, hp_net_input_grad(net), nin * sizeof(float));
    memcpy(st, hp_net_state(net), hp_net_nstate(net) * sizeof(float));
    hp_net_destroy(net);
    hp_backend_destroy(be);
}

/* A transient tensor made again before the backward that reads it gives what keeping it
 * gives, bit for bit: conv - bn - relu - conv - bn - relu - conv (two transient tensors
 * taking turns in the temp buffer) and conv - bn - linear as one unit against the same ops as
 * units of their own (the batch norms' outputs kept as unit outputs), with the same
 * parameters (laid out the same: units, then ops, in order). */
START_TEST(transient_equals_kept)
{
    for (int lin = 0; lin < 2; lin++) {
        const struct spec cbr = {
            .kind = K_CONV, .filters = 4, .kernel = 3, .stride = 1, .pad = 1, .bn = 1, .relu = 1};
        const struct spec specs[2][3] = {
            {cbr, cbr, {.kind = K_CONV, .filters = 3, .kernel = 3, .stride = 2, .pad = 1}},
            {{.kind = K_CONV, .filters = 4, .kernel = 3, .stride = 1, .pad = 1, .bn = 1},
             {.kind = K_LINEAR, .filters = 5, .bias = 1}}};
        const int nb = lin ? 2 : 3;
        struct hp_model *mb = make_model(SHAPE(2, 6, 6), specs[lin], nb);
        struct hp_model *ma = make_model(SHAPE(2, 6, 6), specs[lin], 1);
        struct hp_unit *u = &ma->units[0];
        int t = 0;

        /* ma's one unit again, by hand: every op of mb's units in turn */
        hp_unit_init(u, "u0", "test", SHAPE(2, 6, 6));
        for (int k = 0; k < nb; k++)
            for (int i = 0; i < mb->units[k].nops; i++)
                t = hp_unit_add_op(u, &mb->units[k].ops[i], t, -1);
        ck_assert_int_gt(t, 0);
        ck_assert_int_eq(hp_unit_finish(u), 0);
        ma->nparams = u->nparams;
        ma->nstate = u->nstate;
        ma->classes = (int)hp_shape_size(u->out);
        ck_assert_uint_eq(ma->nparams, mb->nparams);
        ck_assert(hp_unit_transient(u, 1));
        ck_assert(lin || hp_unit_transient(u, 4));
        ck_assert(!hp_unit_transient(&mb->units[0], 1));

        const size_t nin = BATCH * 2 * 6 * 6, nout = (size_t)BATCH * ma->classes;
        float *buf[2][4], *params = malloc(ma->nparams * sizeof(float));
        float *x = malloc(nin * sizeof(float)), *dy = malloc(nout * sizeof(float));
        fill_input(x, nin, 3);
        for (size_t i = 0; i < nout; i++)
            dy[i] = hp_rng_uniform(9, i) - 0.5f;
        for (size_t i = 0; i < ma->nparams; i++)
            params[i] = hp_rng_uniform(13, i) - 0.5f;
        for (int k = 0; k < 2; k++) {
            const size_t n[4] = {nout, ma->nparams, nin, ma->nstate};
            for (int j = 0; j < 4; j++)
                buf[k][j] = malloc(n[j] * sizeof(float));
            one_step(k ? mb : ma, params, x, dy, buf[k][0], buf[k][1], buf[k][2], buf[k][3]);
        }
        ck_assert_msg(memcmp(buf[0][0], buf[1][0], nout * sizeof(float)) == 0, "outputs");
        ck_assert_msg(memcmp(buf[0][1], buf[1][1], ma->nparams * sizeof(float)) == 0,
                      "parameter gradients (linear %d)", lin);
        ck_assert_msg(memcmp(buf[0][2], buf[1][2], nin * sizeof(float)) == 0, "input gradients");
        ck_assert_msg(memcmp(buf[0][3], buf[1][3], ma->nstate * sizeof(float)) == 0, "state");
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 4; j++)
                free(buf[k][j]);
        free(params);
        free(x);
        free(dy);
        hp_model_destroy(ma);
        hp_model_destroy(mb);
    }
}
END_TEST

/* Which ops write over their input (hp_unit_inplace), and the layout that follows. */
START_TEST(inplace_rules)
{
    const struct spec s[] = {
        {.kind = K_CONV, .filters = 4, .kernel = 3, .stride = 1, .pad = 1, .bn = 1, .relu = 1},
        {.kind = K_BOTTLENECK, .filters = 2, .stride = 2},
        {.kind = K_BOTTLENECK, .filters = 2, .stride = 1},
        {.kind = K_RELU},
        {.kind = K_LINEAR, .filters = 3, .bias = 1, .relu = 1},
    };
    /* conv, bn, relu over the bn's output */
    static const int want0[] = {-1, -1, 2};
    /* bottleneck with projection: the ReLUs over the batch norms, the add over the main
     * branch's batch norm (8), the last ReLU over the add */
    static const int want1[] = {-1, -1, 2, -1, -1, 5, -1, -1, -1, -1, 8, 11};
    /* identity shortcut: the add cannot write over the block's input (0) */
    static const int want2[] = {-1, -1, 2, -1, -1, 5, -1, -1, 8, 9};
    const int *want[] = {want0, want1, want2, (const int[]){-1}, (const int[]){-1, 1}};
    /* transient (hp_unit_transient): in a bottleneck the first two batch norms' outputs and
     * the ReLUs over them, read by the next convolution; not the unit's output (unit 0), nor
     * a batch norm read by the add */
    const unsigned transient[] = {0, 1u << 2 | 1u << 3 | 1u << 5 | 1u << 6,
                                  1u << 2 | 1u << 3 | 1u << 5 | 1u << 6, 0, 0};
    struct hp_model *m = make_model(SHAPE(2, 8, 8), s, 5);

    for (int u = 0; u < m->nunits; u++) {
        const struct hp_unit *un = &m->units[u];
        struct hp_unit_layout l;
        size_t owned = 0, temp = 0;
        hp_unit_layout(un, 3, HP_ALIGN, &l);
        for (int i = 0; i < un->nops; i++) {
            const int over = hp_unit_inplace(un, i);
            const size_t bytes =
                hp_align_up(3 * hp_shape_size(un->ops[i].out_shape) * sizeof(float), HP_ALIGN);
            ck_assert_msg(over == want[u][i], "unit %d op %d: %d, not %d", u, i, over, want[u][i]);
            ck_assert_msg(l.transient[i + 1] == (int)(transient[u] >> (i + 1) & 1),
                          "unit %d tensor %d: transient %d", u, i + 1, l.transient[i + 1]);
            if (l.transient[i + 1])
                temp = bytes > temp ? bytes : temp;
            else if (over > 0)
                ck_assert_uint_eq(l.act_off[i + 1], l.act_off[over]);
            else
                owned += bytes;
        }
        ck_assert_uint_eq(l.acts, owned);
        ck_assert_uint_eq(l.temp, temp);
    }
    /* gradients along the in-place chains share buffers; the bottleneck's last chain (its
     * third batch norm, the add, the ReLU) ends in the unit's output buffer */
    struct hp_unit_layout l;
    hp_unit_layout(&m->units[1], 3, HP_ALIGN, &l);
    ck_assert_int_eq(l.grad_root[2], 3);
    ck_assert_int_eq(l.grad_root[5], 6);
    ck_assert_int_eq(l.grad_root[8], 12);
    ck_assert_int_eq(l.grad_root[11], 12);
    ck_assert_int_eq(l.grad_root[10], 10);
    ck_assert_uint_eq(l.grad_off[2], l.grad_off[3]);
    hp_model_destroy(m);

    /* by hand: a ReLU after a max pooling or a ReLU (their backward reads their output), and
     * over a tensor with another reader, stays out of place */
    struct hp_unit u;
    const struct hp_op pool = {.type = HP_OP_MAXPOOL, .kernel = 2, .stride = 2};
    const struct hp_op relu = {.type = HP_OP_RELU}, add = {.type = HP_OP_ADD};
    hp_unit_init(&u, "hand", "test", SHAPE(2, 4, 4));
    ck_assert_int_eq(hp_unit_add_op(&u, &pool, 0, -1), 1);
    ck_assert_int_eq(hp_unit_add_op(&u, &relu, 1, -1), 2);
    ck_assert_int_eq(hp_unit_add_op(&u, &relu, 2, -1), 3);
    ck_assert_int_eq(hp_unit_add_op(&u, &add, 3, 2), 4);
    ck_assert_int_eq(hp_unit_finish(&u), 0);
    for (int i = 0; i < u.nops; i++)
        ck_assert_int_eq(hp_unit_inplace(&u, i), -1);
}
END_TEST

/* Replays a unit's backward pass on its gradient layout: whenever two gradients are live at
 * once (written and not yet read by their producer), their buffers are the same (an in-place
 * chain) or do not overlap. */
static void check_grad_layout(const struct hp_unit *u, int batch, size_t align)
{
    struct hp_unit_layout l;
    int live[HP_UNIT_MAX_OPS + 1] = {0};
    size_t bytes[HP_UNIT_MAX_OPS + 1];
    const int n = u->nops;

    hp_unit_layout(u, batch, align, &l);
    for (int t = 1; t <= n; t++)
        bytes[t] = hp_align_up((size_t)batch * hp_shape_size(u->ops[t - 1].out_shape) * 4, align);
    live[n] = 1; /* the output's, in its own buffer */
    for (int i = n - 1; i >= 0; i--) {
        for (int j = 0; j < 2; j++)
            if (u->ops[i].in[j] > 0)
                live[u->ops[i].in[j]] = 1;
        for (int a = 1; a < n; a++) {
            if (!live[a] || l.grad_root[a] == n)
                continue;
            ck_assert_uint_le(l.grad_off[a] + bytes[a], l.grads);
            for (int b = a + 1; b <= n; b++) {
                if (!live[b] || l.grad_root[a] == l.grad_root[b])
                    continue;
                ck_assert_msg(l.grad_root[b] == n || l.grad_off[a] + bytes[a] <= l.grad_off[b] ||
                                  l.grad_off[b] + bytes[b] <= l.grad_off[a],
                              "unit %s, op %d: gradients of %d and %d overlap", u->name, i, a, b);
            }
        }
        live[i + 1] = 0; /* read by its producer */
    }
}

START_TEST(grad_layout_liveness)
{
    static const char *const models[] = {"cnn", "vgg19", "resnet152",
                                         "tests/models/resnet-mini.ini"};
    int units = 0;

    for (int i = 0; i < 4; i++) {
        struct hp_model *m;
        ck_assert_int_eq(hp_model_load(models[i], &m), 0);
        for (int u = 0; u < m->nunits; u++, units++) {
            check_grad_layout(&m->units[u], 1, 1);
            check_grad_layout(&m->units[u], 3, HP_ALIGN);
        }
        hp_model_destroy(m);
    }
    ck_assert_int_gt(units, 80);
}
END_TEST

/* softmax cross-entropy: dlogits against finite differences of the mean loss */
START_TEST(grad_softmax_xent)
{
    struct hp_backend *be;
    const int n = 4, k = 5;
    float z[20], dz[20];
    int32_t y[4] = {0, 3, 4, 1};
    double l, lp, lm;
    int c;

    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    for (int i = 0; i < n * k; i++)
        z[i] = 3.0f * (2.0f * hp_rng_uniform(9, (uint64_t)i) - 1.0f);
    ck_assert_int_eq(be->ops->softmax_xent(be, z, y, n, k, 1.0f / n, dz, &l, &c), 0);
    for (int i = 0; i < n * k; i++) {
        const float keep = z[i];
        z[i] = keep + 1e-2f;
        be->ops->softmax_xent(be, z, y, n, k, 1.0f, NULL, &lp, &c);
        z[i] = keep - 1e-2f;
        be->ops->softmax_xent(be, z, y, n, k, 1.0f, NULL, &lm, &c);
        z[i] = keep;
        const double num = (lp - lm) / (2e-2 * n);
        ck_assert_msg(fabs(num - dz[i]) < 1e-4 + 1e-3 * fabs(num), "dlogits[%d] %f vs %f", i,
                      (double)dz[i], num);
    }
    /* the loss itself, against a direct computation */
    double ref = 0.0;
    int ok = 0;
    for (int i = 0; i < n; i++) {
        double s = 0.0;
        int arg = 0;
        for (int j = 0; j < k; j++) {
            s += exp((double)z[i * k + j]);
            if (z[i * k + j] > z[i * k + arg])
                arg = j;
        }
        ref += log(s) - z[i * k + y[i]];
        ok += arg == y[i];
    }
    be->ops->softmax_xent(be, z, y, n, k, 1.0f, NULL, &l, &c);
    ck_assert_double_eq_tol(l, ref, 1e-4);
    ck_assert_int_eq(c, ok);
    hp_backend_destroy(be);
}
END_TEST

START_TEST(sgd_rule)
{
    struct hp_backend *be;
    float w[3] = {1.0f, -2.0f, 0.5f}, g[3] = {0.1f, 0.2f, -0.3f}, m[3] = {0.5f, 0.0f, 1.0f};
    const float lr = 0.1f, mu = 0.9f, wd = 0.01f;
    float we[3], me[3];

    for (int i = 0; i < 3; i++) {
        me[i] = mu * m[i] + g[i] + wd * w[i];
        we[i] = w[i] - lr * me[i];
    }
    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(be->ops->sgd_update(be, w, g, m, 3, lr, mu, wd), 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_float_eq_tol(w[i], we[i], 1e-6f);
        ck_assert_float_eq_tol(m[i], me[i], 1e-6f);
    }
    hp_backend_destroy(be);
}
END_TEST

/* Batch norm in eval mode uses the running statistics that train mode accumulated. */
START_TEST(batchnorm_running_stats)
{
    struct hp_backend *be;
    const struct hp_bn_desc d = {.n = 4, .c = 2, .hw = 3, .eps = 1e-5f, .momentum = 0.1f};
    float x[24], y[24], g[2] = {1.5f, 0.5f}, b[2] = {0.2f, -0.1f}, rm[2] = {0, 0}, rv[2] = {1, 1};
    float sm[2], si[2];

    for (int i = 0; i < 24; i++)
        x[i] = (float)(i % 7) - 2.0f + 0.1f * (float)i;
    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(be->ops->bn_forward_train(be, &d, x, g, b, y, rm, rv, sm, si), 0);
    for (int c = 0; c < 2; c++) {
        double s = 0, ss = 0;
        for (int n = 0; n < 4; n++)
            for (int i = 0; i < 3; i++)
                s += x[(n * 2 + c) * 3 + i];
        const double mean = s / 12;
        for (int n = 0; n < 4; n++)
            for (int i = 0; i < 3; i++)
                ss += pow(x[(n * 2 + c) * 3 + i] - mean, 2);
        ck_assert_double_eq_tol(rm[c], 0.1 * mean, 1e-5);
        ck_assert_double_eq_tol(rv[c], 0.9 + 0.1 * ss / 11, 1e-5);
        ck_assert_double_eq_tol(si[c], 1.0 / sqrt(ss / 12 + 1e-5), 1e-4);
        /* train output has the batch mean beta */
        double ym = 0;
        for (int n = 0; n < 4; n++)
            for (int i = 0; i < 3; i++)
                ym += y[(n * 2 + c) * 3 + i];
        ck_assert_double_eq_tol(ym / 12, b[c], 1e-5);
    }
    ck_assert_int_eq(be->ops->bn_forward_eval(be, &d, x, g, b, rm, rv, y), 0);
    ck_assert_float_eq_tol(y[0], g[0] * (x[0] - rm[0]) / sqrtf(rv[0] + 1e-5f) + b[0], 1e-5f);
    hp_backend_destroy(be);
}
END_TEST

/* im2col convolution against a direct 7-loop convolution. */
START_TEST(conv_against_direct)
{
    struct hp_backend *be;
    struct hp_conv *conv;
    const struct hp_conv_desc d = {2, 3, 7, 6, 4, 3, 3, 2, 1, 4, 3, 1};
    float x[2 * 3 * 7 * 6], w[4 * 3 * 9], b[4], y[2 * 4 * 4 * 3];
    size_t ws;
    void *work;

    for (size_t i = 0; i < sizeof(x) / 4; i++)
        x[i] = hp_rng_uniform(1, i) - 0.5f;
    for (size_t i = 0; i < sizeof(w) / 4; i++)
        w[i] = hp_rng_uniform(2, i) - 0.5f;
    for (int i = 0; i < 4; i++)
        b[i] = (float)i;
    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(be->ops->conv_create(be, &d, &conv, &ws), 0);
    ck_assert_int_eq(be->ops->alloc(be, ws + 4, &work), 0);
    ck_assert_int_eq(be->ops->conv_forward(be, conv, x, w, b, y, work), 0);
    for (int n = 0; n < 2; n++)
        for (int k = 0; k < 4; k++)
            for (int p = 0; p < 4; p++)
                for (int q = 0; q < 3; q++) {
                    double s = b[k];
                    for (int c = 0; c < 3; c++)
                        for (int i = 0; i < 3; i++)
                            for (int j = 0; j < 3; j++) {
                                int h = p * 2 - 1 + i, ww = q * 2 - 1 + j;
                                if (h >= 0 && h < 7 && ww >= 0 && ww < 6)
                                    s += (double)x[((n * 3 + c) * 7 + h) * 6 + ww] *
                                         w[((k * 3 + c) * 3 + i) * 3 + j];
                            }
                    ck_assert_double_eq_tol(y[((n * 4 + k) * 4 + p) * 3 + q], s, 1e-5);
                }
    be->ops->free(be, work);
    be->ops->conv_destroy(be, conv);
    hp_backend_destroy(be);
}
END_TEST

/* The weight and bias gradients of a "same" convolution (the flat-shift im2col) over several
 * images, against direct loops. */
START_TEST(conv_weight_grad_groups)
{
    struct hp_backend *be;
    struct hp_conv *conv;
    const struct hp_conv_desc d = {5, 1, 142, 142, 4, 3, 3, 1, 1, 142, 142, 1};
    const size_t nx = 5 * 142 * 142, ny = 5 * 4 * 142 * 142;
    float *x = malloc(nx * 4), *dy = malloc(ny * 4), w[36], dw[36], db[4];
    size_t ws;
    void *work;

    for (size_t i = 0; i < nx; i++)
        x[i] = hp_rng_uniform(1, i) - 0.5f;
    for (size_t i = 0; i < ny; i++)
        dy[i] = hp_rng_uniform(2, i) - 0.5f;
    for (int i = 0; i < 36; i++)
        w[i] = hp_rng_uniform(3, (uint64_t)i) - 0.5f;
    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(be->ops->conv_create(be, &d, &conv, &ws), 0);
    ck_assert_int_eq(be->ops->alloc(be, ws, &work), 0);
    ck_assert_int_eq(be->ops->conv_backward(be, conv, x, w, dy, NULL, dw, db, work), 0);
    for (int k = 0; k < 4; k++) {
        double sb = 0.0;
        for (int n = 0; n < 5; n++)
            for (int pq = 0; pq < 142 * 142; pq++)
                sb += dy[((size_t)n * 4 + k) * 142 * 142 + pq];
        ck_assert_double_eq_tol(db[k], sb, 1e-2);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double s = 0.0;
                for (int n = 0; n < 5; n++)
                    for (int p = 0; p < 142; p++)
                        for (int q = 0; q < 142; q++) {
                            int h = p - 1 + i, ww = q - 1 + j;
                            if (h >= 0 && h < 142 && ww >= 0 && ww < 142)
                                s += (double)x[((size_t)n * 142 + h) * 142 + ww] *
                                     dy[(((size_t)n * 4 + k) * 142 + p) * 142 + q];
                        }
                ck_assert_msg(fabs(dw[k * 9 + i * 3 + j] - s) < 1e-2 + 1e-4 * fabs(s),
                              "dw[%d][%d][%d] %f vs %f", k, i, j, (double)dw[k * 9 + i * 3 + j], s);
            }
    }
    be->ops->free(be, work);
    be->ops->conv_destroy(be, conv);
    hp_backend_destroy(be);
    free(x);
    free(dy);
}
END_TEST

Suite *suite_layers(void)
{
    Suite *s = suite_create("layers");
    TCase *g = tcase_create("gradcheck");
    TCase *o = tcase_create("ops");

    tcase_set_timeout(g, 120);
    tcase_add_test(g, grad_conv_3x3_pad);
    tcase_add_test(g, grad_conv_stride2);
    tcase_add_test(g, grad_conv_1x1_nobias);
    tcase_add_test(g, grad_conv_7x7_stride2_pad3);
    tcase_add_test(g, grad_conv_bn_relu);
    tcase_add_test(g, grad_linear);
    tcase_add_test(g, grad_linear_relu);
    tcase_add_test(g, grad_relu);
    tcase_add_test(g, grad_maxpool);
    tcase_add_test(g, grad_maxpool_3x3_s2_pad1);
    tcase_add_test(g, grad_avgpool);
    tcase_add_test(g, grad_gap);
    tcase_add_test(g, grad_batchnorm);
    tcase_add_test(g, grad_flatten_linear);
    tcase_add_test(g, grad_dropout);
    tcase_add_test(g, grad_basic_identity);
    tcase_add_test(g, grad_basic_projection);
    tcase_add_test(g, grad_bottleneck_projection);
    tcase_add_test(g, grad_bottleneck_identity);
    tcase_add_test(g, grad_small_cnn);
    tcase_add_test(g, grad_residual_chain);
    tcase_add_test(g, grad_softmax_xent);
    suite_add_tcase(s, g);
    tcase_add_test(o, sgd_rule);
    tcase_add_test(o, inplace_rules);
    tcase_add_test(o, transient_equals_kept);
    tcase_add_test(o, grad_layout_liveness);
    tcase_add_test(o, batchnorm_running_stats);
    tcase_add_test(o, conv_against_direct);
    tcase_add_test(o, conv_weight_grad_groups);
    suite_add_tcase(s, o);
    return s;
}
