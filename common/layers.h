/* layers.h - ops and units: what a model is made of, their shapes and their costs.
 *
 * An op is one primitive layer (a convolution, a batch norm, a ReLU, ...). A unit is what the
 * planner partitions: an indivisible, ordered little graph of ops with one input and one
 * output (a conv with its batch norm and ReLU, or a whole residual block). Tensors inside a
 * unit are numbered: tensor 0 is the unit's input, every op writes one new tensor, and the
 * last op's output is the unit's output. Shapes are per sample, [c, h, w]; a flat vector of
 * n values is [n, 1, 1].
 *
 * Sequences (the GPT ops, from HP_OP_EMBED on): a sequence of T positions, each a vector of
 * d features, is the shape [T, 1, d], so that a minibatch is [batch x T, d] rows of d floats,
 * row-major ([B][T][d], PyTorch's layout): an op applied per position is one GEMM
 * over batch x T rows. Token ids enter as floats, one per position: [T, 1, 1] (exact as
 * floats up to 2^24). The logits of a vocabulary of V tokens are [T, 1, V], and the loss is
 * the softmax cross-entropy of every position against its own label (hp_net_loss_tokens).
 *
 * Nothing here touches a device: this is the description that the model loader builds, the
 * planner costs and hp_net (net.h) instantiates.
 */
#ifndef HP_LAYERS_H
#define HP_LAYERS_H

#include <stddef.h>

#define HP_UNIT_MAX_OPS 16
#define HP_NAME_MAX 64

struct hp_shape {
    int c, h, w;
};

/* The most values a tensor may hold per sample, and an op's parameters: 2^31 - 1. */
#define HP_MAX_TENSOR 2147483647

/* Every buffer of a net (net.h) starts on a multiple of HP_ALIGN bytes. */
#define HP_ALIGN 256

/* bytes rounded up to a multiple of `align` (a power of two; 1: unchanged). */
static inline size_t hp_align_up(size_t bytes, size_t align)
{
    return (bytes + align - 1) & ~(align - 1);
}

static inline size_t hp_shape_size(struct hp_shape s)
{
    return (size_t)s.c * s.h * s.w;
}

enum hp_op_type {
    HP_OP_CONV,    /* filters, kernel, stride, pad, bias: [c,h,w] -> [filters,p,q] */
    HP_OP_LINEAR,  /* outputs, bias: any shape (flattened) -> [outputs,1,1] */
    HP_OP_BN,      /* batch norm per channel, eps 1e-5, momentum 0.1 */
    HP_OP_RELU,    /* elementwise */
    HP_OP_MAXPOOL, /* kernel, stride, pad */
    HP_OP_AVGPOOL, /* kernel, stride, pad (padding counted); global when kernel = 0 */
    HP_OP_FLATTEN, /* [c,h,w] -> [chw,1,1] (a copy) */
    HP_OP_DROPOUT, /* p */
    HP_OP_ADD,     /* in[0] + in[1], same shapes */
    /* sequence ops, on [T, 1, d] (see above) */
    HP_OP_EMBED,     /* filters = d, vocab: token ids [T,1,1] -> [T,1,d]: token embedding
                        [vocab, d] (the weights) + learned position embedding [T, d] (the
                        "bias"); no input gradient */
    HP_OP_LAYERNORM, /* over the d features of each position, eps 1e-5; gamma, beta [d] */
    HP_OP_PLINEAR,   /* linear per position: filters = outputs, bias: [T,1,in] -> [T,1,out],
                        weights [out, in] (PyTorch's nn.Linear) */
    HP_OP_ATTENTION, /* causal multi-head self-attention core, heads: [T,1,3d] (q | k | v, each
                        head's dh = d / heads columns in turn) -> [T,1,d]; softmax(q k^T /
                        sqrt(dh)) over keys <= the query's position, times v */
    HP_OP_GELU,      /* elementwise, the tanh form (GPT-2's, PyTorch's approximate='tanh') */
    HP_OP_NTYPES
};

struct hp_op {
    enum hp_op_type type;
    int in[2]; /* unit-local tensor ids; in[1] only for HP_OP_ADD */
    int out;   /* unit-local tensor id = index of this op + 1 */
    int filters, kernel, stride, pad, bias;
    float p;
    int heads; /* HP_OP_ATTENTION */
    int vocab; /* HP_OP_EMBED: tokens */
    int tie;   /* HP_OP_PLINEAR of a head with tie = true: its weights are tied to the token
                  matrix of the embed unit of model index tie_unit (the same values at
                  initialisation; the gradients are to be summed, model.h) */
    int tie_unit;
    struct hp_shape in_shape, out_shape;
    size_t param_off; /* floats into the unit's parameter block: weights, then bias / gamma, beta */
    size_t nparams;   /* trainable floats */
    size_t state_off; /* floats into the unit's state block (batch norm running mean, var) */
    size_t nstate;
};

/* Costs of one unit, per sample (multiply by the minibatch size). */
struct hp_unit_cost {
    double fwd_macs;        /* multiply-adds of convolutions and linear layers */
    double fwd_flops;       /* all forward floating-point operations (2 per MAC, + the rest) */
    double bwd_flops;       /* backward: gradients of the input and of the parameters */
    double fwd_bytes;       /* memory traffic estimate of the forward pass (roofline) */
    double bwd_bytes;       /* of the backward pass */
    size_t param_bytes;     /* trainable parameters (also = gradient bytes, = momentum bytes) */
    size_t state_bytes;     /* non-trained state (batch norm running statistics) */
    size_t out_bytes;       /* the unit's output activation (what crosses a stage boundary) */
    size_t saved_bytes;     /* activations kept for backward, the input excluded: op outputs
                               that own memory (see hp_unit_inplace) and dropout masks */
    size_t grad_bytes;      /* the unit's inner activation gradients live at once (its input's
                               and output's excluded), as hp_unit_layout places them */
    size_t workspace_bytes; /* largest per-sample scratch of one op (CPU im2col; an
                               attention's T x T probability gradient) */
    size_t scratch_bytes;   /* largest tensor whose gradient backward builds in a scratch
                               buffer: one read by two ops (the second contribution is
                               computed there, then added), or the unit's input read by a
                               batch norm (its backward writes an input gradient even when
                               nothing needs one) */
};

struct hp_unit {
    char name[HP_NAME_MAX];
    char kind[16]; /* "conv", "linear", "bottleneck", ... as in the model file */
    int nops;
    struct hp_op ops[HP_UNIT_MAX_OPS];
    struct hp_shape in, out;
    size_t nparams, nstate; /* floats */
    struct hp_unit_cost cost;
};

/* The name of an op type ("conv", "bn", ...); static. */
const char *hp_op_name(enum hp_op_type type);

/* Unit builders. Each starts from an empty unit with name and kind set (hp_unit_init), adds
 * ops, and hp_unit_finish() infers every shape, lays out parameters and computes costs.
 * Shapes that cannot work (a kernel larger than the padded input, mismatched residual shapes)
 * give -HP_EMODEL with a message naming the unit and the problem. */
void hp_unit_init(struct hp_unit *u, const char *name, const char *kind, struct hp_shape in);

/* Append an op reading tensor `in0` (and `in1` for ADD, else -1); returns the new tensor id,
 * or -HP_EMODEL if the unit is full. */
int hp_unit_add_op(struct hp_unit *u, const struct hp_op *proto, int in0, int in1);

int hp_unit_finish(struct hp_unit *u);

/* The composite units. `filters` is the output channels of a conv / basic block and the
 * width (the output is 4 x filters) of a bottleneck; a projection shortcut (1x1 conv, stride,
 * batch norm) is added when the block changes the shape. */
int hp_unit_build_conv(struct hp_unit *u, int filters, int kernel, int stride, int pad, int bias,
                       int bn, int relu);
int hp_unit_build_linear(struct hp_unit *u, int outputs, int bias, int relu);
int hp_unit_build_basic(struct hp_unit *u, int filters, int stride);
int hp_unit_build_bottleneck(struct hp_unit *u, int filters, int stride);

/* The trainable tensors of an op, in the order of its parameter block (param_off): a
 * convolution's, linear or per-position linear layer's weights then its bias (if any), a
 * batch or layer norm's gamma then beta, an embedding's token then position matrices (one
 * tensor). Writes their sizes in floats into n[] and into decay[] whether AdamW's decoupled
 * weight decay applies to each: to the weight matrices of convolutions and (per-position)
 * linear layers only (not a tied head's: they are its embed's token matrix), never to biases, norm
 * parameters or embeddings (GPT-2's and PyTorch practice). Every other op type, and a new one
 * unless it is listed here, has no decay. Returns how many tensors (0, 1 or 2); their sizes add up
 * to op->nparams. SGD ignores the flags (it decays every parameter, as it always has). */
int hp_op_param_tensors(const struct hp_op *op, size_t n[2], int decay[2]);

/* The GPT units, on sequences [T, 1, d] (see above); dropout p in [0, 1), its ops left out
 * when p = 0.
 *  - embed: token ids [T,1,1] -> embedding (vocab x width) + position (T x width), then
 *    dropout: [T,1,width];
 *  - block: GPT-2's pre-norm block, [T,1,d] -> [T,1,d], d a multiple of heads:
 *      t1 = ln1(x); t2 = plinear 3d (bias)(t1); t3 = attention(t2); t4 = plinear d (bias)(t3);
 *      [dropout]; t6 = x + t5; t7 = ln2(t6); t8 = plinear 4d (bias)(t7); t9 = gelu(t8);
 *      t10 = plinear d (bias)(t9); [dropout]; out = t6 + t11
 *  - head: ln_f, then plinear vocab (no bias): [T,1,d] -> logits [T,1,vocab]; tie_unit >= 0
 *    marks the weights as tied to that embed unit's token matrix (tie = 1), else -1. Its
 *    backward cost includes the loss over its logits (the model's last unit: the loss follows). */
int hp_unit_build_embed(struct hp_unit *u, int vocab, int width, float p);
int hp_unit_build_block(struct hp_unit *u, int heads, float p);
int hp_unit_build_head(struct hp_unit *u, int vocab, int tie_unit);

/* Multiply-adds of one op per sample: conv, linear, plinear (T in x out) and attention
 * (2 T^2 d: q k^T and p v over all heads, the masked half included: the GEMMs compute it);
 * 0 for the other types. */
double hp_op_macs(const struct hp_op *op);

/* Shape of tensor `t` of a finished unit. */
struct hp_shape hp_unit_tensor_shape(const struct hp_unit *u, int t);

/* Whether op `i` of a finished unit writes its output over one of its inputs: the unit-local
 * tensor it overwrites (its output then shares that tensor's memory), or -1. Only a ReLU or
 * an add does, over an input tensor that is not the unit's input (0), that has no other
 * reader, and whose producer's backward does not read its own output (a ReLU's or a max
 * pooling's does). No backward reads what it overwrites: a ReLU's backward reads only its
 * output, an add's nothing; and an overwritten tensor had one reader, the op itself. */
int hp_unit_inplace(const struct hp_unit *u, int i);

/* Whether the output of op i of a finished unit is transient: not kept for backward but made
 * again, from what is kept, when backward needs it. A batch norm's output, or the in-place
 * ReLU's over it, read by one op only, a convolution or linear layer that comes right after
 * (the chain's end not being the unit's output): its backward needs that input, and the
 * batch norm (with the same batch statistics) and ReLU that made it cost little next to the
 * convolution. The batch norm's own backward reads its input and saved statistics, the
 * ReLU's its output, made again just before the convolution's backward. */
int hp_unit_transient(const struct hp_unit *u, int i);

/* How a net (net.h) lays out one unit at minibatch `batch`, every buffer rounded up to
 * `align` bytes (HP_ALIGN; 1 for per-sample figures at batch 1). Offsets are bytes into the
 * unit's block of each region. The planner (launcher/cost.c) predicts a net's memory from
 * these same figures.
 *  - activations (one minibatch): the outputs of ops that are not in place and not
 *    transient, in op order; an in-place op's output has the offset of the tensor it
 *    overwrites; transient tensors go to one buffer of the net's, as large as the largest;
 *  - extra (one minibatch): dropout masks [batch x size], batch norm saves [2 x channels],
 *    layer norm saves [batch x T x 2] (mean, 1/std per position) and attention
 *    probabilities [batch x heads x T x T] (what their backward reads);
 *  - gradients: of the inner tensors (1 .. nops - 1; the input's and the output's are the
 *    net's, hp_grad_place). An in-place op's input gradient shares its output gradient's
 *    buffer (backward runs in place too), so a chain of in-place ops shares one buffer, the
 *    unit output's if the chain ends there. A buffer is live during the unit's backward pass
 *    from the first write to one of its gradients (by the tensor's last reader; later
 *    readers add to it) to the last read (by the producer of the chain's first tensor);
 *    buffers are placed largest first, each at the lowest offset that overlaps no placed
 *    buffer live at the same time, so the region is about the peak of gradients live at
 *    once, not their sum. */
struct hp_unit_layout {
    size_t acts, extra, grads;            /* bytes of each region */
    size_t temp;                          /* the largest transient tensor (0: none) */
    int transient[HP_UNIT_MAX_OPS + 1];   /* tensor t is transient (hp_unit_transient) */
    size_t act_off[HP_UNIT_MAX_OPS + 1];  /* tensor t >= 1 (not transient) */
    size_t extra_off[HP_UNIT_MAX_OPS];    /* op i (dropout and batch norm) */
    size_t grad_off[HP_UNIT_MAX_OPS + 1]; /* tensor t (1 <= t < nops, unless grad_root is nops) */
    int grad_root[HP_UNIT_MAX_OPS + 1];   /* the tensor whose gradient buffer t's is: t itself,
                                             the end of its in-place chain, nops: the output's */
};
void hp_unit_layout(const struct hp_unit *u, int batch, size_t align, struct hp_unit_layout *l);

/* Where a net's activation gradients go (net.h). Backward runs unit by unit from the last, so
 * while unit j runs backward the activations the slot holds for units after j are dead: the
 * gradient buffers go there when they fit, else into one region of their own. Per unit j of
 * the net: its inner gradients N_j (hp_unit_layout's grads; live while j runs backward) and
 * its output's gradient O_j (written by unit j + 1's backward, read by j's; the net output's,
 * written before backward, always has its own region). Both may use the dead end of the slot
 * (the blocks of units j + 1 ...), taken in turn from the last unit back, each at the lowest
 * offset that overlaps no buffer live at the same time, measured back from the slot's end, so
 * a buffer's place does not depend on where the net starts. */
struct hp_grad_need {
    size_t block; /* the unit's activations in a slot */
    size_t out;   /* its output's gradient */
    size_t inner; /* its inner gradients */
};
struct hp_grad_spot {
    int in_slot; /* in the slot that runs backward, else in the gradient region */
    size_t off;  /* in_slot: bytes from the buffer's end to the slot's end; else the offset
                    into the region */
};
/* Place N_j (inner[j]) and O_j (out[j]) for the units [u0, u1) of need[] (indexed by unit;
 * O_(u0-1), the net input's gradient, is not placed). dedicated[j], for u0 <= j < u1: the
 * bytes of the gradient region of a net of units [j, u1). */
void hp_grad_place(const struct hp_grad_need *need, int u0, int u1, struct hp_grad_spot *inner,
                   struct hp_grad_spot *out, size_t *dedicated);

#endif
