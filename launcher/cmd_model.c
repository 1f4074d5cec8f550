/* cmd_model.c - `hetpipe model`: a model's units, parameters and multiply-adds. */
#include "commands.h"
#include "log.h"
#include "model.h"

#include <stdio.h>

static const char synopsis[] =
    "usage: hetpipe model --model NAME|PATH [--units]   (or: hetpipe model NAME)\n"
    "Print a model's parameters, forward multiply-adds and training memory per sample.\n";

static void print_units(const struct hp_model *m)
{
    printf("%-14s %-10s %-14s %12s %12s %12s %12s %12s %12s\n", "unit", "kind", "output", "params",
           "fwd MACs", "bwd FLOPs", "out bytes", "saved bytes", "grad bytes");
    for (int i = 0; i < m->nunits; i++) {
        const struct hp_unit *u = &m->units[i];
        char shape[32];
        snprintf(shape, sizeof(shape), "%dx%dx%d", u->out.c, u->out.h, u->out.w);
        printf("%-14s %-10s %-14s %12zu %12.0f %12.0f %12zu %12zu %12zu\n", u->name, u->kind, shape,
               u->nparams, u->cost.fwd_macs, u->cost.bwd_flops, u->cost.out_bytes,
               u->cost.saved_bytes, u->cost.grad_bytes);
    }
}

int hp_cmd_model(int argc, char **argv)
{
    struct hp_options o;
    struct hp_model *m;
    int rest, rc = hp_cmd_options(HP_CMD_MODEL, synopsis, argc, argv, &o, 1, &rest);

    if (rc >= 0)
        return rc;
    if (!o.model && rest < argc)
        o.model = argv[rest++];
    if (rest < argc) {
        hp_error("model: unexpected argument '%s' (see hetpipe model --help)", argv[rest]);
        return 2;
    }
    if (!o.model) {
        hp_error("model: give --model NAME or a path");
        return 2;
    }
    if (hp_model_load(o.model, &m))
        return 1;
    if (o.units)
        print_units(m);
    struct hp_unit_cost t = hp_model_cost(m, 0, m->nunits);
    printf("model %s: %d units, input %dx%dx%d, %d classes, data set %s\n", m->name, m->nunits,
           m->input.c, m->input.h, m->input.w, m->classes, m->dataset);
    printf("parameters: %zu (%.2f M)\n", m->nparams, (double)m->nparams / 1e6);
    if (m->ntied)
        printf("parameters without the head's tied copy of the token matrix: %zu (%.2f M)\n",
               m->nparams - m->ntied, (double)(m->nparams - m->ntied) / 1e6);
    if (t.fwd_macs >= 1e9)
        printf("forward multiply-adds per sample: %.0f (%.2f G)\n", t.fwd_macs, t.fwd_macs / 1e9);
    else
        printf("forward multiply-adds per sample: %.0f (%.2f M)\n", t.fwd_macs, t.fwd_macs / 1e6);
    printf("forward FLOPs per sample: %.3g, backward FLOPs per sample: %.3g\n", t.fwd_flops,
           t.bwd_flops);
    printf("activations kept for backward per sample: %.2f MiB\n",
           (double)t.saved_bytes / 1048576.0);
    printf("activation gradients beyond those (in no dead activation) per sample: %.2f MiB\n",
           (double)hp_model_grad_bytes(m) / 1048576.0);
    printf("recomputing (--recompute always): segments of %d units\n",
           hp_model_recompute_segment(m));
    hp_model_destroy(m);
    return 0;
}
