/* plans.c - the planner on the paper's testbed, and its speed (tests/bench/paper_plans).
 *
 * For ResNet-152 and VGG-19 at minibatch 32 on etc/clusters/paper.ini: every policy and
 * placement with Nm per VW and the predicted images/s, and the ratio to dp on the same 16
 * GPUs (dp leaves out the GPUs that cannot hold the model) and to dp on the 12 GPUs without
 * the RTX 2060 node. GPT-2, GPT-2 medium and GPT-2 XL at minibatch 8 (of 1024 tokens) under
 * AdamW on paper.ini and six-types.ini: dp (under SGD for reference where no GPU holds AdamW's
 * moments), then every policy and placement, each plan's VWs with which GPU holds which
 * units, Nm, recomputation, and tokens/s against dp's. Then the time to plan paper.ini for
 * ResNet-152 under auto (target < 50 ms) and a synthetic 1024-GPU cluster of 8 types (target < 2
 * s); the planner's wall-clock time under auto for every shipped model (etc/models) on clusters of
 * 8 types shaped as tests/clusters/big8x2048.ini at 256, 512, 1024 and 2048 GPUs, with the seconds
 * per 1024 GPUs (target <= 1 s); and the time and peak resident set of planning a model of 4,096
 * one-op units (the model loader's limit) on etc/clusters/demo.ini (target: seconds, under
 * 200 MB). Figures only: nothing here is asserted.
 */
#include "cluster.h"
#include "clock.h"
#include "cost.h"
#include "gpudb.h"
#include "log.h"
#include "model.h"
#include "planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int plan(const struct hp_cost *c, const struct hp_cluster *cl, enum hp_policy pol,
                enum hp_placement pl, struct hp_plan *p)
{
    struct hp_options o = {.policy = pol, .placement = pl, .batch = c->batch};

    hp_log_set_quiet(1);
    int rc = hp_plan_compute(c, cl, &o, p);
    hp_log_set_quiet(0);
    return rc;
}

/* paper.ini without node3 (the RTX 2060s): 12 GPUs */
static int without_rtx2060(const struct hp_gpudb *db, struct hp_cluster *out)
{
    const int t[3] = {hp_gpudb_find(db, "titanv"), hp_gpudb_find(db, "titanrtx"),
                      hp_gpudb_find(db, "p4000")};
    const int counts[3] = {4, 4, 4};
    int rc = hp_cluster_make(db, 3, counts, t, out);

    if (!rc) {
        out->intra_node_gbs = db->intra_node_gbs;
        out->inter_node_gbs = db->inter_node_gbs;
    }
    return rc;
}

/* Which GPUs a plan uses, by type, and on how many of them a stage recomputes: "4 titanv,
 * 4 rtx2060 (4 recompute)". */
static void gpus_used(const struct hp_plan *p, const struct hp_cluster *cl,
                      const struct hp_gpudb *db, char *buf, size_t n, int *nrecompute)
{
    int count[64] = {0}, rc[64] = {0};

    *nrecompute = 0;
    for (int v = 0; v < p->nvws; v++)
        for (int s = 0; s < p->vws[v].nstages; s++) {
            const struct hp_stage_plan *st = &p->vws[v].stages[s];
            const int t = cl->gpus[st->gpu].type;
            if (t >= 0 && t < 64) {
                count[t]++;
                rc[t] += st->recompute;
            }
            *nrecompute += st->recompute;
        }
    buf[0] = '\0';
    for (int t = 0; t < db->ntypes && t < 64; t++)
        if (count[t]) {
            const size_t l = strlen(buf);
            if (rc[t])
                snprintf(buf + l, n - l, "%s%d %s (recompute)", l ? ", " : "", count[t],
                         db->types[t].name);
            else
                snprintf(buf + l, n - l, "%s%d %s", l ? ", " : "", count[t], db->types[t].name);
        }
}

static void print_dp(const char *what, const struct hp_plan *p, const struct hp_cluster *cl,
                     const struct hp_gpudb *db, const char *per)
{
    char used[512];
    int nrc;

    gpus_used(p, cl, db, used, sizeof(used), &nrc);
    printf("  %-38s %2d GPUs, %6.1f %s/s (allreduce %5.1f ms): %s\n", what, p->nvws, p->rate, per,
           1e3 * p->allreduce_s, used);
}

/* The minibatch a model is planned at here: 8 sequences for a text model of a long context
 * (8 x 1024 tokens for GPT-2), 32 samples for the others (gpt-tiny's 64 tokens included). */
static int model_batch(const struct hp_model *m)
{
    return hp_model_positions(m) >= 256 ? 8 : 32;
}

/* One VW's stages on a line: GPU (type, node and index) and the units it holds, R where it
 * recomputes: "p4000 node4/0: embed..block.2 R | ...". */
static void print_vw(const struct hp_vw_plan *vw, const struct hp_model *m,
                     const struct hp_cluster *cl, const struct hp_gpudb *db)
{
    printf("      Nm %d:", vw->nm);
    for (int s = 0; s < vw->nstages; s++) {
        const struct hp_stage_plan *st = &vw->stages[s];
        const struct hp_gpu *g = &cl->gpus[st->gpu];
        printf("%s %s %s/%d: %s..%s%s", s ? " |" : "", db->types[g->type].name,
               cl->nodes[g->node].name, g->index, m->units[st->u0].name, m->units[st->u1 - 1].name,
               st->recompute ? " R" : "");
    }
    printf("\n");
}

/* A plan's VWs, grouping the VWs whose stages hold the same units on the same GPU types with
 * the same recomputation and Nm ("2 VWs like this"). */
static void print_vws(const struct hp_plan *p, const struct hp_model *m,
                      const struct hp_cluster *cl, const struct hp_gpudb *db)
{
    for (int v = 0; v < p->nvws; v++) {
        int same = 0, first = 1;
        for (int w = 0; w < p->nvws && first; w++) {
            const struct hp_vw_plan *a = &p->vws[v], *b = &p->vws[w];
            int eq = a->nstages == b->nstages && a->nm == b->nm;
            for (int s = 0; s < a->nstages && eq; s++)
                eq = a->stages[s].u0 == b->stages[s].u0 && a->stages[s].u1 == b->stages[s].u1 &&
                     a->stages[s].recompute == b->stages[s].recompute &&
                     cl->gpus[a->stages[s].gpu].type == cl->gpus[b->stages[s].gpu].type;
            if (eq && w < v)
                first = 0;
            same += eq;
        }
        if (!first)
            continue;
        printf("    VW %d%s, %.2f samples/s each:\n", v, same > 1 ? " and the VWs like it" : "",
               p->vws[v].rate);
        if (same > 1)
            printf("      (%d VWs on GPUs of these types; VW %d's GPUs shown)\n", same, v);
        print_vw(&p->vws[v], m, cl, db);
    }
}

/* GPT-2, -medium and -XL at minibatch 8 of 1024 tokens under AdamW on paper.ini and
 * six-types.ini: dp (recomputation where needed), then every policy under both placements,
 * each with its VWs, which GPUs hold which units, Nm, recomputation, and tokens/s
 * (samples/s x 1024) against dp's. */
static int gpt_plans(const struct hp_gpudb *db)
{
    static const char *const models[] = {"gpt2", "gpt2-medium", "gpt2-xl"};
    static const char *const clusters[] = {"etc/clusters/paper.ini", "etc/clusters/six-types.ini"};
    static const enum hp_policy pols[] = {HP_POLICY_NP, HP_POLICY_ED, HP_POLICY_HD, HP_POLICY_AUTO};

    for (int ci = 0; ci < 2; ci++) {
        struct hp_cluster cl;
        if (hp_cluster_load(clusters[ci], db, &cl))
            return 1;
        for (int mi = 0; mi < 3; mi++) {
            struct hp_model *m;
            struct hp_cost c;
            struct hp_plan dp;
            if (hp_model_load(models[mi], &m) || hp_cost_init(&c, m, db, model_batch(m)))
                return 1;
            c.optimizer = HP_OPTIMIZER_ADAMW;
            const double T = hp_model_positions(m);
            printf("\n%s (%zu parameters), minibatch %d x %.0f tokens, AdamW, %s (%d GPUs)\n",
                   m->name, m->nparams - m->ntied, c.batch, T, clusters[ci], cl.ngpus);
            const int okdp = plan(&c, &cl, HP_POLICY_DP, HP_PLACEMENT_DEFAULT, &dp) == 0;
            if (okdp) {
                print_dp("dp, recomputation where needed:", &dp, &cl, db, "samples");
            } else {
                /* no GPU holds the parameters and AdamW's two moments: dp under SGD (one
                 * moment) for reference */
                struct hp_plan sgd;
                c.optimizer = HP_OPTIMIZER_SGD;
                printf("  dp: does not fit (no GPU holds the whole model and AdamW's moments)\n");
                if (!plan(&c, &cl, HP_POLICY_DP, HP_PLACEMENT_DEFAULT, &sgd)) {
                    print_dp("dp under SGD instead, for reference:", &sgd, &cl, db, "samples");
                    printf("  %-38s %.0f tokens/s\n", "", sgd.rate * T);
                    hp_plan_release(&sgd);
                }
                c.optimizer = HP_OPTIMIZER_ADAMW;
            }
            for (size_t k = 0; k < sizeof(pols) / sizeof(pols[0]); k++)
                for (int pl = HP_PLACEMENT_DEFAULT; pl <= HP_PLACEMENT_LOCAL; pl++) {
                    struct hp_plan p;
                    if (plan(&c, &cl, pols[k], (enum hp_placement)pl, &p)) {
                        printf("  %s %s: does not fit\n", hp_policy_name(pols[k]),
                               hp_placement_name((enum hp_placement)pl));
                        continue;
                    }
                    int nst = 0, nrc = 0;
                    for (int v = 0; v < p.nvws; v++)
                        for (int s = 0; s < p.vws[v].nstages; s++) {
                            nst++;
                            nrc += p.vws[v].stages[s].recompute;
                        }
                    printf("  %s %s%s%s: %d VWs, %.2f samples/s = %.0f tokens/s",
                           hp_policy_name(pols[k]), hp_placement_name((enum hp_placement)pl),
                           pols[k] == HP_POLICY_AUTO ? " -> " : "",
                           pols[k] != HP_POLICY_AUTO      ? ""
                           : p.grouping == HP_POLICY_AUTO ? "snake"
                                                          : hp_policy_name(p.grouping),
                           p.nvws, p.rate, p.rate * T);
                    if (okdp)
                        printf(" (dp %.0f tokens/s: %.2fx)", dp.rate * T, p.rate / dp.rate);
                    printf(", %d of %d stages recompute, network %.0f MB/wave\n", nrc, nst,
                           p.wave_bytes[pl] / 1e6);
                    print_vws(&p, m, &cl, db);
                    hp_plan_release(&p);
                }
            if (okdp)
                hp_plan_release(&dp);
            hp_cost_release(&c);
            hp_model_destroy(m);
        }
        hp_cluster_release(&cl);
    }
    return 0;
}

/* The shape of tests/clusters/big8x2048.ini at `gpus` GPUs (a multiple of 256): 3/4 of the
 * GPUs in nodes of 8, the rest in nodes of 4, one type per node, 8 types in turn. */
static int make_big(const struct hp_gpudb *db, int gpus, struct hp_cluster *out)
{
    static const char *const types[8] = {"a100-80", "a100-40", "v100-32", "v100-16",
                                         "t4",      "l4",      "rtx3090", "p4000"};
    const int n8 = gpus * 3 / 32, n4 = gpus / 16;
    int counts[320], tt[320];

    for (int n = 0; n < n8 + n4 && n < 320; n++) {
        counts[n] = n < n8 ? 8 : 4;
        tt[n] = hp_gpudb_find(db, types[n % 8]);
        if (tt[n] < 0)
            return -1;
    }
    int rc = hp_cluster_make(db, n8 + n4, counts, tt, out);
    if (!rc) {
        out->intra_node_gbs = 24.0;
        out->inter_node_gbs = 11.0;
    }
    return rc;
}

/* CPU seconds of the calling thread. */
static double thread_cpu_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Planner time under auto per shipped model and cluster size, and per 1024 GPUs. */
static int speed_sizes(const struct hp_gpudb *db)
{
    static const char *const models[] = {"cnn",      "mlp",  "vgg19",       "resnet152",
                                         "gpt-tiny", "gpt2", "gpt2-medium", "gpt2-xl"};
    static const int sizes[] = {256, 512, 1024, 2048};
    const int nmodels = (int)(sizeof(models) / sizeof(models[0]));

    printf("\nspeed: auto on clusters shaped as tests/clusters/big8x2048.ini (8 types): wall "
           "and the planning thread's CPU seconds (CPU per 1024 GPUs; target <= 1 s: on a "
           "shared machine the wall time is inflated by the others' load); GPT models at "
           "minibatch 8 under AdamW, the others at 32\n  %-11s",
           "model");
    for (int k = 0; k < 4; k++)
        printf(" %21d", sizes[k]);
    printf("\n");
    for (int mi = 0; mi < nmodels; mi++) {
        struct hp_model *m;
        struct hp_cost c;
        if (hp_model_load(models[mi], &m) || hp_cost_init(&c, m, db, model_batch(m)))
            return 1;
        if (m->positions > 1)
            c.optimizer = HP_OPTIMIZER_ADAMW;
        printf("  %-11s", models[mi]);
        for (int k = 0; k < 4; k++) {
            struct hp_cluster cl;
            struct hp_plan p;
            if (make_big(db, sizes[k], &cl))
                return 1;
            const double t0 = hp_now_s(), c0 = thread_cpu_s();
            const int rc = plan(&c, &cl, HP_POLICY_AUTO, HP_PLACEMENT_DEFAULT, &p);
            const double dt = hp_now_s() - t0, dc = thread_cpu_s() - c0;
            printf(" %6.3f %6.3f (%5.3f)%s", dt, dc, dc * 1024.0 / sizes[k], rc ? "!" : " ");
            if (!rc)
                hp_plan_release(&p);
            hp_cluster_release(&cl);
        }
        printf("\n");
        fflush(stdout);
        hp_cost_release(&c);
        hp_model_destroy(m);
    }
    printf("  (! no plan)\n");
    return 0;
}

/* A model of 4,096 one-op units (a flatten, then 4,095 linear layers of 512) planned under
 * auto on demo.ini: cost model, planner, and the peak resident set (getrusage). Run first,
 * so the peak is this planning's. */
static int speed_units(const struct hp_gpudb *db)
{
    char path[] = "/tmp/hetpipe-bench-XXXXXX.ini";
    const int fd = mkstemps(path, 4);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    struct hp_model *m;
    struct hp_cluster demo;
    struct hp_cost c;
    struct hp_plan p;
    struct rusage ru;

    if (!f)
        return 1;
    fprintf(f, "[model]\nname = units4096\ndataset = none\ninput = 1x1x512\nclasses = 512\n\n"
               "[flat]\ntype = flatten\n\n[fc]\ntype = linear\noutputs = 512\nrepeat = 4095\n");
    fclose(f);
    const int lrc = hp_model_load(path, &m);
    unlink(path);
    if (lrc || hp_cluster_load("etc/clusters/demo.ini", db, &demo))
        return 1;
    const double t0 = hp_now_s();
    if (hp_cost_init(&c, m, db, 32))
        return 1;
    const double t1 = hp_now_s();
    const int rc = plan(&c, &demo, HP_POLICY_AUTO, HP_PLACEMENT_DEFAULT, &p);
    const double t2 = hp_now_s();
    getrusage(RUSAGE_SELF, &ru);
    printf("\nspeed: a model of %d one-op units on demo.ini, auto: cost model %.2f s, planner "
           "%.2f s, peak resident set %.0f MB (target: seconds, < 200 MB)%s\n",
           m->nunits, t1 - t0, t2 - t1, ru.ru_maxrss / 1024.0, rc ? " (no plan)" : "");
    if (!rc)
        hp_plan_release(&p);
    hp_cost_release(&c);
    hp_cluster_release(&demo);
    hp_model_destroy(m);
    return 0;
}

int main(void)
{
    static const char *const models[] = {"resnet152", "vgg19"};
    struct hp_gpudb db;
    struct hp_cluster paper, twelve;

    if (hp_gpudb_load("etc/hetpipe.conf", &db) || speed_units(&db) ||
        hp_cluster_load("etc/clusters/paper.ini", &db, &paper) || without_rtx2060(&db, &twelve))
        return 1;
    for (int mi = 0; mi < 2; mi++) {
        struct hp_model *m;
        struct hp_cost c;
        struct hp_plan dp16, dp12, dpnever;
        if (hp_model_load(models[mi], &m) || hp_cost_init(&c, m, &db, 32))
            return 1;
        const int ok16 = plan(&c, &paper, HP_POLICY_DP, HP_PLACEMENT_DEFAULT, &dp16) == 0;
        const int ok12 = plan(&c, &twelve, HP_POLICY_DP, HP_PLACEMENT_DEFAULT, &dp12) == 0;
        c.recompute = HP_RECOMPUTE_NEVER; /* what holds the model as it is (Horovod's view) */
        const int okn = plan(&c, &paper, HP_POLICY_DP, HP_PLACEMENT_DEFAULT, &dpnever) == 0;
        c.recompute = HP_RECOMPUTE_AUTO;
        printf(
            "\n%s, minibatch 32, paper.ini (16 GPUs: 4 titanv, 4 titanrtx, 4 rtx2060, 4 p4000)\n",
            m->name);
        if (okn)
            print_dp("dp, no recomputation, on 16:", &dpnever, &paper, &db, "images");
        if (ok16)
            print_dp("dp(16), recomputation where needed:", &dp16, &paper, &db, "images");
        if (ok12)
            print_dp("dp(12), the 12 without rtx2060:", &dp12, &twelve, &db, "images");
        printf("  %-6s %-9s %-16s %10s %10s %10s %12s %10s\n", "policy", "placement", "Nm per VW",
               "images/s", "vs dp(16)", "vs dp(12)", "net MB/wave", "recompute");
        /* the policies by name: the enum begins with auto, so no range of it lists them */
        static const enum hp_policy pols[] = {HP_POLICY_NP, HP_POLICY_ED, HP_POLICY_HD,
                                              HP_POLICY_AUTO};
        for (size_t k = 0; k < sizeof(pols) / sizeof(pols[0]); k++) {
            const int pol = (int)pols[k];
            for (int pl = HP_PLACEMENT_DEFAULT; pl <= HP_PLACEMENT_LOCAL; pl++) {
                struct hp_plan p;
                char nm[64] = "";
                if (plan(&c, &paper, (enum hp_policy)pol, (enum hp_placement)pl, &p)) {
                    printf("  %-6s %-9s does not fit\n", hp_policy_name((enum hp_policy)pol),
                           hp_placement_name((enum hp_placement)pl));
                    continue;
                }
                for (int v = 0; v < p.nvws && strlen(nm) < 50; v++)
                    snprintf(nm + strlen(nm), sizeof(nm) - strlen(nm), "%s%d", v ? "," : "",
                             p.vws[v].nm);
                char used[512];
                int nrc, nst = 0;
                gpus_used(&p, &paper, &db, used, sizeof(used), &nrc);
                for (int v = 0; v < p.nvws; v++)
                    nst += p.vws[v].nstages;
                printf("  %-6s %-9s %-16s %10.1f %10.2f %10.2f %12.1f %4d of %d\n",
                       hp_policy_name((enum hp_policy)pol),
                       hp_placement_name((enum hp_placement)pl), nm, p.rate,
                       ok16 ? p.rate / dp16.rate : 0.0, ok12 ? p.rate / dp12.rate : 0.0,
                       p.wave_bytes[pl] / 1e6, nrc, nst);
                hp_plan_release(&p);
            }
        }
        if (ok16)
            hp_plan_release(&dp16);
        if (ok12)
            hp_plan_release(&dp12);
        if (okn)
            hp_plan_release(&dpnever);
        hp_cost_release(&c);
        hp_model_destroy(m);
    }

    printf("\nthe paper (ATC'20, same testbed): Horovod trains ResNet-152 at 32 on the 12 GPUs "
           "other than the RTX 2060s;\nHetPipe is 1.4-1.8x faster than Horovod in some "
           "configurations, up to 2.3x with the whimpy GPUs added\n");

    /* speed */
    {
        struct hp_model *m;
        struct hp_cost c;
        struct hp_plan p;
        double best = 1e9;
        if (hp_model_load("resnet152", &m) || hp_cost_init(&c, m, &db, 32))
            return 1;
        for (int r = 0; r < 5; r++) {
            double t0 = hp_now_s();
            if (plan(&c, &paper, HP_POLICY_AUTO, HP_PLACEMENT_LOCAL, &p))
                return 1;
            double dt = hp_now_s() - t0;
            if (dt < best)
                best = dt;
            hp_plan_release(&p);
        }
        printf("\nspeed: plan paper.ini, resnet152, auto: %.1f ms (target < 50 ms)\n", 1e3 * best);

        static const char *const types[8] = {"a100-80", "a100-40", "v100-32", "v100-16",
                                             "t4",      "l4",      "rtx3090", "p4000"};
        int counts[128], tt[128];
        for (int n = 0; n < 128; n++) {
            counts[n] = 8;
            tt[n] = hp_gpudb_find(&db, types[n % 8]);
            if (tt[n] < 0)
                return 1;
        }
        struct hp_cluster big;
        if (hp_cluster_make(&db, 128, counts, tt, &big))
            return 1;
        double t0 = hp_now_s();
        int rc = plan(&c, &big, HP_POLICY_AUTO, HP_PLACEMENT_LOCAL, &p);
        double dt = hp_now_s() - t0;
        printf("speed: plan a synthetic 1024-GPU, 8-type cluster (128 nodes x 8), resnet152, "
               "auto: %.2f s (target < 2 s)%s\n",
               dt, rc ? " (no plan)" : "");
        if (!rc) {
            printf("       -> %d virtual workers, %.1f images/s\n", p.nvws, p.rate);
            hp_plan_release(&p);
        }
        hp_cluster_release(&big);
        hp_cost_release(&c);
        hp_model_destroy(m);
    }
    if (gpt_plans(&db) || speed_sizes(&db))
        return 1;
    hp_cluster_release(&paper);
    hp_cluster_release(&twelve);
    hp_gpudb_release(&db);
    return 0;
}
