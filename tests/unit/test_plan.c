/* test_plan.c - policies, placement and plan files on the shipped clusters and models. */
#include "suites.h"
#include "util.h"

#include "binding.h"
#include "cluster.h"
#include "cost.h"
#include "error.h"
#include "gpudb.h"
#include "ini.h"
#include "model.h"
#include "plan.h"
#include "planfile.h"
#include "planjob.h"
#include "planner.h"
#include "rundir.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const clusters[] = {"paper", "uneven", "mixed", "six-types", "local4"};
static const char *const models[] = {"vgg19", "resnet152", "cnn"};

struct setup {
    struct hp_gpudb db;
    struct hp_cluster cl;
    struct hp_model *m;
    struct hp_cost cost;
};

static void setup(struct setup *s, const char *cluster, const char *model, int batch)
{
    char path[256];

    memset(s, 0, sizeof(*s));
    ck_assert_int_eq(hp_gpudb_load("etc/hetpipe.conf", &s->db), 0);
    snprintf(path, sizeof(path), "etc/clusters/%s.ini", cluster);
    ck_assert_int_eq(hp_cluster_load(path, &s->db, &s->cl), 0);
    ck_assert_int_eq(hp_model_load(model, &s->m), 0);
    ck_assert_int_eq(hp_cost_init(&s->cost, s->m, &s->db, batch), 0);
}

static void teardown(struct setup *s)
{
    hp_cost_release(&s->cost);
    hp_model_destroy(s->m);
    hp_cluster_release(&s->cl);
    hp_gpudb_release(&s->db);
}

static double plan_rate(struct setup *s, enum hp_policy pol, int *ok)
{
    struct hp_options o = {.policy = pol, .placement = HP_PLACEMENT_LOCAL, .batch = 32};
    struct hp_plan p;
    double r;

    test_capture_begin();
    int rc = hp_plan_compute(&s->cost, &s->cl, &o, &p);
    test_capture_end();
    *ok = rc == 0;
    if (rc)
        return 0.0;
    r = p.rate;
    hp_plan_release(&p);
    return r;
}

/* auto is never predicted slower than the best of np, ed and hd, on every shipped cluster
 * and model (where any of them has a plan at all). */
START_TEST(auto_beats_fixed_policies)
{
    const char *cluster = clusters[_i];

    for (size_t mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++) {
        struct setup s;
        double best = 0.0;
        int any = 0, ok;

        setup(&s, cluster, models[mi], 32);
        for (int pol = HP_POLICY_NP; pol <= HP_POLICY_HD; pol++) {
            double r = plan_rate(&s, (enum hp_policy)pol, &ok);
            any |= ok;
            if (ok && r > best)
                best = r;
        }
        double a = plan_rate(&s, HP_POLICY_AUTO, &ok);
        if (any) {
            ck_assert_msg(ok, "%s/%s: auto found no plan", cluster, models[mi]);
            ck_assert_msg(a >= best * (1.0 - 1e-12), "%s/%s: auto %.3f < best fixed %.3f", cluster,
                          models[mi], a, best);
        }
        teardown(&s);
    }
}
END_TEST

/* With several VWs (WSP) every VW has the same Nm, the wave its clocks count, and no stage
 * keeps more minibatches in flight than that; a VW whose own pipeline needs fewer keeps its
 * in-flight counts (some case on the shipped clusters must show it, or the test shows
 * nothing). */
START_TEST(vws_share_one_wave)
{
    int shorter = 0;

    for (size_t ci = 0; ci < sizeof(clusters) / sizeof(clusters[0]); ci++)
        for (size_t mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++) {
            struct setup s;
            setup(&s, clusters[ci], models[mi], 32);
            for (int pol = HP_POLICY_AUTO; pol <= HP_POLICY_HD; pol++) {
                struct hp_options o = {
                    .policy = (enum hp_policy)pol, .placement = HP_PLACEMENT_LOCAL, .batch = 32};
                struct hp_plan p;
                test_capture_begin();
                int rc = hp_plan_compute(&s.cost, &s.cl, &o, &p);
                test_capture_end();
                if (rc)
                    continue;
                for (int v = 0; v < p.nvws; v++) {
                    ck_assert_msg(p.vws[v].nm == p.vws[0].nm,
                                  "%s/%s policy %d: vw %d Nm %d, vw 0 %d", clusters[ci], models[mi],
                                  pol, v, p.vws[v].nm, p.vws[0].nm);
                    for (int st = 0; st < p.vws[v].nstages; st++)
                        ck_assert_int_le(p.vws[v].stages[st].in_flight, p.vws[v].nm);
                    shorter += p.vws[v].stages[0].in_flight < p.vws[v].nm;
                }
                hp_plan_release(&p);
            }
            teardown(&s);
        }
    ck_assert_int_gt(shorter, 0);
}
END_TEST

/* Nm is the smallest whose rate is within the site's nm_tolerance of the best: on demo under
 * ed (CNN at 64) Nm 4 is fastest, Nm 3 within 5% of it, Nm 1 far slower. */
START_TEST(nm_within_tolerance)
{
    struct setup s;
    struct hp_options o = {.policy = HP_POLICY_ED, .placement = HP_PLACEMENT_LOCAL, .batch = 64};
    struct hp_plan p;
    double rate[3];
    const double tol[3] = {0.0, 0.05, 0.99};
    const int want[3] = {4, 3, 1};

    setup(&s, "demo", "cnn", 64);
    for (int i = 0; i < 3; i++) {
        s.db.nm_tolerance = tol[i];
        ck_assert_int_eq(hp_plan_compute(&s.cost, &s.cl, &o, &p), 0);
        ck_assert_int_eq(p.nvws, 1);
        ck_assert_msg(p.vws[0].nm == want[i], "tolerance %g: Nm %d, expected %d", tol[i],
                      p.vws[0].nm, want[i]);
        rate[i] = p.rate;
        hp_plan_release(&p);
    }
    ck_assert_double_lt(rate[1], rate[0]);
    ck_assert_double_ge(rate[1], 0.95 * rate[0]);
    ck_assert_double_lt(rate[2], 0.95 * rate[0]);
    teardown(&s);
}
END_TEST

/* On the paper's cluster: ed makes 4 identical VWs, one GPU of each node; np one VW per
 * node; local placement sends no bytes across nodes under ed, default does. dp leaves out
 * the GPUs that cannot hold VGG-19. */
START_TEST(paper_policies)
{
    struct setup s;
    struct hp_options o = {.policy = HP_POLICY_ED, .placement = HP_PLACEMENT_LOCAL, .batch = 32};
    struct hp_plan p;

    setup(&s, "paper", "vgg19", 32);
    ck_assert_int_eq(hp_plan_compute(&s.cost, &s.cl, &o, &p), 0);
    ck_assert_int_eq(p.nvws, 4);
    for (int v = 0; v < 4; v++) {
        int nodes = 0;
        ck_assert_int_eq(p.vws[v].nstages, 4);
        for (int st = 0; st < 4; st++)
            nodes |= 1 << s.cl.gpus[p.vws[v].stages[st].gpu].node;
        ck_assert_int_eq(nodes, 0xf);
        ck_assert_double_eq_tol(p.vws[v].rate, p.vws[0].rate, 1e-9 * p.vws[0].rate);
    }
    ck_assert_double_eq(p.wave_bytes[HP_PLACEMENT_LOCAL], 0.0);
    ck_assert_double_gt(p.wave_bytes[HP_PLACEMENT_DEFAULT], 0.0);
    ck_assert_int_eq(p.nranks, 16 + 4);
    ck_assert_double_eq_tol(p.rate, 4 * p.vws[0].rate, 1e-9 * p.rate);
    hp_plan_release(&p);

    o.policy = HP_POLICY_NP;
    ck_assert_int_eq(hp_plan_compute(&s.cost, &s.cl, &o, &p), 0);
    ck_assert_int_eq(p.nvws, 4);
    for (int v = 0; v < 4; v++)
        for (int st = 0; st < p.vws[v].nstages; st++)
            ck_assert_int_eq(s.cl.gpus[p.vws[v].stages[st].gpu].node,
                             s.cl.gpus[p.vws[v].stages[0].gpu].node);
    hp_plan_release(&p);

    /* on a slow network the synchronisation of a wave dominates: local placement, which keeps
     * ed's traffic inside nodes, is then predicted faster than default */
    {
        struct hp_plan pd, pl;
        const double keep = s.cl.inter_node_gbs;
        struct hp_options oe = {.policy = HP_POLICY_ED, .batch = 32};
        s.cl.inter_node_gbs = 0.3;
        oe.placement = HP_PLACEMENT_DEFAULT;
        ck_assert_int_eq(hp_plan_compute(&s.cost, &s.cl, &oe, &pd), 0);
        oe.placement = HP_PLACEMENT_LOCAL;
        ck_assert_int_eq(hp_plan_compute(&s.cost, &s.cl, &oe, &pl), 0);
        ck_assert_double_gt(pl.rate, 1.5 * pd.rate);
        hp_plan_release(&pd);
        hp_plan_release(&pl);
        s.cl.inter_node_gbs = keep;
    }

    /* VGG-19 at 32 fits every GPU (3.7 GiB: activation gradients in dead activations, ReLU in
     * place) */
    o.policy = HP_POLICY_DP;
    ck_assert_int_eq(hp_plan_compute(&s.cost, &s.cl, &o, &p), 0);
    ck_assert_int_eq(p.nvws, 16);
    hp_plan_release(&p);
    teardown(&s);
    /* at 112 (8.8 GiB) it does not fit 6 or 8 GiB: only titanv and titanrtx */
    setup(&s, "paper", "vgg19", 112);
    o.batch = 112;
    test_capture_begin();
    ck_assert_int_eq(hp_plan_compute(&s.cost, &s.cl, &o, &p), 0);
    test_capture_end();
    ck_assert_int_eq(p.nvws, 8);
    for (int v = 0; v < p.nvws; v++) {
        const char *type = s.db.types[s.cl.gpus[p.vws[v].stages[0].gpu].type].name;
        ck_assert_msg(!strcmp(type, "titanv") || !strcmp(type, "titanrtx"), "%s", type);
        ck_assert_double_le(p.vws[v].stages[0].memory, p.vws[v].stages[0].capacity);
    }
    ck_assert_double_gt(p.allreduce_s, 0.0);
    hp_plan_release(&p);
    teardown(&s);
}
END_TEST

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    static char buf[1 << 20];
    size_t n;

    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strdup(buf);
}

/* write -> read -> write gives the same bytes, for every policy. */
START_TEST(planfile_round_trip)
{
    struct setup s;
    const char *tok = "0123456789abcdef0123456789abcdef";
    char path1[512], path2[512], tok2[33];
    int written = 0;

    setup(&s, "mixed", "resnet152", 32);
    snprintf(path1, sizeof(path1), "%s", test_write_file("p1.ini", ""));
    snprintf(path2, sizeof(path2), "%s", test_write_file("p2.ini", ""));
    for (int pol = HP_POLICY_NP; pol <= HP_POLICY_DP; pol++) {
        struct hp_options o = {.policy = (enum hp_policy)pol,
                               .placement = HP_PLACEMENT_LOCAL,
                               .batch = 32,
                               .staleness = 2,
                               .seed = 7};
        struct hp_plan p, q;
        struct hp_cluster cl2;

        test_capture_begin();
        int rc = hp_plan_compute(&s.cost, &s.cl, &o, &p);
        test_capture_end();
        if (rc == -HP_ERANGE)
            continue; /* np and ed: some VW's GPUs cannot hold ResNet-152 at 32 together */
        ck_assert_int_eq(rc, 0);
        written++;
        ck_assert_int_eq(hp_planfile_save(path1, &p, &s.cl, &s.db, tok), 0);
        ck_assert_int_eq(hp_planfile_load(path1, &s.db, &q, &cl2, tok2), 0);
        ck_assert_str_eq(tok2, tok);
        ck_assert_int_eq(q.nvws, p.nvws);
        ck_assert_double_eq(q.rate, p.rate);
        ck_assert_int_eq(hp_planfile_save(path2, &q, &cl2, &s.db, tok2), 0);
        char *a = slurp(path1), *b = slurp(path2);
        ck_assert_str_eq(a, b);
        free(a);
        free(b);
        hp_plan_release(&p);
        hp_plan_release(&q);
        hp_cluster_release(&cl2);
    }
    ck_assert_int_ge(written, 3);
    teardown(&s);
}
END_TEST

/* Plan files written before the plan's options came from the options table (and before the
 * recompute key: tests/fuzz/corpus/plan, committed then) still load, with the same options,
 * and are written back in the same form. */
START_TEST(planfile_older_plans_load)
{
    static const char *const names[] = {"demo-cnn-np-default",      "local4-cnn-ed-default",
                                        "local4-cnn-np-local",      "mix2-mlp-plain-auto-default",
                                        "mixed-vgg19-auto-default", "paper-resnet152-ed-local",
                                        "paper-vgg19-hd-default",   "six-types-mlp-dp-default",
                                        "uneven-cnn-hd-local",      "wsp2x2-mlp-ed-local"};
    struct hp_gpudb db;
    char path[512], out1[512], out2[512], tok[33];

    ck_assert_int_eq(hp_gpudb_load("etc/hetpipe.conf", &db), 0);
    snprintf(out1, sizeof(out1), "%s", test_write_file("old1.ini", ""));
    snprintf(out2, sizeof(out2), "%s", test_write_file("old2.ini", ""));
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct hp_plan p, q;
        struct hp_cluster cl, cl2;
        snprintf(path, sizeof(path), "tests/fuzz/corpus/plan/%s.ini", names[i]);
        char *orig = slurp(path);
        ck_assert_ptr_null(strstr(orig, "\nrecompute = ")); /* from before the key */
        test_capture_begin();
        const int rc = hp_planfile_load(path, &db, &p, &cl, tok);
        const char *err = test_capture_end();
        ck_assert_msg(rc == 0, "%s: %s", path, err);
        ck_assert_ptr_null(p.opts.model); /* the model is p.model */
        ck_assert_int_eq(p.opts.recompute, HP_RECOMPUTE_AUTO);
        ck_assert_msg(strstr(orig, p.model) != NULL, "%s: model '%s'", path, p.model);
        ck_assert_int_eq(hp_planfile_save(out1, &p, &cl, &db, tok), 0);
        ck_assert_int_eq(hp_planfile_load(out1, &db, &q, &cl2, tok), 0);
        ck_assert_int_eq(hp_planfile_save(out2, &q, &cl2, &db, tok), 0);
        char *a = slurp(out1), *b = slurp(out2);
        ck_assert_str_eq(a, b);
        /* the option keys as they were, in the same order, recompute added after nm */
        const char *end = strstr(orig, "grouping = ");
        ck_assert_ptr_nonnull(end);
        char *head = strndup(orig, (size_t)(end - orig));
        char *nm = strstr(head, "\nnm = ");
        ck_assert_ptr_nonnull(nm);
        char *after = strchr(nm + 1, '\n') + 1;
        char expect[4096];
        snprintf(expect, sizeof(expect), "%.*srecompute = auto\n%s", (int)(after - head), head,
                 after);
        ck_assert_msg(strncmp(a, expect, strlen(expect)) == 0, "%s: [plan] written as\n%.600s",
                      path, a);
        if (strcmp(names[i], "local4-cnn-ed-default") == 0) {
            ck_assert_int_eq(p.opts.policy, HP_POLICY_ED);
            ck_assert_int_eq(p.opts.placement, HP_PLACEMENT_DEFAULT);
            ck_assert_int_eq(p.opts.staleness, 2);
            ck_assert_int_eq(p.opts.nm, 0);
            ck_assert_int_eq(p.opts.nm_max, 0);
            ck_assert_int_eq(p.opts.batch, 32);
            ck_assert_int_eq(p.opts.seed, 1);
            ck_assert_str_eq(p.model, "cnn");
        }
        free(head);
        free(a);
        free(b);
        free(orig);
        hp_plan_release(&p);
        hp_plan_release(&q);
        hp_cluster_release(&cl);
        hp_cluster_release(&cl2);
    }
    hp_gpudb_release(&db);
}
END_TEST

/* The plan file at the extremes: 3,500 GPUs (one node of 2,500 in reverse device order, 1,000
 * nodes of one), 875 VWs, 4,000 units over 7 shards, and a model path with every printable
 * character but '"' (and the same names quoted the other way): lists are continued over
 * several keys, odd values quoted, and everything reads back; what cannot be read back is
 * refused before anything is written. */
START_TEST(planfile_extremes)
{
    enum { NODES = 1001, BIG = 2500, UNITS = 4000, STAGES = 4, SHARDS = 7 };
    struct hp_gpudb db;
    struct hp_cluster cl, cl2;
    struct hp_plan p, q;
    static int counts[NODES], types[NODES];
    const char *tok = "0123456789abcdef0123456789abcdef";
    char tok2[33], path[512], printable[128];
    int n = 0;

    ck_assert_int_eq(hp_gpudb_load("etc/hetpipe.conf", &db), 0);
    for (int i = 0; i < NODES; i++) {
        counts[i] = i == 0 ? BIG : 1;
        types[i] = i % db.ntypes;
    }
    ck_assert_int_eq(hp_cluster_make(&db, NODES, counts, types, &cl), 0);
    for (int j = 0; j < BIG; j++)
        cl.gpus[j].index = BIG - 1 - j; /* not the identity: a devices list is written */
    for (int c = ' '; c <= '~'; c++)
        if (c != '"')
            printable[n++] = (char)c;
    printable[n] = '\0';
    snprintf(cl.nodes[0].name, sizeof(cl.nodes[0].name), " %.40s; #= ", printable + 1);
    snprintf(cl.nodes[1].name, sizeof(cl.nodes[1].name), "say \"hi\"; # [x]");
    memset(&p, 0, sizeof(p));
    p.version = HP_PLAN_VERSION;
    snprintf(p.model, sizeof(p.model), "/models/%s.ini", printable);
    snprintf(p.cluster, sizeof(p.cluster), "c;#=\\ '");
    p.opts = (struct hp_options){.policy = HP_POLICY_HD,
                                 .placement = HP_PLACEMENT_DEFAULT,
                                 .batch = 32,
                                 .staleness = 3,
                                 .seed = 11};
    p.grouping = HP_POLICY_HD;
    p.nunits = UNITS;
    p.nvws = (NODES - 1 + BIG) / STAGES;
    p.nshards = SHARDS;
    p.nranks = p.nvws * STAGES + SHARDS;
    p.vws = calloc((size_t)p.nvws, sizeof(*p.vws));
    p.unit_shard = calloc(UNITS, sizeof(int));
    ck_assert_ptr_nonnull(p.vws);
    ck_assert_ptr_nonnull(p.unit_shard);
    for (int u = 0; u < UNITS; u++)
        p.unit_shard[u] = (u * 5) % SHARDS;
    for (int v = 0; v < p.nvws; v++) {
        p.vws[v].nstages = STAGES;
        p.vws[v].nm = 2;
        p.vws[v].rate = 1.0 + v;
        for (int s = 0; s < STAGES; s++)
            p.vws[v].stages[s] = (struct hp_stage_plan){.gpu = v * STAGES + s,
                                                        .u0 = s * UNITS / STAGES,
                                                        .u1 = (s + 1) * UNITS / STAGES,
                                                        .in_flight = 2 - (s == STAGES - 1),
                                                        .fwd_s = 1e-3 * (s + 1),
                                                        .capacity = 1e10};
    }
    snprintf(path, sizeof(path), "%s", test_write_file("extreme.ini", ""));
    ck_assert_int_eq(hp_planfile_save(path, &p, &cl, &db, tok), 0);
    char *text = slurp(path);
    for (char *line = text, *end; *line; line = end + 1) { /* every line within iniparser's */
        end = strchr(line, '\n');
        ck_assert_ptr_nonnull(end);
        ck_assert_int_le((int)(end - line), HP_INI_LINE_MAX);
    }
    ck_assert_ptr_nonnull(strstr(text, "unit_shard.1 = "));
    ck_assert_ptr_nonnull(strstr(text, "devices.1 = "));
    free(text);
    test_capture_begin();
    int rc = hp_planfile_load(path, &db, &q, &cl2, tok2);
    const char *err = test_capture_end();
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_str_eq(q.model, p.model);
    ck_assert_str_eq(q.cluster, p.cluster);
    ck_assert_str_eq(cl2.nodes[0].name, cl.nodes[0].name);
    ck_assert_str_eq(cl2.nodes[1].name, cl.nodes[1].name);
    ck_assert_int_eq(cl2.nnodes, NODES);
    ck_assert_int_eq(cl2.ngpus, cl.ngpus);
    for (int g = 0; g < cl.ngpus; g++) {
        ck_assert_int_eq(cl2.gpus[g].index, cl.gpus[g].index);
        ck_assert_int_eq(cl2.gpus[g].type, cl.gpus[g].type);
    }
    ck_assert_int_eq(q.nunits, UNITS);
    for (int u = 0; u < UNITS; u++)
        ck_assert_int_eq(q.unit_shard[u], p.unit_shard[u]);
    ck_assert_int_eq(q.nvws, p.nvws);
    ck_assert_int_eq(q.vws[p.nvws - 1].stages[STAGES - 1].gpu, p.nvws * STAGES - 1);
    hp_plan_release(&q);
    hp_cluster_release(&cl2);

    /* unwritable: both quotes, a line break, a line too long; the old file stays */
    static const char *const bad[] = {"a'b\"c", "two\nlines", NULL};
    for (int i = 0; bad[i]; i++) {
        snprintf(p.model, sizeof(p.model), "%s", bad[i]);
        test_capture_begin();
        ck_assert_int_ne(hp_planfile_save(path, &p, &cl, &db, tok), 0);
        err = test_capture_end();
        ck_assert_msg(strstr(err, "cannot write the plan: the model"), "%s", err);
    }
    memset(p.model, 'm', 2000);
    p.model[2000] = '\0';
    test_capture_begin();
    ck_assert_int_ne(hp_planfile_save(path, &p, &cl, &db, tok), 0);
    err = test_capture_end();
    ck_assert_msg(strstr(err, "is 2000 characters long: an INI line (iniparser) holds at most"),
                  "%s", err);
    test_capture_begin();
    ck_assert_int_eq(hp_planfile_load(path, &db, &q, &cl2, tok2), 0); /* the good one */
    test_capture_end();
    hp_plan_release(&q);
    hp_cluster_release(&cl2);
    hp_plan_release(&p);
    hp_cluster_release(&cl);
    hp_gpudb_release(&db);
}
END_TEST

/* Broken plans are refused, each with its own message. */
struct bad_edit {
    const char *from, *to, *expect;
};

static const struct bad_edit edits[] = {
    {"version = 2", "version = 1", "version 1 is not supported (this hetpipe reads version 2"},
    {"[vw.1]\nnm = 4", "[vw.1]\nnm = 5", "nm = 5, but [vw.0] has 4"},
    {"[vw.1]\nnm = 4", "[vw.1]\nnm = 3", "in_flight 4, more than the VW's Nm 3"},
    {"[vw.0.stage.1]\nrank = 1", "[vw.0.stage.1]\nrank = 0", "rank 0 is used twice"},
    {"first_unit = 0", "first_unit = 1", "must start at unit 0"},
    {"vws = 4", "vws = 5", "no [vw.4]"},
    {"ranks = 20", "ranks = 21", "rank 20 of 21 has no role"},
    {"[vw.1.stage.0]\nrank = 4\nnode = 1\ndevice = 0",
     "[vw.1.stage.0]\nrank = 4\nnode = 1\ndevice = 7", "device 7"},
    {"token = 0123456789abcdef0123456789abcdef", "token = xyz", "32 lower-case hex"},
    {"batch = 32", "batch = 32x", "[plan]: batch=32x: must be an integer from 1 to 65536"},
    {"[ps.0]", "[bogus]\nx = 1\n\n[ps.0]", "unknown or surplus section [bogus]"},
    {"[vw.0.stage.1]\nrank = 1\nnode = 0\ndevice = 1",
     "[vw.0.stage.1]\nrank = 1\nnode = 0\ndevice = 0", "GPU 0 of node 'node1' is used twice"},
    {"[vw.0.stage.1]\nrank = 1\nnode = 0\ndevice = 1\ntype = titanv",
     "[vw.0.stage.1]\nrank = 1\nnode = 0\ndevice = 1\ntype = p4000", "type 'p4000', but GPU 1"},
};

static char *replace(const char *s, const char *from, const char *to)
{
    const char *at = strstr(s, from);
    char *out;

    ck_assert_msg(at != NULL, "'%s' not in the plan", from);
    out = malloc(strlen(s) + strlen(to) + 1);
    memcpy(out, s, (size_t)(at - s));
    strcpy(out + (at - s), to);
    strcat(out, at + strlen(from));
    return out;
}

START_TEST(planfile_rejects_inconsistent)
{
    struct setup s;
    struct hp_options o = {.policy = HP_POLICY_NP, .placement = HP_PLACEMENT_DEFAULT, .batch = 32};
    struct hp_plan p, q;
    struct hp_cluster cl2;
    char path[512], tok[33];

    setup(&s, "paper", "vgg19", 32);
    ck_assert_int_eq(hp_plan_compute(&s.cost, &s.cl, &o, &p), 0);
    snprintf(path, sizeof(path), "%s", test_write_file("good.ini", ""));
    ck_assert_int_eq(hp_planfile_save(path, &p, &s.cl, &s.db, "0123456789abcdef0123456789abcdef"),
                     0);
    char *good = slurp(path);
    const struct bad_edit *e = &edits[_i];
    char *bad = replace(good, e->from, e->to);
    const char *bp = test_write_file("bad.ini", bad);
    test_capture_begin();
    ck_assert_int_eq(hp_planfile_load(bp, &s.db, &q, &cl2, tok), -HP_ECONFIG);
    const char *err = test_capture_end();
    ck_assert_msg(strstr(err, e->expect) != NULL, "case %d: '%s' not in: %s", _i, e->expect, err);
    ck_assert_ptr_nonnull(strstr(err, "bad.ini"));
    free(good);
    free(bad);
    hp_plan_release(&p);
    teardown(&s);
}
END_TEST

START_TEST(impossible_requests)
{
    struct setup s;
    struct hp_plan p;
    struct hp_options o = {.policy = HP_POLICY_ED, .batch = 32, .staleness = -1};

    setup(&s, "paper", "cnn", 32);
    test_capture_begin();
    ck_assert_int_eq(hp_plan_compute(&s.cost, &s.cl, &o, &p), -HP_EINVAL);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "staleness D = -1"));
    /* the CNN has 6 units: a VW of 16 GPUs (np on a 1-node cluster of 16) cannot exist */
    o.staleness = 0;
    o.policy = HP_POLICY_NP;
    int counts[1] = {16}, types[1] = {0};
    struct hp_cluster big;
    ck_assert_int_eq(hp_cluster_make(&s.db, 1, counts, types, &big), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_plan_compute(&s.cost, &big, &o, &p), -HP_EINVAL);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "cannot be split over 6 units"));
    hp_cluster_release(&big);
    teardown(&s);
}
END_TEST

/* Binding files: every rank of a plan once, written and read back; broken ones refused with
 * the line and the problem. */
START_TEST(binding_round_trip_and_rejects)
{
    struct setup s;
    struct hp_plan p;
    struct hp_options o = {.policy = HP_POLICY_ED, .placement = HP_PLACEMENT_LOCAL, .batch = 32};
    struct hp_binding *b, *back = NULL;
    int *rank_of = NULL;
    char path[512], errbuf[1024];

    setup(&s, "paper", "cnn", 32);
    test_capture_begin();
    ck_assert_int_eq(hp_plan_compute(&s.cost, &s.cl, &o, &p), 0);
    test_capture_end();
    b = calloc((size_t)p.nranks, sizeof(*b));
    ck_assert_ptr_nonnull(b);
    /* tasks in reverse rank order, as a hetjob step may order them */
    for (int v = 0, r = 0; v < p.nvws; v++)
        for (int st = 0; st < p.vws[v].nstages; st++, r++) {
            const struct hp_gpu *g = &s.cl.gpus[p.vws[v].stages[st].gpu];
            struct hp_binding *e = &b[p.nranks - 1 - r];
            e->task = p.nranks - 1 - r;
            e->device = g->index;
            snprintf(e->node, sizeof(e->node), "%s", s.cl.nodes[g->node].name);
            snprintf(e->role, sizeof(e->role), "vw%d.stage%d", v, st);
            ck_assert_int_eq(hp_plan_role_rank(&p, e->role), r);
        }
    for (int k = 0; k < p.nshards; k++) {
        const int r = p.nranks - p.nshards + k;
        struct hp_binding *e = &b[p.nranks - 1 - r];
        e->task = p.nranks - 1 - r;
        e->device = -1;
        snprintf(e->node, sizeof(e->node), "n%d", k);
        snprintf(e->role, sizeof(e->role), "ps%d", k);
        ck_assert_int_eq(hp_plan_role_rank(&p, e->role), r);
    }
    ck_assert_int_eq(hp_plan_role_rank(&p, "vw99.stage0"), -1);
    ck_assert_int_eq(hp_plan_role_rank(&p, "ps-1"), -1);
    ck_assert_int_eq(hp_plan_role_rank(&p, "vw0.stage0x"), -1);
    ck_assert_int_eq(hp_plan_role_rank(&p, "ps99"), -1);

    snprintf(path, sizeof(path), "%s", test_write_file("binding", ""));
    ck_assert_int_eq(hp_binding_write(path, b, p.nranks, errbuf, sizeof(errbuf)), 0);
    ck_assert_int_eq(hp_plan_binding_load(&p, path, &back, &rank_of), 0);
    for (int t = 0; t < p.nranks; t++) {
        ck_assert_int_eq(back[t].task, t);
        ck_assert_int_eq(rank_of[t], p.nranks - 1 - t);
        ck_assert_int_eq(back[t].device, b[t].device);
        ck_assert_str_eq(back[t].node, b[t].node);
        ck_assert_str_eq(back[t].role, b[t].role);
    }
    free(back);
    free(rank_of);

    /* node names that would not read back as one word are refused, the file left as it was */
    static const char *odd_nodes[] = {"two words", "tab\tnode", "#comment", "", "bell\a"};
    for (size_t k = 0; k < sizeof(odd_nodes) / sizeof(odd_nodes[0]); k++) {
        struct hp_binding keep = b[1];
        snprintf(b[1].node, sizeof(b[1].node), "%s", odd_nodes[k]);
        errbuf[0] = '\0';
        ck_assert_int_eq(hp_binding_write(path, b, p.nranks, errbuf, sizeof(errbuf)), -1);
        ck_assert_msg(strstr(errbuf, "task 1's node name"), "'%s': %s", odd_nodes[k], errbuf);
        b[1] = keep;
        ck_assert_int_eq(hp_plan_binding_load(&p, path, &back, &rank_of), 0);
        free(back);
        free(rank_of);
    }

    /* broken files: a role twice, a missing task, a bad device, a foreign role, junk */
    static const struct {
        int task, line_fix;
        const char *role, *device, *expect;
    } bad[] = {
        {0, 0, "vw0.stage0", NULL, "is given twice"},
        {-1, 0, NULL, NULL, "tasks, but the plan"},
        {0, 0, NULL, "x", "device 'x' is neither '-' nor"},
        {0, 0, "vw9.stage0", NULL, "role 'vw9.stage0' is not in the plan"},
        {0, 1, NULL, NULL, "expected 'TASK NODE DEVICE ROLE'"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        struct hp_binding *c = calloc((size_t)p.nranks, sizeof(*c));
        int n = p.nranks;
        memcpy(c, b, (size_t)p.nranks * sizeof(*c));
        if (bad[k].task < 0)
            n--;
        if (bad[k].role && strcmp(bad[k].role, "vw0.stage0") == 0)
            snprintf(c[1].role, sizeof(c[1].role), "%s", c[0].role);
        else if (bad[k].role)
            snprintf(c[0].role, sizeof(c[0].role), "%s", bad[k].role);
        if (bad[k].line_fix)
            snprintf(c[0].node, sizeof(c[0].node), "only-a-node");
        ck_assert_int_eq(hp_binding_write(path, c, n, errbuf, sizeof(errbuf)), 0);
        if (bad[k].device || bad[k].line_fix) {
            /* what hp_binding_write cannot write: edit the first entry's line by hand */
            FILE *f = fopen(path, "w");
            ck_assert_ptr_nonnull(f);
            fprintf(f, "# edited\n");
            for (int t = 0; t < n; t++) {
                if (t == 0 && bad[k].device)
                    fprintf(f, "%d %s %s %s\n", c[t].task, c[t].node, bad[k].device, c[t].role);
                else if (t == 0)
                    fprintf(f, "%d %s\n", c[t].task, c[t].node);
                else if (c[t].device >= 0)
                    fprintf(f, "%d %s %d %s\n", c[t].task, c[t].node, c[t].device, c[t].role);
                else
                    fprintf(f, "%d %s - %s\n", c[t].task, c[t].node, c[t].role);
            }
            fclose(f);
        }
        back = NULL;
        test_capture_begin();
        ck_assert_int_eq(hp_plan_binding_load(&p, path, &back, &rank_of), -HP_ECONFIG);
        const char *err = test_capture_end();
        ck_assert_msg(strstr(err, bad[k].expect) != NULL, "case %zu: '%s' lacks '%s'", k, err,
                      bad[k].expect);
        ck_assert_ptr_null(back);
        free(c);
    }
    free(b);
    hp_plan_release(&p);
    teardown(&s);
}
END_TEST

/* The libc-only binding module, as the SPANK plugin uses it: roles, whole-file rules, what
 * the step's GPUs make of a device, and a FIFO at the path refused without blocking. */
START_TEST(binding_file_rules)
{
    struct hp_binding *b = NULL;
    char err[1024], dev[16], fifo[600];
    int v = -2, st = -2, n = 0;

    ck_assert_int_eq(hp_binding_role_parse("vw12.stage3", &v, &st), 0);
    ck_assert_int_eq(v, 12);
    ck_assert_int_eq(st, 3);
    ck_assert_int_eq(hp_binding_role_parse("ps7", &v, &st), 0);
    ck_assert_int_eq(v, 7);
    ck_assert_int_eq(st, -1);
    for (const char *const *r =
             (const char *const[]){"vw.stage0", "vw1.stage", "vw-1.stage0", "vw1.stage+0", "ps",
                                   "ps1x", "psx", "vw1.stage0 ", "VW1.stage0", "vw99999999.stage0",
                                   "x", "", NULL};
         *r; r++)
        ck_assert_msg(hp_binding_role_parse(*r, &v, &st) == -1, "'%s' accepted", *r);

    const char *ok = test_write_file("b1", "# c\n1 node2 3 vw0.stage1\n\n0 node1 - ps0\n");
    ck_assert_int_eq(hp_binding_read(ok, &b, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(b[0].node, "node1");
    ck_assert_int_eq(b[0].device, -1);
    ck_assert_int_eq(b[1].device, 3);
    ck_assert_str_eq(b[1].role, "vw0.stage1");
    free(b);
    static const struct {
        const char *text, *expect;
    } bad[] = {
        {"0 n 0 vw0.stage0\n2 n 1 vw0.stage1\n", "line 2: task 2 is out of range"},
        {"0 n 0 vw0.stage0\n0 n 1 vw0.stage1\n", "line 2: task 0 is given a second time"},
        {"0 n 0 vw0.stage0 extra\n", "line 1: expected 'TASK NODE DEVICE ROLE'"},
        {"0 n 4096 vw0.stage0\n", "device '4096'"},
        {"-1 n 0 vw0.stage0\n", "task '-1'"},
        {"0 n 0 worker\n", "role 'worker'"},
        {"# nothing\n", "no task"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        b = NULL;
        const char *p = test_write_file("b2", bad[k].text);
        ck_assert_int_eq(hp_binding_read(p, &b, &n, err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, bad[k].expect) != NULL, "case %zu: '%s' lacks '%s'", k, err,
                      bad[k].expect);
        ck_assert_ptr_null(b);
    }
    snprintf(fifo, sizeof(fifo), "%s.fifo", ok);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(hp_binding_read(fifo, &b, &n, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "not a regular file"));
    unlink(fifo);

    ck_assert_int_eq(
        hp_binding_visible_device("0,2,3", "0,1,2", 2, dev, sizeof(dev), err, sizeof(err)), 0);
    ck_assert_str_eq(dev, "1"); /* renumbered by device cgroups */
    ck_assert_int_eq(
        hp_binding_visible_device("0,2,3", NULL, 3, dev, sizeof(dev), err, sizeof(err)), 0);
    ck_assert_str_eq(dev, "3");
    ck_assert_int_eq(hp_binding_visible_device("0,2", "0,1", 1, dev, sizeof(dev), err, sizeof(err)),
                     -1);
    ck_assert_str_eq(err, "the step has GPU(s) 0,2");
    ck_assert_int_eq(hp_binding_visible_device(NULL, NULL, 1, dev, sizeof(dev), err, sizeof(err)),
                     -1);
    ck_assert_str_eq(err, "the step has no GPUs (SLURM_STEP_GPUS is unset)");
}
END_TEST

/* run --local's limits: the rank count by cores, the memory by what is available, each said
 * with what it is made of. */
START_TEST(local_job_fits_the_machine)
{
    struct hp_model model = {.nparams = 1000000};
    struct hp_vw_plan vws[70];
    struct hp_job job = {.model = &model};
    char why[1024];

    memset(vws, 0, sizeof(vws));
    for (int v = 0; v < 70; v++) {
        vws[v].nstages = 1;
        vws[v].stages[0].memory = 100.0 * 1048576.0;
    }
    job.plan.vws = vws;
    job.plan.nvws = 60;
    job.plan.nshards = 0;
    job.plan.nranks = 64;
    ck_assert_int_eq(hp_job_local_fits(&job, 2, 0.0, why, sizeof(why)), 0); /* 64 on 2 cores */
    job.plan.nranks = 65;
    ck_assert_int_eq(hp_job_local_fits(&job, 2, 0.0, why, sizeof(why)), -HP_EINVAL);
    ck_assert_str_eq(why, "the plan has 65 ranks, more than this machine can hold: at most 64 "
                          "(max(64, 8 x 2 cores): every rank of a local job is a process on this "
                          "machine's cores)");
    ck_assert_int_eq(hp_job_local_fits(&job, 16, 0.0, why, sizeof(why)), 0); /* 128 on 16 */
    job.plan.nranks = 8193;
    ck_assert_int_eq(hp_job_local_fits(&job, 16, 0.0, why, sizeof(why)), -HP_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "at most 128 (max(64, 8 x 16 cores)"));
    /* 60 VWs of one 100 MiB stage, 64 ranks: 64 x 32 + 60 x 256 + 60 x 100 MiB = 22.9 GiB */
    job.plan.nranks = 64;
    ck_assert_int_eq(hp_job_local_fits(&job, 2, 24.0 * 1073741824.0, why, sizeof(why)), 0);
    ck_assert_int_eq(hp_job_local_fits(&job, 2, 20.0 * 1073741824.0, why, sizeof(why)),
                     -HP_ENOMEM);
    ck_assert_str_eq(why, "the plan's 64 ranks need about 22.9 GiB (32 MiB of each rank's own, "
                          "256 MiB of data per VW, each stage's planned memory), more than the "
                          "20.0 GiB this machine has available (MemAvailable)");
}
END_TEST

/* A run's record (run.ini) reads back as written; none is 1; a bad one is refused; the runs of
 * a job go to JOB_DIR/run-K, the next free K, and only a directory with a plan is a job's. */
START_TEST(run_record_and_restart_dirs)
{
    const char *dir = test_fresh_dir();
    char job[600], run[700], path[800];
    struct hp_runrec r = {.restart = 2,
                          .started = 1765000000.25,
                          .ended = 1765000100.5,
                          .status = 75,
                          .resumed_seq = 4,
                          .resumed_samples = 12800},
                     back;
    int k = 0;

    snprintf(job, sizeof(job), "%s", dir);
    ck_assert_int_eq(hp_runrec_read(job, &back), 1);
    ck_assert_int_eq(back.status, -1);
    ck_assert_int_eq(back.resumed_seq, -1);
    ck_assert_int_eq(hp_runrec_write(job, &r), 0);
    ck_assert_int_eq(hp_runrec_read(job, &back), 0);
    ck_assert_int_eq(back.restart, 2);
    ck_assert_int_eq(back.status, 75);
    ck_assert_int_eq(back.resumed_seq, 4);
    ck_assert_int_eq(back.resumed_samples, 12800);
    ck_assert(back.started == 1765000000.25 && back.ended == 1765000100.5);
    snprintf(path, sizeof(path), "%s/run.ini", job);
    for (const char *const *bad =
             (const char *const[]){"[run]\nrestart = 1\nstarted = x\n", "[run]\nstarted = 1\n",
                                   "[run]\nrestart = 1\nstarted = 1\nwho = me\n",
                                   "[run]\nrestart = -3\nstarted = 1\n", NULL};
         *bad; bad++) {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(*bad, f);
        fclose(f);
        test_capture_begin();
        ck_assert_msg(hp_runrec_read(job, &back) == -HP_ECONFIG, "accepted: %s", *bad);
        ck_assert_ptr_nonnull(strstr(test_capture_end(), "run.ini"));
    }
    unlink(path);
    ck_assert(!hp_rundir_is_job(job)); /* no plan.ini */
    snprintf(path, sizeof(path), "%s/plan.ini", job);
    fclose(fopen(path, "w"));
    ck_assert(hp_rundir_is_job(job));
    ck_assert_int_eq(hp_rundir_restart("t", job, -1, run, sizeof(run), &k), 0);
    ck_assert_int_eq(k, 1);
    ck_assert_int_eq(hp_rundir_restart("t", job, 3, run, sizeof(run), &k), 0);
    ck_assert_int_eq(k, 3);
    snprintf(path, sizeof(path), "%s/run-3", job);
    ck_assert_str_eq(run, path);
    ck_assert_int_eq(hp_rundir_restart("t", job, -1, run, sizeof(run), &k), 0);
    ck_assert_int_eq(k, 2); /* the first free */
    for (int i = 1; i <= 3; i++) {
        snprintf(path, sizeof(path), "%s/run-%d", job, i);
        ck_assert_int_eq(rmdir(path), 0);
    }
    snprintf(path, sizeof(path), "%s/plan.ini", job);
    unlink(path);
    test_remove_dir(job);
}
END_TEST

Suite *suite_plan(void)
{
    Suite *s = suite_create("plan");
    TCase *t = tcase_create("plan");

    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, auto_beats_fixed_policies, 0,
                        (int)(sizeof(clusters) / sizeof(clusters[0])));
    tcase_add_test(t, vws_share_one_wave);
    tcase_add_test(t, nm_within_tolerance);
    tcase_add_test(t, paper_policies);
    tcase_add_test(t, planfile_round_trip);
    tcase_add_test(t, planfile_older_plans_load);
    tcase_add_test(t, planfile_extremes);
    tcase_add_loop_test(t, planfile_rejects_inconsistent, 0,
                        (int)(sizeof(edits) / sizeof(edits[0])));
    tcase_add_test(t, impossible_requests);
    tcase_add_test(t, binding_round_trip_and_rejects);
    tcase_add_test(t, binding_file_rules);
    tcase_add_test(t, local_job_fits_the_machine);
    tcase_add_test(t, run_record_and_restart_dirs);
    suite_add_tcase(s, t);
    return s;
}
