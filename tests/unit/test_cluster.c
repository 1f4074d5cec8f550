/* test_cluster.c - the site config's GPU database and the cluster descriptions. */
#include "suites.h"
#include "util.h"

#include "cluster.h"
#include "error.h"
#include "gpudb.h"
#include "outcome.h"
#include "process.h"
#include "slurm.h"

#include <check.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SITE_CONF "etc/hetpipe.conf"

static void load_site(struct hp_gpudb *db)
{
    ck_assert_int_eq(hp_gpudb_load(SITE_CONF, db), 0);
}

static void check_type(const struct hp_gpudb *db, const char *name, double gib, double tflops,
                       double gbs, int major, int minor)
{
    int i = hp_gpudb_find(db, name);
    const struct hp_gpu_type *t;

    ck_assert_msg(i >= 0, "type '%s' missing", name);
    t = &db->types[i];
    ck_assert_str_eq(t->name, name);
    ck_assert_double_eq(t->memory_gib, gib);
    ck_assert_double_eq_tol(t->tflops, tflops, 1e-9);
    ck_assert_double_eq_tol(t->bandwidth_gbs, gbs, 1e-9);
    ck_assert_int_eq(t->cc_major, major);
    ck_assert_int_eq(t->cc_minor, minor);
}

START_TEST(site_config)
{
    static const char *const modern[] = {"v100-16", "v100-32", "t4",      "a10",  "l4",   "a100-40",
                                         "a100-80", "rtx3090", "rtx4090", "h100", "h200", NULL};
    struct hp_gpudb db;

    load_site(&db);
    check_type(&db, "titanv", 12, 14.9, 652.8, 7, 0);
    check_type(&db, "titanrtx", 24, 16.3, 672, 7, 5);
    check_type(&db, "rtx2060", 6, 6.5, 336, 7, 5);
    check_type(&db, "p4000", 8, 5.3, 243, 6, 1);
    ck_assert_str_eq(db.types[hp_gpudb_find(&db, "titanv")].label, "NVIDIA TITAN V");
    for (int i = 0; modern[i]; i++)
        ck_assert_msg(hp_gpudb_find(&db, modern[i]) >= 0, "type '%s' missing", modern[i]);
    ck_assert_int_eq(hp_gpudb_find(&db, "TitanV"), hp_gpudb_find(&db, "titanv"));
    ck_assert_int_eq(hp_gpudb_find(&db, "k80"), -1);
    ck_assert_int_eq(hp_gpudb_find(&db, NULL), -1);
    ck_assert_double_eq(db.intra_node_gbs, 12.0);
    ck_assert_double_eq(db.inter_node_gbs, 6.0);
    ck_assert_double_eq(db.intra_latency_us, 10.0);
    ck_assert_double_eq(db.inter_latency_us, 20.0);
    ck_assert_double_eq(db.efficiency, 0.5);
    hp_gpudb_release(&db);
    ck_assert_int_eq(db.ntypes, 0);
    ck_assert_ptr_null(db.types);
}
END_TEST

START_TEST(defaults_and_case)
{
    const char *p = test_write_file("min.conf", "[GPU.Tiny]\nmemory_gib = 1\ntflops = 0.5\n"
                                                "bandwidth_gbs = 50\ncompute_capability = 10.0\n");
    struct hp_gpudb db;

    ck_assert_int_eq(hp_gpudb_load(p, &db), 0);
    ck_assert_int_eq(db.ntypes, 1);
    ck_assert_str_eq(db.types[0].name, "tiny");
    ck_assert_str_eq(db.types[0].label, "tiny");
    ck_assert_int_eq(db.types[0].cc_major, 10);
    ck_assert_int_eq(hp_gpudb_find(&db, "TINY"), 0);
    ck_assert_double_eq(db.intra_node_gbs, 12.0);
    ck_assert_double_eq(db.inter_node_gbs, 6.0);
    ck_assert_double_eq(db.intra_latency_us, 10.0);
    ck_assert_double_eq(db.inter_latency_us, 20.0);
    ck_assert_double_eq(db.efficiency, 0.5);
    ck_assert_double_eq(db.nm_tolerance, 0.05);
    hp_gpudb_release(&db);
}
END_TEST

START_TEST(default_path)
{
    char buf[4096];

    setenv("HETPIPE_CONF", "/some/where.conf", 1);
    ck_assert_int_eq(hp_gpudb_default_path(buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/some/where.conf");
    test_capture_begin();
    ck_assert_int_eq(hp_gpudb_default_path(buf, 4), -HP_ERANGE);
    test_capture_end();
    unsetenv("HETPIPE_CONF");
    /* the tests run in the source tree */
    ck_assert_int_eq(hp_gpudb_default_path(buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, SITE_CONF);
}
END_TEST

/* Each case: a file, and strings its error must contain. */
struct bad {
    const char *text;
    const char *expect[3];
};

#define TYPE_BODY                                                                                  \
    "memory_gib = 12\ntflops = 14.9\nbandwidth_gbs = 652.8\ncompute_capability = 7.0\n"
#define TITANV "[gpu.titanv]\n" TYPE_BODY

static const struct bad bad_confs[] = {
    {TITANV "colour = green\n", {"[gpu.titanv]", "unknown key 'colour'", "tflops"}},
    {TITANV "[gpus.x]\n" TYPE_BODY,
     {"unknown section [gpus.x]", "[links], [planner]", "[gpu.NAME]"}},
    {"[gpu.titanv]\nmemory_gib = 12\ntflops = 14.9x\nbandwidth_gbs = 1\ncompute_capability = 7.0\n",
     {"[gpu.titanv]", "key 'tflops'", "'14.9x' is not a number"}},
    {"[gpu.titanv]\nmemory_gib = -12\ntflops = 14.9\nbandwidth_gbs = 1\ncompute_capability = 7.0\n",
     {"[gpu.titanv]", "key 'memory_gib'", "out of range"}},
    {"[gpu.titanv]\nmemory_gib = 0\ntflops = 14.9\nbandwidth_gbs = 1\ncompute_capability = 7.0\n",
     {"[gpu.titanv]", "key 'memory_gib'", "greater than 0"}},
    {TITANV "[gpu.TitanV]\n" TYPE_BODY, {"[gpu.titanv]", "appears again", "line 6"}},
    {"[links]\nintra_node_gbs = 10\n", {"no GPU types", "[gpu.NAME]", NULL}},
    {TITANV "[links]\ninter_node_gbs = 0\n", {"[links]", "key 'inter_node_gbs'", NULL}},
    {TITANV "[links]\nintra_node_gb = 10\n", {"[links]", "unknown key 'intra_node_gb'", NULL}},
    {TITANV "[planner]\nefficiency = 1.5\n", {"[planner]", "key 'efficiency'", "out of range"}},
    {TITANV "[planner]\nnm_tolerance = 1\n", {"[planner]", "key 'nm_tolerance'", "out of range"}},
    {TITANV "[planner]\nnm_tolerance = -0.1\n", {"[planner]", "key 'nm_tolerance'", NULL}},
    {"[gpu.titanv]\nmemory_gib = 12\ntflops = 14.9\nbandwidth_gbs = 1\n",
     {"[gpu.titanv]", "missing required key 'compute_capability'", NULL}},
    {"[gpu.titanv]\nmemory_gib = 12\ntflops = 14.9\nbandwidth_gbs = 1\ncompute_capability = 7\n",
     {"[gpu.titanv]", "key 'compute_capability'", "MAJOR.MINOR"}},
    {"[gpu.titan:v]\n" TYPE_BODY, {"[gpu.titan:v]", "':' is not allowed", NULL}},
    {"[gpu.titan v]\n" TYPE_BODY, {"[gpu.titan v]", "character ' '", NULL}},
    {"[gpu.]\n" TYPE_BODY, {"[gpu.]", "1 to 31 characters", NULL}},
};

START_TEST(bad_conf_files)
{
    const struct bad *b = &bad_confs[_i];
    const char *path = test_write_file("bad.conf", b->text), *err;
    struct hp_gpudb db;

    test_capture_begin();
    ck_assert_int_eq(hp_gpudb_load(path, &db), -HP_ECONFIG);
    err = test_capture_end();
    ck_assert_int_eq(db.ntypes, 0);
    ck_assert_ptr_null(db.types);
    ck_assert_msg(strstr(err, "bad.conf") != NULL, "case %d: no file name in: %s", _i, err);
    for (int k = 0; k < 3 && b->expect[k]; k++)
        ck_assert_msg(strstr(err, b->expect[k]) != NULL, "case %d: '%s' not in: %s", _i,
                      b->expect[k], err);
}
END_TEST

START_TEST(shipped_clusters)
{
    struct hp_gpudb db;
    glob_t g;

    load_site(&db);
    ck_assert_int_eq(glob("etc/clusters/*.ini", 0, NULL, &g), 0);
    ck_assert_uint_ge(g.gl_pathc, 5);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct hp_cluster c;
        int sum = 0;

        ck_assert_msg(hp_cluster_load(g.gl_pathv[i], &db, &c) == 0, "%s", g.gl_pathv[i]);
        ck_assert_int_ge(c.nnodes, 1);
        for (int n = 0; n < c.nnodes; n++) {
            ck_assert_int_eq(c.nodes[n].first_gpu, sum);
            sum += c.nodes[n].ngpus;
        }
        ck_assert_int_eq(sum, c.ngpus);
        hp_cluster_release(&c);
    }
    globfree(&g);
    hp_gpudb_release(&db);
}
END_TEST

/* The number of distinct GPU types in c. */
static int ntypes_in(const struct hp_cluster *c, const struct hp_gpudb *db)
{
    int n = 0;

    for (int t = 0; t < db->ntypes; t++)
        for (int g = 0; g < c->ngpus; g++)
            if (c->gpus[g].type == t) {
                n++;
                break;
            }
    return n;
}

START_TEST(paper_cluster)
{
    static const char *const types[] = {"titanv", "titanrtx", "rtx2060", "p4000"};
    struct hp_gpudb db;
    struct hp_cluster c;

    load_site(&db);
    ck_assert_int_eq(hp_cluster_load("etc/clusters/paper.ini", &db, &c), 0);
    ck_assert_str_eq(c.name, "paper");
    ck_assert_int_eq(c.nnodes, 4);
    ck_assert_int_eq(c.ngpus, 16);
    ck_assert_int_eq(ntypes_in(&c, &db), 4);
    ck_assert_double_eq(c.intra_node_gbs, 12.0);
    ck_assert_double_eq(c.inter_node_gbs, 6.0);
    ck_assert_double_eq(c.inter_latency_us, db.inter_latency_us);
    for (int n = 0; n < 4; n++) {
        const struct hp_node *node = &c.nodes[n];
        char name[16];

        snprintf(name, sizeof(name), "node%d", n + 1);
        ck_assert_str_eq(node->name, name);
        ck_assert_int_eq(node->first_gpu, 4 * n);
        ck_assert_int_eq(node->ngpus, 4);
        for (int j = 0; j < 4; j++) {
            const struct hp_gpu *g = &c.gpus[node->first_gpu + j];
            ck_assert_int_eq(g->node, n);
            ck_assert_int_eq(g->index, j);
            ck_assert_str_eq(db.types[g->type].name, types[n]);
        }
    }
    hp_cluster_release(&c);
    ck_assert_ptr_null(c.gpus);

    /* mixed types inside a node: indices follow the order listed */
    ck_assert_int_eq(hp_cluster_load("etc/clusters/local4.ini", &db, &c), 0);
    ck_assert_int_eq(c.nnodes, 1);
    ck_assert_int_eq(c.ngpus, 4);
    for (int j = 0; j < 4; j++) {
        ck_assert_int_eq(c.gpus[j].index, j);
        ck_assert_str_eq(db.types[c.gpus[j].type].name, types[j]);
    }
    hp_cluster_release(&c);
    ck_assert_int_eq(hp_cluster_load("etc/clusters/six-types.ini", &db, &c), 0);
    ck_assert_int_ge(ntypes_in(&c, &db), 6);
    hp_cluster_release(&c);
    hp_gpudb_release(&db);
}
END_TEST

START_TEST(cluster_details)
{
    const char *p = test_write_file("tiny.ini", "[cluster]\ninter_node_gbs = 3.5\n"
                                                "[a]\ngpus =  titanv : 2 ,p4000:1  \n"
                                                "[b]\ngpus = TITANRTX:1\n");
    struct hp_gpudb db;
    struct hp_cluster c;

    load_site(&db);
    ck_assert_int_eq(hp_cluster_load(p, &db, &c), 0);
    ck_assert_str_eq(c.name, "tiny");
    ck_assert_double_eq(c.intra_node_gbs, db.intra_node_gbs);
    ck_assert_double_eq(c.inter_node_gbs, 3.5);
    ck_assert_int_eq(c.nnodes, 2);
    ck_assert_int_eq(c.ngpus, 4);
    ck_assert_str_eq(c.nodes[1].name, "b");
    ck_assert_int_eq(c.gpus[2].type, hp_gpudb_find(&db, "p4000"));
    ck_assert_int_eq(c.gpus[2].index, 2);
    ck_assert_int_eq(c.gpus[3].node, 1);
    ck_assert_int_eq(c.gpus[3].index, 0);
    ck_assert_int_eq(c.gpus[3].type, hp_gpudb_find(&db, "titanrtx"));
    hp_cluster_release(&c);
    hp_gpudb_release(&db);
}
END_TEST

#define CL "[cluster]\nname = t\n"

static const struct bad bad_clusters[] = {
    {CL "[node1]\ngpus = titanv:2, k80:4\n",
     {"[node1]", "unknown GPU type 'k80' (known: titanv, titanrtx, rtx2060, p4000",
      "add a [gpu.k80] section to the site config (etc/hetpipe.conf)"}},
    {CL "[node1]\ngpus = titanv:x\n", {"[node1]", "key 'gpus'", "count 'x'"}},
    {CL "[node1]\ngpus = titanv:0\n", {"[node1]", "key 'gpus'", "1..4096"}},
    {CL "[node1]\ngpus = titanv:4097\n", {"[node1]", "key 'gpus'", "1..4096"}},
    {CL "[node1]\ngpus = titanv\n", {"[node1]", "key 'gpus'", "TYPE:COUNT"}},
    {CL "[node1]\ngpus = titanv:1,\n", {"[node1]", "key 'gpus'", "TYPE:COUNT"}},
    {CL "[node1]\ngpus =\n", {"[node1]", "key 'gpus'", NULL}},
    {CL "[node1]\ngpus = :2\n", {"[node1]", "key 'gpus'", "TYPE:COUNT"}},
    {CL "[node1]\ngpu = titanv:1\n", {"[node1]", "unknown key 'gpu'", "gpus"}},
    {CL "[node1]\n", {"[node1]", "missing required key 'gpus'", NULL}},
    {"[node1]\ngpus = titanv:1\n", {"missing section [cluster]", NULL, NULL}},
    {CL "nodes = 4\n[node1]\ngpus = titanv:1\n", {"[cluster]", "unknown key 'nodes'", NULL}},
    {CL "inter_node_gbs = fast\n[node1]\ngpus = titanv:1\n",
     {"[cluster]", "key 'inter_node_gbs'", "not a number"}},
    {CL "intra_node_gbs = 0\n[node1]\ngpus = titanv:1\n",
     {"[cluster]", "key 'intra_node_gbs'", "greater than 0"}},
    {CL, {"no nodes", NULL, NULL}},
    {CL "[node1]\ngpus = titanv:1\n[Node1]\ngpus = p4000:1\n", {"[node1]", "appears again", NULL}},
};

START_TEST(bad_cluster_files)
{
    const struct bad *b = &bad_clusters[_i];
    const char *path;
    struct hp_gpudb db;
    struct hp_cluster c;
    const char *err;

    /* the paper's four types only, so the list of known types is fixed */
    path = test_write_file("four.conf", "[gpu.titanv]\n" TYPE_BODY "[gpu.titanrtx]\n" TYPE_BODY
                                        "[gpu.rtx2060]\n" TYPE_BODY "[gpu.p4000]\n" TYPE_BODY);
    ck_assert_int_eq(hp_gpudb_load(path, &db), 0);
    path = test_write_file("bad.ini", b->text);
    test_capture_begin();
    ck_assert_int_eq(hp_cluster_load(path, &db, &c), -HP_ECONFIG);
    err = test_capture_end();
    ck_assert_int_eq(c.ngpus, 0);
    ck_assert_ptr_null(c.nodes);
    ck_assert_ptr_null(c.gpus);
    ck_assert_msg(strstr(err, "bad.ini") != NULL, "case %d: no file name in: %s", _i, err);
    for (int k = 0; k < 3 && b->expect[k]; k++)
        ck_assert_msg(strstr(err, b->expect[k]) != NULL, "case %d: '%s' not in: %s", _i,
                      b->expect[k], err);
    hp_gpudb_release(&db);
}
END_TEST

START_TEST(cluster_make)
{
    struct hp_gpudb db;
    struct hp_cluster c;
    int counts[3] = {4, 2, 3}, types[3];

    load_site(&db);
    types[0] = hp_gpudb_find(&db, "a100-80");
    types[1] = hp_gpudb_find(&db, "t4");
    types[2] = hp_gpudb_find(&db, "titanv");
    ck_assert_int_eq(hp_cluster_make(&db, 3, counts, types, &c), 0);
    ck_assert_int_eq(c.nnodes, 3);
    ck_assert_int_eq(c.ngpus, 9);
    ck_assert_str_eq(c.nodes[2].name, "node3");
    ck_assert_int_eq(c.nodes[2].first_gpu, 6);
    ck_assert_int_eq(c.nodes[2].ngpus, 3);
    ck_assert_int_eq(c.gpus[5].node, 1);
    ck_assert_int_eq(c.gpus[5].index, 1);
    ck_assert_int_eq(c.gpus[5].type, types[1]);
    ck_assert_int_eq(c.gpus[8].type, types[2]);
    ck_assert_int_eq(c.gpus[8].index, 2);
    ck_assert_double_eq(c.intra_node_gbs, db.intra_node_gbs);
    ck_assert_double_eq(c.inter_node_gbs, db.inter_node_gbs);
    ck_assert_double_eq(c.intra_latency_us, db.intra_latency_us);
    hp_cluster_release(&c);

    test_capture_begin();
    counts[1] = 0;
    ck_assert_int_eq(hp_cluster_make(&db, 3, counts, types, &c), -HP_EINVAL);
    counts[1] = 2;
    types[0] = db.ntypes;
    ck_assert_int_eq(hp_cluster_make(&db, 3, counts, types, &c), -HP_EINVAL);
    ck_assert_int_eq(hp_cluster_make(&db, 0, counts, types, &c), -HP_EINVAL);
    test_capture_end();
    ck_assert_ptr_null(c.gpus);
    hp_gpudb_release(&db);
}
END_TEST

/* Slurm's per-node GRES detail strings, as slurm_load_job(SHOW_DETAIL) gives them. */
static const struct {
    const char *detail, *expect; /* expect: "type:idx ..." or "!" + a piece of the error */
} gres_cases[] = {
    {"gpu:titanv:2(IDX:0-1)", "titanv:0 titanv:1"},
    {"gpu:titanv:4(IDX:0-3)", "titanv:0 titanv:1 titanv:2 titanv:3"},
    {"gpu:p4000:3(IDX:0,2-3)", "p4000:0 p4000:2 p4000:3"},
    {"gpu:titanv:1(IDX:3),gpu:p4000:2(IDX:0-1)", "p4000:0 p4000:1 titanv:3"},
    {"mps:100(0),gpu:rtx2060:1(IDX:2)", "rtx2060:2"},
    {"gpu:titanv(IDX:1)", "titanv:1"},
    {"gpu:titanv:0(IDX:N/A)", ""},
    {"", ""},
    {"gpu:2(IDX:0-1)", "!has no GPU type"},
    {"gpu:(null):2(IDX:0-1)", "!has no GPU type"},
    {"gpu:titanv:2", "!lacks its device indices"},
    {"gpu:titanv:2(IDX:0)", "!does not have COUNT"},
    {"gpu:titanv:2(IDX:1-0)", "!is not N, N-M"},
    {"gpu:titanv:2(IDX:0,)", "!is not N, N-M"},
    {"gpu:titanv:x(IDX:0)", "!count 'x'"},
    {"gpu:titanv:1(IDX:0),gpu:p4000:1(IDX:0)", "!appears twice"},
    {"gpu:titanv:2(IDX:0-1", "!lacks its device indices"},
};

START_TEST(gres_detail)
{
    struct hp_alloc_node n = {.name = "node7"};
    char err[512] = "", got[512] = "";
    const char *want = gres_cases[_i].expect;
    int rc = hp_gres_detail_parse(gres_cases[_i].detail, &n, err, sizeof(err));

    if (want[0] == '!') {
        ck_assert_int_eq(rc, -1);
        ck_assert_msg(strstr(err, want + 1) && strstr(err, "node7"), "'%s': error '%s'",
                      gres_cases[_i].detail, err);
        return;
    }
    ck_assert_msg(rc == 0, "'%s': %s", gres_cases[_i].detail, err);
    for (int g = 0; g < n.ngpus; g++)
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s:%d", g ? " " : "",
                 n.gpus[g].type, n.gpus[g].index);
    ck_assert_str_eq(got, want);
}
END_TEST

/* An allocation written as a cluster file loads back with its types and device indices. */
START_TEST(alloc_as_cluster)
{
    struct hp_gpudb db;
    struct hp_cluster cl;
    struct hp_alloc a = {.jobid = 42, .hetjob = 1, .ncomponents = 2, .nnodes = 2};
    struct hp_alloc_node nodes[2] = {{.name = "node3", .component = 0},
                                     {.name = "node1", .component = 1}};
    char err[256];
    const char *path = test_write_file("alloc.ini", "");

    ck_assert_int_eq(hp_gres_detail_parse("gpu:rtx2060:2(IDX:1,3)", &nodes[0], err, sizeof(err)),
                     0);
    ck_assert_int_eq(
        hp_gres_detail_parse("gpu:titanv:1(IDX:2),gpu:p4000:1(IDX:0)", &nodes[1], err, sizeof(err)),
        0);
    a.nodes = nodes;
    ck_assert_int_eq(hp_alloc_write_cluster(&a, "job42", path), 0);
    load_site(&db);
    ck_assert_int_eq(hp_cluster_load(path, &db, &cl), 0);
    ck_assert_int_eq(cl.nnodes, 2);
    ck_assert_int_eq(cl.ngpus, 4);
    ck_assert_str_eq(cl.nodes[0].name, "node3");
    ck_assert_str_eq(cl.nodes[1].name, "node1");
    const int idx[4] = {1, 3, 0, 2};
    const char *types[4] = {"rtx2060", "rtx2060", "p4000", "titanv"};
    for (int g = 0; g < 4; g++) {
        ck_assert_int_eq(cl.gpus[g].index, idx[g]);
        ck_assert_str_eq(db.types[cl.gpus[g].type].name, types[g]);
    }
    hp_cluster_release(&cl);
    hp_gpudb_release(&db);
}
END_TEST

/* Write `a` as a cluster file and load it back: names, types and device indices as written. */
static void alloc_round_trip(const struct hp_alloc *a, const struct hp_gpudb *db)
{
    const char *path = test_write_file("alloc-extreme.ini", "");
    struct hp_cluster cl;
    int g = 0;

    ck_assert_int_eq(hp_alloc_write_cluster(a, "job \"x\"; #1", path), 0);
    ck_assert_int_eq(hp_cluster_load(path, db, &cl), 0);
    ck_assert_str_eq(cl.name, "job \"x\"; #1");
    ck_assert_int_eq(cl.nnodes, a->nnodes);
    for (int i = 0; i < a->nnodes; i++) {
        ck_assert_str_eq(cl.nodes[i].name, a->nodes[i].name);
        ck_assert_int_eq(cl.nodes[i].ngpus, a->nodes[i].ngpus);
        for (int j = 0; j < a->nodes[i].ngpus; j++, g++) {
            ck_assert_int_eq(cl.gpus[g].node, i);
            ck_assert_int_eq(cl.gpus[g].index, a->nodes[i].gpus[j].index);
            ck_assert_str_eq(db->types[cl.gpus[g].type].name, a->nodes[i].gpus[j].type);
        }
    }
    ck_assert_int_eq(cl.ngpus, g);
    hp_cluster_release(&cl);
}

/* The cluster file hetpipe launch writes, at the extremes: 1000 nodes of 64 GPUs (lists over
 * iniparser's line length, continued), node names of every printable character (in
 * [node.I] sections with quoted names), and what no spelling holds refused by name. */
START_TEST(alloc_extremes)
{
    static const char *types[] = {"titanv", "rtx2060", "p4000", "v100-32"};
    enum { NODES = 1000 };
    struct hp_alloc_node *nodes = calloc(NODES, sizeof(*nodes));
    struct hp_alloc a = {.jobid = 7, .ncomponents = 1, .nnodes = NODES, .nodes = nodes};
    struct hp_gpudb db;
    char printable[96];

    ck_assert_ptr_nonnull(nodes);
    load_site(&db);
    for (int i = 0; i < NODES; i++) {
        snprintf(nodes[i].name, sizeof(nodes[i].name), "gpu-%04d.rack_%d", i, i % 7);
        nodes[i].ngpus = HP_ALLOC_GPUS_MAX;
        for (int j = 0; j < HP_ALLOC_GPUS_MAX; j++) {
            /* a type change at every GPU: 64 items of TYPE:1 */
            snprintf(nodes[i].gpus[j].type, HP_GPU_TYPE_MAX, "%s", types[(i + j) % 4]);
            nodes[i].gpus[j].index = (j * 37 + i) % HP_ALLOC_GPUS_MAX;
        }
    }
    for (int i = 0; i < 4; i++)
        ck_assert_msg(hp_gpudb_find(&db, types[i]) >= 0, "type %s", types[i]);
    alloc_round_trip(&a, &db); /* every section [NAME] */

    /* every printable character, the two quotes in different names, spaces at the ends */
    for (int c = ' '; c <= '~'; c++)
        printable[c - ' '] = (char)c;
    printable['~' - ' ' + 1] = '\0';
    snprintf(nodes[1].name, sizeof(nodes[1].name), "%.*s", '\'' - ' ', printable);
    snprintf(nodes[2].name, sizeof(nodes[2].name), "%.*s", '@' - '\'', printable + ('\'' - ' '));
    snprintf(nodes[3].name, sizeof(nodes[3].name), "%s", printable + ('@' - ' '));
    snprintf(nodes[4].name, sizeof(nodes[4].name), " Node4 ");
    snprintf(nodes[5].name, sizeof(nodes[5].name), "cluster");
    snprintf(nodes[6].name, sizeof(nodes[6].name), "node.7"); /* not node 7's section */
    alloc_round_trip(&a, &db);

    /* refused, with the reason: a control character, both quote kinds, an odd GPU type */
    const char *path = test_write_file("alloc-refused.ini", "keep");
    snprintf(nodes[8].name, sizeof(nodes[8].name), "line\nbreak");
    test_capture_begin();
    ck_assert_int_lt(hp_alloc_write_cluster(&a, "x", path), 0);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "the name of node 8"));
    snprintf(nodes[8].name, sizeof(nodes[8].name), "both'\"");
    test_capture_begin();
    ck_assert_int_lt(hp_alloc_write_cluster(&a, "x", path), 0);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "the name of node 8"));
    snprintf(nodes[8].name, sizeof(nodes[8].name), "n8");
    snprintf(nodes[9].gpus[3].type, HP_GPU_TYPE_MAX, "a,b");
    test_capture_begin();
    ck_assert_int_lt(hp_alloc_write_cluster(&a, "x", path), 0);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "GPU type 'a,b'"));
    /* a refused write leaves the file that was there */
    FILE *f = fopen(path, "r");
    char buf[16] = "";
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
    fclose(f);
    ck_assert_str_eq(buf, "keep");
    hp_gpudb_release(&db);
    free(nodes);
}
END_TEST

/* Hand-written cluster files: a name key, continued lists, and their errors. */
START_TEST(cluster_names_and_lists)
{
    struct hp_gpudb db;
    struct hp_cluster cl;
    static const struct {
        const char *text, *expect;
    } bad[] = {
        {"[cluster]\n[a]\nname = b\ngpus = titanv:1\n[b]\ngpus = titanv:1\n",
         "node 'b' is given twice"},
        {"[cluster]\n[a]\nname = \"\"\ngpus = titanv:1\n", "node names have 1 to 63"},
        {"[cluster]\n[a]\ngpus = titanv:1\ngpus.2 = titanv:1\n", "'gpus.1' is missing"},
        {"[cluster]\n[a]\ngpus = titanv:2\ndevices = 0\ndevices.1 = 0\n", "distinct device"},
    };

    load_site(&db);
    const char *path = test_write_file("named.ini", "[cluster]\nname = n\n"
                                                    "[node.0]\nname = \"Big Node; #1\"\n"
                                                    "gpus = titanv:1, p4000:1\ngpus.1 = titanv:2\n"
                                                    "devices = 3,2\ndevices.1 = 1,0\n");
    ck_assert_int_eq(hp_cluster_load(path, &db, &cl), 0);
    ck_assert_str_eq(cl.nodes[0].name, "Big Node; #1");
    ck_assert_int_eq(cl.ngpus, 4);
    for (int g = 0; g < 4; g++)
        ck_assert_int_eq(cl.gpus[g].index, 3 - g);
    ck_assert_str_eq(db.types[cl.gpus[1].type].name, "p4000");
    ck_assert_str_eq(db.types[cl.gpus[3].type].name, "titanv");
    hp_cluster_release(&cl);
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        path = test_write_file("bad-named.ini", bad[k].text);
        test_capture_begin();
        ck_assert_int_lt(hp_cluster_load(path, &db, &cl), 0);
        const char *err = test_capture_end();
        ck_assert_msg(strstr(err, bad[k].expect), "case %zu: '%s' lacks '%s'", k, err,
                      bad[k].expect);
    }
    hp_gpudb_release(&db);
}
END_TEST

/* rec DIR RANK STATUS SIGNAL BLAME WHY: a rank's exit record, as the rank writes it */
static void rec(const char *dir, int rank, int status, int sig, int blame, const char *why)
{
    struct hp_rank_exit e = {.status = status, .signal = sig, .blame = blame};

    snprintf(e.why, sizeof(e.why), "%s", why ? why : "");
    ck_assert_int_eq(hp_rank_exit_save(dir, rank, &e), 0);
}

/* How a launched job ended, from its ranks' records: the first failure is the blamed rank, a
 * rank without a record, or one that failed on its own, never the SIGTERM the others got. */
START_TEST(job_outcome)
{
    struct hp_outcome o;
    const char *dir = test_fresh_dir();

    ck_assert_int_eq(hp_outcome_read(dir, 4, &o), 0);
    ck_assert_int_eq(o.kind, HP_OUTCOME_NONE); /* no record: srun's status stands */
    rec(dir, 0, 0, 0, -1, NULL);
    rec(dir, 1, 75, 0, -1, NULL);
    ck_assert_int_eq(hp_outcome_read(dir, 2, &o), 0);
    ck_assert_int_eq(o.kind, HP_OUTCOME_STOPPED);
    ck_assert_int_eq(o.status, 75);
    ck_assert_int_eq(hp_outcome_read(dir, 1, &o), 0);
    ck_assert_int_eq(o.kind, HP_OUTCOME_DONE);
    ck_assert_int_eq(o.status, 0);
    /* rank 2 killed by SIGKILL (no record); 3 blames it, 0..1 succeeded */
    rec(dir, 3, 1, 0, 2, "exited");
    ck_assert_int_eq(hp_outcome_read(dir, 4, &o), 0);
    ck_assert_int_eq(o.kind, HP_OUTCOME_FAILED);
    ck_assert_int_eq(o.rank, 2);
    ck_assert_int_eq(o.status, 137);
    ck_assert_ptr_nonnull(strstr(o.cause, "was killed by SIGKILL (signal 9"));
    ck_assert_int_eq(o.failed, 2);
    test_remove_dir(dir);

    /* a chain: 0 and 1 blame 2, 2 blames 3, which was stopped; srun's SIGTERM to the rest */
    dir = test_fresh_dir();
    rec(dir, 0, 1, 0, 2, "exited");
    rec(dir, 1, 1, 0, 2, "exited");
    rec(dir, 2, 1, 0, 3, "stopped (SIGSTOP) for more than 2 s");
    rec(dir, 3, 143, 15, -1, NULL);
    rec(dir, 4, 143, 15, -1, NULL);
    ck_assert_int_eq(hp_outcome_read(dir, 5, &o), 0);
    ck_assert_int_eq(o.rank, 3);
    ck_assert_int_eq(o.status, 128 + SIGSTOP);
    ck_assert_ptr_nonnull(strstr(o.cause, "was stopped (SIGSTOP) for more than 2 s"));
    test_remove_dir(dir);

    /* no blame: the rank that failed on its own, not the ones srun terminated */
    dir = test_fresh_dir();
    rec(dir, 0, 143, 15, -1, NULL);
    rec(dir, 1, 3, 0, -1, NULL);
    rec(dir, 2, 143, 15, -1, NULL);
    ck_assert_int_eq(hp_outcome_read(dir, 3, &o), 0);
    ck_assert_int_eq(o.rank, 1);
    ck_assert_int_eq(o.status, 3);
    ck_assert_str_eq(o.cause, "failed with exit status 3");
    test_remove_dir(dir);

    /* a crash recorded by the rank's handler; a silent peer */
    dir = test_fresh_dir();
    rec(dir, 0, 143, 15, -1, NULL);
    rec(dir, 1, 139, 11, -1, NULL);
    ck_assert_int_eq(hp_outcome_read(dir, 2, &o), 0);
    ck_assert_int_eq(o.rank, 1);
    ck_assert_int_eq(o.status, 139);
    ck_assert_str_eq(o.cause, "was killed by SIGSEGV (signal 11)");
    rec(dir, 2, 1, 0, 0, "silent (no message within the deadline)");
    ck_assert_int_eq(hp_outcome_read(dir, 3, &o), 0);
    ck_assert_int_eq(o.rank, 0);
    ck_assert_int_eq(o.status, HP_EXIT_SILENT);
    test_remove_dir(dir);
}
END_TEST

/* Heartbeats: a rank is silent once its heartbeat, written in this launch, has not moved for
 * HP_SILENT_S, also when it never moved (stopped before its first beat was seen); a file an
 * earlier run left (older than the watch) is not, until it moves; nor is an ended rank; a
 * pause of the watcher itself times every rank afresh. */
START_TEST(heartbeat_watch)
{
    const char *dir = test_fresh_dir();
    char p0[4200], p1[4200], p2[4200];
    struct hp_watch w;
    double quiet = 0.0, t = 100.0;

    ck_assert_int_eq(hp_watch_init(&w, 3), 0);
    ck_assert_int_eq(hp_rank_beat_create(dir, 0, p0, sizeof(p0)), 0);
    ck_assert_int_eq(hp_rank_beat_create(dir, 1, p1, sizeof(p1)), 0);
    ck_assert_int_eq(hp_rank_beat_create(dir, 2, p2, sizeof(p2)), 0);
    ck_assert_int_eq(hp_rank_beat(p2, 99), 0); /* stale: an earlier run's, never moves */
    const struct timespec old[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    ck_assert_int_eq(utimensat(AT_FDCWD, p2, old, 0), 0);
    for (unsigned long n = 1; n <= 5; n++, t += 1.0) {
        hp_rank_beat(p0, n);
        hp_rank_beat(p1, n);
        ck_assert_int_eq(hp_watch_silent(&w, dir, t, &quiet), -1);
    }
    /* rank 1 stops; rank 0 beats on */
    for (unsigned long n = 6; t < 105.0 + HP_SILENT_S - 1.0; n++, t += 1.0) {
        hp_rank_beat(p0, n);
        ck_assert_int_eq(hp_watch_silent(&w, dir, t, &quiet), -1);
    }
    hp_rank_beat(p0, 1000);
    ck_assert_int_eq(hp_watch_silent(&w, dir, t, &quiet), 1); /* HP_SILENT_S since it moved */
    ck_assert(quiet >= HP_SILENT_S && quiet < HP_SILENT_S + 1.0);
    ck_assert_int_eq(hp_watch_silent(&w, dir, t + 0.5, &quiet), -1); /* once per HP_BEAT_S */
    /* the watcher paused (stopped itself): rank 1 is timed afresh */
    ck_assert_int_eq(hp_watch_silent(&w, dir, t + 10.0, &quiet), -1);
    for (double u = t + 11.0; u < t + 10.0 + HP_SILENT_S; u += 1.0) {
        hp_rank_beat(p0, (unsigned long)u);
        ck_assert_int_eq(hp_watch_silent(&w, dir, u, &quiet), -1);
    }
    hp_rank_beat(p0, 2000);
    ck_assert_int_eq(hp_watch_silent(&w, dir, t + 10.0 + HP_SILENT_S, &quiet), 1);
    /* an ended rank is not silent */
    rec(dir, 1, 0, 0, -1, NULL);
    hp_rank_beat(p0, 2001);
    ck_assert_int_eq(hp_watch_silent(&w, dir, t + 11.0 + HP_SILENT_S, &quiet), -1);
    hp_watch_release(&w);
    /* a rank stopped before the watch ever saw its heartbeat move: silent all the same */
    char p3[4200], d2[4200];
    snprintf(d2, sizeof(d2), "%s/again", dir);
    ck_assert_int_eq(mkdir(d2, 0700), 0);
    ck_assert_int_eq(hp_watch_init(&w, 4), 0);
    ck_assert_int_eq(hp_rank_beat_create(d2, 3, p3, sizeof(p3)), 0);
    ck_assert_int_eq(hp_rank_beat(p3, 7), 0);
    for (double u = 500.0; u < 500.0 + HP_SILENT_S; u += 1.0)
        ck_assert_int_eq(hp_watch_silent(&w, d2, u, &quiet), -1);
    ck_assert_int_eq(hp_watch_silent(&w, d2, 500.0 + HP_SILENT_S, &quiet), 3);
    test_remove_dir(d2);
    hp_watch_release(&w);
    test_remove_dir(dir);
}
END_TEST

Suite *suite_cluster(void)
{
    Suite *s = suite_create("cluster");
    TCase *t = tcase_create("cluster");

    tcase_add_test(t, site_config);
    tcase_add_test(t, defaults_and_case);
    tcase_add_test(t, default_path);
    tcase_add_loop_test(t, bad_conf_files, 0, (int)(sizeof(bad_confs) / sizeof(bad_confs[0])));
    tcase_add_test(t, shipped_clusters);
    tcase_add_test(t, paper_cluster);
    tcase_add_test(t, cluster_details);
    tcase_add_loop_test(t, bad_cluster_files, 0,
                        (int)(sizeof(bad_clusters) / sizeof(bad_clusters[0])));
    tcase_add_test(t, cluster_make);
    tcase_add_loop_test(t, gres_detail, 0, (int)(sizeof(gres_cases) / sizeof(gres_cases[0])));
    tcase_add_test(t, alloc_as_cluster);
    tcase_add_test(t, cluster_names_and_lists);
    tcase_add_test(t, job_outcome);
    tcase_add_test(t, heartbeat_watch);
    suite_add_tcase(s, t);
    /* 64,000 GPUs written and read three times: seconds, more under a sanitizer */
    t = tcase_create("extremes");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, alloc_extremes);
    suite_add_tcase(s, t);
    return s;
}
