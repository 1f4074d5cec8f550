/* model.h - model definitions: loading etc/models/NAME.ini into an ordered list of units.
 *
 * File format (all keys checked; unknown keys and sections are errors):
 *
 *   [model]
 *   name    = cnn                   ; defaults to the file's base name
 *   dataset = fashion-mnist         ; fashion-mnist | imagenet | none | text
 *   input   = 1x28x28               ; channels x height x width
 *   classes = 10                    ; the last unit must output this many values
 *
 *   [conv1]                         ; one section per unit, in order; the name is the unit's
 *   type = conv                     ; conv | linear | maxpool | avgpool | gap | batchnorm |
 *                                   ; relu | flatten | dropout | basic | bottleneck |
 *                                   ; embed | block | head (text models, below)
 *   ...                             ; the type's keys (see hp_model_help / README)
 *   repeat = 1                      ; the unit N times (names get .1 .. .N; only the first
 *                                   ; keeps stride, so a stage of residual blocks is one section)
 *
 * Sequence models (GPT, layers.h's [T, 1, d] layout): `dataset = text`, `input = Tx1x1` (the
 * context: T token ids per sample), `classes = V` (the vocabulary); the units
 *   type = embed   width = d, dropout = 0      ; first: token + position embedding
 *   type = block   heads = H, dropout = 0      ; GPT-2's pre-norm block; repeat = N
 *   type = head    tie = false                 ; last: layer norm + projection to V logits
 * and the last unit outputs [T, 1, V]: a label per position (hp_net_loss_tokens). These units
 * need `dataset = text`, and `dataset = text` needs them (embed first, head last). A head with
 * tie = true keeps its own copy of the embed's token matrix [V, d] (the same values at
 * initialisation): a trainer must sum the two gradients every step (between the stages that
 * hold them) so that the copies stay equal; hp_model.ntied counts the copy.
 */
#ifndef HP_MODEL_H
#define HP_MODEL_H

#include "layers.h"

#include <stddef.h>

struct hp_model {
    char name[HP_NAME_MAX];
    char dataset[32];
    struct hp_shape input;
    int classes;
    int nunits;
    struct hp_unit *units; /* owned */
    size_t nparams;        /* trainable floats over all units (a tied head's copy included) */
    size_t ntied;          /* of those, the floats of tied copies (a head's with tie = true) */
    size_t nstate;
    int positions; /* labels per sample: T for dataset = text, else 1 (0: read as 1) */
};

/* Labels per sample of model m: a sequence model's T, else 1. */
static inline int hp_model_positions(const struct hp_model *m)
{
    return m->positions > 0 ? m->positions : 1;
}

/* The unit of m's tied head (a head with tie = true: its projection is a copy of an embed's
 * token matrix), and in *embed that embed's unit; -1 (and *embed -1) when m has none. */
int hp_model_tied_head(const struct hp_model *m, int *embed);

/* Load a model from a file path, or by name from the model directories (see
 * hp_model_resolve). On success *out is new (hp_model_destroy) and 0 is returned; on error
 * the message names the file, the section (unit) and the key. */
int hp_model_load(const char *name_or_path, struct hp_model **out);
void hp_model_destroy(struct hp_model *m);

/* Units per recomputation segment (net.h): a net that recomputes keeps per minibatch the
 * output of every unit that ends a segment (hp_model_segment_end, and of its last unit) and
 * makes the rest again, a segment at a time. The segment (1 to 64 units) that makes the
 * whole model's recomputing training step smallest per sample: the outputs kept, the largest
 * segment's activations and extras, and the activation gradients that find no dead kept
 * output to lie in (hp_grad_place). */
int hp_model_recompute_segment(const struct hp_model *m);

/* Whether unit u ends a recomputation segment of `seg` units. */
static inline int hp_model_segment_end(int seg, int u)
{
    return (u + 1) % seg == 0;
}

/* Bytes per sample of the activation gradients a net of the whole model (no recomputation)
 * holds in a region of their own (hp_grad_place): those that find no dead activations. */
size_t hp_model_grad_bytes(const struct hp_model *m);

/* Find the file of model `name`: a path containing '/' or ending in .ini is used as is;
 * otherwise $HETPIPE_MODELS, ./etc/models, the directory next to the executable
 * (../etc/models, ../share/hetpipe/models) and HP_DATADIR/models are tried. Writes the path
 * into buf (size n); returns 0, or -HP_ENOTFOUND (logged, with the places tried). */
int hp_model_resolve(const char *name, char *buf, size_t n);

/* Sum of a per-sample cost field over units [u0, u1). */
struct hp_unit_cost hp_model_cost(const struct hp_model *m, int u0, int u1);

#endif
