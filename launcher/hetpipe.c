/* hetpipe.c - the `hetpipe` command: one dispatch point for its subcommands.
 *
 *   hetpipe train   train a model on Fashion-MNIST in one process
 *   hetpipe model   print a model's units, parameters and multiply-adds
 *   hetpipe time    time training steps of a model on random data (benchmarks, GPU checks)
 *
 * Later subcommands (plan, run, launch, profile, doctor) are added here.
 */
#include "backend.h"
#include "cli.h"
#include "clock.h"
#include "cluster.h"
#include "cost.h"
#include "error.h"
#include "gpudb.h"
#include "ini.h"
#include "log.h"
#include "parse.h"
#include "model.h"
#include "net.h"
#include "planner.h"
#include "planfile.h"
#include "profile.h"
#include "rng.h"
#include "train.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VERSION "0.1.0"

static void usage(FILE *f)
{
    fprintf(f, "usage: hetpipe <command> [options]\n"
               "\n"
               "commands:\n"
               "  train    train a model on Fashion-MNIST in one process\n"
               "  model    show a model's units, parameters and multiply-adds\n"
               "  time     time training steps of a model on random data\n"
               "  plan     plan virtual workers, stages and parameter placement for a cluster\n"
               "  profile  measure every unit's forward/backward time and memory on this device\n"
               "  run      run a job: --local forks its ranks here, emulating the GPU types\n"
               "  launch   inside a Slurm allocation: discover its GPUs, plan, srun the ranks\n"
               "  doctor   check this installation and say what to fix\n"
               "  version  print the version\n"
               "\n"
               "'hetpipe <command> --help' shows a command's options.\n");
}

/* Errors are logged once, where they are first known (STYLE.md); only the few codes that
 * are returned without a message (running out of memory, a failed write) are reported here,
 * so that a failure never goes unexplained. */
static void report_unlogged(const char *cmd, int rc)
{
    if (rc == -HP_ENOMEM || rc == -ENOMEM || rc == -HP_EIO)
        hp_error("%s failed: %s", cmd, hp_strerror(rc));
}

/* Parse an integer option strictly; on error print which option and what is allowed. */
static int opt_long(const char *opt, const char *v, long min, long max, long *out)
{
    int rc = hp_parse_long(v, min, max, out);

    if (rc)
        hp_error("option '--%s': '%s' is not an integer in %ld..%ld", opt, v, min, max);
    return rc;
}

static int opt_double(const char *opt, const char *v, double min, double max, double *out)
{
    int rc = hp_parse_double(v, min, max, out);

    if (rc)
        hp_error("option '--%s': '%s' is not a number in %g..%g", opt, v, min, max);
    return rc;
}

static int opt_device(const char *v)
{
    if (strcmp(v, "cpu") && strcmp(v, "cuda") && strcmp(v, "auto")) {
        hp_error("option '--device': unknown device '%s' (allowed: cpu, cuda, auto)", v);
        return -HP_EINVAL;
    }
    return 0;
}

/* ---- train ---------------------------------------------------------------------------- */

static void train_usage(FILE *f)
{
    fprintf(f, "usage: hetpipe train [options]\n"
               "  --model NAME|PATH    model (default cnn; mlp, or a model .ini)\n"
               "  --epochs N           epochs (default 5)\n"
               "  --batch N            minibatch size (default 64)\n"
               "  --lr X               learning rate (default 0.05)\n"
               "  --momentum X         SGD momentum (default 0.9)\n"
               "  --weight-decay X     L2 weight decay (default 5e-4)\n"
               "  --schedule S         cosine (default) or constant learning rate\n"
               "  --seed N             seed of initialisation, shuffling, dropout (default 1)\n"
               "  --device D           cpu, cuda or auto (default auto: cuda if present)\n"
               "  --threads N          BLAS threads of the CPU backend (default: OpenBLAS's)\n"
               "  --data DIR           Fashion-MNIST directory (default $HETPIPE_DATA or\n"
               "                       /usr/share/datasets/fashion-mnist)\n"
               "  --metrics FILE       write per-interval and per-epoch metrics as CSV\n"
               "  --log-every N        steps between progress lines (default 100, 0: none)\n"
               "  --train-limit N      train on the first N samples only\n"
               "  --test-limit N       evaluate on the first N test samples only\n"
               "  --step-log FILE      write every step's mean loss (step,loss) as CSV\n"
               "  --save-params FILE   write the final parameters (raw float32, model order)\n");
}

static int cmd_train(int argc, char **argv)
{
    enum {
        O_MOMENTUM = 256,
        O_WD,
        O_SCHEDULE,
        O_THREADS,
        O_DATA,
        O_METRICS,
        O_LOG,
        O_TRL,
        O_TEL,
        O_SLOG,
        O_SAVE
    };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},
        {"epochs", required_argument, 0, 'e'},
        {"batch", required_argument, 0, 'b'},
        {"lr", required_argument, 0, 'l'},
        {"momentum", required_argument, 0, O_MOMENTUM},
        {"weight-decay", required_argument, 0, O_WD},
        {"schedule", required_argument, 0, O_SCHEDULE},
        {"seed", required_argument, 0, 's'},
        {"device", required_argument, 0, 'd'},
        {"threads", required_argument, 0, O_THREADS},
        {"data", required_argument, 0, O_DATA},
        {"metrics", required_argument, 0, O_METRICS},
        {"log-every", required_argument, 0, O_LOG},
        {"train-limit", required_argument, 0, O_TRL},
        {"test-limit", required_argument, 0, O_TEL},
        {"step-log", required_argument, 0, O_SLOG},
        {"save-params", required_argument, 0, O_SAVE},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    struct hp_train_opts o;
    struct hp_train_result r;
    long v;
    double x;
    int c, rc;

    hp_train_opts_init(&o);
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        rc = 0;
        switch (c) {
        case 'm':
            o.model = optarg;
            break;
        case 'e':
            if (!(rc = opt_long("epochs", optarg, 1, 10000, &v)))
                o.epochs = (int)v;
            break;
        case 'b':
            if (!(rc = opt_long("batch", optarg, 1, 65536, &v)))
                o.batch = (int)v;
            break;
        case 'l':
            if (!(rc = opt_double("lr", optarg, 1e-8, 10.0, &x)))
                o.lr = (float)x;
            break;
        case O_MOMENTUM:
            if (!(rc = opt_double("momentum", optarg, 0.0, 0.999, &x)))
                o.momentum = (float)x;
            break;
        case O_WD:
            if (!(rc = opt_double("weight-decay", optarg, 0.0, 1.0, &x)))
                o.weight_decay = (float)x;
            break;
        case O_SCHEDULE:
            if (strcmp(optarg, "cosine") == 0)
                o.cosine = 1;
            else if (strcmp(optarg, "constant") == 0)
                o.cosine = 0;
            else {
                hp_error("option '--schedule': unknown schedule '%s' (allowed: cosine, "
                         "constant)",
                         optarg);
                rc = -HP_EINVAL;
            }
            break;
        case 's':
            if (!(rc = opt_long("seed", optarg, 0, 0x7fffffffL, &v)))
                o.seed = (uint64_t)v;
            break;
        case 'd':
            rc = opt_device(optarg);
            o.device = optarg;
            break;
        case O_THREADS:
            if (!(rc = opt_long("threads", optarg, 1, 1024, &v)))
                hp_backend_cpu_set_threads((int)v);
            break;
        case O_DATA:
            o.data_dir = optarg;
            break;
        case O_METRICS:
            o.metrics = optarg;
            break;
        case O_LOG:
            if (!(rc = opt_long("log-every", optarg, 0, 1000000, &v)))
                o.log_every = (int)v;
            break;
        case O_TRL:
            if (!(rc = opt_long("train-limit", optarg, 1, 60000, &v)))
                o.train_limit = (int)v;
            break;
        case O_SLOG:
            o.step_log = optarg;
            break;
        case O_SAVE:
            o.save_params = optarg;
            break;
        case O_TEL:
            if (!(rc = opt_long("test-limit", optarg, 1, 10000, &v)))
                o.test_limit = (int)v;
            break;
        case 'h':
            train_usage(stdout);
            return 0;
        default:
            train_usage(stderr);
            return 2;
        }
        if (rc)
            return 2;
    }
    if (optind < argc) {
        hp_error("train: unexpected argument '%s'", argv[optind]);
        return 2;
    }
    rc = hp_train_run(&o, &r);
    if (rc) {
        report_unlogged("train", rc);
        return 1;
    }
    printf("hetpipe train: done: %ld steps in %.1f s (%.0f img/s), test accuracy %.2f%%, "
           "test loss %.4f, parameter hash %016llx\n",
           r.steps, r.seconds, r.images_per_s, 100.0 * r.test_acc, r.test_loss,
           (unsigned long long)r.param_hash);
    return 0;
}

/* ---- model ---------------------------------------------------------------------------- */

static int cmd_model(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},
        {"units", no_argument, 0, 'u'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *name = NULL;
    struct hp_model *m;
    int units = 0, c, rc;

    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            name = optarg;
            break;
        case 'u':
            units = 1;
            break;
        case 'h':
            printf("usage: hetpipe model --model NAME|PATH [--units]\n"
                   "  prints parameters and forward multiply-adds per sample; --units lists\n"
                   "  every unit with its output shape, parameters, FLOPs and bytes\n");
            return 0;
        default:
            return 2;
        }
    }
    if (!name && optind < argc)
        name = argv[optind++];
    if (!name) {
        hp_error("model: give --model NAME or a path");
        return 2;
    }
    rc = hp_model_load(name, &m);
    if (rc)
        return 1;
    if (units) {
        printf("%-14s %-10s %-14s %12s %12s %12s %12s %12s\n", "unit", "kind", "output", "params",
               "fwd MACs", "bwd FLOPs", "out bytes", "saved bytes");
        for (int i = 0; i < m->nunits; i++) {
            const struct hp_unit *u = &m->units[i];
            char shape[32];
            snprintf(shape, sizeof(shape), "%dx%dx%d", u->out.c, u->out.h, u->out.w);
            printf("%-14s %-10s %-14s %12zu %12.0f %12.0f %12zu %12zu\n", u->name, u->kind, shape,
                   u->nparams, u->cost.fwd_macs, u->cost.bwd_flops, u->cost.out_bytes,
                   u->cost.saved_bytes);
        }
    }
    struct hp_unit_cost t = hp_model_cost(m, 0, m->nunits);
    printf("model %s: %d units, input %dx%dx%d, %d classes, data set %s\n", m->name, m->nunits,
           m->input.c, m->input.h, m->input.w, m->classes, m->dataset);
    printf("parameters: %zu (%.2f M)\n", m->nparams, (double)m->nparams / 1e6);
    if (t.fwd_macs >= 1e9)
        printf("forward multiply-adds per sample: %.0f (%.2f G)\n", t.fwd_macs, t.fwd_macs / 1e9);
    else
        printf("forward multiply-adds per sample: %.0f (%.2f M)\n", t.fwd_macs, t.fwd_macs / 1e6);
    printf("forward FLOPs per sample: %.3g, backward FLOPs per sample: %.3g\n", t.fwd_flops,
           t.bwd_flops);
    printf("activations kept for backward per sample: %.2f MiB\n",
           (double)t.saved_bytes / 1048576.0);
    hp_model_destroy(m);
    return 0;
}

/* ---- time ----------------------------------------------------------------------------- */

static int cmd_time(int argc, char **argv)
{
    enum { O_THREADS = 256, O_WARMUP };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},
        {"batch", required_argument, 0, 'b'},
        {"device", required_argument, 0, 'd'},
        {"steps", required_argument, 0, 'n'},
        {"threads", required_argument, 0, O_THREADS},
        {"warmup", required_argument, 0, O_WARMUP},
        {"profile", no_argument, 0, 'p'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *name = "cnn", *device = "auto";
    long batch = 32, steps = 20, warmup = 3, v;
    int profile = 0, c, rc;
    struct hp_model *m = NULL;
    struct hp_backend *be = NULL;
    struct hp_net *net = NULL;
    struct hp_net_profile prof;
    float *himg = NULL;
    int32_t *hlab = NULL;
    double *unit_fwd = NULL, *unit_bwd = NULL;

    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        rc = 0;
        switch (c) {
        case 'm':
            name = optarg;
            break;
        case 'b':
            rc = opt_long("batch", optarg, 1, 65536, &batch);
            break;
        case 'd':
            rc = opt_device(optarg);
            device = optarg;
            break;
        case 'n':
            rc = opt_long("steps", optarg, 1, 1000000, &steps);
            break;
        case O_WARMUP:
            rc = opt_long("warmup", optarg, 0, 1000, &warmup);
            break;
        case O_THREADS:
            if (!(rc = opt_long("threads", optarg, 1, 1024, &v)))
                hp_backend_cpu_set_threads((int)v);
            break;
        case 'p':
            profile = 1;
            break;
        case 'h':
            printf("usage: hetpipe time [--model M] [--batch N] [--device cpu|cuda|auto]\n"
                   "                    [--steps N] [--warmup N] [--threads N] [--profile]\n"
                   "  times training steps (forward, loss, backward, SGD) on random data;\n"
                   "  --profile adds time and GFLOP/s per op type\n");
            return 0;
        default:
            return 2;
        }
        if (rc)
            return 2;
    }
    rc = hp_model_load(name, &m);
    if (!rc)
        rc = hp_backend_create(device, &be);
    const struct hp_net_config cfg = {.batch = (int)batch, .nslots = 1, .need_input_grad = 0};
    if (!rc)
        rc = hp_net_create(be, m, 0, m->nunits, &cfg, &net);
    if (!rc)
        rc = hp_net_init_params(net, 1);
    if (rc)
        goto out;
    const size_t in = (size_t)batch * hp_shape_size(m->input);
    himg = malloc(in * sizeof(float));
    hlab = malloc((size_t)batch * sizeof(int32_t));
    if (!himg || !hlab) {
        rc = -HP_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < in; i++)
        himg[i] = 2.0f * hp_rng_uniform(7, i) - 1.0f;
    for (long i = 0; i < batch; i++)
        hlab[i] = (int32_t)(hp_rng_u64(8, (uint64_t)i) % (uint64_t)m->classes);
    unit_fwd = calloc((size_t)m->nunits, sizeof(double));
    unit_bwd = calloc((size_t)m->nunits, sizeof(double));
    if (!unit_fwd || !unit_bwd) {
        rc = -HP_ENOMEM;
        goto out;
    }
    rc = be->ops->upload(be, hp_net_input(net, 0), himg, in * sizeof(float));
    double t0 = 0.0;
    for (long s = 0; s < warmup + steps && !rc; s++) {
        double l;
        int cc;
        if (s == warmup) {
            be->ops->sync(be);
            memset(&prof, 0, sizeof(prof));
            prof.unit_fwd_s = unit_fwd;
            prof.unit_bwd_s = unit_bwd;
            if (profile)
                hp_net_set_profile(net, &prof);
            t0 = hp_now_s();
        }
        rc = hp_net_forward(net, 0, 1, (uint64_t)s);
        if (!rc)
            rc = hp_net_loss(net, 0, hlab, (int)batch, 1, &l, &cc);
        if (!rc)
            rc = hp_net_backward(net, 0);
        if (!rc)
            rc = hp_net_sgd(net, 0.001f, 0.9f, 0.0f);
    }
    if (!rc)
        rc = be->ops->sync(be);
    if (rc)
        goto out;
    const double dt = hp_now_s() - t0;
    struct hp_net_memory mem;
    hp_net_memory(net, &mem);
    printf("time: model %s, batch %ld, device %s, threads %d: %.3f ms/step, %.1f images/s, "
           "memory %.1f MiB\n",
           m->name, batch, be->name, be->kind == HP_DEVICE_CPU ? hp_backend_cpu_threads() : 0,
           1e3 * dt / steps, (double)batch * steps / dt, (double)mem.total / 1048576.0);
    if (profile) {
        double gemm_s = 0.0, gemm_f = 0.0, all = 0.0;
        printf("%-10s %10s %10s %10s\n", "op", "fwd ms", "bwd ms", "GFLOP/s");
        for (int t = 0; t < HP_OP_NTYPES; t++) {
            const double s = prof.fwd_s[t] + prof.bwd_s[t],
                         f = prof.fwd_flops[t] + prof.bwd_flops[t];
            all += s;
            if (s == 0.0)
                continue;
            printf("%-10s %10.3f %10.3f %10.2f\n", hp_op_name((enum hp_op_type)t),
                   1e3 * prof.fwd_s[t] / steps, 1e3 * prof.bwd_s[t] / steps,
                   f > 0 ? f / s / 1e9 : 0.0);
            if (t == HP_OP_CONV || t == HP_OP_LINEAR) {
                gemm_s += s;
                gemm_f += f;
            }
        }
        printf("conv+linear: %.2f GFLOP/s, %.1f%% of op time\n", gemm_f / gemm_s / 1e9,
               100.0 * gemm_s / all);
        printf("%-14s %10s %10s %12s\n", "unit", "fwd ms", "bwd ms", "fwd+bwd GF/s");
        for (int u = 0; u < m->nunits; u++) {
            const struct hp_unit_cost *uc = &m->units[u].cost;
            const double s = unit_fwd[u] + unit_bwd[u];
            printf("%-14s %10.3f %10.3f %12.2f\n", m->units[u].name, 1e3 * unit_fwd[u] / steps,
                   1e3 * unit_bwd[u] / steps,
                   s > 0 ? (uc->fwd_flops + uc->bwd_flops) * batch * steps / s / 1e9 : 0.0);
        }
    }
out:
    if (rc)
        report_unlogged("time", rc);
    free(himg);
    free(hlab);
    free(unit_fwd);
    free(unit_bwd);
    hp_net_destroy(net);
    hp_backend_destroy(be);
    hp_model_destroy(m);
    return rc ? 1 : 0;
}

/* ---- plan ----------------------------------------------------------------------------- */

static void plan_usage(FILE *f)
{
    fprintf(f, "usage: hetpipe plan --cluster FILE [options]\n"
               "  --cluster FILE      cluster description (etc/clusters/*.ini)\n"
               "  --model NAME|PATH   model (default vgg19)\n"
               "  --policy P          np, ed, hd, auto (default) or dp\n"
               "  --placement P       default (default) or local\n"
               "  --staleness D       WSP staleness threshold, >= 0 (default 0)\n"
               "  --nm N|auto         minibatches in flight per virtual worker (default auto)\n"
               "  --nm-max N          upper bound of the auto search (default: stages of the VW)\n"
               "  --batch N           minibatch size (default 32)\n"
               "  --seed N            job seed recorded in the plan (default 1)\n"
               "  --config FILE       site config with the GPU database (default: $HETPIPE_CONF,\n"
               "                      ./etc/hetpipe.conf, next to hetpipe, /etc/hetpipe)\n"
               "  --out FILE          write the plan file there\n"
               "  --profile FILE      measured unit times (hetpipe profile) instead of estimates\n"
               "  --quiet             no table\n");
}

static void random_token(char *tok)
{
    unsigned char b[16] = {0};
    FILE *f = fopen("/dev/urandom", "rb");

    if (!f || fread(b, 1, sizeof(b), f) != sizeof(b)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = hp_rng_u64((uint64_t)ts.tv_nsec ^ (uint64_t)getpid(), (uint64_t)ts.tv_sec);
        memcpy(b, &x, 8);
    }
    if (f)
        fclose(f);
    for (int i = 0; i < 16; i++)
        snprintf(tok + 2 * i, 3, "%02x", b[i]);
}

static void print_plan(const struct hp_plan *p, const struct hp_cost *c,
                       const struct hp_cluster *cl, const struct hp_gpudb *db)
{
    const struct hp_model *m = c->model;

    printf("plan: model %s (%d units), cluster %s (%d nodes, %d GPUs), policy %s", p->model,
           m->nunits, cl->name, cl->nnodes, cl->ngpus, hp_policy_name(p->opts.policy));
    if (p->opts.policy == HP_POLICY_AUTO)
        printf(" (chose %s)", p->grouping == HP_POLICY_AUTO ? "a speed-balanced grouping"
                                                            : hp_policy_name(p->grouping));
    printf(", placement %s, staleness %d, minibatch %d\n", hp_placement_name(p->opts.placement),
           p->opts.staleness, p->opts.batch);
    for (int v = 0; v < p->nvws; v++) {
        const struct hp_vw_plan *vw = &p->vws[v];
        printf("\nVW %d: %d GPUs, Nm %d, %.1f images/s (slowest stage %.2f ms)\n", v, vw->nstages,
               vw->nm, vw->rate, 1e3 * vw->bottleneck_s);
        printf("  %-5s %-12s %-4s %-10s %-28s %10s %11s %16s\n", "stage", "node", "gpu", "type",
               "units", "compute ms", "transfer ms", "memory GiB used/has");
        for (int s = 0; s < vw->nstages; s++) {
            const struct hp_stage_plan *st = &vw->stages[s];
            const struct hp_gpu *g = &cl->gpus[st->gpu];
            char units[64];
            snprintf(units, sizeof(units), "%d-%d %.11s..%.11s", st->u0, st->u1 - 1,
                     m->units[st->u0].name, m->units[st->u1 - 1].name);
            printf("  %-5d %-12s %-4d %-10s %-28s %10.2f %11.2f %8.2f / %-6.2f\n", s,
                   cl->nodes[g->node].name, g->index, db->types[g->type].name, units,
                   1e3 * st->compute_s, 1e3 * st->transfer_s, st->memory / 1073741824.0,
                   st->capacity / 1073741824.0);
        }
    }
    if (p->nshards) {
        printf("\nPS shards (one per node):");
        for (int s = 0; s < p->nshards; s++) {
            int n = 0;
            for (int u = 0; u < p->nunits; u++)
                n += p->unit_shard[u] == s;
            printf("%s %s: %d units", s ? "," : "", cl->nodes[s].name, n);
        }
        printf("\nnetwork bytes per wave: %.1f MB under default placement, %.1f MB under local\n",
               p->wave_bytes[0] / 1e6, p->wave_bytes[1] / 1e6);
    } else {
        printf("\nallreduce per minibatch: %.2f ms\n", 1e3 * p->allreduce_s);
    }
    printf("predicted: %.1f images/s for the job (%d virtual workers, %d ranks)\n", p->rate,
           p->nvws, p->nranks);
}

static int cmd_plan(int argc, char **argv)
{
    enum { O_PLACEMENT = 256, O_NMMAX, O_CONFIG, O_OUT, O_QUIET, O_PROFILE };
    static const struct option opts[] = {
        {"cluster", required_argument, 0, 'c'},
        {"model", required_argument, 0, 'm'},
        {"policy", required_argument, 0, 'p'},
        {"placement", required_argument, 0, O_PLACEMENT},
        {"staleness", required_argument, 0, 'D'},
        {"nm", required_argument, 0, 'n'},
        {"nm-max", required_argument, 0, O_NMMAX},
        {"batch", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 's'},
        {"config", required_argument, 0, O_CONFIG},
        {"out", required_argument, 0, O_OUT},
        {"quiet", no_argument, 0, O_QUIET},
        {"profile", required_argument, 0, O_PROFILE},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    struct hp_plan_opts o = {
        .policy = HP_POLICY_AUTO, .placement = HP_PLACEMENT_DEFAULT, .batch = 32, .seed = 1};
    const char *cluster = NULL, *model = "vgg19", *config = NULL, *out = NULL, *profile = NULL;
    char confpath[4096], token[33];
    struct hp_gpudb db = {0};
    struct hp_cluster cl = {0};
    struct hp_model *m = NULL;
    struct hp_cost cost = {0};
    struct hp_plan plan = {0};
    int quiet = 0, c, rc = 0;
    long v;

    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        rc = 0;
        switch (c) {
        case 'c':
            cluster = optarg;
            break;
        case 'm':
            model = optarg;
            break;
        case 'p':
            if ((rc = hp_policy_parse(optarg, &o.policy)))
                hp_error("option '--policy': unknown policy '%s' (allowed: np, ed, hd, auto, dp)",
                         optarg);
            break;
        case O_PLACEMENT:
            if ((rc = hp_placement_parse(optarg, &o.placement)))
                hp_error("option '--placement': unknown placement '%s' (allowed: default, local)",
                         optarg);
            break;
        case 'D':
            if (!(rc = opt_long("staleness", optarg, 0, 1000000, &v)))
                o.staleness = (int)v;
            break;
        case 'n':
            if (strcmp(optarg, "auto") == 0)
                o.nm_fixed = 0;
            else if ((rc = hp_parse_long(optarg, 1, 1024, &v)))
                hp_error("option '--nm': '%s' is neither auto nor an integer in 1..1024", optarg);
            else
                o.nm_fixed = (int)v;
            break;
        case O_NMMAX:
            if (!(rc = opt_long("nm-max", optarg, 1, 1024, &v)))
                o.nm_max = (int)v;
            break;
        case 'b':
            if (!(rc = opt_long("batch", optarg, 1, 65536, &v)))
                o.batch = (int)v;
            break;
        case 's':
            if (!(rc = opt_long("seed", optarg, 0, 0x7fffffffL, &v)))
                o.seed = (uint64_t)v;
            break;
        case O_CONFIG:
            config = optarg;
            break;
        case O_OUT:
            out = optarg;
            break;
        case O_QUIET:
            quiet = 1;
            break;
        case O_PROFILE:
            profile = optarg;
            break;
        case 'h':
            plan_usage(stdout);
            return 0;
        default:
            plan_usage(stderr);
            return 2;
        }
        if (rc)
            return 2;
    }
    if (!cluster) {
        hp_error("plan: option '--cluster FILE' is required (see etc/clusters/)");
        return 2;
    }
    if (!config) {
        if (hp_gpudb_default_path(confpath, sizeof(confpath)))
            return 1;
        config = confpath;
    }
    if ((rc = hp_gpudb_load(config, &db)) || (rc = hp_cluster_load(cluster, &db, &cl)) ||
        (rc = hp_model_load(model, &m)) || (rc = hp_cost_init(&cost, m, &db, o.batch)))
        goto done;
    if (profile) {
        int applied = 0;
        if ((rc = hp_profile_apply(profile, &cost, &applied)))
            goto done;
        if (!quiet)
            printf("profile %s: measured times for %d of %d units\n", profile, applied, m->nunits);
    }
    if ((rc = hp_plan_compute(&cost, &cl, &o, &plan)))
        goto done;
    /* a model given as a file: the ranks load it by its absolute path, whatever their cwd */
    if (strchr(model, '/') ||
        (strlen(model) > 4 && strcmp(model + strlen(model) - 4, ".ini") == 0)) {
        char *abs = realpath(model, NULL);
        if (abs == NULL || strlen(abs) >= sizeof(plan.model)) {
            hp_error("model '%s': cannot resolve its absolute path", model);
            free(abs);
            rc = -HP_EINVAL;
            goto done;
        }
        snprintf(plan.model, sizeof(plan.model), "%s", abs);
        free(abs);
    }
    random_token(token);
    if (!quiet)
        print_plan(&plan, &cost, &cl, &db);
    if (out) {
        rc = hp_planfile_save(out, &plan, &cl, &db, token);
        if (!rc && !quiet)
            printf("plan written to %s\n", out);
    }
done:
    hp_plan_release(&plan);
    hp_cost_release(&cost);
    hp_model_destroy(m);
    if (cl.nodes)
        hp_cluster_release(&cl);
    hp_gpudb_release(&db);
    return rc ? 1 : 0;
}

int hp_cmd_plan(int argc, char **argv)
{
    optind = 0;
    return cmd_plan(argc, argv);
}

int hp_rank_binary(const char *cmd, char *buf, size_t n)
{
    const char *env = getenv("HETPIPE_RANK_BIN");
    ssize_t len = readlink("/proc/self/exe", buf, n > 16 ? n - 16 : 0);

    if (env && *env)
        snprintf(buf, n, "%s", env);
    else if (len > 0) {
        buf[len] = 0;
        char *slash = strrchr(buf, '/');
        strcpy(slash ? slash + 1 : buf, "hetpipe-rank");
    } else
        snprintf(buf, n, "hetpipe-rank");
    if (access(buf, X_OK) != 0) {
        hp_error("%s: cannot execute the rank program '%s' (build it with make, or set "
                 "HETPIPE_RANK_BIN)",
                 cmd, buf);
        return -1;
    }
    return 0;
}

/* ---- run --local ---------------------------------------------------------------------- */

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: hetpipe run --local [options] [training options]\n"
            "  --local              fork the ranks on this machine, CPU ranks emulating the\n"
            "                       cluster's GPU types (no Slurm needed)\n"
            "  --cluster FILE|NAME  cluster to emulate (default demo: etc/clusters/demo.ini)\n"
            "  --model NAME|PATH    model (default cnn)\n"
            "  --policy P           np, ed (default), hd, auto, dp\n"
            "  --placement P        default or local\n"
            "  --nm N|auto          minibatches in flight per virtual worker (default auto)\n"
            "  --staleness D        WSP staleness bound in waves (default 0)\n"
            "  --batch N            minibatch (default 64)    --seed N   (default 1)\n"
            "  --emulate auto|off|S emulated time = S x the cost model's (default auto: S so\n"
            "                       that padding dominates the real CPU time)\n"
            "  --run-dir DIR        where the plan, address files and logs go (default a new\n"
            "                       private directory, removed after a successful run)\n"
            "  --keep               keep the run directory\n"
            "  --config FILE        site config\n"
            "training options, passed to every rank: --epochs N (default 5) --lr X --momentum X\n"
            "  --weight-decay X --schedule S --train-limit N --test-limit N --log-every N\n"
            "  --data DIR --metrics FILE --step-log FILE --weight-log PREFIX --stats PREFIX\n"
            "  --trace PREFIX --save-params PREFIX --eval-every N --stop-at P --timeout SEC\n"
            "  --device D --threads N --no-stash\n"
            "  --lr is the job's: with V virtual workers each applies lr/V (the PS sums their\n"
            "  updates); dp averages its replicas' gradients. --eval-every N evaluates the\n"
            "  global weights every N training samples (metrics rows 'test'); nothing trains\n"
            "  meanwhile. --stop-at P stops the job after the first evaluation at or above P%%\n"
            "  test accuracy.\n");
}

/* Whole-model forward + backward seconds per minibatch on this CPU: the fastest of 5 steps
 * after a warm-up (the fastest is the least disturbed by other load on a shared machine). */
static double cpu_step_seconds(const struct hp_model *m, int batch)
{
    struct hp_backend *be = NULL;
    struct hp_net *net = NULL;
    const struct hp_net_config cfg = {.batch = batch, .nslots = 1, .need_input_grad = 0};
    double best = 0.0;

    if (hp_backend_cpu_create(&be) || hp_net_create(be, m, 0, m->nunits, &cfg, &net) ||
        hp_net_init_params(net, 1)) {
        hp_net_destroy(net);
        hp_backend_destroy(be);
        return 0.0;
    }
    for (int s = 0; s < 6; s++) {
        const double t0 = hp_now_s();
        hp_net_forward(net, 0, 1, (uint64_t)s);
        hp_net_backward(net, 0);
        const double t = hp_now_s() - t0;
        if (s > 0 && (best == 0.0 || t < best))
            best = t;
    }
    hp_net_destroy(net);
    hp_backend_destroy(be);
    return best;
}

static volatile sig_atomic_t run_interrupted;
static void run_on_signal(int sig)
{
    run_interrupted = sig;
}

static void describe_rank(const struct hp_plan *p, const struct hp_cluster *cl,
                          const struct hp_gpudb *db, int r, char *buf, size_t n)
{
    int v, s;

    if (hp_plan_rank_stage(p, r, &v, &s) == 0) {
        const struct hp_gpu *g = &cl->gpus[p->vws[v].stages[s].gpu];
        snprintf(buf, n, "vw %d stage %d, %s on %s", v, s, db->types[g->type].name,
                 cl->nodes[g->node].name);
        return;
    }
    snprintf(buf, n, "PS shard %d", r - (p->nranks - p->nshards));
}

static void tail_file(const char *path, int lines)
{
    char cmd[8400];

    snprintf(cmd, sizeof(cmd), "tail -n %d '%s' 1>&2", lines, path);
    if (system(cmd) != 0)
        return;
}

static int cmd_run(int argc, char **argv)
{
    static const char *plan_opts[] = {"cluster", "model", "policy", "placement", "nm", "nm-max",
                                      "batch",   "seed",  "config", "staleness", NULL};
    static const char *rank_opts[] = {
        "epochs",    "lr",    "momentum", "weight-decay", "schedule",   "train-limit", "test-limit",
        "log-every", "data",  "metrics",  "step-log",     "weight-log", "timeout",     "device",
        "threads",   "stats", "trace",    "save-params",  "eval-every", "stop-at", NULL};
    const char *pargv[64], *rargv[96];
    int pargc = 0, rargc = 0, local = 0, keep = 0, rc = 0;
    const char *cluster = "demo", *model = "cnn", *policy = "ed", *batch = "64", *config = NULL;
    const char *emulate = "auto", *run_dir = NULL;
    char cluster_path[4096], dir[4096], plan_path[4200], boot[4200], confpath[4096];
    char rank_bin[4096], emu[64], token[33];

    rargv[rargc++] = "hetpipe-rank";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            run_usage(stdout);
            return 0;
        }
        if (strcmp(a, "--local") == 0) {
            local = 1;
            continue;
        }
        if (strcmp(a, "--keep") == 0) {
            keep = 1;
            continue;
        }
        if (strcmp(a, "--no-stash") == 0) {
            rargv[rargc++] = a;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 || i + 1 >= argc) {
            hp_error("run: '%s' is not an option with a value (see hetpipe run --help)", a);
            return 2;
        }
        const char *name = a + 2, *val = argv[++i];
        int known = 0;
        if (strcmp(name, "emulate") == 0) {
            emulate = val;
            continue;
        }
        if (strcmp(name, "run-dir") == 0) {
            run_dir = val;
            continue;
        }
        for (int k = 0; plan_opts[k]; k++)
            if (strcmp(name, plan_opts[k]) == 0) {
                known = 1;
                if (strcmp(name, "cluster") == 0)
                    cluster = val;
                else if (strcmp(name, "model") == 0)
                    model = val;
                else if (strcmp(name, "policy") == 0)
                    policy = val;
                else if (strcmp(name, "batch") == 0)
                    batch = val;
                else {
                    if (strcmp(name, "config") == 0)
                        config = val;
                    if (pargc + 2 >= 50)
                        return 2;
                    pargv[pargc++] = a;
                    pargv[pargc++] = val;
                }
            }
        for (int k = 0; !known && rank_opts[k]; k++)
            if (strcmp(name, rank_opts[k]) == 0) {
                known = 1;
                if (rargc + 2 >= 80)
                    return 2;
                rargv[rargc++] = a;
                rargv[rargc++] = val;
            }
        if (!known) {
            hp_error("run: unknown option '%s' (see hetpipe run --help)", a);
            return 2;
        }
    }
    if (!local) {
        hp_error("run: only --local is supported: it forks the ranks on this machine (inside a "
                 "Slurm allocation the ranks are started with srun --mpi=pmix)");
        return 2;
    }
    /* a cluster name is a file of etc/clusters (or the installed clusters) */
    if (strchr(cluster, '/') || strstr(cluster, ".ini"))
        snprintf(cluster_path, sizeof(cluster_path), "%s", cluster);
    else {
        snprintf(cluster_path, sizeof(cluster_path), "etc/clusters/%s.ini", cluster);
        if (access(cluster_path, R_OK) != 0)
            snprintf(cluster_path, sizeof(cluster_path), "%s/clusters/%s.ini", HP_DATADIR, cluster);
    }
    if (!config) {
        if (hp_gpudb_default_path(confpath, sizeof(confpath)))
            return 1;
        config = confpath;
    }
    if (hp_rank_binary("run", rank_bin, sizeof(rank_bin)))
        return 1;
    /* the private run directory */
    if (run_dir) {
        snprintf(dir, sizeof(dir), "%s", run_dir);
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            hp_error("run: cannot create run directory '%s': %s", dir, strerror(errno));
            return 1;
        }
        chmod(dir, 0700);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof(dir), "%s/hetpipe-run.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            hp_error("run: cannot create a run directory in %s: %s", tmp ? tmp : "/tmp",
                     strerror(errno));
            return 1;
        }
    }
    snprintf(plan_path, sizeof(plan_path), "%s/plan.ini", dir);
    snprintf(boot, sizeof(boot), "%s/boot", dir);
    if (mkdir(boot, 0700) != 0 && errno != EEXIST) {
        hp_error("run: cannot create '%s': %s", boot, strerror(errno));
        return 1;
    }
    chmod(boot, 0700);

    /* plan (prints the table) */
    {
        const char *av[80];
        int ac = 0;
        av[ac++] = "plan";
        av[ac++] = "--cluster";
        av[ac++] = cluster_path;
        av[ac++] = "--model";
        av[ac++] = model;
        av[ac++] = "--policy";
        av[ac++] = policy;
        av[ac++] = "--batch";
        av[ac++] = batch;
        for (int i = 0; i < pargc; i++)
            av[ac++] = pargv[i];
        av[ac++] = "--out";
        av[ac++] = plan_path;
        av[ac] = NULL;
        optind = 0;
        if (cmd_plan(ac, (char **)av) != 0)
            return 1;
        fflush(stdout);
    }
    struct hp_gpudb db = {0};
    struct hp_plan plan = {0};
    struct hp_cluster cl = {0};
    struct hp_model *m = NULL;
    if ((rc = hp_gpudb_load(config, &db)) ||
        (rc = hp_planfile_load(plan_path, &db, &plan, &cl, token)) ||
        (rc = hp_model_load(plan.model, &m)))
        return 1;
    /* emulation scale */
    {
        double S = 0.0;
        if (strcmp(emulate, "off") == 0)
            S = 0.0;
        else if (strcmp(emulate, "auto") == 0) {
            const int workers = plan.nranks - plan.nshards;
            long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
            double gpu = 0.0;
            for (int s = 0; s < plan.vws[0].nstages; s++)
                gpu += plan.vws[0].stages[s].compute_s;
            const double cpu = cpu_step_seconds(m, plan.opts.batch);
            const double margin = 2.0 * (workers > ncpu && ncpu > 0 ? (double)workers / ncpu : 1.0);
            S = gpu > 0.0 && cpu > 0.0 ? margin * cpu / gpu : 0.0;
            printf("emulation: whole model %.2f ms per minibatch on this CPU, %.3f ms on the "
                   "planned GPUs: scale %.0f (emulated time = %.0f x the GPUs')\n",
                   1e3 * cpu, 1e3 * gpu, S, S);
        } else if (opt_double("emulate", emulate, 0.0, 1e9, &S)) {
            rc = -HP_EINVAL;
            goto done;
        }
        snprintf(emu, sizeof(emu), "%.9g", S);
        rargv[rargc++] = "--emulate";
        rargv[rargc++] = emu;
    }
    rargv[rargc++] = "--plan";
    rargv[rargc++] = plan_path;
    rargv[rargc++] = "--boot-dir";
    rargv[rargc++] = boot;
    rargv[rargc++] = "--config";
    rargv[rargc++] = config;
    rargv[rargc] = NULL;
    fflush(stdout);

    /* fork the ranks */
    const int n = plan.nranks;
    pid_t *pids = calloc((size_t)n, sizeof(pid_t));
    if (!pids) {
        rc = -HP_ENOMEM;
        goto done;
    }
    char parent[32];
    snprintf(parent, sizeof(parent), "%ld", (long)getpid());
    struct sigaction sa = {0};
    sa.sa_handler = run_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            hp_error("run: cannot fork rank %d: %s", r, strerror(errno));
            rc = -HP_EIO;
            break;
        }
        if (pid == 0) {
            char rs[16], logp[4300];
            snprintf(rs, sizeof(rs), "%d", r);
            setenv("HETPIPE_RANK", rs, 1);
            setenv("HETPIPE_PARENT", parent, 1);
            setenv("OPENBLAS_NUM_THREADS",
                   getenv("OPENBLAS_NUM_THREADS") ? getenv("OPENBLAS_NUM_THREADS") : "1", 1);
            snprintf(logp, sizeof(logp), "%s/rank-%d.log", dir, r);
            int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd >= 0 && r > 0) {
                dup2(fd, 1);
                dup2(fd, 2);
            }
            if (fd > 2)
                close(fd);
            execv(rank_bin, (char **)rargv);
            fprintf(stderr, "hetpipe run: cannot execute %s: %s\n", rank_bin, strerror(errno));
            _exit(127);
        }
        pids[r] = pid;
    }
    /* supervise: the first rank that fails stops the others */
    int alive = 0, failed = -1;
    for (int r = 0; r < n; r++)
        alive += pids[r] > 0;
    if (rc && alive) {
        for (int r = 0; r < n; r++)
            if (pids[r] > 0)
                kill(pids[r], SIGTERM);
    }
    double kill_at = 0.0;
    while (alive > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid == 0 || (pid < 0 && errno == EINTR)) {
            if (run_interrupted && failed < 0) {
                hp_error("run: interrupted (signal %d): stopping the ranks", (int)run_interrupted);
                failed = n;
                for (int r = 0; r < n; r++)
                    if (pids[r] > 0)
                        kill(pids[r], SIGTERM);
                kill_at = hp_now_s() + 5.0;
            }
            if (kill_at > 0.0 && hp_now_s() > kill_at) {
                for (int r = 0; r < n; r++)
                    if (pids[r] > 0)
                        kill(pids[r], SIGKILL);
                kill_at = 0.0;
            }
            usleep(20000);
            continue;
        }
        if (pid < 0)
            break;
        int r = 0;
        while (r < n && pids[r] != pid)
            r++;
        if (r == n)
            continue;
        pids[r] = 0;
        alive--;
        const int bad = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
        if (bad && failed < 0) {
            char role[256], logp[4300];
            failed = r;
            describe_rank(&plan, &cl, &db, r, role, sizeof(role));
            if (WIFSIGNALED(status))
                hp_error("run: rank %d (%s) was killed by signal %d (%s); stopping the others", r,
                         role, WTERMSIG(status), strsignal(WTERMSIG(status)));
            else
                hp_error("run: rank %d (%s) failed with exit status %d; stopping the others", r,
                         role, WEXITSTATUS(status));
            snprintf(logp, sizeof(logp), "%s/rank-%d.log", dir, r);
            if (r > 0 && WIFEXITED(status)) {
                fprintf(stderr, "last lines of %s:\n", logp);
                fflush(stderr);
                tail_file(logp, 5);
            }
            for (int q = 0; q < n; q++)
                if (pids[q] > 0)
                    kill(pids[q], SIGTERM);
            kill_at = hp_now_s() + 5.0;
        }
    }
    free(pids);
    if (failed >= 0 || rc) {
        fprintf(stderr, "hetpipe run: failed; plan, logs and address files kept in %s\n", dir);
        rc = rc ? rc : -HP_EIO;
    } else if (!keep && !run_dir) {
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
        if (system(cmd) != 0)
            hp_warn("run: could not remove %s", dir);
    } else {
        printf("hetpipe run: plan and logs in %s\n", dir);
    }
done:
    hp_model_destroy(m);
    hp_plan_release(&plan);
    hp_cluster_release(&cl);
    hp_gpudb_release(&db);
    return rc ? 1 : 0;
}

/* ---- profile -------------------------------------------------------------------------- */

static int cmd_profile(int argc, char **argv)
{
    enum { O_TYPE = 256, O_OUT, O_STEPS, O_THREADS };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},
        {"device", required_argument, 0, 'd'},
        {"batch", required_argument, 0, 'b'},
        {"type", required_argument, 0, O_TYPE},
        {"out", required_argument, 0, O_OUT},
        {"steps", required_argument, 0, O_STEPS},
        {"threads", required_argument, 0, O_THREADS},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *model = "cnn", *device = "auto", *type = NULL, *out = "profile.ini";
    long batch = 32, steps = 3, v;
    struct hp_model *m = NULL;
    struct hp_backend *be = NULL;
    FILE *f = NULL;
    float *host = NULL;
    int c, rc = 0;

    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        rc = 0;
        switch (c) {
        case 'm':
            model = optarg;
            break;
        case 'd':
            rc = opt_device(optarg);
            device = optarg;
            break;
        case 'b':
            rc = opt_long("batch", optarg, 1, 65536, &batch);
            break;
        case O_TYPE:
            type = optarg;
            break;
        case O_OUT:
            out = optarg;
            break;
        case O_STEPS:
            rc = opt_long("steps", optarg, 1, 1000, &steps);
            break;
        case O_THREADS:
            if (!(rc = opt_long("threads", optarg, 1, 1024, &v)))
                hp_backend_cpu_set_threads((int)v);
            break;
        case 'h':
            printf("usage: hetpipe profile [--model M] [--device cpu|cuda|auto] [--batch N]\n"
                   "                       [--type GPUTYPE] [--steps N] [--out FILE]\n"
                   "  times forward and backward of every distinct unit of the model (one-unit\n"
                   "  nets on random data, the median of N steps after a warm-up) and its memory,\n"
                   "  and writes a profile database for 'hetpipe plan --profile FILE'; --type\n"
                   "  names the site config's GPU type the numbers stand for (default: the\n"
                   "  device name, or 'cpu')\n");
            return 0;
        default:
            return 2;
        }
        if (rc)
            return 2;
    }
    if ((rc = hp_model_load(model, &m)) || (rc = hp_backend_create(device, &be)))
        goto done;
    f = fopen(out, "w");
    if (!f) {
        hp_error("cannot write profile '%s': %m", out);
        rc = -HP_EIO;
        goto done;
    }
    fprintf(f,
            "; hetpipe profile of model %s, written by hetpipe profile\n[profile]\nversion = 1\n"
            "type = %s\ndevice = %s\nbatch = %ld\n",
            m->name, type ? type : (be->kind == HP_DEVICE_CPU ? "cpu" : be->name), be->name, batch);
    printf("%-16s %-34s %10s %10s %12s\n", "unit", "signature", "fwd ms", "bwd ms", "memory MiB");
    for (int u = 0; u < m->nunits && rc == 0; u++) {
        char sig[128];
        int seen = 0;
        hp_profile_signature(&m->units[u], sig, sizeof(sig));
        for (int w = 0; w < u && !seen; w++) {
            char s2[128];
            hp_profile_signature(&m->units[w], s2, sizeof(s2));
            seen = strcmp(sig, s2) == 0;
        }
        if (seen)
            continue;
        const struct hp_net_config cfg = {.batch = (int)batch, .nslots = 1, .need_input_grad = 1};
        struct hp_net *net = NULL;
        struct hp_net_memory mem;
        double fwd[1000], bwd[1000];
        const size_t nin = (size_t)batch * hp_shape_size(m->units[u].in);
        const size_t nout = (size_t)batch * hp_shape_size(m->units[u].out);
        const size_t nmax = nin > nout ? nin : nout;
        if ((rc = hp_net_create(be, m, u, u + 1, &cfg, &net)) || (rc = hp_net_init_params(net, 1)))
            break;
        free(host);
        host = malloc(nmax * sizeof(float));
        if (!host) {
            rc = -HP_ENOMEM;
            hp_net_destroy(net);
            break;
        }
        for (size_t i = 0; i < nmax; i++)
            host[i] = 2.0f * hp_rng_uniform(3, i) - 1.0f;
        rc = be->ops->upload(be, hp_net_input(net, 0), host, nin * sizeof(float));
        if (!rc)
            rc = be->ops->upload(be, hp_net_output_grad(net), host, nout * sizeof(float));
        for (long s = 0; s <= steps && !rc; s++) {
            double t0, t1;
            be->ops->sync(be);
            t0 = hp_now_s();
            rc = hp_net_forward(net, 0, 1, (uint64_t)s);
            be->ops->sync(be);
            t1 = hp_now_s();
            if (!rc)
                rc = hp_net_backward(net, 0);
            be->ops->sync(be);
            if (s > 0) { /* step 0 warms up */
                fwd[s - 1] = t1 - t0;
                bwd[s - 1] = hp_now_s() - t1;
            }
        }
        if (!rc) {
            /* medians */
            for (long i = 0; i < steps; i++)
                for (long j = i + 1; j < steps; j++) {
                    if (fwd[j] < fwd[i]) {
                        double t = fwd[i];
                        fwd[i] = fwd[j];
                        fwd[j] = t;
                    }
                    if (bwd[j] < bwd[i]) {
                        double t = bwd[i];
                        bwd[i] = bwd[j];
                        bwd[j] = t;
                    }
                }
            hp_net_memory(net, &mem);
            fprintf(f, "\n[unit.%s]\nfwd_s = %.9g\nbwd_s = %.9g\nmemory = %zu\n", sig,
                    fwd[steps / 2], bwd[steps / 2], mem.total);
            printf("%-16s %-34.34s %10.3f %10.3f %12.1f\n", m->units[u].name, sig,
                   1e3 * fwd[steps / 2], 1e3 * bwd[steps / 2], (double)mem.total / 1048576.0);
        }
        hp_net_destroy(net);
    }
    if (!rc)
        printf("profile written to %s\n", out);
done:
    if (f && fclose(f) != 0 && !rc)
        rc = -HP_EIO;
    free(host);
    hp_backend_destroy(be);
    hp_model_destroy(m);
    if (rc)
        report_unlogged("profile", rc);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *cmd;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("hetpipe %s (cuda backend: %s)\n", VERSION, HP_HAVE_CUDA ? "built" : "not built");
        return 0;
    }
    argv[1] = argv[0];
    if (strcmp(cmd, "train") == 0)
        return cmd_train(argc - 1, argv + 1);
    if (strcmp(cmd, "model") == 0)
        return cmd_model(argc - 1, argv + 1);
    if (strcmp(cmd, "time") == 0)
        return cmd_time(argc - 1, argv + 1);
    if (strcmp(cmd, "plan") == 0)
        return cmd_plan(argc - 1, argv + 1);
    if (strcmp(cmd, "profile") == 0)
        return cmd_profile(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "launch") == 0)
        return hp_cmd_launch(argc - 1, argv + 1);
    if (strcmp(cmd, "doctor") == 0)
        return hp_cmd_doctor(argc - 1, argv + 1);
    hp_error("unknown command '%s' (allowed: train, model, time, plan, profile, run, launch, "
             "doctor, version; see hetpipe --help)",
             cmd);
    return 2;
}
