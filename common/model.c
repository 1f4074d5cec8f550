/* model.c - loading model definitions. */
#include "model.h"

#include "error.h"
#include "ini.h"
#include "log.h"
#include "paths.h"
#include "parse.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_UNITS 4096
#define MAX_DIM 65536

enum unit_type {
    T_CONV,
    T_LINEAR,
    T_MAXPOOL,
    T_AVGPOOL,
    T_GAP,
    T_BN,
    T_RELU,
    T_FLATTEN,
    T_DROPOUT,
    T_BASIC,
    T_BOTTLENECK,
    T_EMBED,
    T_BLOCK,
    T_HEAD,
    T_NTYPES
};

static const char *const type_words[] = {"conv",       "linear", "maxpool", "avgpool", "gap",
                                         "batchnorm",  "relu",   "flatten", "dropout", "basic",
                                         "bottleneck", "embed",  "block",   "head",    NULL};

/* The keys each unit type accepts (besides type and repeat). */
static const char *const keys_conv[] = {"type", "repeat", "filters", "kernel", "stride",
                                        "pad",  "bias",   "bn",      "relu",   NULL};
static const char *const keys_linear[] = {"type", "repeat", "outputs", "bias", "relu", NULL};
static const char *const keys_pool[] = {"type", "repeat", "kernel", "stride", "pad", NULL};
static const char *const keys_none[] = {"type", "repeat", NULL};
static const char *const keys_dropout[] = {"type", "repeat", "p", NULL};
static const char *const keys_block[] = {"type", "repeat", "filters", "stride", NULL};
static const char *const keys_embed[] = {"type", "repeat", "width", "dropout", NULL};
static const char *const keys_gpt_block[] = {"type", "repeat", "heads", "dropout", NULL};
static const char *const keys_head[] = {"type", "repeat", "tie", NULL};
static const char *const keys_model[] = {"name", "dataset", "input", "classes", NULL};

static const char *const *const type_keys[T_NTYPES] = {
    [T_CONV] = keys_conv,       [T_LINEAR] = keys_linear,    [T_MAXPOOL] = keys_pool,
    [T_AVGPOOL] = keys_pool,    [T_GAP] = keys_none,         [T_BN] = keys_none,
    [T_RELU] = keys_none,       [T_FLATTEN] = keys_none,     [T_DROPOUT] = keys_dropout,
    [T_BASIC] = keys_block,     [T_BOTTLENECK] = keys_block, [T_EMBED] = keys_embed,
    [T_BLOCK] = keys_gpt_block, [T_HEAD] = keys_head,
};

static const char *const dataset_words[] = {"fashion-mnist", "imagenet", "none", "text", NULL};

/* Whether a unit type is one of the sequence units (model.h). */
static int seq_type(int t)
{
    return t == T_EMBED || t == T_BLOCK || t == T_HEAD;
}

void hp_model_destroy(struct hp_model *m)
{
    if (!m)
        return;
    free(m->units);
    free(m);
}

static int parse_input(const struct hp_ini *ini, struct hp_shape *out)
{
    const char *v;
    long dims[3];
    char buf[64], *save = NULL, *tok;
    int n = 0, rc;

    rc = hp_ini_get_str(ini, "model", "input", 1, NULL, &v);
    if (rc)
        return rc;
    snprintf(buf, sizeof(buf), "%s", v);
    for (tok = strtok_r(buf, "x", &save); tok; tok = strtok_r(NULL, "x", &save)) {
        if (n == 3 || hp_parse_long(tok, 1, MAX_DIM, &dims[n]) != 0)
            goto bad;
        n++;
    }
    if (n != 3)
        goto bad;
    *out = (struct hp_shape){(int)dims[0], (int)dims[1], (int)dims[2]};
    return 0;
bad:
    hp_error("%s: [model]: key 'input': '%s' is not CxHxW with each size in 1..%d",
             hp_ini_path(ini), v, MAX_DIM);
    return -HP_EMODEL;
}

static int get_int(const struct hp_ini *ini, const char *sec, const char *key, int required,
                   long def, long min, long *out)
{
    return hp_ini_get_long(ini, sec, key, required, def, min, MAX_DIM, out) ? -HP_EMODEL : 0;
}

/* Build one unit of type t from section `sec`; `first` is 0 for the 2nd..Nth repetition. */
/* Build a sequence unit (model.h) of type t from section `sec` of the model m so far. */
static int build_seq_unit(const struct hp_ini *ini, const char *sec, enum unit_type t,
                          const struct hp_model *m, struct hp_unit *u)
{
    long width = 0, heads = 0;
    double p = 0.0;
    int tie = 0;

    switch (t) {
    case T_EMBED:
        if (get_int(ini, sec, "width", 1, 0, 1, &width) ||
            hp_ini_get_double(ini, sec, "dropout", 0, 0.0, 0.0, 0.95, &p))
            return -HP_EMODEL;
        return hp_unit_build_embed(u, m->classes, (int)width, (float)p);
    case T_BLOCK:
        if (get_int(ini, sec, "heads", 1, 0, 1, &heads) ||
            hp_ini_get_double(ini, sec, "dropout", 0, 0.0, 0.0, 0.95, &p))
            return -HP_EMODEL;
        return hp_unit_build_block(u, (int)heads, (float)p);
    default: /* T_HEAD */
        if (hp_ini_get_bool(ini, sec, "tie", 0, 0, &tie))
            return -HP_EMODEL;
        if (tie && u->in.w != m->units[0].out.w) {
            hp_error("%s: [%s]: key 'tie': the head's width %d is not the embedding's %d",
                     hp_ini_path(ini), sec, u->in.w, m->units[0].out.w);
            return -HP_EMODEL;
        }
        return hp_unit_build_head(u, m->classes, tie ? 0 : -1);
    }
}

static int build_unit(const struct hp_ini *ini, const char *sec, enum unit_type t, int first,
                      const struct hp_model *m, struct hp_unit *u)
{
    long filters = 0, kernel = 0, stride = 1, pad = 0, outputs = 0;
    int bias = 1, bn = 0, relu = 0, rc = 0;
    double p = 0.5;
    struct hp_op op = {0};

    switch (t) {
    case T_CONV:
        if ((rc = get_int(ini, sec, "filters", 1, 0, 1, &filters)) ||
            (rc = get_int(ini, sec, "kernel", 1, 0, 1, &kernel)) ||
            (rc = get_int(ini, sec, "stride", 0, 1, 1, &stride)) ||
            (rc = get_int(ini, sec, "pad", 0, 0, 0, &pad)) ||
            (rc = hp_ini_get_bool(ini, sec, "bn", 0, 0, &bn)) ||
            (rc = hp_ini_get_bool(ini, sec, "bias", 0, !bn, &bias)) ||
            (rc = hp_ini_get_bool(ini, sec, "relu", 0, 0, &relu)))
            return -HP_EMODEL;
        return hp_unit_build_conv(u, (int)filters, (int)kernel, first ? (int)stride : 1, (int)pad,
                                  bias, bn, relu);
    case T_LINEAR:
        if ((rc = get_int(ini, sec, "outputs", 1, 0, 1, &outputs)) ||
            (rc = hp_ini_get_bool(ini, sec, "bias", 0, 1, &bias)) ||
            (rc = hp_ini_get_bool(ini, sec, "relu", 0, 0, &relu)))
            return -HP_EMODEL;
        return hp_unit_build_linear(u, (int)outputs, bias, relu);
    case T_MAXPOOL:
    case T_AVGPOOL:
        if ((rc = get_int(ini, sec, "kernel", 1, 0, 1, &kernel)) ||
            (rc = get_int(ini, sec, "stride", 0, kernel, 1, &stride)) ||
            (rc = get_int(ini, sec, "pad", 0, 0, 0, &pad)))
            return -HP_EMODEL;
        op.type = t == T_MAXPOOL ? HP_OP_MAXPOOL : HP_OP_AVGPOOL;
        op.kernel = (int)kernel;
        op.stride = (int)stride;
        op.pad = (int)pad;
        break;
    case T_GAP:
        op.type = HP_OP_AVGPOOL; /* kernel 0: global */
        break;
    case T_BN:
        op.type = HP_OP_BN;
        break;
    case T_RELU:
        op.type = HP_OP_RELU;
        break;
    case T_FLATTEN:
        op.type = HP_OP_FLATTEN;
        break;
    case T_DROPOUT:
        if (hp_ini_get_double(ini, sec, "p", 0, 0.5, 0.0, 0.95, &p))
            return -HP_EMODEL;
        op.type = HP_OP_DROPOUT;
        op.p = (float)p;
        break;
    case T_BASIC:
    case T_BOTTLENECK:
        if ((rc = get_int(ini, sec, "filters", 1, 0, 1, &filters)) ||
            (rc = get_int(ini, sec, "stride", 0, 1, 1, &stride)))
            return -HP_EMODEL;
        if (t == T_BASIC)
            return hp_unit_build_basic(u, (int)filters, first ? (int)stride : 1);
        return hp_unit_build_bottleneck(u, (int)filters, first ? (int)stride : 1);
    case T_EMBED:
    case T_BLOCK:
    case T_HEAD:
        return build_seq_unit(ini, sec, t, m, u);
    default:
        return -HP_EMODEL;
    }
    rc = hp_unit_add_op(u, &op, 0, -1);
    return rc < 0 ? rc : hp_unit_finish(u);
}

/* Where a sequence unit may stand (model.h): in a text model, embed first and once, head once;
 * and a text model's units are all sequence units. */
static int check_seq_unit(const struct hp_ini *ini, const char *sec, int t, long repeat,
                          const struct hp_model *m)
{
    const char *path = hp_ini_path(ini);

    if (seq_type(t) != (m->positions > 0)) {
        hp_error("%s: [%s]: key 'type': '%s' %s", path, sec, type_words[t],
                 m->positions ? "is not a unit of a text model (dataset = text takes embed, block "
                                "and head)"
                              : "needs [model] dataset = text (and input = Tx1x1)");
        return -HP_EMODEL;
    }
    if (!m->positions)
        return 0;
    if ((t == T_EMBED) != (m->nunits == 0)) {
        hp_error("%s: [%s]: key 'type': %s", path, sec,
                 t == T_EMBED ? "embed must be the first unit (it reads the token ids)"
                              : "a text model starts with an embed unit");
        return -HP_EMODEL;
    }
    if ((t == T_EMBED || t == T_HEAD) && repeat != 1) {
        hp_error("%s: [%s]: key 'repeat': %s takes repeat = 1 only", path, sec, type_words[t]);
        return -HP_EMODEL;
    }
    return 0;
}

/* A text model ends in a head: logits [T, 1, classes]. */
static int check_seq_model(const char *path, const struct hp_model *m, struct hp_shape cur)
{
    if (strcmp(m->units[m->nunits - 1].kind, "head") != 0 || cur.c != m->positions || cur.h != 1 ||
        cur.w != m->classes) {
        hp_error("%s: a text model ends with a head unit (logits %dx1x%d), not '%s' (%dx%dx%d)",
                 path, m->positions, m->classes, m->units[m->nunits - 1].name, cur.c, cur.h, cur.w);
        return -HP_EMODEL;
    }
    return 0;
}

static int load_units(const struct hp_ini *ini, struct hp_model *m)
{
    const char *path = hp_ini_path(ini);
    struct hp_shape cur = m->input;
    int nsec = hp_ini_nsections(ini);

    for (int s = 0; s < nsec; s++) {
        const char *sec = hp_ini_section(ini, s);
        long repeat;
        int t, rc;

        if (strcmp(sec, "model") == 0)
            continue;
        if (!hp_ini_has(ini, sec, "type")) {
            hp_error("%s: [%s]: missing required key 'type' (every section but [model] is a "
                     "unit)",
                     path, sec);
            return -HP_EMODEL;
        }
        if (hp_ini_get_enum(ini, sec, "type", 1, 0, type_words, &t) ||
            hp_ini_check_keys(ini, sec, type_keys[t]) ||
            hp_ini_get_long(ini, sec, "repeat", 0, 1, 1, MAX_UNITS, &repeat))
            return -HP_EMODEL;
        if (check_seq_unit(ini, sec, t, repeat, m))
            return -HP_EMODEL;
        if (m->nunits + repeat > MAX_UNITS) {
            hp_error("%s: more than %d units", path, MAX_UNITS);
            return -HP_EMODEL;
        }
        for (long r = 0; r < repeat; r++) {
            struct hp_unit *u = &m->units[m->nunits];
            char name[HP_NAME_MAX];

            if (repeat > 1)
                snprintf(name, sizeof(name), "%.50s.%d", sec, (int)(r + 1));
            else
                snprintf(name, sizeof(name), "%s", sec);
            hp_unit_init(u, name, type_words[t], cur);
            rc = build_unit(ini, sec, (enum unit_type)t, r == 0, m, u);
            if (rc) {
                hp_error("%s: [%s]: invalid unit (input %dx%dx%d)", path, sec, cur.c, cur.h, cur.w);
                return -HP_EMODEL;
            }
            cur = u->out;
            for (int i = 0; i < u->nops; i++)
                if (u->ops[i].tie)
                    m->ntied += (size_t)u->ops[i].filters * u->ops[i].in_shape.w;
            m->nparams += u->nparams;
            m->nstate += u->nstate;
            m->nunits++;
        }
    }
    if (m->nunits == 0) {
        hp_error("%s: the model has no units", path);
        return -HP_EMODEL;
    }
    if (m->positions)
        return check_seq_model(path, m, cur);
    if (hp_shape_size(cur) != (size_t)m->classes) {
        hp_error("%s: the last unit outputs %dx%dx%d values, but [model] classes = %d", path, cur.c,
                 cur.h, cur.w, m->classes);
        return -HP_EMODEL;
    }
    return 0;
}

int hp_model_resolve(const char *name, char *buf, size_t n)
{
    if (!buf || n == 0)
        return -HP_EINVAL;
    if (hp_path_find("models", HP_OPT_MODELS, name, buf, n) == 0)
        return 0;
    hp_error("unknown model '%s': no %s.ini in $HETPIPE_MODELS, ./etc/models, %s/models or "
             "next to the executable (give a path to an .ini file, or see etc/models)",
             name, name, HP_DATADIR);
    return -HP_ENOTFOUND;
}

int hp_model_load(const char *name_or_path, struct hp_model **out)
{
    char path[PATH_MAX];
    struct hp_ini *ini = NULL;
    struct hp_model *m;
    const char *v;
    long classes;
    int ds, rc;

    rc = hp_model_resolve(name_or_path, path, sizeof(path));
    if (rc)
        return rc;
    rc = hp_ini_load(path, &ini);
    if (rc)
        return rc == -HP_ECONFIG ? -HP_EMODEL : rc;
    m = calloc(1, sizeof(*m));
    if (!m) {
        rc = -HP_ENOMEM;
        goto err_ini;
    }
    m->units = calloc(MAX_UNITS, sizeof(*m->units));
    if (!m->units) {
        rc = -HP_ENOMEM;
        goto err_model;
    }
    rc = -HP_EMODEL;
    if (!hp_ini_has_section(ini, "model")) {
        hp_error("%s: missing section [model] (name, dataset, input, classes)", path);
        goto err_model;
    }
    if (hp_ini_check_keys(ini, "model", keys_model) || parse_input(ini, &m->input) ||
        hp_ini_get_long(ini, "model", "classes", 1, 0, 1, 1 << 20, &classes) ||
        hp_ini_get_enum(ini, "model", "dataset", 0, 2, dataset_words, &ds))
        goto err_model;
    m->classes = (int)classes;
    snprintf(m->dataset, sizeof(m->dataset), "%s", dataset_words[ds]);
    if (strcmp(m->dataset, "text") == 0) {
        if (m->input.h != 1 || m->input.w != 1) {
            hp_error("%s: [model]: key 'input': a text model's input is Tx1x1 (T token ids, the "
                     "context), not %dx%dx%d",
                     path, m->input.c, m->input.h, m->input.w);
            goto err_model;
        }
        m->positions = m->input.c;
    }
    if (hp_ini_get_str(ini, "model", "name", 0, NULL, &v))
        goto err_model;
    if (!v) {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        snprintf(m->name, sizeof(m->name), "%.*s", (int)strcspn(base, "."), base);
    } else {
        snprintf(m->name, sizeof(m->name), "%s", v);
    }
    rc = load_units(ini, m);
    if (rc)
        goto err_model;
    /* Give back what MAX_UNITS over-reserved. */
    struct hp_unit *shrunk = realloc(m->units, (size_t)m->nunits * sizeof(*m->units));
    if (shrunk)
        m->units = shrunk;
    hp_ini_destroy(ini);
    *out = m;
    return 0;

err_model:
    hp_model_destroy(m);
err_ini:
    hp_ini_destroy(ini);
    return rc;
}

struct hp_unit_cost hp_model_cost(const struct hp_model *m, int u0, int u1)
{
    struct hp_unit_cost c = {0};

    for (int i = u0; i < u1; i++) {
        const struct hp_unit_cost *x = &m->units[i].cost;
        c.fwd_macs += x->fwd_macs;
        c.fwd_flops += x->fwd_flops;
        c.bwd_flops += x->bwd_flops;
        c.fwd_bytes += x->fwd_bytes;
        c.bwd_bytes += x->bwd_bytes;
        c.param_bytes += x->param_bytes;
        c.state_bytes += x->state_bytes;
        c.saved_bytes += x->saved_bytes;
        c.out_bytes = x->out_bytes;
        if (x->workspace_bytes > c.workspace_bytes)
            c.workspace_bytes = x->workspace_bytes;
        if (x->scratch_bytes > c.scratch_bytes)
            c.scratch_bytes = x->scratch_bytes;
    }
    return c;
}

/* What hp_grad_place needs of every unit of m at batch 1 (the blocks those of a slot), and
 * each unit's activations and extras into own[] (if not NULL). */
static void unit_needs(const struct hp_model *m, struct hp_grad_need *need, double *own)
{
    for (int u = 0; u < m->nunits; u++) {
        struct hp_unit_layout l;
        hp_unit_layout(&m->units[u], 1, 1, &l);
        need[u] = (struct hp_grad_need){l.acts, m->units[u].cost.out_bytes, l.grads};
        if (own)
            own[u] = (double)(l.acts + l.extra);
    }
}

size_t hp_model_grad_bytes(const struct hp_model *m)
{
    const size_t n = m->nunits > 0 ? (size_t)m->nunits : 1;
    struct hp_grad_need *need = calloc(n, sizeof(*need));
    struct hp_grad_spot *sp = calloc(2 * n, sizeof(*sp));
    size_t *ded = calloc(n, sizeof(*ded)), r = 0;

    if (need && sp && ded && m->nunits > 0) {
        unit_needs(m, need, NULL);
        hp_grad_place(need, 0, m->nunits, sp, sp + m->nunits, ded);
        r = ded[0];
    }
    free(need);
    free(sp);
    free(ded);
    return r;
}

int hp_model_tied_head(const struct hp_model *m, int *embed)
{
    for (int u = 0; u < m->nunits; u++)
        for (int i = 0; i < m->units[u].nops; i++)
            if (m->units[u].ops[i].tie) {
                *embed = m->units[u].ops[i].tie_unit;
                return u;
            }
    *embed = -1;
    return -1;
}

int hp_model_recompute_segment(const struct hp_model *m)
{
    const int n = m->nunits, smax = n < 64 ? n : 64;
    double *own = malloc((size_t)(n > 0 ? n : 1) * sizeof(double)), best = 0.0;
    struct hp_grad_need *need = calloc((size_t)(n > 0 ? n : 1), sizeof(*need));
    struct hp_grad_spot *sp = calloc(2 * (size_t)(n > 0 ? n : 1), sizeof(*sp));
    size_t *ded = calloc((size_t)(n > 0 ? n : 1), sizeof(*ded));
    int seg = 1;

    if (!own || !need || !sp || !ded || n == 0)
        goto out;
    unit_needs(m, need, own);
    for (int s = 1; s <= smax; s++) {
        double kept = 0.0, work = 0.0, cur = 0.0;
        for (int u = 0; u < n; u++) {
            const double out = (double)m->units[u].cost.out_bytes;
            const int end = hp_model_segment_end(s, u) || u == n - 1;
            cur += own[u];
            need[u].block = end ? m->units[u].cost.out_bytes : 0;
            if (end) {
                kept += out;
                work = cur - out > work ? cur - out : work;
                cur = 0.0;
            }
        }
        /* the gradients that find no dead kept output to lie in */
        hp_grad_place(need, 0, n, sp, sp + n, ded);
        if (s == 1 || kept + work + (double)ded[0] < best) {
            best = kept + work + (double)ded[0];
            seg = s;
        }
    }
out:
    free(own);
    free(need);
    free(sp);
    free(ded);
    return seg;
}
