/* plans.c - the planner on the paper's testbed, and its speed (tests/bench/paper_plans).
 *
 * For ResNet-152 and VGG-19 at minibatch 32 on etc/clusters/paper.ini: every policy and
 * placement with Nm per VW and the predicted images/s, and the ratio to dp on the same 16
 * GPUs (dp leaves out the GPUs that cannot hold the model) and to dp on the 12 GPUs without
 * the RTX 2060 node. Then the time to plan paper.ini for ResNet-152 under auto (target
 * < 50 ms) and a synthetic 1024-GPU cluster of 8 types (target < 2 s).
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
#include <time.h>

static int plan(const struct hp_cost *c, const struct hp_cluster *cl, enum hp_policy pol,
                enum hp_placement pl, struct hp_plan *p)
{
    struct hp_plan_opts o = {.policy = pol, .placement = pl, .batch = 32};

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

int main(void)
{
    static const char *const models[] = {"resnet152", "vgg19"};
    struct hp_gpudb db;
    struct hp_cluster paper, twelve;

    if (hp_gpudb_load("etc/hetpipe.conf", &db) ||
        hp_cluster_load("etc/clusters/paper.ini", &db, &paper) || without_rtx2060(&db, &twelve))
        return 1;
    for (int mi = 0; mi < 2; mi++) {
        struct hp_model *m;
        struct hp_cost c;
        struct hp_plan dp16, dp12;
        if (hp_model_load(models[mi], &m) || hp_cost_init(&c, m, &db, 32))
            return 1;
        const int ok16 = plan(&c, &paper, HP_POLICY_DP, HP_PLACEMENT_DEFAULT, &dp16) == 0;
        const int ok12 = plan(&c, &twelve, HP_POLICY_DP, HP_PLACEMENT_DEFAULT, &dp12) == 0;
        printf(
            "\n%s, minibatch 32, paper.ini (16 GPUs: 4 titanv, 4 titanrtx, 4 rtx2060, 4 p4000)\n",
            m->name);
        if (ok16)
            printf("  dp on 16: %d GPUs hold the model, %.1f images/s (allreduce %.1f ms)\n",
                   dp16.nvws, dp16.rate, 1e3 * dp16.allreduce_s);
        if (ok12)
            printf("  dp on the 12 without rtx2060: %d GPUs hold the model, %.1f images/s\n",
                   dp12.nvws, dp12.rate);
        printf("  %-6s %-9s %-14s %10s %12s %12s %14s\n", "policy", "placement", "Nm per VW",
               "images/s", "vs dp(16)", "vs dp(12)", "net MB/wave");
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
                printf("  %-6s %-9s %-14s %10.1f %12.2f %12.2f %14.1f\n",
                       hp_policy_name((enum hp_policy)pol),
                       hp_placement_name((enum hp_placement)pl), nm, p.rate,
                       ok16 ? p.rate / dp16.rate : 0.0, ok12 ? p.rate / dp12.rate : 0.0,
                       p.wave_bytes[pl] / 1e6);
                hp_plan_release(&p);
            }
        }
        if (ok16)
            hp_plan_release(&dp16);
        if (ok12)
            hp_plan_release(&dp12);
        hp_cost_release(&c);
        hp_model_destroy(m);
    }

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
    hp_cluster_release(&paper);
    hp_cluster_release(&twelve);
    hp_gpudb_release(&db);
    return 0;
}
