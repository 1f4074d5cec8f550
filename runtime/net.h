/* net.h - a model (or a contiguous range of its units: a pipeline stage) instantiated on a
 * backend for a fixed minibatch size, trained forward and backward.
 *
 * Everything is planned at creation and carved out of one device allocation: parameters,
 * gradients, momentum (AdamW: its first moment, and its second moment beside it), batch norm
 * state, the activations of `nslots` minibatches in flight
 * (every tensor of every unit, kept for backward; a ReLU or an add writes its output over its
 * input where nothing needs that input any more, hp_unit_inplace; a transient tensor, a batch
 * norm's output read by the next convolution, is not kept but made again just before that
 * convolution's backward, in one temp buffer, hp_unit_transient), the activation gradients
 * (buffers shared by tensors whose gradients are not live at once, hp_unit_layout, placed
 * where the slot running backward held the activations of later units when they fit there,
 * hp_grad_place, else in a region of their own), the convolution workspace and a scratch
 * buffer (hp_unit_cost.scratch_bytes). Nothing is allocated in forward, backward or update.
 * The planner's memory model (launcher/cost.h) predicts these bytes exactly. A slot's
 * backward thus uses up its activations: a second backward needs a forward first.
 *
 * Recomputation (cfg.recompute, GPipe's trade of time for memory, by segments of units,
 * hp_model_recompute_segment): a slot keeps only the net's input and the output of each unit
 * that ends a segment (and of the net's last unit); the other activations, batch norm saves
 * and dropout masks of whichever segment last ran forward sit in one work area, as large as
 * the largest segment's. Backward then goes segment by segment from the last: the segment's
 * forward pass again, from its kept input, with the weights and step seed of the slot's
 * training forward and without touching the running statistics, then its backward. The same
 * floats go in, so the gradients are bit for bit those without recomputation, for one more
 * forward pass per backward.
 *
 * Parameters are laid out unit after unit (a unit's block is contiguous), each op's weights
 * then its bias (or batch norm gamma then beta), in model order; so the parameters of units
 * [u0, u1) of a model are the same floats whether one net holds them or several stages do.
 */
#ifndef HP_NET_H
#define HP_NET_H

#include "backend.h"
#include "model.h"
#include "options.h"

#include <stddef.h>
#include <stdint.h>

struct hp_net_config {
    int batch;           /* minibatch size, > 0 */
    int nslots;          /* minibatches whose activations are kept at once (>= 1) */
    int need_input_grad; /* compute the gradient of the net's input (a stage after the first) */
    int recompute;       /* keep only each segment's output per slot and run every segment's
                            forward pass again just before its backward (see below) */
    int optimizer;       /* enum hp_optimizer (options.h): HP_OPTIMIZER_SGD (0, the default)
                            or HP_OPTIMIZER_ADAMW, which adds a second moment buffer */
};

/* Bytes a net holds, by purpose (what the planner's memory model must predict). */
struct hp_net_memory {
    size_t params, grads, momentum, state; /* state: batch norm running statistics */
    size_t moment2;                        /* AdamW's second moment (0 under SGD); its first
                                              moment is the momentum buffer */
    size_t activations;                    /* all slots (+ the work area when recomputing) */
    size_t act_grads;                      /* the gradient buffers, shared by liveness */
    size_t workspace, scratch, other;      /* other: batch norm and layer norm saves,
                                              attention probabilities, dropout masks, labels
                                              (batch x hp_model_positions int32) */
    size_t total;                          /* the one allocation */
};

struct hp_net;

/* Instantiate units [u0, u1) of `model` on `be`. The net keeps pointers to be and model,
 * which must outlive it. Parameters start at zero: call hp_net_init_params. */
int hp_net_create(struct hp_backend *be, const struct hp_model *model, int u0, int u1,
                  const struct hp_net_config *cfg, struct hp_net **out);
void hp_net_destroy(struct hp_net *net);
const struct hp_model *hp_net_model(const struct hp_net *net);

/* The bytes hp_net_create would allocate, by purpose, without allocating them (the backend's
 * convolutions are created, for their workspace, and destroyed). 0 or a negative code. */
int hp_net_plan_memory(struct hp_backend *be, const struct hp_model *model, int u0, int u1,
                       const struct hp_net_config *cfg, struct hp_net_memory *out);

/* Deterministic initialisation from `seed`: conv and linear weights He-uniform
 * (bound sqrt(6 / fan_in)), biases uniform in +-1/sqrt(fan_in), batch norm gamma 1, beta 0,
 * running mean 0 and variance 1; the sequence ops as GPT-2 (embeddings and plinear weights
 * of standard deviation 0.02, uniform; biases 0; layer norm gamma 1, beta 0; a tied head's
 * weights equal to its embed's token matrix); momentum zero. Each unit's values depend only on
 * (seed, its index in the model), not on how the model is split. */
int hp_net_init_params(struct hp_net *net, uint64_t seed);

/* Device buffers. Input of a slot: [batch, input shape of unit u0]; output of a slot:
 * [batch, output shape of unit u1 - 1]; the gradient of the output, written by the caller
 * (or by hp_net_loss) before backward (which may overwrite it: its buffer is shared with
 * other gradients); the gradient of the input (NULL unless need_input_grad; a buffer of its
 * own, valid from the end of backward until the next backward). The output's gradient has a
 * buffer of its own too; the others may lie in the slot that ran backward last. */
float *hp_net_input(struct hp_net *net, int slot);
float *hp_net_output(struct hp_net *net, int slot);
float *hp_net_output_grad(struct hp_net *net);
float *hp_net_input_grad(struct hp_net *net);

/* Forward pass of the minibatch in `slot`. train: batch norm uses (and updates) batch
 * statistics and dropout draws masks from step_seed; otherwise eval mode. */
int hp_net_forward(struct hp_net *net, int slot, int train, uint64_t step_seed);

/* Softmax cross-entropy of the output of `slot` against labels_host [batch] (copied to the
 * device). Only the first n (<= batch) samples count. If grad is set, writes the mean loss's
 * gradient (1/n scale) into the output gradient. *loss_sum and *correct as in the backend.
 * A text model's (model->positions > 0): hp_net_loss_tokens (labels [n x T], sums over the
 * n x T positions), so that callers divide by n x hp_model_positions. */
int hp_net_loss(struct hp_net *net, int slot, const int32_t *labels_host, int n, int grad,
                double *loss_sum, int *correct);

/* Softmax cross-entropy over every position of a sequence model's output (layers.h): the
 * output of `slot` is logits [batch, T, 1, vocab], labels_host [n, T] (the first n <= batch
 * samples count; T = hp_model_positions of the model, else -HP_EINVAL). *loss_sum: the sum
 * over the n x T positions of -log softmax[label]; *correct: the positions whose arg-max is
 * the label. If grad is set, writes the gradient of the mean over the n x T positions (a
 * 1 / (n T) scale) into the output gradient. Labels are range-checked (logged). */
int hp_net_loss_tokens(struct hp_net *net, int slot, const int32_t *labels_host, int n, int grad,
                       double *loss_sum, int *correct);

/* Backward pass of `slot` from the output gradient: parameter gradients (overwritten) and,
 * if configured, the input gradient. Must follow a training forward of the same slot. */
int hp_net_backward(struct hp_net *net, int slot);

/* hp_net_backward with the parameters read from `weights` (a device vector laid out as
 * hp_net_params, e.g. the version a pipeline stashed when this slot ran forward) instead of
 * the net's current ones; gradients still go to hp_net_grads. NULL: the current ones. */
int hp_net_backward_weights(struct hp_net *net, int slot, const float *weights);

/* SGD step on all parameters from the current gradients. */
int hp_net_sgd(struct hp_net *net, float lr, float momentum, float weight_decay);

/* AdamW step on all parameters from the current gradients (backend.h's adamw_update), the
 * moments in hp_net_momentum (m) and hp_net_moment2 (v). d->wd applies only to the tensors
 * hp_op_param_tensors marks (layers.h: weight matrices; not biases, norms, embeddings); the
 * others get wd 0. d->step is the update's count, from 1 (the caller keeps it, for
 * checkpoints). -HP_EINVAL (logged) unless the net was created with HP_OPTIMIZER_ADAMW. */
int hp_net_adamw(struct hp_net *net, const struct hp_adamw_desc *d);

/* Gradient clipping by the global norm, in two halves so that the norm may be summed over
 * several nets (a VW's stages) in between: *sumsq = the sum of the squares of the net's
 * gradients (in double; synchronous); then hp_net_clip_grads scales the gradients by
 * max_norm / norm when norm > max_norm > 0, and leaves them untouched otherwise (a
 * max_norm of 0: no clipping). A norm that is not finite: -HP_ERANGE (logged), gradients
 * untouched. */
int hp_net_grad_sumsq(struct hp_net *net, double *sumsq);

/* The sums of hp_net_grad_sumsq unit by unit: per_unit[u - u0] for the net's units [u0, u1),
 * each the sum over its ops in order; hp_net_grad_sumsq adds them in unit order. A tied
 * copy (a head's with tie = true) is left out: the matrix counts once, at its embed. So a VW
 * that adds its stages' per-unit sums in unit order gets hetpipe train's norm bit for bit. */
int hp_net_grad_sumsq_units(struct hp_net *net, double *per_unit);

/* Tied embeddings (layers.h: a head with tie = true keeps a copy of its embed's token matrix
 * [V, d], hp_model_tied_head). After a backward pass both copies' gradients must become their
 * sum, so that equal copies take equal updates and never drift (Megatron-LM's embedding
 * group). The device gradient of the part this net holds (the embed's when both), *n floats. */
float *hp_net_tie_grad(struct hp_net *net, size_t *n);
/* Make the tied gradients their sum: with both parts here, embed + copy into both (other
 * unused); with one, its gradient + `other` (a device vector of the other part's gradient,
 * from the stage that holds it). IEEE addition commutes, so both stages get the same floats.
 * A net without a tie: 0, nothing done. */
int hp_net_tie_sum(struct hp_net *net, const float *other);
int hp_net_clip_grads(struct hp_net *net, double norm, double max_norm);

/* Parameters and gradients as one device vector of hp_net_nparams() floats, in model order. */
size_t hp_net_nparams(const struct hp_net *net);
float *hp_net_params(struct hp_net *net);
float *hp_net_grads(struct hp_net *net);
float *hp_net_momentum(struct hp_net *net); /* parallel to the parameters */
float *hp_net_moment2(struct hp_net *net);  /* AdamW's v, parallel too; NULL under SGD */
size_t hp_net_nstate(const struct hp_net *net);
float *hp_net_state(struct hp_net *net);

void hp_net_memory(const struct hp_net *net, struct hp_net_memory *out);

/* Write n host floats, raw float32 in host byte order, to `path` (through path.tmp and a
 * rename, so a reader never sees half a file). 0 or -HP_EIO, logged naming the file. */
int hp_save_floats(const char *path, const float *x, size_t n);

/* Time spent per op type, forward and backward, and the FLOPs done there (for benchmarks
 * and `hetpipe profile`). While a profile is attached, every op is timed between device
 * synchronisations, which costs a little; detach with NULL. The caller owns `prof`. */
struct hp_net_profile {
    double fwd_s[HP_OP_NTYPES], bwd_s[HP_OP_NTYPES];
    double fwd_flops[HP_OP_NTYPES], bwd_flops[HP_OP_NTYPES];
    double *unit_fwd_s, *unit_bwd_s; /* optional, [model->nunits], indexed by model unit */
};
void hp_net_set_profile(struct hp_net *net, struct hp_net_profile *prof);

/* Per-op device pointers for tests: the activation (slot) and gradient buffers of the
 * net-global tensor `t` (0 = input; op i's output is tensor i + 1 in net order). A tensor an
 * in-place op overwrote shares that op's output buffer, a transient tensor is the temp
 * buffer, and gradient buffers are shared by tensors not live at once (a gradient in a slot:
 * that of the last backward): after backward only the input's gradient is sure to hold its
 * own values. */
int hp_net_ntensors(const struct hp_net *net);
float *hp_net_tensor(struct hp_net *net, int slot, int t);
float *hp_net_tensor_grad(struct hp_net *net, int t);

#endif
