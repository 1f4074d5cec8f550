/* net.c - instantiating and running a range of a model's units. */
#include "net.h"
#include "clock.h"

#include "error.h"
#include "log.h"
#include "options.h"
#include "output.h"
#include "rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A tensor of the net: the input (id 0) or the output of one op. */
struct net_tensor {
    struct hp_shape shape;
    size_t size;      /* floats per minibatch: batch x shape */
    size_t act_off;   /* floats into a slot's activation region (an in-place op's output
                         shares the offset of the tensor it overwrites), or into the work
                         area when in_work */
    int in_work;      /* recompute: a tensor held in the one work area that every segment's
                         recomputed forward pass shares */
    int in_temp;      /* transient (hp_unit_transient): in the net's one temp buffer */
    int temp_from;    /* in_temp: the net op that starts its chain (a batch norm) */
    size_t grad_off;  /* floats into the gradient region, or into a slot when grad_in_slot
                         (hp_grad_place; shared by tensors not live at once) */
    int grad_in_slot; /* the gradient sits in the dead end of the slot running backward */
    int has_grad;     /* all but the input unless need_input_grad */
    float *grad;      /* NULL for the input unless need_input_grad; in a slot: that of the
                         last backward (slot 0 before any) */
    int consumers;    /* ops reading it (+1 for the net's output) */
    int grad_ready;   /* during backward: the gradient holds a first contribution */
};

struct net_op {
    const struct hp_op *op;
    int unit;                         /* model index */
    int index;                        /* op index in its unit */
    int in[2], out;                   /* net tensor ids */
    float *w, *b, *gw, *gb, *rm, *rv; /* parameters (b: bias or beta; w: weights or gamma) */
    struct hp_conv *conv;
    size_t extra_off; /* floats into a slot's extra region (masks, batch norm saves), or
                         into the work area when the net recomputes */
    union {
        struct hp_conv_desc conv;
        struct hp_pool_desc pool;
        struct hp_bn_desc bn;
        struct hp_attn_desc attn;
    } d;
};

/* Parameters [off, off + n) that AdamW decays (decay) or not (hp_op_param_tensors). */
struct net_run {
    size_t off, n;
    int decay;
};

struct hp_net {
    struct hp_backend *be;
    const struct hp_model *model;
    int u0, u1;
    struct hp_net_config cfg;
    int seg; /* units per recomputation segment (1 unless recomputing) */

    int nops, ntensors;
    struct net_op *ops;
    struct net_tensor *tensors;

    void *arena;
    float *params, *grads, *momentum, *moment2, *state;
    struct net_run *runs; /* the parameters as runs of one AdamW decay flag, in order */
    int nruns;
    size_t nparams, nstate;
    float *acts;        /* nslots x slot_floats */
    size_t slot_floats; /* activations of one slot */
    float *extra;       /* nslots x extra_floats */
    size_t extra_floats;
    float *work;         /* recompute: one segment's activations (but its output) and extras */
    size_t work_floats;  /* 0 unless recompute */
    float *temp;         /* the transient tensor made last */
    size_t temp_floats;  /* the largest transient tensor */
    int temp_holds;      /* the tensor the temp buffer holds for the slot in backward, or -1 */
    uint64_t *slot_seed; /* recompute: the step seed of each slot's training forward */
    float *grad_region;  /* the activation gradients that are not in a slot */
    float *workspace, *scratch;
    int32_t *labels;
    int32_t *labels_host; /* staging for hp_net_loss (allocated once) */
    struct hp_net_memory mem;
    struct hp_net_profile *prof;
};

void hp_net_destroy(struct hp_net *net)
{
    if (!net)
        return;
    for (int i = 0; i < net->nops; i++)
        if (net->ops[i].conv)
            net->be->ops->conv_destroy(net->be, net->ops[i].conv);
    if (net->arena)
        net->be->ops->free(net->be, net->arena);
    free(net->labels_host);
    free(net->slot_seed);
    free(net->runs);
    free(net->ops);
    free(net->tensors);
    free(net);
}

const struct hp_model *hp_net_model(const struct hp_net *net)
{
    return net->model;
}

/* Build the net-global op and tensor lists from the units. */
static int build_graph(struct hp_net *net)
{
    const struct hp_model *m = net->model;
    const int batch = net->cfg.batch;
    int nops = 0, t = 0;

    for (int u = net->u0; u < net->u1; u++)
        nops += m->units[u].nops;
    net->ops = calloc((size_t)nops, sizeof(*net->ops));
    net->tensors = calloc((size_t)nops + 1, sizeof(*net->tensors));
    if (!net->ops || !net->tensors)
        return -HP_ENOMEM;
    net->nops = nops;
    net->ntensors = nops + 1;
    net->tensors[0].shape = m->units[net->u0].in;

    int base = 0; /* net tensor id of the current unit's input */
    for (int u = net->u0; u < net->u1; u++) {
        const struct hp_unit *unit = &m->units[u];
        for (int i = 0; i < unit->nops; i++) {
            struct net_op *o = &net->ops[t];
            o->op = &unit->ops[i];
            o->unit = u;
            o->index = i;
            /* unit-local tensor 0 is the unit's input, local tensor k > 0 is op k-1's */
            for (int j = 0; j < 2; j++) {
                int li = unit->ops[i].in[j];
                o->in[j] = li < 0 ? -1 : (li == 0 ? base : base + li);
                if (o->in[j] >= 0)
                    net->tensors[o->in[j]].consumers++;
            }
            o->out = t + 1;
            net->tensors[t + 1].shape = unit->ops[i].out_shape;
            t++;
        }
        base += unit->nops;
    }
    net->tensors[net->ntensors - 1].consumers++; /* the output is read by the loss / next stage */
    for (int i = 0; i < net->ntensors; i++)
        net->tensors[i].size = (size_t)batch * hp_shape_size(net->tensors[i].shape);
    return 0;
}

/* Whether the backend has the ops of a sequence op type (backend.h: NULL when it has not). */
static int seq_supported(const struct hp_backend *be, enum hp_op_type type)
{
    const struct hp_backend_ops *o = be->ops;
    int ok = 1;

    switch (type) {
    case HP_OP_EMBED:
        ok = o->embed_forward && o->embed_backward;
        break;
    case HP_OP_LAYERNORM:
        ok = o->layernorm_forward && o->layernorm_backward;
        break;
    case HP_OP_ATTENTION:
        ok = o->attention_forward && o->attention_backward;
        break;
    case HP_OP_GELU:
        ok = o->gelu_forward && o->gelu_backward;
        break;
    default:
        break;
    }
    if (ok)
        return 0;
    hp_error("net: the %s backend has no %s op", be->name, hp_op_name(type));
    return -HP_EUNSUPPORTED;
}

/* Fill in the backend descriptors of each op and create the convolutions. */
static int make_descs(struct hp_net *net, size_t *ws_max)
{
    const int batch = net->cfg.batch;

    *ws_max = 0;
    for (int i = 0; i < net->nops; i++) {
        struct net_op *o = &net->ops[i];
        const struct hp_op *op = o->op;
        struct hp_shape in = op->in_shape, out = op->out_shape;
        size_t ws = 0;
        int rc;

        switch (op->type) {
        case HP_OP_CONV:
            o->d.conv =
                (struct hp_conv_desc){batch,      in.c,       in.h,    in.w,  out.c, op->kernel,
                                      op->kernel, op->stride, op->pad, out.h, out.w, op->bias};
            rc = net->be->ops->conv_create(net->be, &o->d.conv, &o->conv, &ws);
            if (rc)
                return rc;
            if (ws > *ws_max)
                *ws_max = ws;
            break;
        case HP_OP_MAXPOOL:
        case HP_OP_AVGPOOL:
            o->d.pool = (struct hp_pool_desc){batch,      in.c,    in.h,  in.w, op->kernel,
                                              op->stride, op->pad, out.h, out.w};
            break;
        case HP_OP_BN:
            o->d.bn = (struct hp_bn_desc){batch, in.c, in.h * in.w, 1e-5f, 0.1f};
            break;
        case HP_OP_ATTENTION:
            o->d.attn = (struct hp_attn_desc){batch, in.c, out.w, op->heads};
            ws = (size_t)in.c * (size_t)in.c * sizeof(float); /* layers.c's workspace_bytes */
            if (ws > *ws_max)
                *ws_max = ws;
            break;
        default:
            break;
        }
        rc = seq_supported(net->be, op->type);
        if (rc)
            return rc;
    }
    return 0;
}

/* Bytes of a buffer of n floats, as the arena rounds it. */
static size_t abytes(size_t n)
{
    return hp_align_up(n * sizeof(float), HP_ALIGN);
}

/* Whether unit u ends a recomputation segment of the net (hp_model_recompute_segment). */
static int seg_end(const struct hp_net *net, int u)
{
    return u == net->u1 - 1 || hp_model_segment_end(net->seg, u);
}

/* Recompute: the work-area bytes of unit u's block (its activations and extras, its output
 * excluded when it ends a segment: that stays in the slot). */
static size_t work_block(const struct hp_net *net, int u, const struct hp_unit_layout *l)
{
    const size_t out = abytes((size_t)net->cfg.batch * hp_shape_size(net->model->units[u].out));

    return l->acts + l->extra - (seg_end(net, u) ? out : 0);
}

/* Recompute: the work area's size (the largest segment's blocks), and into seg_at[k] where
 * the block of the net's unit k starts in it (its segment's blocks in order from 0). */
static void plan_work(struct hp_net *net, const struct hp_unit_layout *ls, size_t *seg_at)
{
    size_t total = 0, w = 0;

    for (int u = net->u0, k = 0; u < net->u1; u++, k++) {
        seg_at[k] = total;
        total += work_block(net, u, &ls[k]);
        if (seg_end(net, u)) {
            w = total > w ? total : w;
            total = 0;
        }
    }
    net->work_floats = w / sizeof(float);
}

/* Where tensor `local` (1 .. nops) of a unit goes when the net recomputes, the unit's block
 * starting `at` bytes into the work area: all of it, unless the unit ends a segment (`end`);
 * then its output and the in-place chain ending in it (they share its buffer, at out_off in
 * the unit's activation block of l) stay in the slot, at `bound` floats, and the block is
 * closed up over the output's buffer of `out_bytes`. */
static void place_recomputed(struct net_tensor *t, const struct hp_unit_layout *l, int local,
                             int nops, int end, size_t bound, size_t at, size_t out_bytes)
{
    const size_t off = l->act_off[local], out_off = l->act_off[nops];

    t->in_work = !end || off != out_off;
    if (!end)
        t->act_off = (at + off) / sizeof(float);
    else
        t->act_off =
            t->in_work ? (at + off - (off > out_off ? out_bytes : 0)) / sizeof(float) : bound;
}

/* Lay out unit u's tensors and extras (its layout l; its ops from net op `base`): in the
 * slot and the extras region, or, recomputing, in the work area from seg_at bytes. What
 * hp_grad_place needs of it into *need. */
static void place_unit(struct hp_net *net, int u, const struct hp_unit_layout *l, size_t base,
                       size_t seg_at, struct hp_grad_need *need)
{
    const struct hp_unit *unit = &net->model->units[u];
    const size_t out_bytes = abytes((size_t)net->cfg.batch * hp_shape_size(unit->out));
    const int rc = net->cfg.recompute, end = seg_end(net, u);

    for (int i = 0; i < unit->nops; i++) {
        struct net_op *o = &net->ops[base + (size_t)i];
        struct net_tensor *t = &net->tensors[o->out];
        t->in_temp = l->transient[i + 1];
        if (t->in_temp) {
            const int over = hp_unit_inplace(unit, i);
            t->temp_from =
                over > 0 ? net->tensors[base + (size_t)over].temp_from : (int)(base + (size_t)i);
        }
        if (rc) {
            if (!t->in_temp)
                place_recomputed(t, l, i + 1, unit->nops, end, net->slot_floats, seg_at, out_bytes);
            o->extra_off =
                (seg_at + l->acts - (end ? out_bytes : 0) + l->extra_off[i]) / sizeof(float);
        } else {
            if (!t->in_temp)
                t->act_off = net->slot_floats + l->act_off[i + 1] / sizeof(float);
            o->extra_off = net->extra_floats + l->extra_off[i] / sizeof(float);
        }
        t->has_grad = 1;
    }
    *need = (struct hp_grad_need){rc ? (end ? out_bytes : 0) : l->acts, out_bytes, l->grads};
    net->temp_floats =
        l->temp / sizeof(float) > net->temp_floats ? l->temp / sizeof(float) : net->temp_floats;
    if (rc && end) {
        net->slot_floats += out_bytes / sizeof(float);
    } else if (!rc) {
        net->slot_floats += l->acts / sizeof(float);
        net->extra_floats += l->extra / sizeof(float);
    }
}

/* Lay out the activations of one slot and the per-op extras, unit by unit as hp_unit_layout
 * places them (so the planner predicts the same bytes), then the activation gradients: the
 * input's own buffer (need_input_grad) at the start of the gradient region, then each unit's
 * inner gradients and output gradient where hp_grad_place puts them, in the dead end of the
 * slot running backward or in the region after the input's.
 * Recompute: a slot holds the input and the output of each unit that ends a segment; one
 * work area, as large as the largest segment's blocks, serves every segment's forward pass
 * in turn. */
static int plan_tensors(struct hp_net *net)
{
    const int n = net->u1 - net->u0, rc = net->cfg.recompute;
    struct hp_grad_need *need = calloc((size_t)n, sizeof(*need));
    struct hp_grad_spot *inner = calloc((size_t)n, sizeof(*inner));
    struct hp_grad_spot *outg = calloc((size_t)n, sizeof(*outg));
    size_t *ded = calloc((size_t)n, sizeof(*ded)), *seg_at = calloc((size_t)n, sizeof(*seg_at));
    struct hp_unit_layout *ls = calloc((size_t)n, sizeof(*ls));
    size_t boff, base = 0, dead_end;
    const int err = !need || !inner || !outg || !ded || !seg_at || !ls;

    if (!err) {
        net->tensors[0].act_off = 0;
        net->slot_floats = abytes(net->tensors[0].size) / sizeof(float);
        net->tensors[0].grad_off = 0;
        net->tensors[0].has_grad = net->cfg.need_input_grad;
        boff = net->cfg.need_input_grad ? abytes(net->tensors[0].size) : 0;
        for (int u = net->u0, k = 0; u < net->u1; u++, k++)
            hp_unit_layout(&net->model->units[u], net->cfg.batch, HP_ALIGN, &ls[k]);
        if (rc)
            plan_work(net, ls, seg_at);
        for (int u = net->u0, k = 0; u < net->u1; u++, k++) {
            place_unit(net, u, &ls[k], base, seg_at[k], &need[k]);
            base += (size_t)net->model->units[u].nops;
        }
        hp_grad_place(need, 0, n, inner, outg, ded);
        dead_end = net->slot_floats * sizeof(float);
        base = 0;
        for (int u = net->u0, k = 0; u < net->u1; u++, k++) {
            const struct hp_unit *unit = &net->model->units[u];
            for (int i = 0; i < unit->nops; i++) {
                struct net_tensor *t = &net->tensors[base + (size_t)i + 1];
                const int own = ls[k].grad_root[i + 1] < unit->nops; /* else the output's */
                const struct hp_grad_spot *sp = own ? &inner[k] : &outg[k];
                const size_t size = own ? need[k].inner : need[k].out;
                const size_t at = own ? ls[k].grad_off[i + 1] : 0;
                t->grad_in_slot = sp->in_slot;
                t->grad_off = (sp->in_slot ? dead_end - sp->off - size + at : boff + sp->off + at) /
                              sizeof(float);
            }
            base += (size_t)unit->nops;
        }
        net->mem.act_grads = boff + ded[0];
    }
    free(need);
    free(inner);
    free(outg);
    free(ded);
    free(seg_at);
    free(ls);
    return err ? -HP_ENOMEM : 0;
}

/* Plan the arena: the sizes of every part (parameters, gradients and momentum parallel). */
static int plan_arena(struct hp_net *net, size_t ws_bytes)
{
    const struct hp_net_config *cfg = &net->cfg;
    struct hp_net_memory *mem = &net->mem;
    size_t scratch = 0; /* floats */

    for (int u = net->u0; u < net->u1; u++) {
        const struct hp_unit *unit = &net->model->units[u];
        const size_t f = (size_t)cfg->batch * (unit->cost.scratch_bytes / sizeof(float));
        net->nparams += unit->nparams;
        net->nstate += unit->nstate;
        scratch = f > scratch ? f : scratch;
    }
    if (plan_tensors(net))
        return -HP_ENOMEM;
    mem->params = mem->grads = mem->momentum = abytes(net->nparams ? net->nparams : 1);
    mem->moment2 = cfg->optimizer == HP_OPTIMIZER_ADAMW ? mem->params : 0;
    mem->state = abytes(net->nstate ? net->nstate : 1);
    mem->activations =
        ((size_t)cfg->nslots * net->slot_floats + net->work_floats + net->temp_floats) *
        sizeof(float);
    mem->workspace = hp_align_up(ws_bytes, HP_ALIGN);
    mem->scratch = abytes(scratch);
    mem->other = (size_t)cfg->nslots * net->extra_floats * sizeof(float) +
                 hp_align_up((size_t)cfg->batch * hp_model_positions(net->model) * sizeof(int32_t),
                             HP_ALIGN);
    mem->total = mem->params + mem->grads + mem->momentum + mem->moment2 + mem->state +
                 mem->activations + mem->act_grads + mem->workspace + mem->scratch + mem->other;
    return 0;
}

/* Point the tensors' gradients at their buffers for a backward pass of `slot`. */
static void point_grads(struct hp_net *net, int slot)
{
    float *s = net->acts + (size_t)slot * net->slot_floats;

    for (int i = 0; i < net->ntensors; i++) {
        struct net_tensor *t = &net->tensors[i];
        t->grad = !t->has_grad ? NULL : (t->grad_in_slot ? s : net->grad_region) + t->grad_off;
    }
}

/* Carve the allocated arena into its parts, in plan_arena's order. */
static void carve_arena(struct hp_net *net)
{
    const struct hp_net_config *cfg = &net->cfg;
    const size_t np = net->mem.params / sizeof(float), ns = net->mem.state / sizeof(float);
    float *a = net->arena;
    size_t off = 0;

    net->params = a + off;
    off += np;
    net->grads = a + off;
    off += np;
    net->momentum = a + off;
    off += np;
    net->moment2 = net->mem.moment2 ? a + off : NULL;
    off += net->mem.moment2 / sizeof(float);
    net->state = a + off;
    off += ns;
    net->acts = a + off;
    off += (size_t)cfg->nslots * net->slot_floats;
    net->work = a + off;
    off += net->work_floats;
    net->temp = a + off;
    off += net->temp_floats;
    net->grad_region = a + off;
    point_grads(net, 0);
    off += net->mem.act_grads / sizeof(float);
    net->workspace = a + off;
    off += net->mem.workspace / sizeof(float);
    net->scratch = a + off;
    off += net->mem.scratch / sizeof(float);
    net->extra = a + off;
    off += (size_t)cfg->nslots * net->extra_floats;
    net->labels = (int32_t *)(a + off);
}

/* Point each op at its parameters and state: units in order, ops in order (layers.h). */
static void point_params(struct hp_net *net)
{
    size_t pstart = 0, sstart = 0;

    for (int i = 0; i < net->nops; i++) {
        struct net_op *o = &net->ops[i];
        const struct hp_op *op = o->op;
        if (i > 0 && o->unit != net->ops[i - 1].unit) {
            pstart += net->model->units[net->ops[i - 1].unit].nparams;
            sstart += net->model->units[net->ops[i - 1].unit].nstate;
        }
        size_t p = pstart + op->param_off, nw = 0;
        if (op->type == HP_OP_CONV)
            nw = (size_t)op->filters * op->in_shape.c * op->kernel * op->kernel;
        else if (op->type == HP_OP_LINEAR)
            nw = (size_t)op->filters * hp_shape_size(op->in_shape);
        else if (op->type == HP_OP_BN)
            nw = (size_t)op->in_shape.c;
        else if (op->type == HP_OP_EMBED)
            nw = (size_t)op->vocab * op->filters; /* the token matrix; then the positions' */
        else if (op->type == HP_OP_LAYERNORM)
            nw = (size_t)op->in_shape.w;
        else if (op->type == HP_OP_PLINEAR)
            nw = (size_t)op->filters * op->in_shape.w;
        if (op->nparams) {
            o->w = net->params + p;
            o->gw = net->grads + p;
            o->b = op->nparams > nw ? o->w + nw : NULL;
            o->gb = op->nparams > nw ? o->gw + nw : NULL;
        }
        if (op->nstate) {
            o->rm = net->state + sstart + op->state_off;
            o->rv = o->rm + op->in_shape.c;
        }
    }
}

/* The parameters as runs of one AdamW decay flag (adjacent tensors of one flag merged). */
static int plan_runs(struct hp_net *net)
{
    int cap = 0;

    for (int i = 0; i < net->nops; i++)
        cap += net->ops[i].op->nparams ? 2 : 0;
    net->runs = calloc(cap ? (size_t)cap : 1, sizeof(*net->runs));
    if (!net->runs)
        return -HP_ENOMEM;
    for (int i = 0; i < net->nops; i++) {
        const struct net_op *o = &net->ops[i];
        size_t n[2], off = o->w ? (size_t)(o->w - net->params) : 0;
        int decay[2];
        const int k = hp_op_param_tensors(o->op, n, decay);
        for (int j = 0; j < k; off += n[j], j++) {
            struct net_run *last = net->nruns ? &net->runs[net->nruns - 1] : NULL;
            if (last && last->decay == decay[j] && last->off + last->n == off)
                last->n += n[j];
            else
                net->runs[net->nruns++] = (struct net_run){off, n[j], decay[j]};
        }
    }
    return 0;
}

/* A net with its graph, descriptors and plan, but no arena. */
static int net_plan(struct hp_backend *be, const struct hp_model *model, int u0, int u1,
                    const struct hp_net_config *cfg, struct hp_net **out)
{
    struct hp_net *net;
    size_t ws_bytes = 0;
    int rc;

    if (u0 < 0 || u1 > model->nunits || u0 >= u1 || cfg->batch <= 0 || cfg->nslots <= 0 ||
        (cfg->optimizer != HP_OPTIMIZER_SGD && cfg->optimizer != HP_OPTIMIZER_ADAMW)) {
        hp_error("net: invalid unit range [%d, %d) of %d units, batch %d, slots %d or optimizer "
                 "%d",
                 u0, u1, model->nunits, cfg->batch, cfg->nslots, cfg->optimizer);
        return -HP_EINVAL;
    }
    net = calloc(1, sizeof(*net));
    if (!net)
        return -HP_ENOMEM;
    net->be = be;
    net->model = model;
    net->u0 = u0;
    net->u1 = u1;
    net->cfg = *cfg;
    net->seg = cfg->recompute ? hp_model_recompute_segment(model) : 1;
    rc = build_graph(net);
    if (!rc)
        rc = make_descs(net, &ws_bytes);
    if (rc) {
        hp_net_destroy(net);
        return rc;
    }
    rc = plan_arena(net, ws_bytes);
    if (rc) {
        hp_net_destroy(net);
        return rc;
    }
    *out = net;
    return 0;
}

int hp_net_plan_memory(struct hp_backend *be, const struct hp_model *model, int u0, int u1,
                       const struct hp_net_config *cfg, struct hp_net_memory *out)
{
    struct hp_net *net;
    int rc = net_plan(be, model, u0, u1, cfg, &net);

    if (rc)
        return rc;
    *out = net->mem;
    hp_net_destroy(net);
    return 0;
}

int hp_net_create(struct hp_backend *be, const struct hp_model *model, int u0, int u1,
                  const struct hp_net_config *cfg, struct hp_net **out)
{
    struct hp_net *net;
    int rc = net_plan(be, model, u0, u1, cfg, &net);

    if (rc)
        return rc;
    rc = be->ops->alloc(be, net->mem.total, &net->arena);
    if (rc) {
        hp_error("net: cannot allocate %.1f MiB on %s for units [%d, %d) at batch %d",
                 (double)net->mem.total / 1048576.0, be->name, u0, u1, cfg->batch);
        goto err;
    }
    carve_arena(net);
    net->labels_host = calloc((size_t)cfg->batch * hp_model_positions(model), sizeof(int32_t));
    net->slot_seed = calloc((size_t)cfg->nslots, sizeof(uint64_t));
    if (!net->labels_host || !net->slot_seed) {
        rc = -HP_ENOMEM;
        goto err;
    }
    point_params(net);
    rc = plan_runs(net);
    if (rc)
        goto err;
    *out = net;
    return 0;

err:
    hp_net_destroy(net);
    return rc;
}

/* GPT-2's initialisation, in uniform draws of its standard deviation 0.02 (bound 0.02 sqrt 3):
 * the token and position embeddings and every plinear's weights; biases and layer norm betas
 * 0, gammas 1. A tied head's weights are drawn from the stream of its embed unit's first op,
 * index for index: the same values as the token matrix. s: the op's own stream. */
static void init_seq(const struct hp_op *op, uint64_t seed, uint64_t s, float *w)
{
    const float a = 0.02f * sqrtf(3.0f);
    size_t n = op->nparams;

    if (op->type == HP_OP_LAYERNORM) {
        for (int k = 0; k < op->in_shape.w; k++) {
            w[k] = 1.0f;
            w[op->in_shape.w + k] = 0.0f;
        }
        return;
    }
    if (op->type == HP_OP_PLINEAR) {
        n = (size_t)op->filters * op->in_shape.w;
        if (op->tie)
            s = hp_rng_derive(hp_rng_derive(seed, (uint64_t)op->tie_unit), 0);
    }
    for (size_t k = 0; k < n; k++)
        w[k] = (2.0f * hp_rng_uniform(s, k) - 1.0f) * a;
    for (size_t k = n; k < op->nparams; k++)
        w[k] = 0.0f;
}

int hp_net_init_params(struct hp_net *net, uint64_t seed)
{
    /* the CPU backend's device memory is host memory: written in place, without a host copy
     * of every parameter (a second, transient copy of a stage's weights at its start) */
    const int direct = net->be->kind == HP_DEVICE_CPU;
    float *hp = NULL, *hs = NULL;
    int rc;

    if (direct) {
        hp = net->params;
        hs = net->state;
        memset(hp, 0, net->nparams * sizeof(float));
        if (net->nstate)
            memset(hs, 0, net->nstate * sizeof(float));
    } else {
        hp = calloc(net->nparams ? net->nparams : 1, sizeof(float));
        hs = calloc(net->nstate ? net->nstate : 1, sizeof(float));
        if (!hp || !hs) {
            rc = -HP_ENOMEM;
            goto out;
        }
    }
    for (int i = 0; i < net->nops; i++) {
        const struct net_op *o = &net->ops[i];
        const struct hp_op *op = o->op;
        const uint64_t s =
            hp_rng_derive(hp_rng_derive(seed, (uint64_t)o->unit), (uint64_t)o->index);
        size_t p = (size_t)(o->w ? o->w - net->params : 0), nw, fan_in;

        switch (op->type) {
        case HP_OP_CONV:
        case HP_OP_LINEAR: {
            fan_in = op->type == HP_OP_CONV ? (size_t)op->in_shape.c * op->kernel * op->kernel
                                            : hp_shape_size(op->in_shape);
            nw = (size_t)op->filters * fan_in;
            const float wb = sqrtf(6.0f / (float)fan_in), bb = 1.0f / sqrtf((float)fan_in);
            for (size_t k = 0; k < nw; k++)
                hp[p + k] = (2.0f * hp_rng_uniform(s, k) - 1.0f) * wb;
            if (op->bias)
                for (int k = 0; k < op->filters; k++)
                    hp[p + nw + k] = (2.0f * hp_rng_uniform(s, nw + k) - 1.0f) * bb;
            break;
        }
        case HP_OP_BN: {
            const int c = op->in_shape.c;
            const size_t so = (size_t)(o->rm - net->state);
            for (int k = 0; k < c; k++) {
                hp[p + k] = 1.0f;
                hp[p + c + k] = 0.0f;
                hs[so + k] = 0.0f;
                hs[so + c + k] = 1.0f;
            }
            break;
        }
        case HP_OP_EMBED:
        case HP_OP_LAYERNORM:
        case HP_OP_PLINEAR:
            init_seq(op, seed, s, hp + p);
            break;
        default:
            break;
        }
    }
    rc = direct ? 0 : net->be->ops->upload(net->be, net->params, hp, net->nparams * sizeof(float));
    if (!rc && net->nstate && !direct)
        rc = net->be->ops->upload(net->be, net->state, hs, net->nstate * sizeof(float));
    if (!rc)
        rc = net->be->ops->zero(net->be, net->momentum, net->nparams * sizeof(float));
    if (!rc && net->moment2)
        rc = net->be->ops->zero(net->be, net->moment2, net->nparams * sizeof(float));
out:
    if (!direct) {
        free(hp);
        free(hs);
    }
    return rc;
}

static float *act(struct hp_net *net, int slot, int t)
{
    const struct net_tensor *tt = &net->tensors[t];

    if (tt->in_temp)
        return net->temp;
    return tt->in_work ? net->work + tt->act_off
                       : net->acts + (size_t)slot * net->slot_floats + tt->act_off;
}

static float *extra(struct hp_net *net, int slot, const struct net_op *o)
{
    if (net->cfg.recompute)
        return net->work + o->extra_off;
    return net->extra + (size_t)slot * net->extra_floats + o->extra_off;
}

float *hp_net_input(struct hp_net *net, int slot)
{
    return act(net, slot, 0);
}

float *hp_net_output(struct hp_net *net, int slot)
{
    return act(net, slot, net->ntensors - 1);
}

float *hp_net_output_grad(struct hp_net *net)
{
    return net->tensors[net->ntensors - 1].grad;
}

float *hp_net_input_grad(struct hp_net *net)
{
    return net->tensors[0].grad;
}

int hp_net_ntensors(const struct hp_net *net)
{
    return net->ntensors;
}

float *hp_net_tensor(struct hp_net *net, int slot, int t)
{
    return act(net, slot, t);
}

float *hp_net_tensor_grad(struct hp_net *net, int t)
{
    return net->tensors[t].grad;
}

size_t hp_net_nparams(const struct hp_net *net)
{
    return net->nparams;
}

float *hp_net_params(struct hp_net *net)
{
    return net->params;
}

float *hp_net_grads(struct hp_net *net)
{
    return net->grads;
}

size_t hp_net_nstate(const struct hp_net *net)
{
    return net->nstate;
}

float *hp_net_momentum(struct hp_net *net)
{
    return net->momentum;
}

float *hp_net_moment2(struct hp_net *net)
{
    return net->moment2;
}

float *hp_net_state(struct hp_net *net)
{
    return net->state;
}

void hp_net_memory(const struct hp_net *net, struct hp_net_memory *out)
{
    *out = net->mem;
}

void hp_net_set_profile(struct hp_net *net, struct hp_net_profile *prof)
{
    net->prof = prof;
}

/* FLOPs of one op for the whole minibatch (per-sample costs of layers.c, times batch). */
static void op_flops(const struct hp_net *net, const struct hp_op *op, double *fwd, double *bwd)
{
    const double macs = hp_op_macs(op);

    *fwd = 2.0 * macs * net->cfg.batch;
    *bwd = 4.0 * macs * net->cfg.batch;
}

static void prof_add(struct hp_net *net, const struct net_op *o, int backward, double t0)
{
    struct hp_net_profile *p = net->prof;
    double f, b, dt;

    net->be->ops->sync(net->be);
    dt = hp_now_s() - t0;
    op_flops(net, o->op, &f, &b);
    if (backward && !net->tensors[o->in[0]].grad)
        b *= 0.5; /* the input gradient was not computed: only the weight gradient's FLOPs */
    if (backward) {
        p->bwd_s[o->op->type] += dt;
        p->bwd_flops[o->op->type] += b;
        if (p->unit_bwd_s)
            p->unit_bwd_s[o->unit] += dt;
    } else {
        p->fwd_s[o->op->type] += dt;
        p->fwd_flops[o->op->type] += f;
        if (p->unit_fwd_s)
            p->unit_fwd_s[o->unit] += dt;
    }
}

/* Rows of a sequence tensor of the net's minibatch: batch x positions (layers.h). */
static int seq_rows(const struct hp_net *net, struct hp_shape s)
{
    return net->cfg.batch * s.c * s.h;
}

/* Forward of a sequence op (layers.h) of `slot`: x its input, y its output, w and b its
 * parameters (weights or gamma; bias, beta or the position embedding). */
static int forward_seq(struct hp_net *net, int slot, struct net_op *o, const float *x, float *y,
                       const float *w, const float *b)
{
    struct hp_backend *be = net->be;
    const struct hp_backend_ops *ops = be->ops;
    const struct hp_op *op = o->op;
    const int rows = seq_rows(net, op->in_shape), in = op->in_shape.w;
    int rc;

    switch (op->type) {
    case HP_OP_EMBED:
        return ops->embed_forward(be, x, w, b, y, net->cfg.batch, op->in_shape.c, op->filters,
                                  op->vocab);
    case HP_OP_LAYERNORM: {
        float *save = extra(net, slot, o); /* mean [rows], then rstd [rows] */
        return ops->layernorm_forward(be, x, w, b, y, save, save + rows, rows, in, 1e-5f);
    }
    case HP_OP_PLINEAR:
        /* y [rows, out] = x [rows, in] w^T, w [out, in] */
        rc = ops->gemm(be, 0, 1, rows, op->filters, in, 1.0f, x, in, w, in, 0.0f, y, op->filters);
        if (!rc && op->bias)
            rc = ops->bias_add(be, y, b, rows, op->filters);
        return rc;
    case HP_OP_ATTENTION:
        return ops->attention_forward(be, &o->d.attn, x, y, extra(net, slot, o));
    case HP_OP_GELU:
        return ops->gelu_forward(be, x, y, net->tensors[o->out].size);
    default:
        return -HP_EINVAL;
    }
}

/* Backward of a sequence op: parameter gradients, and dx (NULL: not needed) from dy. */
static int backward_seq(struct hp_net *net, int slot, struct net_op *o, const float *x,
                        const float *dy, float *dx, const float *w)
{
    struct hp_backend *be = net->be;
    const struct hp_backend_ops *ops = be->ops;
    const struct hp_op *op = o->op;
    const int rows = seq_rows(net, op->in_shape), in = op->in_shape.w;
    int rc;

    switch (op->type) {
    case HP_OP_EMBED:
        /* token ids have no gradient: a requested one is zero */
        rc = ops->embed_backward(be, x, dy, o->gw, o->gb, net->cfg.batch, op->in_shape.c,
                                 op->filters, op->vocab);
        return !rc && dx ? ops->zero(be, dx, net->tensors[o->in[0]].size * sizeof(float)) : rc;
    case HP_OP_LAYERNORM: {
        const float *save = extra(net, slot, o);
        return ops->layernorm_backward(be, x, dy, w, save, save + rows, dx, o->gw, o->gb, rows, in);
    }
    case HP_OP_PLINEAR:
        /* gw [out, in] = dy^T [out, rows] x [rows, in] */
        rc = ops->gemm(be, 1, 0, op->filters, in, rows, 1.0f, dy, op->filters, x, in, 0.0f, o->gw,
                       in);
        if (!rc && op->bias)
            rc = ops->bias_grad(be, dy, o->gb, rows, op->filters);
        /* dx [rows, in] = dy [rows, out] w [out, in] */
        if (!rc && dx)
            rc = ops->gemm(be, 0, 0, rows, in, op->filters, 1.0f, dy, op->filters, w, in, 0.0f, dx,
                           in);
        return rc;
    case HP_OP_ATTENTION:
        return dx ? ops->attention_backward(be, &o->d.attn, x, extra(net, slot, o), dy, dx,
                                            net->workspace)
                  : 0;
    case HP_OP_GELU:
        return dx ? ops->gelu_backward(be, x, dy, dx, net->tensors[o->out].size) : 0;
    default:
        return -HP_EINVAL;
    }
}

/* How forward runs an op: training (batch statistics, updated running statistics, dropout
 * masks drawn), evaluation, or the recomputation of a training forward during backward
 * (batch statistics and masks again, the running statistics left alone: they were updated
 * once, when the minibatch first went through). */
enum fwd_mode { FWD_EVAL, FWD_TRAIN, FWD_RECOMPUTE };

/* Forward ops [i0, i1) of `slot`, with the parameters read from `weights` (laid out as
 * hp_net_params; NULL: the current ones). */
static int forward_ops(struct hp_net *net, int slot, int i0, int i1, enum fwd_mode mode,
                       uint64_t step_seed, const float *weights)
{
    struct hp_backend *be = net->be;
    const struct hp_backend_ops *ops = be->ops;
    const int train = mode != FWD_EVAL;
    int rc = 0;

    for (int i = i0; i < i1 && rc == 0; i++) {
        struct net_op *o = &net->ops[i];
        const struct hp_op *op = o->op;
        const float *x = act(net, slot, o->in[0]);
        float *y = act(net, slot, o->out);
        const size_t n = net->tensors[o->out].size;
        const float *w = weights && o->w ? weights + (o->w - net->params) : o->w;
        const float *b = weights && o->b ? weights + (o->b - net->params) : o->b;
        const double t0 = net->prof ? (ops->sync(be), hp_now_s()) : 0.0;

        switch (op->type) {
        case HP_OP_CONV:
            rc = ops->conv_forward(be, o->conv, x, w, b, y, net->workspace);
            break;
        case HP_OP_LINEAR: {
            const int in = (int)hp_shape_size(op->in_shape);
            /* y [batch, out] = x [batch, in] w^T, w [out, in] */
            rc = ops->gemm(be, 0, 1, net->cfg.batch, op->filters, in, 1.0f, x, in, w, in, 0.0f, y,
                           op->filters);
            if (!rc && op->bias)
                rc = ops->bias_add(be, y, b, net->cfg.batch, op->filters);
            break;
        }
        case HP_OP_BN: {
            float *save = extra(net, slot, o);
            if (train)
                rc = ops->bn_forward_train(
                    be, &o->d.bn, x, w, b, y, mode == FWD_TRAIN ? o->rm : NULL,
                    mode == FWD_TRAIN ? o->rv : NULL, save, save + op->in_shape.c);
            else
                rc = ops->bn_forward_eval(be, &o->d.bn, x, w, b, o->rm, o->rv, y);
            break;
        }
        case HP_OP_RELU:
            rc = ops->relu_forward(be, x, y, n);
            break;
        case HP_OP_MAXPOOL:
            rc = ops->maxpool_forward(be, &o->d.pool, x, y);
            break;
        case HP_OP_AVGPOOL:
            rc = ops->avgpool_forward(be, &o->d.pool, x, y);
            break;
        case HP_OP_FLATTEN:
            rc = ops->copy(be, y, x, n * sizeof(float));
            break;
        case HP_OP_DROPOUT:
            if (train && op->p > 0.0f) {
                uint64_t s =
                    hp_rng_derive(hp_rng_derive(step_seed, (uint64_t)o->unit), (uint64_t)o->index);
                rc = ops->dropout_forward(be, x, y, extra(net, slot, o), n, op->p, s);
            } else {
                rc = ops->copy(be, y, x, n * sizeof(float));
            }
            break;
        case HP_OP_ADD:
            rc = ops->add(be, x, act(net, slot, o->in[1]), y, n);
            break;
        default:
            rc = forward_seq(net, slot, o, x, y, w, b);
        }
        if (net->tensors[o->out].in_temp)
            net->temp_holds = o->out;
        if (net->prof)
            prof_add(net, o, 0, t0);
    }
    return rc;
}

int hp_net_forward(struct hp_net *net, int slot, int train, uint64_t step_seed)
{
    if (slot < 0 || slot >= net->cfg.nslots)
        return -HP_EINVAL;
    if (train)
        net->slot_seed[slot] = step_seed;
    return forward_ops(net, slot, 0, net->nops, train ? FWD_TRAIN : FWD_EVAL, step_seed, NULL);
}

int hp_net_loss(struct hp_net *net, int slot, const int32_t *labels_host, int n, int grad,
                double *loss_sum, int *correct)
{
    struct hp_backend *be = net->be;
    const struct net_tensor *t = &net->tensors[net->ntensors - 1];
    const int classes = (int)hp_shape_size(t->shape);
    int rc;

    if (net->model->positions > 0)
        return hp_net_loss_tokens(net, slot, labels_host, n, grad, loss_sum, correct);
    if (n <= 0 || n > net->cfg.batch)
        return -HP_EINVAL;
    memcpy(net->labels_host, labels_host, (size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) {
        if (labels_host[i] < 0 || labels_host[i] >= classes) {
            hp_error("label %d of sample %d is outside 0..%d", labels_host[i], i, classes - 1);
            return -HP_EINVAL;
        }
    }
    rc = be->ops->upload(be, net->labels, net->labels_host, (size_t)n * sizeof(int32_t));
    if (rc)
        return rc;
    if (grad && n < net->cfg.batch)
        rc = be->ops->zero(be, t->grad, t->size * sizeof(float));
    if (rc)
        return rc;
    return be->ops->softmax_xent(be, hp_net_output(net, slot), net->labels, n, classes,
                                 1.0f / (float)n, grad ? t->grad : NULL, loss_sum, correct);
}

int hp_net_loss_tokens(struct hp_net *net, int slot, const int32_t *labels_host, int n, int grad,
                       double *loss_sum, int *correct)
{
    struct hp_backend *be = net->be;
    const struct net_tensor *t = &net->tensors[net->ntensors - 1];
    const int pos = t->shape.c * t->shape.h, classes = t->shape.w;
    const size_t rows = (size_t)n * pos;
    int rc;

    if (n <= 0 || n > net->cfg.batch)
        return -HP_EINVAL;
    if (pos != hp_model_positions(net->model)) {
        hp_error("net: the output %dx%dx%d is not logits of the model's %d positions", t->shape.c,
                 t->shape.h, t->shape.w, hp_model_positions(net->model));
        return -HP_EINVAL;
    }
    for (size_t i = 0; i < rows; i++) {
        if (labels_host[i] < 0 || labels_host[i] >= classes) {
            hp_error("label %d of sample %zu, position %zu is outside 0..%d", labels_host[i],
                     i / (size_t)pos, i % (size_t)pos, classes - 1);
            return -HP_EINVAL;
        }
    }
    memcpy(net->labels_host, labels_host, rows * sizeof(int32_t));
    rc = be->ops->upload(be, net->labels, net->labels_host, rows * sizeof(int32_t));
    if (!rc && grad && n < net->cfg.batch)
        rc = be->ops->zero(be, t->grad, t->size * sizeof(float));
    if (rc)
        return rc;
    return be->ops->softmax_xent(be, hp_net_output(net, slot), net->labels, (int)rows, classes,
                                 1.0f / (float)rows, grad ? t->grad : NULL, loss_sum, correct);
}

/* Add `src` (n floats) into the gradient of tensor t: the first contribution is copied (or
 * was written in place), later ones are added. */
static int accumulate(struct hp_net *net, int t, const float *src)
{
    struct net_tensor *tt = &net->tensors[t];
    int rc;

    if (!tt->grad)
        return 0;
    if (!tt->grad_ready) {
        tt->grad_ready = 1;
        return src == tt->grad ? 0 : net->be->ops->copy(net->be, tt->grad, src, tt->size * 4);
    }
    rc = net->be->ops->axpy(net->be, 1.0f, src, tt->grad, tt->size);
    return rc;
}

/* Where an op writes the gradient of its input t: straight into the tensor's gradient for
 * the first contribution, else into scratch (then accumulate). NULL: not needed. */
static float *grad_dst(struct hp_net *net, int t)
{
    struct net_tensor *tt = &net->tensors[t];

    if (!tt->grad)
        return NULL;
    return tt->grad_ready ? net->scratch : tt->grad;
}

int hp_net_backward(struct hp_net *net, int slot)
{
    return hp_net_backward_weights(net, slot, NULL);
}

/* Backward of op i of `slot` (the weights as in forward_ops). */
static int backward_op(struct hp_net *net, int slot, int i, const float *weights)
{
    struct hp_backend *be = net->be;
    const struct hp_backend_ops *ops = be->ops;
    struct net_op *o = &net->ops[i];
    const struct hp_op *op = o->op;
    const int tin = o->in[0];
    const float *x = act(net, slot, tin);
    const float *y = act(net, slot, o->out);
    const float *dy = net->tensors[o->out].grad;
    const size_t n = net->tensors[o->out].size;
    float *dx = grad_dst(net, tin);
    /* the weights (or gamma) this op's forward used: the stashed version, if given */
    const float *w = weights && o->w ? weights + (o->w - net->params) : o->w;
    const double t0 = net->prof ? (ops->sync(be), hp_now_s()) : 0.0;
    int rc;

    switch (op->type) {
    case HP_OP_CONV:
        rc = ops->conv_backward(be, o->conv, x, w, dy, dx, o->gw, o->gb, net->workspace);
        break;
    case HP_OP_LINEAR: {
        const int in = (int)hp_shape_size(op->in_shape), b = net->cfg.batch;
        /* gw [out, in] = dy^T [out, batch] x [batch, in] */
        rc = ops->gemm(be, 1, 0, op->filters, in, b, 1.0f, dy, op->filters, x, in, 0.0f, o->gw, in);
        if (!rc && op->bias)
            rc = ops->bias_grad(be, dy, o->gb, b, op->filters);
        /* dx [batch, in] = dy [batch, out] w [out, in] */
        if (!rc && dx)
            rc =
                ops->gemm(be, 0, 0, b, in, op->filters, 1.0f, dy, op->filters, w, in, 0.0f, dx, in);
        break;
    }
    case HP_OP_BN: {
        const float *save = extra(net, slot, o);
        /* batch norm's parameter gradients are needed even when dx is not */
        rc = ops->bn_backward(be, &o->d.bn, x, dy, w, save, save + op->in_shape.c,
                              dx ? dx : net->scratch, o->gw, o->gb);
        break;
    }
    case HP_OP_RELU:
        rc = dx ? ops->relu_backward(be, y, dy, dx, n) : 0;
        break;
    case HP_OP_MAXPOOL:
        rc = dx ? ops->maxpool_backward(be, &o->d.pool, x, y, dy, dx) : 0;
        break;
    case HP_OP_AVGPOOL:
        rc = dx ? ops->avgpool_backward(be, &o->d.pool, dy, dx) : 0;
        break;
    case HP_OP_FLATTEN:
        rc = dx ? ops->copy(be, dx, dy, n * sizeof(float)) : 0;
        break;
    case HP_OP_DROPOUT:
        if (dx && op->p > 0.0f)
            rc = ops->dropout_backward(be, dy, extra(net, slot, o), dx, n);
        else
            rc = dx ? ops->copy(be, dx, dy, n * sizeof(float)) : 0;
        break;
    case HP_OP_ADD:
        /* both inputs receive dy */
        rc = accumulate(net, o->in[0], dy);
        if (!rc)
            rc = accumulate(net, o->in[1], dy);
        dx = NULL;
        break;
    default:
        rc = backward_seq(net, slot, o, x, dy, dx, w);
    }
    if (!rc && dx)
        rc = accumulate(net, tin, dx);
    if (net->prof)
        prof_add(net, o, 1, t0);
    return rc;
}

/* Before the backward of op i: a transient input made again (its chain's forward, as in
 * the slot's training forward) unless the temp buffer holds it already. */
static int remake_input(struct hp_net *net, int slot, int i, const float *weights)
{
    const int t = net->ops[i].in[0];

    if (!net->tensors[t].in_temp || net->temp_holds == t)
        return 0;
    return forward_ops(net, slot, net->tensors[t].temp_from, t, FWD_RECOMPUTE, net->slot_seed[slot],
                       weights);
}

int hp_net_backward_weights(struct hp_net *net, int slot, const float *weights)
{
    int rc = 0;

    if (slot < 0 || slot >= net->cfg.nslots)
        return -HP_EINVAL;
    point_grads(net, slot);
    net->temp_holds = -1;
    for (int i = 0; i < net->ntensors; i++)
        net->tensors[i].grad_ready = 0;
    net->tensors[net->ntensors - 1].grad_ready = 1;

    for (int i1 = net->nops; i1 > 0 && rc == 0;) {
        int i0 = i1 - 1;
        if (net->cfg.recompute) {
            /* segment by segment: its forward again from its input (kept in the slot),
             * with the weights and the step seed of the first time, then its backward */
            while (i0 > 0 && (net->ops[i0 - 1].unit == net->ops[i1 - 1].unit ||
                              !seg_end(net, net->ops[i0 - 1].unit)))
                i0--;
            rc = forward_ops(net, slot, i0, i1, FWD_RECOMPUTE, net->slot_seed[slot], weights);
        }
        for (int i = i1 - 1; i >= i0 && rc == 0; i--) {
            rc = remake_input(net, slot, i, weights);
            if (!rc)
                rc = backward_op(net, slot, i, weights);
        }
        i1 = i0;
    }
    return rc;
}

int hp_net_sgd(struct hp_net *net, float lr, float momentum, float weight_decay)
{
    if (!net->nparams)
        return 0;
    return net->be->ops->sgd_update(net->be, net->params, net->grads, net->momentum, net->nparams,
                                    lr, momentum, weight_decay);
}

int hp_net_adamw(struct hp_net *net, const struct hp_adamw_desc *d)
{
    struct hp_backend *be = net->be;
    int rc = 0;

    if (!net->moment2) {
        hp_error("net: an AdamW step on a net created for SGD (hp_net_config.optimizer)");
        return -HP_EINVAL;
    }
    if (d->step < 1) {
        hp_error("net: AdamW step %ld: steps count from 1", d->step);
        return -HP_EINVAL;
    }
    for (int r = 0; r < net->nruns && !rc; r++) {
        const struct net_run *run = &net->runs[r];
        struct hp_adamw_desc dr = *d;
        dr.wd = run->decay ? d->wd : 0.0f;
        rc = be->ops->adamw_update(be, net->params + run->off, net->grads + run->off,
                                   net->momentum + run->off, net->moment2 + run->off, run->n, &dr);
    }
    return rc;
}

/* Both sums of squares in one walk over the ops (a unit's ops are adjacent): per unit into
 * per_unit (NULL: not wanted), and in *total the per-unit sums added in unit order (a unit
 * without parameters adds 0.0, which changes no sum), so the two agree bit for bit. */
static int grad_sumsq(struct hp_net *net, double *per_unit, double *total)
{
    double unit = 0.0; /* the current unit's sum */
    int rc = 0;

    if (per_unit)
        for (int u = net->u0; u < net->u1; u++)
            per_unit[u - net->u0] = 0.0;
    *total = 0.0;
    for (int i = 0; i < net->nops && !rc; i++) {
        const struct net_op *o = &net->ops[i];
        double s;
        if (i > 0 && o->unit != net->ops[i - 1].unit) {
            *total += unit;
            unit = 0.0;
        }
        if (!o->op->nparams || o->op->tie) /* a tied copy counts once: at its embed */
            continue;
        rc = net->be->ops->sumsq(net->be, o->gw, o->op->nparams, &s);
        unit += s;
        if (per_unit)
            per_unit[o->unit - net->u0] += s;
    }
    *total += unit;
    return rc;
}

int hp_net_grad_sumsq_units(struct hp_net *net, double *per_unit)
{
    double total;

    return grad_sumsq(net, per_unit, &total);
}

int hp_net_grad_sumsq(struct hp_net *net, double *sumsq)
{
    return grad_sumsq(net, NULL, sumsq);
}

/* The ops of a tie: the embed op of the tied head's tie_unit, and the head's tied plinear
 * (NULL where this net does not hold it). */
static void tie_ops(struct hp_net *net, struct net_op **embed, struct net_op **head)
{
    int tu;

    *embed = *head = NULL;
    if (hp_model_tied_head(net->model, &tu) < 0)
        return;
    for (int i = 0; i < net->nops; i++) {
        if (net->ops[i].op->tie)
            *head = &net->ops[i];
        else if (net->ops[i].unit == tu && net->ops[i].op->type == HP_OP_EMBED)
            *embed = &net->ops[i];
    }
}

float *hp_net_tie_grad(struct hp_net *net, size_t *n)
{
    struct net_op *e, *h, *o;

    tie_ops(net, &e, &h);
    o = e ? e : h;
    if (!o)
        return NULL;
    /* the embed's token matrix [vocab, width]; the head's copy [filters = vocab, in width] */
    *n = o == e ? (size_t)o->op->vocab * (size_t)o->op->filters
                : (size_t)o->op->filters * (size_t)o->op->in_shape.w;
    return o->gw;
}

int hp_net_tie_sum(struct hp_net *net, const float *other)
{
    struct hp_backend *be = net->be;
    struct net_op *e, *h;
    size_t n;
    int rc;

    tie_ops(net, &e, &h);
    if (!e && !h)
        return 0;
    float *g = hp_net_tie_grad(net, &n);
    if (e && h) /* both here: the embed's gradient plus the copy's, into both */
        rc = be->ops->add(be, e->gw, h->gw, e->gw, n);
    else if (!other)
        return -HP_EINVAL;
    else /* IEEE addition commutes: a + b on one stage equals b + a on the other */
        rc = be->ops->add(be, g, other, g, n);
    if (!rc && e && h)
        rc = be->ops->copy(be, h->gw, e->gw, n * sizeof(float));
    return rc;
}

int hp_net_clip_grads(struct hp_net *net, double norm, double max_norm)
{
    if (!isfinite(norm)) {
        hp_error("the gradients' norm is %g: training diverged (lower --lr)", norm);
        return -HP_ERANGE;
    }
    if (!(max_norm > 0.0) || norm <= max_norm)
        return 0;
    return net->be->ops->scale(net->be, net->grads, net->nparams, (float)(max_norm / norm));
}

int hp_save_floats(const char *path, const float *x, size_t n)
{
    FILE *f = hp_out_open(path, "parameters", 0666);

    if (!f)
        return -HP_EIO;
    if (fwrite(x, sizeof(float), n, f) != n) {
        hp_error("cannot write parameters to '%s': %s", path, strerror(errno));
        hp_out_close(f, 0);
        return -HP_EIO;
    }
    return hp_out_close(f, 1) ? -HP_EIO : 0;
}
