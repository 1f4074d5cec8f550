/* test_ps.c - a parameter-server shard's rules without a job (runtime/ps_store.h): it starts
 * from the weights every worker starts from, applies a push only as the next wave of every
 * unit it carries, answers a pull only once every VW has pushed its threshold, and says what
 * its weights hold. */
#include "suites.h"
#include "util.h"

#include "backend.h"
#include "error.h"
#include "model.h"
#include "net.h"
#include "plan.h"
#include "ps_store.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* A plan of nvws VWs over `model`'s units, the units placed on two shards in turn (what the
 * store reads: units, their shards, VWs, the seed). */
struct two_shards {
    struct hp_plan p;
    int unit_shard[64];
};

static void plan_init(struct two_shards *t, const struct hp_model *m, int nvws)
{
    memset(t, 0, sizeof(*t));
    t->p.nunits = m->nunits;
    t->p.nvws = nvws;
    t->p.nshards = 2;
    t->p.unit_shard = t->unit_shard;
    t->p.opts.seed = 1;
    for (int u = 0; u < m->nunits; u++)
        t->unit_shard[u] = u % 2;
}

START_TEST(starts_where_the_workers_start)
{
    struct hp_model *m;
    struct two_shards t;
    struct hp_backend *be;
    struct hp_net *net;
    const struct hp_net_config cfg = {.batch = 1, .nslots = 1};

    ck_assert_int_eq(hp_model_load("cnn", &m), 0);
    plan_init(&t, m, 2);
    ck_assert_int_eq(hp_backend_cpu_create(&be), 0);
    ck_assert_int_eq(hp_net_create(be, m, 0, m->nunits, &cfg, &net), 0);
    ck_assert_int_eq(hp_net_init_params(net, 1), 0);
    const float *w = hp_net_params(net);
    for (int i = 0; i < 2; i++) {
        struct hp_ps_store *st;
        size_t off = 0;
        ck_assert_int_eq(hp_ps_store_create(&t.p, m, i, &st), 0);
        for (int u = 0; u < m->nunits; u++) {
            const int held = u % 2 == i && m->units[u].nparams > 0;
            ck_assert_int_eq(hp_ps_store_holds(st, u), held);
            if (held)
                ck_assert_mem_eq(hp_ps_store_unit(st, u), w + off,
                                 m->units[u].nparams * sizeof(float));
            off += m->units[u].nparams;
        }
        hp_ps_store_destroy(st);
    }
    hp_net_destroy(net);
    hp_backend_destroy(be);
    hp_model_destroy(m);
}
END_TEST

START_TEST(applies_in_order_and_serves_at_thresholds)
{
    struct hp_model *m;
    struct two_shards t;
    struct hp_ps_store *st;
    char why[256];
    int64_t mm[6];

    ck_assert_int_eq(hp_model_load("cnn", &m), 0);
    plan_init(&t, m, 3);
    ck_assert_int_eq(hp_ps_store_create(&t.p, m, 0, &st), 0);
    /* a stage of units [0, 4): the units held here are 0 and 2 */
    const size_t n = hp_ps_store_floats(st, 0, 4);
    ck_assert_uint_eq(n, m->units[0].nparams + m->units[2].nparams);
    float *delta = malloc(n * sizeof(float)), *before = malloc(n * sizeof(float));
    float *after = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        delta[i] = 0.5f;
    hp_ps_store_pack(st, 0, 4, before);
    /* VW 1 pushes waves 0 and 1: added, clocks 2 */
    ck_assert_int_eq(hp_ps_store_apply(st, 1, 0, 4, 0, delta, why, sizeof(why)), 0);
    ck_assert_int_eq(hp_ps_store_apply(st, 1, 0, 4, 1, delta, why, sizeof(why)), 0);
    hp_ps_store_pack(st, 0, 4, after);
    for (size_t i = 0; i < n; i++)
        ck_assert(after[i] == (before[i] + 0.5f) + 0.5f);
    ck_assert_int_eq(*hp_ps_store_clock(st, 1, 0), 2);
    ck_assert_int_eq(*hp_ps_store_clock(st, 1, 2), 2);
    ck_assert_int_eq(*hp_ps_store_clock(st, 0, 0), 0);
    /* a wave pushed twice, or one skipped: refused, nothing applied */
    ck_assert_int_eq(hp_ps_store_apply(st, 1, 0, 4, 1, delta, why, sizeof(why)), -HP_EPROTOCOL);
    ck_assert_ptr_nonnull(strstr(why, "pushed wave 1 of unit 0, whose next wave is 2"));
    ck_assert_int_eq(hp_ps_store_apply(st, 1, 0, 4, 3, delta, why, sizeof(why)), -HP_EPROTOCOL);
    hp_ps_store_pack(st, 0, 4, before);
    ck_assert_mem_eq(before, after, n * sizeof(float));
    ck_assert_int_eq(*hp_ps_store_clock(st, 1, 0), 2);
    /* a pull of thresholds (0, 2, 0) is ready; (1, 2, 0) waits for VW 0 */
    const int64_t ready[3] = {0, 2, 0}, waits[3] = {1, 2, 0};
    ck_assert(hp_ps_store_ready(st, 0, 4, ready));
    ck_assert(!hp_ps_store_ready(st, 0, 4, waits));
    /* a stage whose units here are behind by a unit pushed by another stage of VW 0 */
    ck_assert_int_eq(hp_ps_store_apply(st, 0, 0, 1, 0, delta, why, sizeof(why)), 0);
    ck_assert(!hp_ps_store_ready(st, 0, 4, waits)); /* unit 2 of VW 0 still at 0 */
    ck_assert(hp_ps_store_ready(st, 0, 1, waits));
    /* what the weights hold: per VW the smallest and largest clock, the global clock */
    ck_assert_int_eq(hp_ps_store_view(st, 0, 4, mm), 0);
    ck_assert(mm[0] == 0 && mm[1] == 1 && mm[2] == 2 && mm[3] == 2 && mm[4] == 0 && mm[5] == 0);
    free(delta);
    free(before);
    free(after);
    hp_ps_store_destroy(st);
    hp_model_destroy(m);
}
END_TEST

Suite *suite_ps(void)
{
    Suite *s = suite_create("ps");
    TCase *tc = tcase_create("store");

    tcase_add_test(tc, starts_where_the_workers_start);
    tcase_add_test(tc, applies_in_order_and_serves_at_thresholds);
    suite_add_tcase(s, tc);
    return s;
}
