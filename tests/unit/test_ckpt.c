/* test_ckpt.c - checkpoint files (common/ckptfile.h): parts round-trip with their checksums,
 * a changed or cut byte is found, the manifest is checked whole, the newest valid checkpoint is
 * found and old ones pruned, --checkpoint-every is parsed, plans are compared; and taking and
 * loading them by unit (runtime/ckpt.h): every rank's part written as a job writes it, loaded
 * back under the same plan exactly and under another plan unit by unit, where a run starts. */
#include "ckpt.h"
#include "ckptfile.h"
#include "ckptlock.h"
#include "cost.h"
#include "error.h"
#include "gpudb.h"
#include "planfile.h"
#include "planner.h"
#include "ps_store.h"
#include "suites.h"
#include "util.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A checkpoint directory DIR/ckpt-SEQ with one part (rank 0: two records), a plan.ini and a
 * manifest; its path in out. */
static void make_ckpt(const char *parent, long seq, char *out, size_t n)
{
    struct hp_ckpt_writer *w;
    struct hp_ckpt_info ci = {.seq = seq,
                              .nunits = 2,
                              .model_sig = 0x1234,
                              .seed = 7,
                              .batch = 64,
                              .ntrain = 6400,
                              .epochs = 3,
                              .epoch = 1,
                              .minibatch = 5,
                              .nvws = 1,
                              .nranks = 1,
                              .samples = 6720};
    float a[100];
    int64_t c[3] = {4, 5, 6};
    long got;
    char plan[4300];
    FILE *f;

    ck_assert_int_eq(hp_ckpt_new_dir(parent, seq - 1, &got, out, n), 0);
    ck_assert_int_eq(got, seq);
    for (int i = 0; i < 100; i++)
        a[i] = (float)i * 0.5f - 3.0f;
    ck_assert_int_eq(hp_ckpt_part_create(out, 0, &w), 0);
    ck_assert_int_eq(hp_ckpt_part_add(w, HP_CK_PARAMS, 0, 0, a, sizeof(a)), 0);
    ck_assert_int_eq(hp_ckpt_part_add(w, HP_CK_CLOCKS, 1, -1, c, sizeof(c)), 0);
    ci.names = calloc(2, sizeof(*ci.names));
    ci.bytes = calloc(2, sizeof(*ci.bytes));
    ci.crc = calloc(2, sizeof(*ci.crc));
    ck_assert_int_eq(hp_ckpt_part_close(w, &ci.bytes[0], &ci.crc[0]), 0);
    snprintf(ci.names[0], sizeof(ci.names[0]), "rank-0.part");
    snprintf(plan, sizeof(plan), "%s/src-plan.ini", parent);
    f = fopen(plan, "w");
    fputs("[plan]\nversion = 2\n", f);
    fclose(f);
    ck_assert_int_eq(hp_ckpt_copy_file(plan, out, "plan.ini", &ci.bytes[1], &ci.crc[1]), 0);
    snprintf(ci.names[1], sizeof(ci.names[1]), "plan.ini");
    ci.nfiles = 2;
    snprintf(ci.dir, sizeof(ci.dir), "%s", out);
    snprintf(ci.model, sizeof(ci.model), "cnn");
    snprintf(ci.reason, sizeof(ci.reason), "interval");
    ck_assert_int_eq(hp_ckpt_manifest_write(&ci), 0);
    hp_ckpt_info_release(&ci);
}

/* Remove what make_ckpt made under parent, and parent. */
static void cleanup(const char *parent)
{
    char path[4300];

    for (int seq = 1; seq <= 9; seq++) {
        snprintf(path, sizeof(path), "%s/ckpt-%d", parent, seq);
        hp_ckpt_remove(path);
    }
    snprintf(path, sizeof(path), "%s/src-plan.ini", parent);
    unlink(path);
    ck_assert_int_eq(rmdir(parent), 0);
}

static void flip_byte(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    int ch;

    ck_assert_ptr_nonnull(f);
    fseek(f, off, SEEK_SET);
    ch = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(ch ^ 0x40, f);
    fclose(f);
}

START_TEST(part_round_trip_and_corruption)
{
    const char *parent = test_fresh_dir();
    char dir[4200], path[4300], why[512];
    struct hp_ckpt_reader *r;
    struct hp_ckpt_info ci;
    float a[100];
    int64_t c[3];

    make_ckpt(parent, 3, dir, sizeof(dir));
    ck_assert_int_eq(hp_ckpt_check(dir, 1, &ci, why, sizeof(why)), 0);
    ck_assert_int_eq(ci.seq, 3);
    ck_assert_int_eq(ci.epoch, 1);
    ck_assert_int_eq(ci.minibatch, 5);
    ck_assert_int_eq(ci.samples, 6720);
    ck_assert_str_eq(ci.model, "cnn");
    ck_assert(ci.model_sig == 0x1234);
    hp_ckpt_info_release(&ci);

    ck_assert_int_eq(hp_ckpt_part_open(dir, 0, &r), 0);
    ck_assert(hp_ckpt_part_has(r, HP_CK_PARAMS, 0));
    ck_assert(!hp_ckpt_part_has(r, HP_CK_PARAMS, 1));
    ck_assert_int_eq(hp_ckpt_part_read(r, HP_CK_PARAMS, 0, a, sizeof(a)), 0);
    ck_assert(a[7] == 0.5f);
    ck_assert_int_eq(hp_ckpt_part_read(r, HP_CK_CLOCKS, 1, c, sizeof(c)), 0);
    ck_assert(c[2] == 6);
    test_capture_begin();
    ck_assert_int_eq(hp_ckpt_part_read(r, HP_CK_PARAMS, 0, a, sizeof(a) - 4), -HP_EDATA);
    ck_assert_int_eq(hp_ckpt_part_read(r, HP_CK_MOMENTUM, 0, a, sizeof(a)), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "has no momentum of unit 0"));
    hp_ckpt_part_close_reader(r);

    /* one changed bit in a record's payload: the record's CRC and the file's */
    snprintf(path, sizeof(path), "%s/rank-0.part", dir);
    flip_byte(path, 24 + 24 + 40);
    ck_assert_int_eq(hp_ckpt_check(dir, 0, &ci, why, sizeof(why)), 0); /* sizes only */
    hp_ckpt_info_release(&ci);
    ck_assert_int_eq(hp_ckpt_check(dir, 1, &ci, why, sizeof(why)), -HP_EDATA);
    ck_assert_str_eq(why, "rank-0.part fails its checksum (corrupt)");
    ck_assert_int_eq(hp_ckpt_part_open(dir, 0, &r), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_ckpt_part_read(r, HP_CK_PARAMS, 0, a, sizeof(a)), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "fail their checksum"));
    hp_ckpt_part_close_reader(r);

    /* cut short */
    ck_assert_int_eq(truncate(path, 60), 0);
    ck_assert_int_eq(hp_ckpt_check(dir, 0, &ci, why, sizeof(why)), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(why, "rank-0.part has 60 bytes, the manifest says"));
    test_capture_begin();
    ck_assert_int_eq(hp_ckpt_part_open(dir, 0, &r), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "is cut short"));
    cleanup(parent);
}
END_TEST

START_TEST(manifest_checked_whole)
{
    const char *parent = test_fresh_dir();
    char dir[4200], path[4300], why[512];
    struct hp_ckpt_info ci;
    FILE *f;

    make_ckpt(parent, 1, dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/manifest", dir);
    flip_byte(path, 60); /* inside the text: the checksum no longer matches */
    ck_assert_int_eq(hp_ckpt_check(dir, 0, &ci, why, sizeof(why)), -HP_EDATA);
    ck_assert_str_eq(why, "the checksum does not match its contents");
    /* no checksum line: an incomplete manifest */
    f = fopen(path, "w");
    fputs("format = 1\nseq = 1\n", f);
    fclose(f);
    ck_assert_int_eq(hp_ckpt_check(dir, 0, &ci, why, sizeof(why)), -HP_EDATA);
    ck_assert_str_eq(why, "no checksum line at the end (incomplete)");
    unlink(path);
    ck_assert_int_eq(hp_ckpt_check(dir, 0, &ci, why, sizeof(why)), -HP_EDATA);
    ck_assert_str_eq(why, "it has no manifest (an incomplete checkpoint)");
    cleanup(parent);
}
END_TEST

START_TEST(latest_and_prune)
{
    const char *parent = test_fresh_dir();
    char d1[4200], d2[4200], d3[4200], d4[4200], path[4300];
    struct hp_ckpt_info ci;
    struct stat st;

    make_ckpt(parent, 1, d1, sizeof(d1));
    make_ckpt(parent, 2, d2, sizeof(d2));
    make_ckpt(parent, 3, d3, sizeof(d3));
    make_ckpt(parent, 4, d4, sizeof(d4));
    snprintf(path, sizeof(path), "%s/manifest", d4);
    unlink(path); /* the newest is incomplete: not a checkpoint */
    ck_assert_int_eq(mkfifo(path, 0600), 0); /* and its "manifest" a FIFO: never waited on */
    test_capture_begin();
    ck_assert_int_eq(hp_ckpt_latest(parent, &ci), 0);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "ckpt-4 is not valid (skipped)"));
    ck_assert_int_eq(ci.seq, 3);
    hp_ckpt_info_release(&ci);
    hp_ckpt_prune(parent, 2);
    ck_assert_int_eq(stat(d3, &st), 0);
    ck_assert_int_eq(stat(d2, &st), 0);
    ck_assert_int_ne(stat(d1, &st), 0);
    ck_assert_int_eq(stat(d4, &st), 0); /* newer than the newest valid: may be being written */
    /* a new one goes after all of them */
    long seq;
    ck_assert_int_eq(hp_ckpt_new_dir(parent, 0, &seq, path, sizeof(path)), 0);
    ck_assert_int_eq(seq, 5);
    ck_assert_int_eq(hp_ckpt_latest("/nonexistent/hetpipe", &ci), 1);
    cleanup(parent);
}
END_TEST

/* A manifest at the extremes reads back: 70,000 ranks' parts (a plan may have 65,536 GPUs
 * and their shards), a model name with '=' and '#', under a directory whose name holds every
 * printable character but '/' and a line break (the manifest's comment stays one line). */
START_TEST(manifest_extremes)
{
    enum { RANKS = 70000 };
    const char *fresh = test_fresh_dir();
    char parent[3900], dir[4000], path[4300], why[512];
    struct hp_ckpt_info ci = {.seq = 1,
                              .nunits = 4096,
                              .model_sig = 0xfeedULL,
                              .batch = 32,
                              .nvws = 65536,
                              .nranks = RANKS,
                              .samples = 1};
    struct hp_ckpt_info back;
    size_t len = (size_t)snprintf(parent, sizeof(parent), "%s/", fresh);
    long seq;

    for (int c = ' '; c <= '~'; c++)
        if (c != '/')
            parent[len++] = (char)c;
    parent[len++] = '\n';
    snprintf(parent + len, sizeof(parent) - len, "end");
    ck_assert_int_eq(hp_ckpt_new_dir(parent, 0, &seq, dir, sizeof(dir)), 0);
    ci.names = calloc(RANKS + 1, sizeof(*ci.names));
    ci.bytes = calloc(RANKS + 1, sizeof(*ci.bytes));
    ci.crc = calloc(RANKS + 1, sizeof(*ci.crc));
    ck_assert(ci.names && ci.bytes && ci.crc);
    for (int r = 0; r <= RANKS; r++) {
        if (r < RANKS)
            snprintf(ci.names[r], sizeof(ci.names[r]), "rank-%d.part", r);
        else
            snprintf(ci.names[r], sizeof(ci.names[r]), "plan.ini");
        snprintf(path, sizeof(path), "%s/%s", dir, ci.names[r]);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f); /* empty: 0 bytes, CRC-32 0 */
    }
    ci.nfiles = RANKS + 1;
    snprintf(ci.dir, sizeof(ci.dir), "%s", dir);
    snprintf(ci.model, sizeof(ci.model), "my = model #2; v1.0 ");
    snprintf(ci.reason, sizeof(ci.reason), "signal");
    ck_assert_int_eq(hp_ckpt_manifest_write(&ci), 0);
    ck_assert_msg(hp_ckpt_check(dir, 1, &back, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(back.nfiles, RANKS + 1);
    ck_assert_int_eq(back.nranks, RANKS);
    ck_assert_int_eq(back.nvws, 65536);
    ck_assert_int_eq(back.nunits, 4096);
    ck_assert_str_eq(back.model, ci.model);
    ck_assert_str_eq(back.names[RANKS - 1], "rank-69999.part");
    hp_ckpt_info_release(&back);

    /* what no manifest line holds is refused, the manifest there kept */
    snprintf(ci.model, sizeof(ci.model), "two\nlines");
    test_capture_begin();
    ck_assert_int_eq(hp_ckpt_manifest_write(&ci), -HP_EINVAL);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "(one line)"));
    ck_assert_int_eq(hp_ckpt_check(dir, 0, &back, why, sizeof(why)), 0);
    hp_ckpt_info_release(&back);
    hp_ckpt_info_release(&ci);
    hp_ckpt_remove(dir);
    ck_assert_int_eq(rmdir(parent), 0);
    ck_assert_int_eq(rmdir(fresh), 0);
}
END_TEST

/* ---- taking and loading checkpoints by unit ---- */

/* The floats a test writes: which (1 parameters, 2 momentum, 3 statistics, 4 a shard's
 * global weights) of unit u, element i. */
static float val(int which, int u, size_t i)
{
    return (float)which * 1000.0f + (float)u * 10.0f + (float)(i % 7) * 0.25f;
}

struct job {
    struct hp_gpudb db;
    struct hp_cluster cl;
    struct hp_model *m;
    struct hp_cost cost;
    struct hp_plan p;
};

static void job_plan(struct job *j, const char *cluster)
{
    struct hp_options o = {
        .policy = HP_POLICY_ED, .placement = HP_PLACEMENT_DEFAULT, .batch = 64, .seed = 1};
    char path[256];

    memset(j, 0, sizeof(*j));
    ck_assert_int_eq(hp_gpudb_load("etc/hetpipe.conf", &j->db), 0);
    snprintf(path, sizeof(path), "etc/clusters/%s.ini", cluster);
    ck_assert_int_eq(hp_cluster_load(path, &j->db, &j->cl), 0);
    ck_assert_int_eq(hp_model_load("cnn", &j->m), 0);
    ck_assert_int_eq(hp_cost_init(&j->cost, j->m, &j->db, 64), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_plan_compute(&j->cost, &j->cl, &o, &j->p), 0);
    test_capture_end();
    snprintf(j->p.model, sizeof(j->p.model), "cnn");
}

static void job_release(struct job *j)
{
    hp_plan_release(&j->p);
    hp_cost_release(&j->cost);
    hp_model_destroy(j->m);
    hp_cluster_release(&j->cl);
    hp_gpudb_release(&j->db);
}

/* Host buffers for units [u0, u1) of m, filled with val() (or zeros). */
static struct hp_ckpt_units units_of(const struct hp_model *m, int u0, int u1, int vw, int fill)
{
    size_t np = 0, ns = 0;
    struct hp_ckpt_units u = {.model = m, .u0 = u0, .u1 = u1, .vw = vw};

    for (int k = u0; k < u1; k++) {
        np += m->units[k].nparams;
        ns += m->units[k].nstate;
    }
    u.params = calloc(np + 1, sizeof(float));
    u.momentum = calloc(np + 1, sizeof(float));
    u.state = calloc(ns + 1, sizeof(float));
    for (int k = u0, po = 0, so = 0; k < u1 && fill; k++) {
        for (size_t i = 0; i < m->units[k].nparams; i++) {
            u.params[po + i] = val(1, k, i);
            u.momentum[po + i] = val(2, k, i);
        }
        for (size_t i = 0; i < m->units[k].nstate; i++)
            u.state[so + i] = val(3, k, i);
        po += (int)m->units[k].nparams;
        so += (int)m->units[k].nstate;
    }
    return u;
}

static void units_free(struct hp_ckpt_units *u)
{
    free(u->params);
    free(u->momentum);
    free(u->state);
}

/* Unit by unit, the loaded floats are val(params_from, ...), val(2), val(3). */
static void units_check(const struct hp_ckpt_units *u, int params_from)
{
    for (int k = u->u0, po = 0, so = 0; k < u->u1; k++) {
        for (size_t i = 0; i < u->model->units[k].nparams; i++) {
            ck_assert(u->params[po + i] == val(params_from, k, i));
            ck_assert(u->momentum[po + i] == val(2, k, i));
        }
        for (size_t i = 0; i < u->model->units[k].nstate; i++)
            ck_assert(u->state[so + i] == val(3, k, i));
        po += (int)u->model->units[k].nparams;
        so += (int)u->model->units[k].nstate;
    }
}

/* Checkpoint 1 of a job under a's plan, every part written as its rank writes it, at epoch 1,
 * minibatch 5; shards with every unit's clock at 5. Its directory in dir. */
static void write_job_ckpt(struct job *a, const char *parent, char *dir, size_t n)
{
    struct hp_ckpt_info ci = {.seq = 1,
                              .nunits = a->m->nunits,
                              .model_sig = hp_ckpt_model_sig(a->m),
                              .seed = 1,
                              .batch = 64,
                              .ntrain = 6400,
                              .epochs = 3,
                              .epoch = 1,
                              .minibatch = 5,
                              .nvws = a->p.nvws,
                              .nranks = a->p.nranks};
    struct hp_ckpt_info chk;
    char plan[4300], why[512];
    long seq;

    ck_assert_int_eq(hp_ckpt_new_dir(parent, 0, &seq, dir, n), 0);
    ci.names = calloc((size_t)a->p.nranks + 1, sizeof(*ci.names));
    ci.bytes = calloc((size_t)a->p.nranks + 1, sizeof(*ci.bytes));
    ci.crc = calloc((size_t)a->p.nranks + 1, sizeof(*ci.crc));
    for (int r = 0; r < a->p.nranks; r++) {
        struct hp_ckpt_note note = {0};
        int v, s;
        if (hp_plan_rank_stage(&a->p, r, &v, &s) == 0) {
            const struct hp_stage_plan *st = &a->p.vws[v].stages[s];
            struct hp_ckpt_units u = units_of(a->m, st->u0, st->u1, v, 1);
            ck_assert_int_eq(hp_ckpt_write_units(dir, r, &u, &note), 0);
            units_free(&u);
        } else {
            struct hp_ps_store *store;
            ck_assert_int_eq(
                hp_ps_store_create(&a->p, a->m, r - hp_plan_first_shard(&a->p), &store), 0);
            for (int k = 0; k < a->m->nunits; k++) {
                float *g = hp_ps_store_unit(store, k);
                for (size_t i = 0; g && i < a->m->units[k].nparams; i++)
                    g[i] = val(4, k, i);
                for (int x = 0; g && x < a->p.nvws; x++)
                    *hp_ps_store_clock(store, x, k) = 5;
            }
            ck_assert_int_eq(hp_ckpt_write_shard(dir, r, &a->p, a->m, store, &note), 0);
            hp_ps_store_destroy(store);
        }
        snprintf(ci.names[r], sizeof(ci.names[r]), "rank-%d.part", r);
        ci.bytes[r] = note.bytes;
        ci.crc[r] = note.crc;
    }
    /* the plan copied in, as the reporter copies the job's */
    snprintf(plan, sizeof(plan), "%s/src-plan.ini", parent);
    ck_assert_int_eq(
        hp_planfile_save(plan, &a->p, &a->cl, &a->db, "0123456789abcdef0123456789abcdef"), 0);
    ck_assert_int_eq(
        hp_ckpt_copy_file(plan, dir, "plan.ini", &ci.bytes[a->p.nranks], &ci.crc[a->p.nranks]), 0);
    snprintf(ci.names[a->p.nranks], sizeof(ci.names[0]), "plan.ini");
    ci.nfiles = a->p.nranks + 1;
    snprintf(ci.dir, sizeof(ci.dir), "%s", dir);
    snprintf(ci.model, sizeof(ci.model), "cnn");
    snprintf(ci.reason, sizeof(ci.reason), "interval");
    ck_assert_int_eq(hp_ckpt_manifest_write(&ci), 0);
    hp_ckpt_info_release(&ci);
    ck_assert_int_eq(hp_ckpt_check(dir, 1, &chk, why, sizeof(why)), 0);
    hp_ckpt_info_release(&chk);
}

START_TEST(units_round_trip_and_replan)
{
    struct job a, b;
    struct hp_ckpt_source src;
    struct hp_ckpt_resume where;
    char parent[3000], dir[4096], path[4300];

    snprintf(parent, sizeof(parent), "%s", test_fresh_dir());
    job_plan(&a, "demo");   /* one VW of 4 stages and 4 shards: 8 ranks */
    job_plan(&b, "local4"); /* 4 VWs of one stage, 1 shard: 5 ranks */
    ck_assert_int_eq(a.p.nvws, 1);
    ck_assert_int_gt(a.p.vws[0].nstages, 1);
    ck_assert_int_gt(a.p.nshards, 0);
    ck_assert_int_eq(b.p.nvws, 4);
    write_job_ckpt(&a, parent, dir, sizeof(dir));

    /* the same plan: every rank its own part, exactly, where it stopped */
    ck_assert_int_eq(hp_ckpt_resume_open(dir, &a.db, a.m, &a.p, 100, 3, &src, &where), 0);
    ck_assert(where.exact && where.seq == 1 && where.epoch0 == 1 && where.nb0 == 5);
    ck_assert_int_eq(where.q0, 0);
    for (int s = 0; s < a.p.vws[0].nstages; s++) {
        const struct hp_stage_plan *st = &a.p.vws[0].stages[s];
        struct hp_ckpt_units u = units_of(a.m, st->u0, st->u1, 0, 0);
        ck_assert_int_eq(hp_ckpt_load_units(&src, &where, hp_plan_stage_rank(&a.p, 0, s), &u), 0);
        units_check(&u, 1);
        units_free(&u);
    }
    hp_ckpt_source_release(&src);
    for (int i = 0; i < a.p.nshards; i++) {
        struct hp_ps_store *store;
        ck_assert_int_eq(hp_ps_store_create(&a.p, a.m, i, &store), 0);
        ck_assert_int_eq(hp_ckpt_load_shard(dir, &a.db, &a.p, hp_plan_first_shard(&a.p) + i, store),
                         0);
        for (int k = 0; k < a.m->nunits; k++)
            if (hp_ps_store_holds(store, k)) {
                ck_assert(hp_ps_store_unit(store, k)[1] == val(4, k, 1));
                ck_assert_int_eq(*hp_ps_store_clock(store, 0, k), 5);
            }
        hp_ps_store_destroy(store);
    }

    /* another plan: each unit from the checkpoint's consensus (its shards' global weights),
     * momentum and statistics from VW v mod 1; the position in the new VWs' minibatches;
     * the shard's clocks start again */
    ck_assert_int_eq(hp_ckpt_resume_open(dir, &b.db, b.m, &b.p, 25, 3, &src, &where), 0);
    ck_assert(!where.exact && where.epoch0 == 1 && where.nb0 == 5 * 1 / 4);
    ck_assert_int_eq(where.q0, 1 * 25 + 1);
    for (int v = 0; v < b.p.nvws; v++) {
        const struct hp_stage_plan *st = &b.p.vws[v].stages[0];
        struct hp_ckpt_units u = units_of(b.m, st->u0, st->u1, v, 0);
        ck_assert_int_eq(hp_ckpt_load_units(&src, &where, hp_plan_stage_rank(&b.p, v, 0), &u), 0);
        units_check(&u, 4);
        units_free(&u);
    }
    hp_ckpt_source_release(&src);
    struct hp_ps_store *store;
    ck_assert_int_eq(hp_ps_store_create(&b.p, b.m, 0, &store), 0);
    ck_assert_int_eq(hp_ckpt_load_shard(dir, &b.db, &b.p, hp_plan_first_shard(&b.p), store), 0);
    for (int k = 0; k < b.m->nunits; k++)
        if (hp_ps_store_holds(store, k)) {
            ck_assert(hp_ps_store_unit(store, k)[2] == val(4, k, 2));
            ck_assert_int_eq(*hp_ps_store_clock(store, 3, k), 0);
        }
    hp_ps_store_destroy(store);

    /* nothing left to train, and another job's checkpoint: refused, naming why */
    test_capture_begin();
    ck_assert_int_eq(hp_ckpt_resume_open(dir, &a.db, a.m, &a.p, 100, 1, &src, &where), -HP_EINVAL);
    hp_ckpt_source_release(&src);
    a.p.opts.seed = 2;
    ck_assert_int_eq(hp_ckpt_resume_open(dir, &a.db, a.m, &a.p, 100, 3, &src, &where), -HP_EDATA);
    hp_ckpt_source_release(&src);
    const char *err = test_capture_end();
    ck_assert_ptr_nonnull(strstr(err, "--epochs 1 leaves nothing to train"));
    ck_assert_ptr_nonnull(strstr(err, "was taken for model 'cnn' with --seed 1"));

    snprintf(path, sizeof(path), "%s/src-plan.ini", parent);
    unlink(path);
    hp_ckpt_remove(dir);
    rmdir(parent);
    job_release(&a);
    job_release(&b);
}
END_TEST

/* A child that holds parent's lock as a job of Slurm job `slurm` ("" for none) for hold_ms,
 * then ends (hold_ms < 0: until killed); the test goes on once it holds it. */
static pid_t lock_holder(const char *parent, const char *slurm, int hold_ms)
{
    int p[2];
    char c;

    ck_assert_int_eq(pipe(p), 0);
    const pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char why[1200];
        if (slurm[0])
            setenv("SLURM_JOB_ID", slurm, 1);
        else
            unsetenv("SLURM_JOB_ID");
        if (hp_ckpt_parent_lock(parent, 0, why, sizeof(why)))
            _exit(1);
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        if (hold_ms < 0)
            pause();
        usleep((useconds_t)hold_ms * 1000);
        _exit(0);
    }
    close(p[1]);
    ck_assert_int_eq(read(p[0], &c, 1), 1);
    close(p[0]);
    return pid;
}

/* The lock of a checkpoint directory: a second job is refused naming the first; a killed
 * holder leaves it free; an earlier run of the same Slurm job (requeued) is waited for, within
 * the deadline; a regular file is no directory. */
START_TEST(directory_lock_and_owner)
{
    const char *dir = test_fresh_dir();
    char parent[4200], file[4200], why[1200];
    int st;

    snprintf(parent, sizeof(parent), "%s/ck", dir);
    ck_assert_int_eq(hp_ckpt_parent_check(parent, why, sizeof(why)), 0); /* not there yet */
    unsetenv("SLURM_JOB_ID");
    pid_t a = lock_holder(parent, "", -1);
    ck_assert_int_eq(hp_ckpt_parent_check(parent, why, sizeof(why)), -HP_EBUSY);
    ck_assert_msg(strstr(why, "it is in use by another job (job ") && strstr(why, "pid "),
                  "why: %s", why);
    ck_assert_int_eq(hp_ckpt_parent_lock(parent, 2000, why, sizeof(why)), -HP_EBUSY);
    kill(a, SIGKILL); /* a killed job holds nothing */
    waitpid(a, &st, 0);
    ck_assert_int_eq(hp_ckpt_parent_check(parent, why, sizeof(why)), 0);
    ck_assert_int_eq(hp_ckpt_parent_lock(parent, 0, why, sizeof(why)), 0);
    hp_ckpt_parent_unlock();

    /* a job that ends within a moment (just killed: its files not yet closed) is no other job */
    a = lock_holder(parent, "", 800);
    ck_assert_int_eq(hp_ckpt_parent_check(parent, why, sizeof(why)), 0);
    waitpid(a, &st, 0);

    /* Slurm job 77 requeued: its earlier run ends 3 s later; waited for */
    a = lock_holder(parent, "77", 3000);
    setenv("SLURM_JOB_ID", "78", 1);
    ck_assert_int_eq(hp_ckpt_parent_check(parent, why, sizeof(why)), -HP_EBUSY);
    ck_assert_ptr_nonnull(strstr(why, ", Slurm job 77)"));
    setenv("SLURM_JOB_ID", "77", 1);
    ck_assert_int_eq(hp_ckpt_parent_check(parent, why, sizeof(why)), 0);
    ck_assert_int_eq(hp_ckpt_parent_lock(parent, 6000, why, sizeof(why)), 0);
    hp_ckpt_parent_unlock();
    waitpid(a, &st, 0);
    /* ... but not past the deadline */
    a = lock_holder(parent, "77", -1);
    ck_assert_int_eq(hp_ckpt_parent_lock(parent, 300, why, sizeof(why)), -HP_EBUSY);
    kill(a, SIGKILL);
    waitpid(a, &st, 0);
    unsetenv("SLURM_JOB_ID");

    snprintf(file, sizeof(file), "%s/file", dir);
    FILE *f = fopen(file, "w");
    fclose(f);
    ck_assert_int_eq(hp_ckpt_parent_check(file, why, sizeof(why)), -HP_EINVAL);
    ck_assert_str_eq(why, "it is a regular file, not a directory");
    ck_assert_int_eq(hp_ckpt_parent_lock(file, 0, why, sizeof(why)), -HP_EINVAL);
    test_remove_dir(dir);
}
END_TEST

Suite *suite_ckpt(void)
{
    Suite *s = suite_create("ckpt");
    TCase *tc = tcase_create("files");

    /* a real job's parts, fsync()ed: seconds on a loaded machine (Check's default is 4 s) */
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, part_round_trip_and_corruption);
    tcase_add_test(tc, manifest_checked_whole);
    tcase_add_test(tc, latest_and_prune);
    tcase_add_test(tc, units_round_trip_and_replan);
    suite_add_tcase(s, tc);
    /* 70,000 files made and checked: seconds, more under a sanitizer */
    tc = tcase_create("extremes");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, manifest_extremes);
    tcase_add_test(tc, directory_lock_and_owner);
    suite_add_tcase(s, tc);
    return s;
}
