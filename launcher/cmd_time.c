/* cmd_time.c - `hetpipe time`: time training steps of a model on random data (benchmarks, the
 * GPU checks), optionally per op type and unit. */
#include "backend.h"
#include "clock.h"
#include "commands.h"
#include "error.h"
#include "model.h"
#include "net.h"
#include "plan.h"
#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char synopsis[] =
    "usage: hetpipe time [options]\n"
    "Time training steps (forward, loss, backward, SGD) of a model on random data.\n";

/* A model's net on a device, with random inputs and labels uploaded. */
struct bench {
    struct hp_model *m;
    struct hp_backend *be;
    struct hp_net *net;
    int32_t *hlab;
    double *unit_fwd, *unit_bwd; /* [nunits] */
};

static int bench_setup(const struct hp_options *o, struct bench *b)
{
    const struct hp_net_config cfg = {.batch = (int)o->batch,
                                      .nslots = 1,
                                      .need_input_grad = 0,
                                      .recompute = o->recompute == HP_RECOMPUTE_ALWAYS,
                                      .optimizer = (int)o->optimizer};
    float *himg;
    int rc;

    if ((rc = hp_model_load(o->model, &b->m)) ||
        (rc = hp_backend_create(hp_opt_word(HP_OPT_DEVICE, o->device), &b->be)) ||
        (rc = hp_net_create(b->be, b->m, 0, b->m->nunits, &cfg, &b->net)) ||
        (rc = hp_net_init_params(b->net, 1)))
        return rc;
    const size_t in = (size_t)o->batch * hp_shape_size(b->m->input);
    himg = malloc(in * sizeof(float));
    const int text = b->m->positions > 0; /* token ids in, a label per position */
    const size_t nlab = (size_t)o->batch * hp_model_positions(b->m);
    b->hlab = malloc(nlab * sizeof(int32_t));
    b->unit_fwd = calloc((size_t)b->m->nunits, sizeof(double));
    b->unit_bwd = calloc((size_t)b->m->nunits, sizeof(double));
    if (!himg || !b->hlab || !b->unit_fwd || !b->unit_bwd) {
        free(himg);
        return -HP_ENOMEM;
    }
    for (size_t i = 0; i < in; i++)
        himg[i] = text ? (float)(hp_rng_u64(7, i) % (uint64_t)b->m->classes)
                       : 2.0f * hp_rng_uniform(7, i) - 1.0f;
    for (size_t i = 0; i < nlab; i++)
        b->hlab[i] = (int32_t)(hp_rng_u64(8, (uint64_t)i) % (uint64_t)b->m->classes);
    rc = b->be->ops->upload(b->be, hp_net_input(b->net, 0), himg, in * sizeof(float));
    free(himg);
    return rc;
}

static void bench_release(struct bench *b)
{
    free(b->hlab);
    free(b->unit_fwd);
    free(b->unit_bwd);
    hp_net_destroy(b->net);
    hp_backend_destroy(b->be);
    hp_model_destroy(b->m);
}

/* warmup + steps training steps; the seconds of the last `steps` into *dt. */
static int run_steps(const struct hp_options *o, struct bench *b, struct hp_net_profile *prof,
                     double *dt)
{
    double t0 = 0.0;
    int rc = 0;

    for (long s = 0; s < o->warmup + o->steps && !rc; s++) {
        double l;
        int cc;
        if (s == o->warmup) {
            b->be->ops->sync(b->be);
            memset(prof, 0, sizeof(*prof));
            prof->unit_fwd_s = b->unit_fwd;
            prof->unit_bwd_s = b->unit_bwd;
            if (o->op_profile)
                hp_net_set_profile(b->net, prof);
            t0 = hp_now_s();
        }
        rc = hp_net_forward(b->net, 0, 1, (uint64_t)s);
        if (!rc)
            rc = b->m->positions ? hp_net_loss_tokens(b->net, 0, b->hlab, (int)o->batch, 1, &l, &cc)
                                 : hp_net_loss(b->net, 0, b->hlab, (int)o->batch, 1, &l, &cc);
        if (!rc)
            rc = hp_net_backward(b->net, 0);
        const struct hp_adamw_desc ad = {
            .lr = 0.001f, .wd = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .step = s + 1};
        if (!rc)
            rc = o->optimizer == HP_OPTIMIZER_ADAMW ? hp_net_adamw(b->net, &ad)
                                                    : hp_net_sgd(b->net, 0.001f, 0.9f, 0.0f);
    }
    if (!rc)
        rc = b->be->ops->sync(b->be);
    *dt = hp_now_s() - t0;
    return rc;
}

static void print_profile(const struct hp_options *o, const struct bench *b,
                          const struct hp_net_profile *prof)
{
    double gemm_s = 0.0, gemm_f = 0.0, all = 0.0;
    const long steps = o->steps;

    printf("%-10s %10s %10s %10s\n", "op", "fwd ms", "bwd ms", "GFLOP/s");
    for (int t = 0; t < HP_OP_NTYPES; t++) {
        const double s = prof->fwd_s[t] + prof->bwd_s[t],
                     f = prof->fwd_flops[t] + prof->bwd_flops[t];
        all += s;
        if (s == 0.0)
            continue;
        printf("%-10s %10.3f %10.3f %10.2f\n", hp_op_name((enum hp_op_type)t),
               1e3 * prof->fwd_s[t] / steps, 1e3 * prof->bwd_s[t] / steps,
               f > 0 ? f / s / 1e9 : 0.0);
        if (t == HP_OP_CONV || t == HP_OP_LINEAR || t == HP_OP_PLINEAR || t == HP_OP_ATTENTION) {
            gemm_s += s;
            gemm_f += f;
        }
    }
    /* a text model's GEMMs are its plinear and attention ops */
    printf("%s: %.2f GFLOP/s, %.1f%% of op time\n",
           b->m->positions ? "plinear+attention" : "conv+linear", gemm_f / gemm_s / 1e9,
           100.0 * gemm_s / all);
    printf("%-14s %10s %10s %12s\n", "unit", "fwd ms", "bwd ms", "fwd+bwd GF/s");
    for (int u = 0; u < b->m->nunits; u++) {
        const struct hp_unit_cost *uc = &b->m->units[u].cost;
        const double s = b->unit_fwd[u] + b->unit_bwd[u];
        printf("%-14s %10.3f %10.3f %12.2f\n", b->m->units[u].name, 1e3 * b->unit_fwd[u] / steps,
               1e3 * b->unit_bwd[u] / steps,
               s > 0 ? (uc->fwd_flops + uc->bwd_flops) * o->batch * steps / s / 1e9 : 0.0);
    }
}

int hp_cmd_time(int argc, char **argv)
{
    struct hp_options o;
    struct bench b = {0};
    struct hp_net_profile prof;
    struct hp_net_memory mem;
    double dt = 0.0;
    int rc = hp_cmd_options(HP_CMD_TIME, synopsis, argc, argv, &o, 0, NULL);

    if (rc >= 0)
        return rc;
    rc = bench_setup(&o, &b);
    if (!rc)
        rc = run_steps(&o, &b, &prof, &dt);
    if (!rc) {
        hp_net_memory(b.net, &mem);
        printf("time: model %s, batch %ld, device %s, threads %d: %.3f ms/step, %.1f images/s, "
               "memory %.1f MiB\n",
               b.m->name, o.batch, b.be->name,
               b.be->kind == HP_DEVICE_CPU ? hp_backend_cpu_threads() : 0, 1e3 * dt / o.steps,
               (double)o.batch * o.steps / dt, (double)mem.total / 1048576.0);
        if (o.op_profile)
            print_profile(&o, &b, &prof);
    }
    if (rc)
        hp_cmd_report("time", rc);
    bench_release(&b);
    return rc ? 1 : 0;
}
