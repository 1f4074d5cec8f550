/* layers.c - unit construction, shape inference, parameter layout and costs. */
#include "layers.h"

#include "error.h"
#include "log.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const op_names[HP_OP_NTYPES] = {
    [HP_OP_CONV] = "conv",           [HP_OP_LINEAR] = "linear",       [HP_OP_BN] = "batchnorm",
    [HP_OP_RELU] = "relu",           [HP_OP_MAXPOOL] = "maxpool",     [HP_OP_AVGPOOL] = "avgpool",
    [HP_OP_FLATTEN] = "flatten",     [HP_OP_DROPOUT] = "dropout",     [HP_OP_ADD] = "add",
    [HP_OP_EMBED] = "embed",         [HP_OP_LAYERNORM] = "layernorm", [HP_OP_PLINEAR] = "plinear",
    [HP_OP_ATTENTION] = "attention", [HP_OP_GELU] = "gelu",
};

const char *hp_op_name(enum hp_op_type type)
{
    return (unsigned)type < HP_OP_NTYPES ? op_names[type] : "?";
}

void hp_unit_init(struct hp_unit *u, const char *name, const char *kind, struct hp_shape in)
{
    memset(u, 0, sizeof(*u));
    snprintf(u->name, sizeof(u->name), "%s", name);
    snprintf(u->kind, sizeof(u->kind), "%s", kind);
    u->in = in;
    u->out = in;
}

int hp_unit_add_op(struct hp_unit *u, const struct hp_op *proto, int in0, int in1)
{
    struct hp_op *op;

    if (u->nops >= HP_UNIT_MAX_OPS) {
        hp_error("unit '%s': more than %d ops", u->name, HP_UNIT_MAX_OPS);
        return -HP_EMODEL;
    }
    op = &u->ops[u->nops++];
    *op = *proto;
    op->in[0] = in0;
    op->in[1] = in1;
    op->out = u->nops;
    return op->out;
}

struct hp_shape hp_unit_tensor_shape(const struct hp_unit *u, int t)
{
    return t == 0 ? u->in : u->ops[t - 1].out_shape;
}

/* Output extent of a window op; <= 0 when the window does not fit. */
static int window_out(int in, int kernel, int stride, int pad)
{
    if (in + 2 * pad < kernel)
        return 0;
    return (in + 2 * pad - kernel) / stride + 1;
}

/* A tensor of more than 2^31 - 1 values per sample: the backends index with int (BLAS too),
 * and its count would wrap. Its factors are checked in 64 bits, each positive. */
static int too_big(const struct hp_unit *u, const struct hp_op *op, const char *which,
                   struct hp_shape s)
{
    if (s.c > 0 && s.h > 0 && s.w > 0 && s.c <= HP_MAX_TENSOR && s.h <= HP_MAX_TENSOR / s.c &&
        s.w <= HP_MAX_TENSOR / ((int64_t)s.c * s.h))
        return 0;
    hp_error("unit '%s': the %s of %s (%dx%dx%d) has more than %d (2^31 - 1) values per sample "
             "or a dimension below 1",
             u->name, which, hp_op_name(op->type), s.c, s.h, s.w, HP_MAX_TENSOR);
    return 1;
}

/* The most positions (T) of a sequence: an attention's workspace of T x T floats stays within
 * 256 MiB (the cap the planner puts on a workspace, launcher/cost.c). */
#define SEQ_MAX 8192

/* The op's output shape, once it and the op's parameters are within the limits. */
static int set_output(const struct hp_unit *u, struct hp_op *op, struct hp_shape out)
{
    if (too_big(u, op, "output", out))
        return -HP_EMODEL;
    if (op->nparams > HP_MAX_TENSOR) {
        hp_error("unit '%s': %s has %zu parameters, more than %d (2^31 - 1)", u->name,
                 hp_op_name(op->type), op->nparams, HP_MAX_TENSOR);
        return -HP_EMODEL;
    }
    op->out_shape = out;
    return 0;
}

/* Shapes and parameters of the sequence ops (layers.h): [T, 1, d] in, [T, 1, d'] out. */
static int infer_seq(struct hp_unit *u, struct hp_op *op)
{
    const struct hp_shape in = op->in_shape;
    const int T = in.c, d = in.w;
    struct hp_shape out = in;

    if (in.h != 1 || T > SEQ_MAX) {
        hp_error("unit '%s': %s needs a sequence [T, 1, d] with T <= %d, not %dx%dx%d", u->name,
                 hp_op_name(op->type), SEQ_MAX, in.c, in.h, in.w);
        return -HP_EMODEL;
    }
    switch (op->type) {
    case HP_OP_EMBED:
        if (d != 1 || op->filters <= 0 || op->vocab <= 0) {
            hp_error("unit '%s': embed needs token ids [T, 1, 1] (not %dx%dx%d), a width and a "
                     "vocabulary > 0",
                     u->name, in.c, in.h, in.w);
            return -HP_EMODEL;
        }
        out.w = op->filters;
        op->nparams = ((size_t)op->vocab + (size_t)T) * (size_t)op->filters;
        break;
    case HP_OP_LAYERNORM:
        op->nparams = 2 * (size_t)d;
        break;
    case HP_OP_PLINEAR:
        if (op->filters <= 0) {
            hp_error("unit '%s': plinear needs outputs > 0", u->name);
            return -HP_EMODEL;
        }
        out.w = op->filters;
        op->nparams = (size_t)op->filters * (size_t)d + (op->bias ? (size_t)op->filters : 0);
        break;
    case HP_OP_ATTENTION:
        if (op->heads <= 0 || d % 3 != 0 || (d / 3) % op->heads != 0) {
            hp_error("unit '%s': attention needs [T, 1, 3d] with d a multiple of heads (%d), "
                     "not width %d",
                     u->name, op->heads, d);
            return -HP_EMODEL;
        }
        if ((double)op->heads * T * T > HP_MAX_TENSOR) {
            hp_error("unit '%s': attention's %d heads x %d x %d probabilities exceed %d per "
                     "sample",
                     u->name, op->heads, T, T, HP_MAX_TENSOR);
            return -HP_EMODEL;
        }
        out.w = d / 3;
        break;
    default: /* HP_OP_GELU */
        break;
    }
    return set_output(u, op, out);
}

static int infer(struct hp_unit *u, struct hp_op *op)
{
    struct hp_shape in = hp_unit_tensor_shape(u, op->in[0]), out = in;

    op->in_shape = in;
    if (too_big(u, op, "input", in))
        return -HP_EMODEL;
    switch (op->type) {
    case HP_OP_CONV:
        if (op->filters <= 0 || op->kernel <= 0 || op->stride <= 0 || op->pad < 0) {
            hp_error("unit '%s': conv needs filters, kernel, stride > 0 and pad >= 0", u->name);
            return -HP_EMODEL;
        }
        out.c = op->filters;
        out.h = window_out(in.h, op->kernel, op->stride, op->pad);
        out.w = window_out(in.w, op->kernel, op->stride, op->pad);
        if (out.h <= 0 || out.w <= 0) {
            hp_error("unit '%s': conv kernel %d does not fit the input %dx%d with padding %d",
                     u->name, op->kernel, in.h, in.w, op->pad);
            return -HP_EMODEL;
        }
        if ((double)op->filters * in.c * op->kernel * op->kernel > HP_MAX_TENSOR) {
            hp_error("unit '%s': conv with %d filters of %dx%dx%d has more than %d (2^31 - 1) "
                     "parameters",
                     u->name, op->filters, in.c, op->kernel, op->kernel, HP_MAX_TENSOR);
            return -HP_EMODEL;
        }
        op->nparams = (size_t)op->filters * in.c * op->kernel * op->kernel +
                      (op->bias ? (size_t)op->filters : 0);
        break;
    case HP_OP_LINEAR:
        if (op->filters <= 0) {
            hp_error("unit '%s': linear needs outputs > 0", u->name);
            return -HP_EMODEL;
        }
        out = (struct hp_shape){op->filters, 1, 1};
        op->nparams = (size_t)op->filters * hp_shape_size(in) + (op->bias ? op->filters : 0);
        break;
    case HP_OP_BN:
        op->nparams = 2 * (size_t)in.c;
        op->nstate = 2 * (size_t)in.c;
        break;
    case HP_OP_MAXPOOL:
    case HP_OP_AVGPOOL:
        if (op->type == HP_OP_AVGPOOL && op->kernel == 0) {
            /* global average pooling */
            if (in.h != in.w) {
                hp_error("unit '%s': global pooling needs a square input, not %dx%d", u->name, in.h,
                         in.w);
                return -HP_EMODEL;
            }
            op->kernel = in.h;
            op->stride = 1;
            op->pad = 0;
        }
        if (op->kernel <= 0 || op->stride <= 0 || op->pad < 0 || op->pad * 2 > op->kernel) {
            hp_error("unit '%s': pooling needs kernel, stride > 0 and 0 <= pad <= kernel/2",
                     u->name);
            return -HP_EMODEL;
        }
        out.h = window_out(in.h, op->kernel, op->stride, op->pad);
        out.w = window_out(in.w, op->kernel, op->stride, op->pad);
        if (out.h <= 0 || out.w <= 0) {
            hp_error("unit '%s': pooling window %d does not fit the input %dx%d", u->name,
                     op->kernel, in.h, in.w);
            return -HP_EMODEL;
        }
        break;
    case HP_OP_FLATTEN:
        out = (struct hp_shape){(int)hp_shape_size(in), 1, 1}; /* in is checked below 2^31 */
        break;
    case HP_OP_DROPOUT:
        if (!(op->p >= 0.0f && op->p < 1.0f)) {
            hp_error("unit '%s': dropout p must be in [0, 1)", u->name);
            return -HP_EMODEL;
        }
        break;
    case HP_OP_ADD: {
        struct hp_shape b = hp_unit_tensor_shape(u, op->in[1]);
        if (b.c != in.c || b.h != in.h || b.w != in.w) {
            hp_error("unit '%s': residual add of %dx%dx%d and %dx%dx%d", u->name, in.c, in.h, in.w,
                     b.c, b.h, b.w);
            return -HP_EMODEL;
        }
        break;
    }
    case HP_OP_RELU:
        break;
    case HP_OP_EMBED:
    case HP_OP_LAYERNORM:
    case HP_OP_PLINEAR:
    case HP_OP_ATTENTION:
    case HP_OP_GELU:
        return infer_seq(u, op);
    default:
        hp_error("unit '%s': unknown op type %d", u->name, (int)op->type);
        return -HP_EMODEL;
    }
    return set_output(u, op, out);
}

double hp_op_macs(const struct hp_op *op)
{
    if (op->type == HP_OP_CONV)
        return (double)op->in_shape.c * op->kernel * op->kernel * hp_shape_size(op->out_shape);
    if (op->type == HP_OP_LINEAR)
        return (double)hp_shape_size(op->in_shape) * op->filters;
    if (op->type == HP_OP_PLINEAR)
        return (double)op->in_shape.c * op->in_shape.w * op->filters;
    if (op->type == HP_OP_ATTENTION)
        return 2.0 * op->in_shape.c * op->in_shape.c * op->out_shape.w;
    return 0.0;
}

int hp_op_param_tensors(const struct hp_op *op, size_t n[2], int decay[2])
{
    size_t nw = 0;

    if (op->type == HP_OP_CONV)
        nw = (size_t)op->filters * op->in_shape.c * op->kernel * op->kernel;
    else if (op->type == HP_OP_LINEAR)
        nw = (size_t)op->filters * hp_shape_size(op->in_shape);
    else if (op->type == HP_OP_PLINEAR)
        nw = (size_t)op->filters * (size_t)op->in_shape.w;
    else if (op->type == HP_OP_BN)
        nw = (size_t)op->in_shape.c;
    else if (op->type == HP_OP_LAYERNORM)
        nw = (size_t)op->in_shape.w;
    if (!op->nparams)
        return 0;
    n[0] = nw ? nw : op->nparams;
    /* a tied head's weights are its embed's token matrix, not decayed (an embedding) */
    decay[0] = op->type == HP_OP_CONV || op->type == HP_OP_LINEAR ||
               (op->type == HP_OP_PLINEAR && !op->tie);
    if (n[0] >= op->nparams)
        return 1;
    n[1] = op->nparams - n[0];
    decay[1] = 0;
    return 2;
}

/* Per-sample costs of the sequence ops (T positions, d = the input's width, heads H):
 *  - embed: T d adds (token + position); backward 2 T d (the scatter-add and the position
 *    gradient);
 *  - layer norm: 8 per value forward (mean, variance, normalise, scale and shift), 11
 *    backward (the parameter gradients, two row sums and the input gradient);
 *  - plinear: 2 T in out (+ T out for the bias) forward, twice the GEMMs backward;
 *  - attention: the GEMMs of q k^T and p v, 2 T^2 d MACs (the masked half computed too), and
 *    5 per probability forward (scale, max, exp, sum, divide); backward 4 T^2 d MACs (the
 *    gradients of p, v, q and k) and 5 per probability (the softmax's backward, the scale);
 *    its bytes add the probabilities written (forward) and read (backward);
 *  - gelu: 8 per value forward (the cubic, tanh, the product), 14 backward.
 * extra: floats moved besides the input and output, per sample: an attention's
 * probabilities; an embedding's gathered rows, T of the token matrix and T of the positions
 * (2 T d: a gather reads only those rows, and its backward adds into only those rows of the
 * gradient, so none of the vocab x d matrix is counted as traffic: hp_unit_finish leaves an
 * embedding's parameters out of the parameter traffic it adds). */
static void seq_cost(const struct hp_op *op, struct hp_unit_cost *c, double *macs, double *fwd,
                     double *bwd, double *extra)
{
    const double T = op->in_shape.c, in = (double)hp_shape_size(op->in_shape),
                 out = (double)hp_shape_size(op->out_shape);

    switch (op->type) {
    case HP_OP_EMBED:
        *fwd = out;
        *bwd = 2.0 * out;
        *extra = 2.0 * out;
        break;
    case HP_OP_LAYERNORM:
        *fwd = 8.0 * in;
        *bwd = 11.0 * in;
        break;
    case HP_OP_PLINEAR:
        *macs = hp_op_macs(op);
        *fwd = 2.0 * *macs + (op->bias ? out : 0.0);
        *bwd = 4.0 * *macs + (op->bias ? out : 0.0);
        break;
    case HP_OP_ATTENTION: {
        const size_t ws = (size_t)op->in_shape.c * (size_t)op->in_shape.c * sizeof(float);
        *macs = hp_op_macs(op);
        *extra = (double)op->heads * T * T;
        *fwd = 2.0 * *macs + 5.0 * *extra;
        *bwd = 4.0 * *macs + 5.0 * *extra;
        if (ws > c->workspace_bytes)
            c->workspace_bytes = ws;
        break;
    }
    default: /* HP_OP_GELU */
        *fwd = 8.0 * out;
        *bwd = 14.0 * out;
        break;
    }
}

/* Per-sample costs of one op. Forward FLOPs count 2 per multiply-add for conv and linear;
 * elementwise ops count their arithmetic (ReLU 1, batch norm 5 train, add 1, pool kernel^2).
 * Backward FLOPs of conv and linear are twice the forward (input and weight gradients).
 * Bytes are read + written floats, parameters included, for a roofline estimate. */
static void op_cost(const struct hp_op *op, struct hp_unit_cost *c)
{
    const double in = (double)hp_shape_size(op->in_shape),
                 out = (double)hp_shape_size(op->out_shape);
    double macs = 0.0, fwd = 0.0, bwd = 0.0, fb, bb, extra = 0.0;

    switch (op->type) {
    case HP_OP_CONV:
        macs = hp_op_macs(op);
        fwd = 2.0 * macs + (op->bias ? out : 0.0);
        bwd = 4.0 * macs + (op->bias ? out : 0.0);
        if (op->kernel > 1 || op->stride > 1 || op->pad > 0) {
            size_t ws = (size_t)op->in_shape.c * op->kernel * op->kernel * op->out_shape.h *
                        op->out_shape.w * sizeof(float);
            if (ws > c->workspace_bytes)
                c->workspace_bytes = ws;
        }
        break;
    case HP_OP_LINEAR:
        macs = hp_op_macs(op);
        fwd = 2.0 * macs + (op->bias ? out : 0.0);
        bwd = 4.0 * macs + (op->bias ? out : 0.0);
        break;
    case HP_OP_BN:
        fwd = 5.0 * in;
        bwd = 8.0 * in;
        break;
    case HP_OP_RELU:
    case HP_OP_DROPOUT:
    case HP_OP_ADD:
        fwd = out;
        bwd = out;
        break;
    case HP_OP_MAXPOOL:
    case HP_OP_AVGPOOL:
        fwd = out * op->kernel * op->kernel;
        bwd = fwd;
        break;
    case HP_OP_EMBED:
    case HP_OP_LAYERNORM:
    case HP_OP_PLINEAR:
    case HP_OP_ATTENTION:
    case HP_OP_GELU:
        seq_cost(op, c, &macs, &fwd, &bwd, &extra);
        break;
    default:
        break;
    }
    fb = 4.0 * (in + (op->type == HP_OP_ADD ? in : 0.0) + out + extra);
    bb = 2.0 * fb;
    c->fwd_macs += macs;
    c->fwd_flops += fwd;
    c->bwd_flops += bwd;
    c->fwd_bytes += fb;
    c->bwd_bytes += bb;
}

static size_t seq_saves(const struct hp_op *op);

int hp_unit_finish(struct hp_unit *u)
{
    size_t poff = 0, soff = 0, gathered = 0; /* an embedding's parameters (see seq_cost) */

    memset(&u->cost, 0, sizeof(u->cost));
    if (u->nops == 0) {
        hp_error("unit '%s': no ops", u->name);
        return -HP_EMODEL;
    }
    for (int i = 0; i < u->nops; i++) {
        struct hp_op *op = &u->ops[i];
        int rc = infer(u, op);
        if (rc)
            return rc;
        op->param_off = poff;
        op->state_off = soff;
        poff += op->nparams;
        soff += op->nstate;
        gathered += op->type == HP_OP_EMBED ? op->nparams : 0;
        op_cost(op, &u->cost);
    }
    {
        struct hp_unit_layout l;
        hp_unit_layout(u, 1, 1, &l);
        u->cost.grad_bytes = l.grads;
        for (int i = 0; i < u->nops; i++) {
            const size_t out = hp_shape_size(u->ops[i].out_shape) * sizeof(float);
            u->cost.saved_bytes += (hp_unit_inplace(u, i) < 0 && !l.transient[i + 1] ? out : 0) +
                                   (u->ops[i].type == HP_OP_DROPOUT ? out : 0) + /* the mask */
                                   seq_saves(&u->ops[i]);
            if (l.transient[i + 1]) {
                /* made again before the backward of the op reading it */
                struct hp_unit_cost again = {0};
                op_cost(&u->ops[i], &again);
                u->cost.bwd_flops += again.fwd_flops;
                u->cost.bwd_bytes += again.fwd_bytes;
            }
        }
    }
    for (int t = 0; t < u->nops; t++) {
        int readers = 0, bn = 0;
        for (int i = 0; i < u->nops; i++)
            for (int j = 0; j < 2; j++)
                if (u->ops[i].in[j] == t) {
                    readers++;
                    bn |= u->ops[i].type == HP_OP_BN;
                }
        const size_t b = hp_shape_size(hp_unit_tensor_shape(u, t)) * sizeof(float);
        if ((readers >= 2 || (t == 0 && bn)) && b > u->cost.scratch_bytes)
            u->cost.scratch_bytes = b;
    }
    u->nparams = poff;
    u->nstate = soff;
    u->out = u->ops[u->nops - 1].out_shape;
    u->cost.param_bytes = poff * sizeof(float);
    /* the weights read forward, read and their gradients written backward */
    u->cost.fwd_bytes += (double)((poff - gathered) * sizeof(float));
    u->cost.bwd_bytes += 2.0 * (double)((poff - gathered) * sizeof(float));
    u->cost.state_bytes = soff * sizeof(float);
    u->cost.out_bytes = hp_shape_size(u->out) * sizeof(float);
    return 0;
}

/* Bytes per sample a sequence op keeps for its backward besides its output: a layer norm's
 * mean and 1/std per position, an attention's probabilities per head; 0 for other ops. */
static size_t seq_saves(const struct hp_op *op)
{
    const size_t T = (size_t)op->in_shape.c;

    if (op->type == HP_OP_LAYERNORM)
        return 2 * T * sizeof(float);
    if (op->type == HP_OP_ATTENTION)
        return (size_t)op->heads * T * T * sizeof(float);
    return 0;
}

/* Whether an op's backward reads its own output (relu_backward and maxpool_backward do). */
static int needs_output(enum hp_op_type type)
{
    return type == HP_OP_RELU || type == HP_OP_MAXPOOL;
}

static int readers(const struct hp_unit *u, int t)
{
    int n = 0;

    for (int k = 0; k < u->nops; k++)
        n += (u->ops[k].in[0] == t) + (u->ops[k].in[1] == t);
    return n;
}

int hp_unit_inplace(const struct hp_unit *u, int i)
{
    const struct hp_op *op = &u->ops[i];

    if (op->type != HP_OP_RELU && op->type != HP_OP_ADD)
        return -1;
    for (int j = 0; j < (op->type == HP_OP_ADD ? 2 : 1); j++) {
        const int t = op->in[j];
        if (t > 0 && t <= i && !needs_output(u->ops[t - 1].type) && readers(u, t) == 1)
            return t;
    }
    return -1;
}

int hp_unit_transient(const struct hp_unit *u, int i)
{
    int end = i + 1; /* the chain's last tensor */

    if (u->ops[i].type != HP_OP_BN)
        return 0;
    if (readers(u, end) != 1)
        return 0;
    if (end < u->nops && u->ops[end].type == HP_OP_RELU && hp_unit_inplace(u, end) == end)
        end++;
    if (end >= u->nops || readers(u, end) != 1 || u->ops[end].in[0] != end)
        return 0;
    return u->ops[end].type == HP_OP_CONV || u->ops[end].type == HP_OP_LINEAR;
}

/* Share gradient buffers along in-place ops: an in-place op's input gradient is its output
 * gradient's buffer (its backward runs in place; the input had one reader, so one
 * contribution). root[t]: the last tensor of t's chain. */
static void grad_roots(const struct hp_unit *u, int *root)
{
    for (int t = 0; t <= u->nops; t++)
        root[t] = t;
    for (int i = u->nops - 1; i >= 0; i--) {
        const int over = hp_unit_inplace(u, i);
        if (over > 0)
            root[over] = root[i + 1]; /* final: only ops after i read tensor i + 1 */
    }
}

/* Place the gradient buffers of the inner tensors (see hp_unit_layout). Backward runs op
 * nops - 1 first: op i at time nops - 1 - i. A buffer is live from the first write to any of
 * its tensors' gradients to the last read. */
static size_t place_grads(const struct hp_unit *u, const size_t *bytes, struct hp_unit_layout *l)
{
    const int n = u->nops;
    int first[HP_UNIT_MAX_OPS + 1], last[HP_UNIT_MAX_OPS + 1], order[HP_UNIT_MAX_OPS + 1];
    int nb = 0;
    size_t size = 0;

    grad_roots(u, l->grad_root);
    for (int t = 1; t <= n; t++) {
        first[t] = n;
        last[t] = -1;
    }
    for (int t = 1; t < n; t++) {
        const int r = l->grad_root[t];
        int reader = t - 1; /* its last reader; the producer if none */
        for (int k = t; k < n; k++)
            if (u->ops[k].in[0] == t || u->ops[k].in[1] == t)
                reader = k;
        first[r] = n - 1 - reader < first[r] ? n - 1 - reader : first[r];
        last[r] = n - t > last[r] ? n - t : last[r];
    }
    for (int t = 1; t < n; t++) {
        if (l->grad_root[t] != t)
            continue;
        /* insertion by size, largest first, then by tensor id */
        int j = nb++;
        while (j > 0 && bytes[order[j - 1]] < bytes[t]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = t;
    }
    for (int i = 0; i < nb; i++) {
        const int t = order[i];
        size_t o = 0;
        for (int moved = 1; moved;) {
            moved = 0;
            for (int k = 0; k < i; k++) {
                const int p = order[k];
                if (first[p] <= last[t] && first[t] <= last[p] && l->grad_off[p] < o + bytes[t] &&
                    o < l->grad_off[p] + bytes[p]) {
                    o = l->grad_off[p] + bytes[p];
                    moved = 1;
                }
            }
        }
        l->grad_off[t] = o;
        if (o + bytes[t] > size)
            size = o + bytes[t];
    }
    for (int t = 1; t < n; t++)
        l->grad_off[t] = l->grad_off[l->grad_root[t]];
    return size;
}

void hp_unit_layout(const struct hp_unit *u, int batch, size_t align, struct hp_unit_layout *l)
{
    size_t bytes[HP_UNIT_MAX_OPS + 1];

    memset(l, 0, sizeof(*l));
    for (int i = 0; i < u->nops; i++) {
        const struct hp_op *op = &u->ops[i];
        const int t = i + 1, over = hp_unit_inplace(u, i);
        bytes[t] = hp_align_up((size_t)batch * hp_shape_size(op->out_shape) * sizeof(float), align);
        l->transient[t] = over > 0 ? l->transient[over] : hp_unit_transient(u, i);
        if (l->transient[t]) {
            l->temp = bytes[t] > l->temp ? bytes[t] : l->temp;
        } else if (over > 0) {
            l->act_off[t] = l->act_off[over];
        } else {
            l->act_off[t] = l->acts;
            l->acts += bytes[t];
        }
        l->extra_off[i] = l->extra;
        if (op->type == HP_OP_DROPOUT)
            l->extra += bytes[t];
        else if (op->type == HP_OP_BN)
            l->extra += hp_align_up(2 * (size_t)op->in_shape.c * sizeof(float), align);
        else
            l->extra += hp_align_up((size_t)batch * seq_saves(op), align);
    }
    l->grads = place_grads(u, bytes, l);
}

static int add_conv(struct hp_unit *u, int in, int filters, int kernel, int stride, int pad,
                    int bias)
{
    struct hp_op op = {.type = HP_OP_CONV,
                       .filters = filters,
                       .kernel = kernel,
                       .stride = stride,
                       .pad = pad,
                       .bias = bias};
    return hp_unit_add_op(u, &op, in, -1);
}

static int add_simple(struct hp_unit *u, enum hp_op_type type, int in0, int in1)
{
    struct hp_op op = {.type = type};
    return hp_unit_add_op(u, &op, in0, in1);
}

int hp_unit_build_conv(struct hp_unit *u, int filters, int kernel, int stride, int pad, int bias,
                       int bn, int relu)
{
    int t = add_conv(u, 0, filters, kernel, stride, pad, bias);
    if (t > 0 && bn)
        t = add_simple(u, HP_OP_BN, t, -1);
    if (t > 0 && relu)
        t = add_simple(u, HP_OP_RELU, t, -1);
    return t < 0 ? t : hp_unit_finish(u);
}

int hp_unit_build_linear(struct hp_unit *u, int outputs, int bias, int relu)
{
    struct hp_op op = {.type = HP_OP_LINEAR, .filters = outputs, .bias = bias};
    int t = hp_unit_add_op(u, &op, 0, -1);
    if (t > 0 && relu)
        t = add_simple(u, HP_OP_RELU, t, -1);
    return t < 0 ? t : hp_unit_finish(u);
}

/* The shortcut of a residual block: identity (tensor 0) when the shape is kept, else a
 * projection, 1x1 conv with the block's stride followed by batch norm. */
static int shortcut(struct hp_unit *u, int out_c, int stride)
{
    int t;

    if (stride == 1 && u->in.c == out_c)
        return 0;
    t = add_conv(u, 0, out_c, 1, stride, 0, 0);
    return t < 0 ? t : add_simple(u, HP_OP_BN, t, -1);
}

/* basic block (ResNet-18/34): 3x3 conv (stride) - bn - relu - 3x3 conv - bn, + shortcut, relu */
int hp_unit_build_basic(struct hp_unit *u, int filters, int stride)
{
    int t, s;

    t = add_conv(u, 0, filters, 3, stride, 1, 0);
    t = t < 0 ? t : add_simple(u, HP_OP_BN, t, -1);
    t = t < 0 ? t : add_simple(u, HP_OP_RELU, t, -1);
    t = t < 0 ? t : add_conv(u, t, filters, 3, 1, 1, 0);
    t = t < 0 ? t : add_simple(u, HP_OP_BN, t, -1);
    if (t < 0)
        return t;
    s = shortcut(u, filters, stride);
    t = s < 0 ? s : add_simple(u, HP_OP_ADD, t, s);
    t = t < 0 ? t : add_simple(u, HP_OP_RELU, t, -1);
    return t < 0 ? t : hp_unit_finish(u);
}

/* bottleneck block (ResNet-50/101/152, "v1.5": the stride sits on the 3x3 conv):
 * 1x1 conv - bn - relu - 3x3 conv (stride) - bn - relu - 1x1 conv (4 filters) - bn,
 * + shortcut, relu */
int hp_unit_build_bottleneck(struct hp_unit *u, int filters, int stride)
{
    int t, s;

    t = add_conv(u, 0, filters, 1, 1, 0, 0);
    t = t < 0 ? t : add_simple(u, HP_OP_BN, t, -1);
    t = t < 0 ? t : add_simple(u, HP_OP_RELU, t, -1);
    t = t < 0 ? t : add_conv(u, t, filters, 3, stride, 1, 0);
    t = t < 0 ? t : add_simple(u, HP_OP_BN, t, -1);
    t = t < 0 ? t : add_simple(u, HP_OP_RELU, t, -1);
    t = t < 0 ? t : add_conv(u, t, 4 * filters, 1, 1, 0, 0);
    t = t < 0 ? t : add_simple(u, HP_OP_BN, t, -1);
    if (t < 0)
        return t;
    s = shortcut(u, 4 * filters, stride);
    t = s < 0 ? s : add_simple(u, HP_OP_ADD, t, s);
    t = t < 0 ? t : add_simple(u, HP_OP_RELU, t, -1);
    return t < 0 ? t : hp_unit_finish(u);
}

static int add_seq(struct hp_unit *u, enum hp_op_type type, int in, int filters, int bias)
{
    struct hp_op op = {.type = type, .filters = filters, .bias = bias};
    return hp_unit_add_op(u, &op, in, -1);
}

static int add_dropout(struct hp_unit *u, int in, float p)
{
    struct hp_op op = {.type = HP_OP_DROPOUT, .p = p};
    return p > 0.0f ? hp_unit_add_op(u, &op, in, -1) : in;
}

int hp_unit_build_embed(struct hp_unit *u, int vocab, int width, float p)
{
    struct hp_op op = {.type = HP_OP_EMBED, .filters = width, .vocab = vocab};
    int t = hp_unit_add_op(u, &op, 0, -1);
    t = t < 0 ? t : add_dropout(u, t, p);
    return t < 0 ? t : hp_unit_finish(u);
}

int hp_unit_build_block(struct hp_unit *u, int heads, float p)
{
    const int d = u->in.w;
    struct hp_op att = {.type = HP_OP_ATTENTION, .heads = heads};
    int t, r;

    if (heads <= 0 || d <= 0 || d % heads != 0 || d > HP_MAX_TENSOR / 4) {
        hp_error("unit '%s': a block's width %d must be a multiple of its heads (%d)", u->name, d,
                 heads);
        return -HP_EMODEL;
    }
    t = add_seq(u, HP_OP_LAYERNORM, 0, 0, 0);
    t = t < 0 ? t : add_seq(u, HP_OP_PLINEAR, t, 3 * d, 1);
    t = t < 0 ? t : hp_unit_add_op(u, &att, t, -1);
    t = t < 0 ? t : add_seq(u, HP_OP_PLINEAR, t, d, 1);
    t = t < 0 ? t : add_dropout(u, t, p);
    r = t < 0 ? t : add_simple(u, HP_OP_ADD, t, 0);
    t = r < 0 ? r : add_seq(u, HP_OP_LAYERNORM, r, 0, 0);
    t = t < 0 ? t : add_seq(u, HP_OP_PLINEAR, t, 4 * d, 1);
    t = t < 0 ? t : add_seq(u, HP_OP_GELU, t, 0, 0);
    t = t < 0 ? t : add_seq(u, HP_OP_PLINEAR, t, d, 1);
    t = t < 0 ? t : add_dropout(u, t, p);
    t = t < 0 ? t : add_simple(u, HP_OP_ADD, t, r);
    return t < 0 ? t : hp_unit_finish(u);
}

int hp_unit_build_head(struct hp_unit *u, int vocab, int tie_unit)
{
    struct hp_op op = {.type = HP_OP_PLINEAR,
                       .filters = vocab,
                       .tie = tie_unit >= 0,
                       .tie_unit = tie_unit >= 0 ? tie_unit : 0};
    int t = add_seq(u, HP_OP_LAYERNORM, 0, 0, 0);
    t = t < 0 ? t : hp_unit_add_op(u, &op, t, -1);
    t = t < 0 ? t : hp_unit_finish(u);
    if (t < 0)
        return t;
    /* the loss, softmax cross-entropy over every logit (hp_net_loss_tokens), runs between
     * the head's forward and backward on its stage: per logit a max, an exp and a sum, then
     * the probability's exp, two subtractions and the scale of its gradient (8 FLOPs), over
     * four passes (three reads, one write: 16 bytes); counted in the backward, so that a
     * recomputing stage (which runs the forward again) does not count it twice */
    const double logits = (double)hp_shape_size(u->out);
    u->cost.bwd_flops += 8.0 * logits;
    u->cost.bwd_bytes += 16.0 * logits;
    return 0;
}

/* Lowest offset at which `size` bytes overlap none of the nc buffers (offset, size) given. */
static size_t first_fit(size_t size, const size_t (*c)[2], int nc)
{
    size_t o = 0;

    for (int moved = 1; moved;) {
        moved = 0;
        for (int k = 0; k < nc; k++) {
            if (c[k][1] && size && c[k][0] < o + size && o < c[k][0] + c[k][1]) {
                o = c[k][0] + c[k][1];
                moved = 1;
            }
        }
    }
    return o;
}

/* Place one buffer of `size` live with the nc buffers of conf[] (spots and sizes): in the
 * slot's dead end of `dead` bytes if it fits there, else in the region (its end raising
 * *ext). */
static void place_one(size_t size, size_t dead, const struct hp_grad_spot *const *conf,
                      const size_t *conf_size, int nc, struct hp_grad_spot *s, size_t *ext)
{
    size_t c[4][2];
    int n;

    for (int slot = 1; slot >= 0; slot--) {
        n = 0;
        for (int k = 0; k < nc; k++)
            if (conf[k]->in_slot == slot) {
                c[n][0] = conf[k]->off;
                c[n++][1] = conf_size[k];
            }
        s->in_slot = slot;
        s->off = first_fit(size, c, n);
        if (!slot) {
            if (s->off + size > *ext)
                *ext = s->off + size;
        } else if (s->off + size <= dead) {
            return;
        }
    }
}

void hp_grad_place(const struct hp_grad_need *need, int u0, int u1, struct hp_grad_spot *inner,
                   struct hp_grad_spot *out, size_t *dedicated)
{
    size_t ext = need[u1 - 1].out, dead = 0;

    out[u1 - 1] = (struct hp_grad_spot){0, 0};
    for (int j = u1 - 1; j >= u0; j--) {
        /* N_j is live with O_j; O_(j-1) with O_j and N_j. Dead: the blocks after j. */
        const struct hp_grad_spot *conf[2] = {&out[j], &inner[j]};
        const size_t size[2] = {need[j].out, need[j].inner};
        place_one(need[j].inner, dead, conf, size, 1, &inner[j], &ext);
        dedicated[j] = ext;
        if (j > u0)
            place_one(need[j - 1].out, dead, conf, size, 2, &out[j - 1], &ext);
        dead += need[j].block;
    }
}
