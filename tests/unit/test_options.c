/* test_options.c - the options table of record (common/options.def, common/options.c): its
 * rows, the --hetpipe-* option rules and their boundaries, the typed values (--checkpoint-every,
 * --resume), the HETPIPE_* variables read through their rows, the plugstack.conf arguments that
 * set the site's limits and defaults, and command lines through the table (common/cli.c). */
#include "suites.h"
#include "util.h"

#include "cli.h"
#include "options.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[4096];

/* check o's value under l (files checked); 0 or -1 */
static int chk(enum hp_opt o, const char *value, const struct hp_optlimits *l)
{
    char what[64];

    snprintf(what, sizeof(what), "--hetpipe-%s", hp_opts[o].flag);
    return hp_opt_check(o, what, value, l, 1, err, sizeof(err));
}

#define ASSERT_OK(o, v, l) ck_assert_msg(chk((o), (v), (l)) == 0, "'%s' refused: %s", (v), err)
#define ASSERT_BAD(o, v, l)                                                                        \
    do {                                                                                           \
        ck_assert_msg(chk((o), (v), (l)) == -1, "'%s' accepted", (v));                             \
        ck_assert_msg(strstr(err, "--hetpipe-") != NULL, "no option in '%s'", err);                \
    } while (0)

/* The job options are the rows flagged HP_OPTF_JOB, each with a flag and the variable named
 * after it; every other variable is a row too, with a flag or without. */
START_TEST(table_names_and_env)
{
    static const char *const names[] = {"policy",          "placement",
                                        "staleness",       "nm",
                                        "recompute",       "model",
                                        "batch",           "epochs",
                                        "checkpoint-dir",  "checkpoint-every",
                                        "checkpoint-keep", "checkpoint-write",
                                        "resume",          "timeline",
                                        "dry-run",         "emulate",
                                        "optimizer"};
    static const char *const envs[] = {"HETPIPE_POLICY",          "HETPIPE_PLACEMENT",
                                       "HETPIPE_STALENESS",       "HETPIPE_NM",
                                       "HETPIPE_RECOMPUTE",       "HETPIPE_MODEL",
                                       "HETPIPE_BATCH",           "HETPIPE_EPOCHS",
                                       "HETPIPE_CHECKPOINT_DIR",  "HETPIPE_CHECKPOINT_EVERY",
                                       "HETPIPE_CHECKPOINT_KEEP", "HETPIPE_CHECKPOINT_WRITE",
                                       "HETPIPE_RESUME",          "HETPIPE_TIMELINE",
                                       "HETPIPE_DRY_RUN",         "HETPIPE_EMULATE",
                                       "HETPIPE_OPTIMIZER"};
    size_t njob = 0;

    for (int o = 0; o < HP_OPT_COUNT; o++) {
        const struct hp_opt_info *r = &hp_opts[o];
        if (!hp_opt_is_job((enum hp_opt)o)) {
            ck_assert_msg(r->flag || r->env, "row %d has neither a flag nor a variable", o);
            continue;
        }
        ck_assert_uint_lt(njob, sizeof(names) / sizeof(names[0]));
        ck_assert_str_eq(r->flag, names[njob]);
        ck_assert_str_eq(r->env, envs[njob]);
        ck_assert_uint_eq(r->env_cmds, 1u << HP_CMD_LAUNCH); /* where the plugin sets them */
        ck_assert_ptr_nonnull(r->help);
        if (o == HP_OPT_DRY_RUN)
            ck_assert_ptr_null(r->arg);
        else
            ck_assert_ptr_nonnull(r->arg);
        njob++;
    }
    ck_assert_uint_eq(njob, sizeof(names) / sizeof(names[0]));
    ck_assert_str_eq(hp_opts[HP_OPT_POLICY].arg, "auto|np|ed|hd|dp");
    /* variables of options that are not job options, and variables alone */
    ck_assert_str_eq(hp_opts[HP_OPT_RANK].env, "HETPIPE_RANK");
    ck_assert_str_eq(hp_opts[HP_OPT_RANK].flag, "rank");
    ck_assert_str_eq(hp_opts[HP_OPT_BOOT_DIR].env, "HETPIPE_BOOT_DIR");
    ck_assert_str_eq(hp_opts[HP_OPT_CONFIG].env, "HETPIPE_CONF");
    ck_assert_ptr_null(hp_opts[HP_OPT_BINDING].flag);
    ck_assert_str_eq(hp_opts[HP_OPT_BINDING].env, "HETPIPE_BINDING");
    ck_assert_str_eq(hp_opts[HP_OPT_LOG_LEVEL].env, "HETPIPE_LOG");
    /* a variable names one row */
    for (int o = 0; o < HP_OPT_COUNT; o++)
        for (int p = o + 1; p < HP_OPT_COUNT; p++)
            ck_assert_msg(!hp_opts[o].env || !hp_opts[p].env ||
                              strcmp(hp_opts[o].env, hp_opts[p].env) != 0,
                          "%s is two rows", hp_opts[o].env);
}
END_TEST

/* The size of a value of type t (what HP_OPT_CTYPE_##t is). */
static size_t type_size(enum hp_opt_type t)
{
    switch (t) {
    case HP_OT_REAL:
        return sizeof(double);
    case HP_OT_TEXT:
    case HP_OT_MODEL:
        return sizeof(const char *);
    case HP_OT_EVERY:
        return sizeof(struct hp_opt_every);
    case HP_OT_AUTOPATH:
        return sizeof(struct hp_opt_autopath);
    default:
        return sizeof(long);
    }
}

/* a's and b's values of option o are the same */
static int same_value(const struct hp_options *a, const struct hp_options *b, enum hp_opt o)
{
    const char *x = (const char *)a + hp_opts[o].offset, *y = (const char *)b + hp_opts[o].offset;
    const char *s, *u;
    struct hp_opt_every e, f;
    struct hp_opt_autopath p, q;

    switch (hp_opts[o].type) {
    case HP_OT_TEXT:
    case HP_OT_MODEL:
        memcpy(&s, x, sizeof(s));
        memcpy(&u, y, sizeof(u));
        return s && u && strcmp(s, u) == 0;
    case HP_OT_EVERY:
        memcpy(&e, x, sizeof(e));
        memcpy(&f, y, sizeof(f));
        return e.samples == f.samples && e.seconds == f.seconds;
    case HP_OT_AUTOPATH:
        memcpy(&p, x, sizeof(p));
        memcpy(&q, y, sizeof(q));
        return p.automatic == q.automatic &&
               (p.path == q.path || (p.path && q.path && strcmp(p.path, q.path) == 0));
    default:
        return memcmp(x, y, type_size(hp_opts[o].type)) == 0;
    }
}

/* A default parses under the row's hard limits and survives format -> parse. */
static void default_round_trips(enum hp_opt o, enum hp_cmd c)
{
    const struct hp_opt_info *r = &hp_opts[o];
    const char *d = hp_opt_default(o, c);
    struct hp_options x, y;
    char err2[1024], buf[4200];

    if (!d || !*d || r->type == HP_OT_FLAG)
        return;
    hp_options_init(&x, HP_CMD_RANK);
    ck_assert_msg(hp_opt_set(&x, o, "default", d, NULL, 0, err2, sizeof(err2)) == 0,
                  "row %d's default '%s' for command %d: %s", o, d, c, err2);
    ck_assert_int_eq(hp_opt_format(&x, o, buf, sizeof(buf)), 0);
    y = x;
    ck_assert_int_eq(hp_opt_set(&y, o, "default", buf, NULL, 0, err2, sizeof(err2)), 0);
    ck_assert_msg(same_value(&x, &y, o), "row %d: '%s' does not read back", o, buf);
}

/* Every row is whole, its value's field is of its type, a command's flags are distinct, and
 * every default a command gets is allowed by the row's own hard limits and survives format ->
 * parse. */
START_TEST(table_rows_are_consistent)
{
    for (int o = 0; o < HP_OPT_COUNT; o++) {
        const struct hp_opt_info *r = &hp_opts[o];
        ck_assert_msg(r->help && (r->flag || r->env), "row %d is not whole", o);
        ck_assert_msg(r->flag ? r->cmds != 0 : r->cmds == 0, "row %d: cmds without a flag", o);
        ck_assert_msg(r->env || !r->env_cmds, "row %d: env_cmds without a variable", o);
        ck_assert_msg(!r->env || strncmp(r->env, "HETPIPE_", 8) == 0, "row %d: %s", o, r->env);
        ck_assert_msg(!hp_opt_is_job((enum hp_opt)o) || (r->flag && r->env), "job row %d", o);
        ck_assert_msg((r->type == HP_OT_FLAG) == (r->arg == NULL), "row %d: arg", o);
        ck_assert_msg(r->type != HP_OT_WORD || r->words, "row %d: words", o);
        ck_assert_msg(r->size == type_size(r->type), "row %d: a field of another type", o);
        ck_assert_msg(r->offset + r->size <= offsetof(struct hp_options, given), "row %d", o);
        if (!r->flag)
            default_round_trips((enum hp_opt)o, HP_CMD_RANK);
        for (int c = 0; c < HP_CMD_COUNT; c++) {
            if (!(r->cmds & (1u << c)))
                continue;
            ck_assert_int_eq(hp_opt_find(r->flag, (enum hp_cmd)c), o);
            default_round_trips((enum hp_opt)o, (enum hp_cmd)c);
        }
    }
}
END_TEST

/* Reals go to the ranks as text that reads back to the same double. */
START_TEST(reals_round_trip)
{
    static const double values[] = {0.05, 0.1 + 0.2, 1e-8, 0.999, 1.0 / 3.0, 86400, 5e-4};
    struct hp_options o, back;
    char buf[64];

    hp_options_init(&o, HP_CMD_RUN);
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        o.lr = values[i] < 10 ? values[i] : 1.0;
        ck_assert_int_eq(hp_opt_format(&o, HP_OPT_LR, buf, sizeof(buf)), 0);
        back = o;
        ck_assert_int_eq(hp_opt_set(&back, HP_OPT_LR, "--lr", buf, NULL, 0, err, sizeof(err)), 0);
        ck_assert_msg(back.lr == o.lr, "%.17g -> '%s' -> %.17g", o.lr, buf, back.lr);
    }
    ck_assert_int_eq(hp_opt_format(&o, HP_OPT_DATA, buf, sizeof(buf)), 1); /* no value */
    o.emulate = -1;
    ck_assert_int_eq(hp_opt_format(&o, HP_OPT_EMULATE, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "auto");
    o.nm = 0;
    ck_assert_int_eq(hp_opt_format(&o, HP_OPT_NM, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "auto");
    ck_assert_int_eq(hp_opt_format(&o, HP_OPT_STALENESS, buf, 1), -1); /* does not fit */
}
END_TEST

/* A command line through the table: values, errors that name the option, --help, the
 * arguments run hands on to the ranks (which read them back to the same values). */
START_TEST(command_lines)
{
    char *ok_av[] = {"run", "--local",    "--lr=0.01", "--staleness", "3", "--emulate",
                     "off", "--no-stash", "--data",    "/d d",        NULL};
    struct hp_options o, r;
    const char *av[64];
    char store[4096];
    int rest = -1, ac = 1;

    hp_options_init(&o, HP_CMD_RUN);
    ck_assert_int_eq(hp_cli_parse(HP_CMD_RUN, "", 10, ok_av, &o, &rest), 0);
    ck_assert_int_eq(rest, 10);
    ck_assert(o.local && o.no_stash && o.given[HP_OPT_LR] && !o.given[HP_OPT_MOMENTUM]);
    ck_assert_double_eq(o.lr, 0.01);
    ck_assert_int_eq(o.staleness, 3);
    ck_assert_double_eq(o.emulate, 0.0);
    ck_assert_int_eq(o.policy, 2); /* run's default: ed */
    av[0] = "hetpipe-rank";
    ck_assert_int_eq(hp_cli_rank_args(&o, HP_CMD_RUN, av, &ac, 64, store, sizeof(store)), 0);
    ck_assert_ptr_null(av[ac]);
    hp_options_init(&r, HP_CMD_RANK);
    ck_assert_int_eq(hp_cli_parse(HP_CMD_RANK, "", ac, (char **)av, &r, &rest), 0);
    ck_assert_double_eq(r.lr, o.lr);
    ck_assert_str_eq(r.data, "/d d");
    ck_assert_int_eq(r.no_stash, 1);
    ck_assert_int_eq(r.epochs, o.epochs);
    ck_assert_int_eq(r.device, o.device);
    ck_assert_int_eq(r.given[HP_OPT_STALENESS], 0); /* a plan option: not handed on */

    static const struct {
        const char *arg, *expect;
    } bad[] = {
        {"--batch=0", "--batch=0: must be an integer from 1 to 65536"},
        {"--lr=abc", "--lr=abc: must be a number from 1e-08 to 10"},
        {"--policy=fast", "--policy=fast: unknown policy; allowed: auto, np, ed, hd, dp"},
        {"--nm=0", "--nm=0: must be auto or an integer from 1 to 1024"},
        {"--bogus", "run: unknown option '--bogus' (see hetpipe run --help)"},
        {"--rank=1", "run: unknown option '--rank=1'"},
        {"--local=1", "option '--local' takes no value"},
        {"--lr", "option '--lr' needs a value"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *av2[] = {"run", (char *)bad[i].arg, NULL};
        hp_options_init(&o, HP_CMD_RUN);
        test_capture_begin();
        ck_assert_int_eq(hp_cli_parse(HP_CMD_RUN, "", 2, av2, &o, &rest), -1);
        const char *msg = test_capture_end();
        ck_assert_msg(strstr(msg, bad[i].expect) != NULL, "%s: '%s'", bad[i].arg, msg);
    }
}
END_TEST

/* launch takes a job option from HETPIPE_* unless the command line gives it, and names the
 * variable of a bad value. */
START_TEST(environment_of_a_job)
{
    char *av[] = {"launch", "--batch", "16", NULL};
    struct hp_options o;
    int rest;

    setenv("HETPIPE_BATCH", "8", 1);
    setenv("HETPIPE_STALENESS", "5", 1);
    setenv("HETPIPE_DRY_RUN", "1", 1);
    hp_options_init(&o, HP_CMD_LAUNCH);
    ck_assert_int_eq(hp_cli_parse(HP_CMD_LAUNCH, "", 3, av, &o, &rest), 0);
    ck_assert_int_eq(hp_cli_from_env(&o, HP_CMD_LAUNCH), 0);
    ck_assert_int_eq(o.batch, 16);
    ck_assert_int_eq(o.staleness, 5);
    ck_assert_int_eq(o.dry_run, 1);
    ck_assert_int_eq(o.epochs, 1); /* launch's default */
    setenv("HETPIPE_STALENESS", "-1", 1);
    hp_options_init(&o, HP_CMD_LAUNCH);
    test_capture_begin();
    ck_assert_int_eq(hp_cli_from_env(&o, HP_CMD_LAUNCH), -1);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "HETPIPE_STALENESS=-1: must be an integer"));
    unsetenv("HETPIPE_BATCH");
    unsetenv("HETPIPE_STALENESS");
    unsetenv("HETPIPE_DRY_RUN");
}
END_TEST

START_TEST(limits_defaults)
{
    struct hp_optlimits l;

    hp_optlimits_init(&l, 1);
    ck_assert_uint_eq(l.words[HP_OPT_POLICY], ~0u);
    ck_assert_int_eq(l.max[HP_OPT_STALENESS], 64);
    ck_assert_int_eq(l.max[HP_OPT_NM], 64);
    ck_assert_int_eq(l.max[HP_OPT_BATCH], 65536);
    ck_assert_int_eq(l.max[HP_OPT_EPOCHS], 10000);
    ck_assert_str_eq(l.models_dir, HP_DATADIR "/models");
    ck_assert_str_eq(l.config, HP_SYSCONFDIR "/hetpipe.conf");
    ck_assert_int_eq(l.config_given, 0);
    for (int o = 0; o < HP_OPT_COUNT; o++)
        ck_assert_ptr_null(l.defaults[o]);
    hp_optlimits_init(&l, 0); /* the hard limits */
    ck_assert_int_eq(l.max[HP_OPT_STALENESS], 1000000);
    ck_assert_int_eq(l.max[HP_OPT_NM], 1024);
}
END_TEST

START_TEST(policy_and_placement)
{
    struct hp_optlimits l;

    hp_optlimits_init(&l, 1);
    for (const char *const *p = (const char *const[]){"auto", "np", "ed", "hd", "dp", NULL}; *p;
         p++)
        ASSERT_OK(HP_OPT_POLICY, *p, &l);
    ASSERT_BAD(HP_OPT_POLICY, "fast", &l);
    ck_assert_str_eq(err, "--hetpipe-policy=fast: unknown policy; allowed: auto, np, ed, hd, dp");
    ASSERT_BAD(HP_OPT_POLICY, "", &l);
    ASSERT_BAD(HP_OPT_POLICY, "ED", &l);
    ASSERT_BAD(HP_OPT_POLICY, "ed ", &l);
    ck_assert_int_eq(hp_opt_check(HP_OPT_POLICY, "x", NULL, &l, 0, err, sizeof(err)), -1);

    ASSERT_OK(HP_OPT_PLACEMENT, "local", &l);
    ASSERT_OK(HP_OPT_PLACEMENT, "default", &l);
    ASSERT_BAD(HP_OPT_PLACEMENT, "near", &l);
    ck_assert_str_eq(err, "--hetpipe-placement=near: unknown placement; allowed: default, local");
    ASSERT_BAD(HP_OPT_PLACEMENT, "", &l);

    for (const char *const *p = (const char *const[]){"auto", "never", "always", NULL}; *p; p++)
        ASSERT_OK(HP_OPT_RECOMPUTE, *p, &l);
    ASSERT_BAD(HP_OPT_RECOMPUTE, "sometimes", &l);
    ck_assert_msg(strstr(err, "--hetpipe-recompute=sometimes") &&
                      strstr(err, "auto, never, always"),
                  "%s", err);
    ASSERT_BAD(HP_OPT_RECOMPUTE, "yes", &l);
}
END_TEST

/* The integer rules at their boundaries, and every way a number can be malformed. */
START_TEST(integer_boundaries)
{
    static const char *const junk[] = {"",
                                       "1x",
                                       " 1",
                                       "1 ",
                                       "+1",
                                       "-",
                                       "0x10",
                                       "1.0",
                                       "1e3",
                                       "--1",
                                       "abc",
                                       "99999999999999999999",
                                       "9223372036854775808",
                                       "-9223372036854775809",
                                       NULL};
    struct hp_optlimits l;

    hp_optlimits_init(&l, 1);
    ASSERT_OK(HP_OPT_STALENESS, "0", &l);
    ASSERT_OK(HP_OPT_STALENESS, "64", &l);
    ASSERT_OK(HP_OPT_STALENESS, "007", &l); /* decimal, not octal */
    ASSERT_BAD(HP_OPT_STALENESS, "65", &l);
    ASSERT_BAD(HP_OPT_STALENESS, "-1", &l);
    ck_assert_str_eq(err, "--hetpipe-staleness=-1: must be an integer from 0 to 64");
    ASSERT_BAD(HP_OPT_STALENESS, "1000000000", &l);

    ASSERT_OK(HP_OPT_BATCH, "1", &l);
    ASSERT_OK(HP_OPT_BATCH, "65536", &l);
    ASSERT_BAD(HP_OPT_BATCH, "0", &l);
    ASSERT_BAD(HP_OPT_BATCH, "65537", &l);
    ck_assert_str_eq(err, "--hetpipe-batch=65537: must be an integer from 1 to 65536");
    ASSERT_BAD(HP_OPT_BATCH, "-1", &l);

    ASSERT_OK(HP_OPT_EPOCHS, "1", &l);
    ASSERT_OK(HP_OPT_EPOCHS, "10000", &l);
    ASSERT_BAD(HP_OPT_EPOCHS, "0", &l);
    ASSERT_BAD(HP_OPT_EPOCHS, "10001", &l);

    ASSERT_OK(HP_OPT_NM, "auto", &l);
    ASSERT_OK(HP_OPT_NM, "1", &l);
    ASSERT_OK(HP_OPT_NM, "64", &l);
    ASSERT_BAD(HP_OPT_NM, "0", &l);
    ck_assert_str_eq(err, "--hetpipe-nm=0: must be auto or an integer from 1 to 64");
    ASSERT_BAD(HP_OPT_NM, "65", &l);
    ASSERT_BAD(HP_OPT_NM, "-3", &l);
    ASSERT_BAD(HP_OPT_NM, "Auto", &l);

    for (const char *const *j = junk; *j; j++) {
        ASSERT_BAD(HP_OPT_STALENESS, *j, &l);
        ASSERT_BAD(HP_OPT_NM, *j, &l);
        ASSERT_BAD(HP_OPT_BATCH, *j, &l);
        ASSERT_BAD(HP_OPT_EPOCHS, *j, &l);
    }
    /* the limits move the boundaries */
    l.max[HP_OPT_STALENESS] = 3;
    l.max[HP_OPT_NM] = 2;
    l.max[HP_OPT_BATCH] = 128;
    l.max[HP_OPT_EPOCHS] = 5;
    ASSERT_OK(HP_OPT_STALENESS, "3", &l);
    ASSERT_BAD(HP_OPT_STALENESS, "4", &l);
    ck_assert_str_eq(err, "--hetpipe-staleness=4: must be an integer from 0 to 3");
    ASSERT_OK(HP_OPT_NM, "2", &l);
    ASSERT_BAD(HP_OPT_NM, "3", &l);
    ASSERT_OK(HP_OPT_BATCH, "128", &l);
    ASSERT_BAD(HP_OPT_BATCH, "129", &l);
    ASSERT_OK(HP_OPT_EPOCHS, "5", &l);
    ASSERT_BAD(HP_OPT_EPOCHS, "6", &l);
}
END_TEST

START_TEST(dry_run_takes_no_value)
{
    struct hp_optlimits l;

    hp_optlimits_init(&l, 1);
    ck_assert_int_eq(chk(HP_OPT_DRY_RUN, NULL, &l), 0);
    ASSERT_OK(HP_OPT_DRY_RUN, "", &l);
    ASSERT_OK(HP_OPT_DRY_RUN, "1", &l); /* what the plugin exports */
    ASSERT_BAD(HP_OPT_DRY_RUN, "yes", &l);
    ck_assert_str_eq(err, "--hetpipe-dry-run=yes: takes no value");
    ASSERT_BAD(HP_OPT_DRY_RUN, "0", &l);
}
END_TEST

/* A model NAME is looked up in the models directory, a PATH must be a readable file. */
START_TEST(model_names_and_paths)
{
    struct hp_optlimits l;
    char dir[1024], ini[1100], sub[1100];

    hp_optlimits_init(&l, 1);
    snprintf(dir, sizeof(dir), "%s", test_fresh_dir());
    snprintf(l.models_dir, sizeof(l.models_dir), "%s", dir);
    snprintf(ini, sizeof(ini), "%s/tiny.ini", dir);
    FILE *f = fopen(ini, "w");
    ck_assert_ptr_nonnull(f);
    fputs("[model]\n", f);
    fclose(f);
    snprintf(sub, sizeof(sub), "%s/sub.ini", dir); /* a directory named like a model */
    ck_assert_int_eq(mkdir(sub, 0755), 0);

    ASSERT_OK(HP_OPT_MODEL, "tiny", &l);
    ASSERT_OK(HP_OPT_MODEL, ini, &l);
    ASSERT_BAD(HP_OPT_MODEL, "nosuchmodel", &l);
    ck_assert_ptr_nonnull(strstr(err, "--hetpipe-model=nosuchmodel: unknown model"));
    ck_assert_ptr_nonnull(strstr(err, dir));
    ck_assert_ptr_nonnull(strstr(err, "models there: sub, tiny")); /* sorted */
    ASSERT_BAD(HP_OPT_MODEL, "", &l);
    ASSERT_BAD(HP_OPT_MODEL, "a b", &l);
    ck_assert_ptr_nonnull(strstr(err, "not a model name"));
    ASSERT_BAD(HP_OPT_MODEL, "tiny;rm", &l);
    ASSERT_BAD(HP_OPT_MODEL, "/nonexistent/m.ini", &l);
    ck_assert_ptr_nonnull(strstr(err, "No such file or directory"));
    ASSERT_BAD(HP_OPT_MODEL, "nonexistent.ini", &l); /* ends in .ini: a path */
    ASSERT_BAD(HP_OPT_MODEL, sub, &l);
    ck_assert_ptr_nonnull(strstr(err, "not a regular file"));
    ASSERT_BAD(HP_OPT_MODEL, "sub", &l);
    /* without check_files only the form counts */
    ck_assert_int_eq(hp_opt_check(HP_OPT_MODEL, "m", "nosuchmodel", &l, 0, err, 64), 0);
    ck_assert_int_eq(hp_opt_check(HP_OPT_MODEL, "m", "/nonexistent/m.ini", &l, 0, err, 64), 0);
    ck_assert_int_eq(hp_opt_check(HP_OPT_MODEL, "m", "a b", &l, 0, err, 64), -1);
    ck_assert_int_eq(hp_opt_check(HP_OPT_MODEL, "m", "", &l, 0, err, 64), -1);
    /* an empty models directory */
    unlink(ini);
    rmdir(sub);
    ASSERT_BAD(HP_OPT_MODEL, "tiny", &l);
    ck_assert_ptr_nonnull(strstr(err, "models there: none"));
    rmdir(dir);
}
END_TEST

START_TEST(env_names_and_short_buffers)
{
    struct hp_optlimits l;
    char small[16];

    hp_optlimits_init(&l, 1);
    ck_assert_int_eq(
        hp_opt_check(HP_OPT_STALENESS, "HETPIPE_STALENESS", "x", &l, 0, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "HETPIPE_STALENESS=x: must be an integer from 0 to 64");
    ck_assert_int_eq(
        hp_opt_check(HP_OPT_POLICY, "HETPIPE_POLICY", "x", &l, 0, small, sizeof(small)), -1);
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1); /* cut, terminated */
    ck_assert_int_eq(hp_opt_check(HP_OPT_COUNT, "x", "1", &l, 0, err, sizeof(err)), -1);
}
END_TEST

START_TEST(plugstack_limits)
{
    struct hp_optlimits l;

    hp_optlimits_init(&l, 1);
    ck_assert_int_eq(hp_optlimits_arg(&l, "max_staleness=3", err, sizeof(err)), 0);
    ck_assert_int_eq(l.max[HP_OPT_STALENESS], 3);
    ck_assert_int_eq(hp_optlimits_arg(&l, "max_staleness=0", err, sizeof(err)), 0);
    ck_assert_int_eq(l.max[HP_OPT_STALENESS], 0);
    ck_assert_int_eq(hp_optlimits_arg(&l, "max_nm=8", err, sizeof(err)), 0);
    ck_assert_int_eq(l.max[HP_OPT_NM], 8);
    ck_assert_int_eq(hp_optlimits_arg(&l, "max_batch=256", err, sizeof(err)), 0);
    ck_assert_int_eq(l.max[HP_OPT_BATCH], 256);
    ck_assert_int_eq(hp_optlimits_arg(&l, "max_epochs=20", err, sizeof(err)), 0);
    ck_assert_int_eq(l.max[HP_OPT_EPOCHS], 20);
    /* bad values leave the limit as it was */
    static const char *const bad[] = {
        "max_staleness=x", "max_staleness=-1", "max_staleness=", "max_staleness", "max_nm=0",
        "max_nm=1025",     "max_batch=65537",  "max_epochs=0",   "max_epochs=1x", NULL};
    for (const char *const *b = bad; *b; b++) {
        ck_assert_msg(hp_optlimits_arg(&l, *b, err, sizeof(err)) == -1, "'%s' accepted", *b);
        ck_assert_msg(strstr(err, *b) != NULL, "'%s' not named in '%s'", *b, err);
    }
    ck_assert_int_eq(l.max[HP_OPT_STALENESS], 0);
    ck_assert_int_eq(l.max[HP_OPT_NM], 8);
    ck_assert_int_eq(l.max[HP_OPT_BATCH], 256);
    ck_assert_int_eq(l.max[HP_OPT_EPOCHS], 20);
    ck_assert_int_eq(hp_optlimits_arg(&l, "max_staleness=x", err, sizeof(err)), -1);
    ck_assert_str_eq(err, "'max_staleness=x': max_staleness must be an integer from 0 to 1000000");

    ck_assert_int_eq(hp_optlimits_arg(&l, "config=/site/hetpipe.conf", err, sizeof(err)), 0);
    ck_assert_str_eq(l.config, "/site/hetpipe.conf");
    ck_assert_int_eq(l.config_given, 1);
    ck_assert_int_eq(hp_optlimits_arg(&l, "models=/site/models", err, sizeof(err)), 0);
    ck_assert_str_eq(l.models_dir, "/site/models");
    ck_assert_int_eq(hp_optlimits_arg(&l, "models=", err, sizeof(err)), -1);
    ck_assert_int_eq(hp_optlimits_arg(&l, "config", err, sizeof(err)), -1);
    ck_assert_str_eq(l.models_dir, "/site/models");
}
END_TEST

START_TEST(plugstack_policies)
{
    struct hp_optlimits l;

    hp_optlimits_init(&l, 1);
    ck_assert_int_eq(hp_optlimits_arg(&l, "policies=ed,hd", err, sizeof(err)), 0);
    ck_assert_uint_eq(l.words[HP_OPT_POLICY], (1u << 2) | (1u << 3));
    ASSERT_OK(HP_OPT_POLICY, "ed", &l);
    ASSERT_OK(HP_OPT_POLICY, "hd", &l);
    ASSERT_BAD(HP_OPT_POLICY, "np", &l);
    ck_assert_str_eq(err,
                     "--hetpipe-policy=np: policy not allowed on this cluster; allowed: ed, hd");
    ASSERT_BAD(HP_OPT_POLICY, "fast", &l);
    ck_assert_str_eq(err, "--hetpipe-policy=fast: unknown policy; allowed: ed, hd");
    static const char *const bad[] = {"policies=",   "policies=ed,",   "policies=,ed",
                                      "policies=zz", "policies=ed hd", "policies",
                                      NULL};
    for (const char *const *b = bad; *b; b++)
        ck_assert_msg(hp_optlimits_arg(&l, *b, err, sizeof(err)) == -1, "'%s' accepted", *b);
    ck_assert_uint_eq(l.words[HP_OPT_POLICY], (1u << 2) | (1u << 3));
    ck_assert_int_eq(hp_optlimits_arg(&l, "policies=dp", err, sizeof(err)), 0);
    ck_assert_uint_eq(l.words[HP_OPT_POLICY], (1u << 4));
}
END_TEST

START_TEST(plugstack_defaults)
{
    struct hp_optlimits l;
    char arg[64] = "default_staleness=4";

    hp_optlimits_init(&l, 1);
    ck_assert_int_eq(hp_optlimits_arg(&l, arg, err, sizeof(err)), 0);
    ck_assert_str_eq(l.defaults[HP_OPT_STALENESS], "4");
    ck_assert_ptr_eq(l.defaults[HP_OPT_STALENESS], arg + strlen("default_staleness="));
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_policy=ed", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_placement=local", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_nm=auto", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_batch=64", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_epochs=2", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_dry-run=", err, sizeof(err)), 0);
    ck_assert_str_eq(l.defaults[HP_OPT_DRY_RUN], "");
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_dry_run=1", err, sizeof(err)), 0);

    /* each default is checked against the limits as they stand */
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_staleness=65", err, sizeof(err)), -1);
    ck_assert_str_eq(err, "default_staleness=65: must be an integer from 0 to 64");
    ck_assert_str_eq(l.defaults[HP_OPT_STALENESS], "4"); /* unchanged */
    ck_assert_int_eq(hp_optlimits_arg(&l, "max_staleness=100", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_staleness=65", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_optlimits_arg(&l, "policies=np", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_policy=ed", err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "default_policy=ed: policy not allowed"));
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_policy=fast", err, sizeof(err)), -1);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_nm=0", err, sizeof(err)), -1);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_batch=1x", err, sizeof(err)), -1);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_dry-run=yes", err, sizeof(err)), -1);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_model=", err, sizeof(err)), -1);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_policy", err, sizeof(err)), -1);

    /* a default model NAME must be in the models directory given before it */
    char dir[1024], ini[1100], models[1100];
    snprintf(dir, sizeof(dir), "%s", test_fresh_dir());
    snprintf(ini, sizeof(ini), "%s/tiny.ini", dir);
    FILE *f = fopen(ini, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_model=tiny", err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "unknown model"));
    snprintf(models, sizeof(models), "models=%s", dir);
    ck_assert_int_eq(hp_optlimits_arg(&l, models, err, sizeof(err)), 0);
    ck_assert_int_eq(hp_optlimits_arg(&l, "default_model=tiny", err, sizeof(err)), 0);
    ck_assert_str_eq(l.defaults[HP_OPT_MODEL], "tiny");
    unlink(ini);
    rmdir(dir);
}
END_TEST

START_TEST(plugstack_unknown_key)
{
    struct hp_optlimits l;
    static const char *const bad[] = {
        "bogus=1", "bogus",           "default_=1",       "default_x=1",
        "",        "Max_staleness=3", "max_staleness =3", "default_dry-runs=1",
        NULL};

    hp_optlimits_init(&l, 1);
    for (const char *const *b = bad; *b; b++) {
        ck_assert_msg(hp_optlimits_arg(&l, *b, err, sizeof(err)) == -1, "'%s' accepted", *b);
        ck_assert_msg(strstr(err, "unknown argument") != NULL, "'%s': %s", *b, err);
    }
    ck_assert_int_eq(hp_optlimits_arg(&l, "bogus=1", err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "'bogus=1': unknown argument; known: config, models, "
                                      "max_staleness, max_nm, max_batch, max_epochs, "
                                      "max_checkpoint-keep, policies, "
                                      "default_policy"));
    ck_assert_ptr_nonnull(strstr(err, "default_dry-run"));
}
END_TEST

START_TEST(allowed_phrases)
{
    struct hp_optlimits l;
    char buf[256];

    hp_optlimits_init(&l, 1);
    l.words[HP_OPT_POLICY] = (1u << 1) | (1u << 4);
    hp_opt_allowed(HP_OPT_POLICY, &l, buf, sizeof(buf));
    ck_assert_str_eq(buf, "np, dp");
    hp_opt_allowed(HP_OPT_NM, &l, buf, sizeof(buf));
    ck_assert_str_eq(buf, "auto or an integer from 1 to 64");
    hp_opt_allowed(HP_OPT_BATCH, &l, buf, 8);
    ck_assert_str_eq(buf, "an inte");
}
END_TEST

/* v formatted as the ranks get it reads back to the same value */
static void reads_back(enum hp_opt o, const struct hp_options *x)
{
    struct hp_options y;
    char buf[4200], err2[1024];

    ck_assert_int_eq(hp_opt_format(x, o, buf, sizeof(buf)), 0);
    hp_options_init(&y, HP_CMD_RANK);
    ck_assert_msg(hp_opt_set(&y, o, "--x", buf, NULL, 0, err2, sizeof(err2)) == 0, "'%s': %s", buf,
                  err2);
    ck_assert_msg(same_value(x, &y, o), "'%s' reads back as another value", buf);
}

/* --checkpoint-every: a count of samples or a training time, checked by the table wherever
 * it enters (the plugin at submit: these are its messages), and handed on to the ranks as
 * text that reads back the same. */
START_TEST(checkpoint_every_values)
{
    static const struct {
        const char *v;
        long samples;
        double seconds;
    } ok[] = {
        {"1", 1, 0},
        {"20000", 20000, 0},
        {"1125899906842624", 1L << 50, 0},
        {"007", 7, 0},
        {"30min", 0, 1800},
        {"1.5h", 0, 5400},
        {"2s", 0, 2},
        {"0.001s", 0, 0.001},
        {"1e7h", 0, 3.6e10},
        {"1e3min", 0, 6e4},
        {"0.1h", 0, 0.1 * 3600.0},
        {"3.3min", 0, 3.3 * 60.0},
        {".5h", 0, 1800},
        {"0.123456789123h", 0, 0.123456789123 * 3600.0},
        {"1.0000000000000002s", 0, 1.0000000000000002},
        {"9999999.999999998min", 0, 9999999.999999998 * 60.0},
        {"10000000s", 0, 1e7},
        {"0.001h", 0, 0.001 * 3600.0},
    };
    static const char *const bad[] = {
        "0",  "-5",     "1e3",   "0min",   "banana", "",        "min",
        "h",  "10 min", "5mins", "-5min",  "1e8min", "0.0001s", "1125899906842625",
        "+5", "5m",     "infh",  "nanmin", "0x10",   "1.5",     " 5",
        "5 ", NULL};
    struct hp_optlimits l;
    struct hp_options o;

    hp_optlimits_init(&l, 1);
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        ASSERT_OK(HP_OPT_CHECKPOINT_EVERY, ok[i].v, &l);
        hp_options_init(&o, HP_CMD_RUN);
        ck_assert_int_eq(hp_opt_set(&o, HP_OPT_CHECKPOINT_EVERY, "--checkpoint-every", ok[i].v,
                                    NULL, 0, err, sizeof(err)),
                         0);
        ck_assert_msg(o.checkpoint_every.samples == ok[i].samples &&
                          o.checkpoint_every.seconds == ok[i].seconds,
                      "'%s': %ld samples, %.17g s", ok[i].v, o.checkpoint_every.samples,
                      o.checkpoint_every.seconds);
        reads_back(HP_OPT_CHECKPOINT_EVERY, &o);
    }
    for (const char *const *b = bad; *b; b++)
        ASSERT_BAD(HP_OPT_CHECKPOINT_EVERY, *b, &l);
    ASSERT_BAD(HP_OPT_CHECKPOINT_EVERY, "banana", &l);
    ck_assert_str_eq(err, "--hetpipe-checkpoint-every=banana: must be N training samples (an "
                          "integer from 1 to 1125899906842624), or a training time: Nmin "
                          "(minutes), Nh (hours) or Ns (seconds), N a number from 0.001 to "
                          "1e+07");
    ASSERT_BAD(HP_OPT_CHECKPOINT_EVERY, "", &l);
    ck_assert_ptr_nonnull(strstr(err, "--hetpipe-checkpoint-every=: empty; must be N training"));
    /* handed on to the ranks as text they read back to the same value */
    char *av[] = {"run",  "--local",  "--checkpoint-dir", "/ck", "--checkpoint-every",
                  "0.1h", "--resume", "/ck/ckpt-2",       NULL};
    const char *rav[64] = {"hetpipe-rank"};
    char store[4096];
    struct hp_options r;
    int rest, ac = 1;
    hp_options_init(&o, HP_CMD_RUN);
    ck_assert_int_eq(hp_cli_parse(HP_CMD_RUN, "", 8, av, &o, &rest), 0);
    ck_assert_int_eq(hp_cli_rank_args(&o, HP_CMD_RUN, rav, &ac, 64, store, sizeof(store)), 0);
    hp_options_init(&r, HP_CMD_RANK);
    ck_assert_int_eq(hp_cli_parse(HP_CMD_RANK, "", ac, (char **)rav, &r, &rest), 0);
    ck_assert(same_value(&o, &r, HP_OPT_CHECKPOINT_EVERY));
    ck_assert(r.checkpoint_every.seconds == 0.1 * 3600.0);
    ck_assert_str_eq(r.resume.path, "/ck/ckpt-2");
    /* unset: nothing, and nothing handed on */
    hp_options_init(&o, HP_CMD_RUN);
    ck_assert(o.checkpoint_every.samples == 0 && o.checkpoint_every.seconds == 0.0);
    ck_assert_int_eq(hp_opt_format(&o, HP_OPT_CHECKPOINT_EVERY, err, sizeof(err)), 1);
    /* times set other than by parsing still read back, or the nearest */
    for (double s = 0.001; s < 3.6e10; s *= 7.77) {
        char text[64];
        o.checkpoint_every = (struct hp_opt_every){.samples = 0, .seconds = s};
        ck_assert_int_eq(hp_opt_format(&o, HP_OPT_CHECKPOINT_EVERY, text, sizeof(text)), 0);
        ck_assert_msg(chk(HP_OPT_CHECKPOINT_EVERY, text, &l) == 0, "%.17g s: '%s'", s, text);
    }
}
END_TEST

/* --resume: auto, or a checkpoint's directory; nobody compares with "auto" by hand. */
START_TEST(resume_values)
{
    struct hp_optlimits l;
    struct hp_options o;

    hp_optlimits_init(&l, 1);
    hp_options_init(&o, HP_CMD_RUN);
    ck_assert(o.resume.path == NULL && !o.resume.automatic);
    ck_assert_int_eq(hp_opt_format(&o, HP_OPT_RESUME, err, sizeof(err)), 1);
    ck_assert_int_eq(hp_opt_set(&o, HP_OPT_RESUME, "--resume", "auto", NULL, 0, err, sizeof(err)),
                     0);
    ck_assert(o.resume.automatic && o.resume.path == NULL);
    reads_back(HP_OPT_RESUME, &o);
    ck_assert_int_eq(
        hp_opt_set(&o, HP_OPT_RESUME, "--resume", "/ck/ckpt-3", NULL, 0, err, sizeof(err)), 0);
    ck_assert(!o.resume.automatic);
    ck_assert_str_eq(o.resume.path, "/ck/ckpt-3");
    reads_back(HP_OPT_RESUME, &o);
    ck_assert_int_eq(hp_opt_set(&o, HP_OPT_RESUME, "--resume", "./auto", NULL, 0, err, sizeof(err)),
                     0);
    ck_assert(!o.resume.automatic);
    o.resume.path = "auto"; /* a directory named auto, set by hand */
    ck_assert_int_eq(hp_opt_format(&o, HP_OPT_RESUME, err, sizeof(err)), 0);
    ck_assert_str_eq(err, "./auto");

    ASSERT_OK(HP_OPT_RESUME, "auto", &l);
    ASSERT_OK(HP_OPT_RESUME, "ck/ckpt-1", &l);
    ASSERT_OK(HP_OPT_RESUME, "a dir with spaces/ckpt-1", &l);
    ASSERT_BAD(HP_OPT_RESUME, "", &l);
    ck_assert_str_eq(err, "--hetpipe-resume=: empty; must be auto, or a path (not empty, no "
                          "control characters)");
    ASSERT_BAD(HP_OPT_RESUME, "ck\nckpt-1", &l);
    ck_assert_str_eq(err, "--hetpipe-resume=ck\\x0ackpt-1: a control character in the path; must "
                          "be auto, or a path (not empty, no control characters)");
    ASSERT_BAD(HP_OPT_RESUME, "ck\x1b[31m", &l);
    ASSERT_BAD(HP_OPT_RESUME, "ck\x7f", &l);
    ASSERT_BAD(HP_OPT_RESUME, "\t", &l);
}
END_TEST

/* Every HETPIPE_* variable is read through its row: typed, checked, named when bad. */
START_TEST(variables_through_their_rows)
{
    struct hp_options o;
    char *av[] = {"hetpipe-rank", "--plan", "p.ini", NULL};
    int rest;

    memset(&o, 0, sizeof(o));
    unsetenv("HETPIPE_GPU");
    ck_assert_int_eq(hp_opt_env(&o, HP_OPT_GPU, err, sizeof(err)), 1);
    setenv("HETPIPE_GPU", "", 1);
    ck_assert_int_eq(hp_opt_env(&o, HP_OPT_GPU, err, sizeof(err)), 1);
    setenv("HETPIPE_GPU", "3", 1);
    ck_assert_int_eq(hp_opt_env(&o, HP_OPT_GPU, err, sizeof(err)), 0);
    ck_assert_int_eq(o.gpu, 3);
    ck_assert_int_eq(o.given[HP_OPT_GPU], 1);
    setenv("HETPIPE_GPU", "0,1", 1);
    ck_assert_int_eq(hp_opt_env(&o, HP_OPT_GPU, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "HETPIPE_GPU=0,1: must be an integer from 0 to 4095");
    ck_assert_int_eq(o.gpu, 3); /* unchanged */
    unsetenv("HETPIPE_GPU");
    setenv("HETPIPE_LOG", "loud", 1);
    ck_assert_int_eq(hp_opt_env(&o, HP_OPT_LOG_LEVEL, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "HETPIPE_LOG=loud: unknown value; allowed: error, warn, info, debug");
    unsetenv("HETPIPE_LOG");
    setenv("HETPIPE_BOUND", "yes", 1);
    ck_assert_int_eq(hp_opt_env(&o, HP_OPT_BOUND, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "HETPIPE_BOUND=yes: takes no value");
    unsetenv("HETPIPE_BOUND");
    ck_assert_int_eq(hp_opt_env(&o, HP_OPT_LR, err, sizeof(err)), 1); /* no variable */

    /* a rank's variables at its start: the command line wins */
    setenv("HETPIPE_RANK", "2", 1);
    setenv("HETPIPE_BOOT_DIR", "/run/boot", 1);
    setenv("HETPIPE_BINDING", "/run/binding", 1);
    setenv("HETPIPE_STALENESS", "5", 1); /* a job option: hetpipe launch's, not the rank's */
    hp_options_init(&o, HP_CMD_RANK);
    ck_assert_int_eq(hp_cli_parse(HP_CMD_RANK, "", 3, av, &o, &rest), 0);
    ck_assert_int_eq(hp_cli_from_env(&o, HP_CMD_RANK), 0);
    ck_assert_int_eq(o.rank, 2);
    ck_assert_str_eq(o.boot_dir, "/run/boot");
    ck_assert(!o.given[HP_OPT_STALENESS]);
    ck_assert(!o.given[HP_OPT_BINDING]); /* no option: read where it is used */
    ck_assert_int_eq(hp_opt_env(&o, HP_OPT_BINDING, err, sizeof(err)), 0);
    ck_assert_str_eq(o.binding, "/run/binding");
    setenv("HETPIPE_RANK", "x", 1);
    hp_options_init(&o, HP_CMD_RANK);
    test_capture_begin();
    ck_assert_int_eq(hp_cli_from_env(&o, HP_CMD_RANK), -1);
    ck_assert_ptr_nonnull(
        strstr(test_capture_end(), "hetpipe-rank: HETPIPE_RANK=x: must be an integer from 0 to"));
    char *av2[] = {"hetpipe-rank", "--rank", "1", NULL};
    hp_options_init(&o, HP_CMD_RANK);
    ck_assert_int_eq(hp_cli_parse(HP_CMD_RANK, "", 3, av2, &o, &rest), 0);
    ck_assert_int_eq(hp_cli_from_env(&o, HP_CMD_RANK), 0); /* --rank given: not read */
    ck_assert_int_eq(o.rank, 1);
    unsetenv("HETPIPE_RANK");
    unsetenv("HETPIPE_BOOT_DIR");
    unsetenv("HETPIPE_BINDING");
    unsetenv("HETPIPE_STALENESS");
}
END_TEST

/* --help gives each option's variable and the variables alone the command reads. */
START_TEST(usage_lists_the_environment)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    ck_assert_ptr_nonnull(f);
    hp_cli_usage(f, HP_CMD_RANK, "usage\n");
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "[HETPIPE_RANK]"));
    ck_assert_ptr_nonnull(strstr(text, "\nenvironment:\n"));
    ck_assert_ptr_nonnull(strstr(text, "\n  HETPIPE_BINDING=FILE"));
    ck_assert_ptr_nonnull(strstr(text, "\n  HETPIPE_BOUND=1"));
    ck_assert_ptr_null(strstr(text, "HETPIPE_STALENESS")); /* launch reads it, not a rank */
    ck_assert_ptr_null(strstr(text, "HETPIPE_SRUN"));
    free(text);
    text = NULL;
    f = open_memstream(&text, &len);
    hp_cli_usage(f, HP_CMD_LAUNCH, "usage\n");
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "[HETPIPE_CHECKPOINT_EVERY]"));
    ck_assert_ptr_nonnull(strstr(text, "[HETPIPE_SRUN]"));
    ck_assert_ptr_null(strstr(text, "HETPIPE_BINDING"));
    free(text);
}
END_TEST

Suite *suite_options(void)
{
    Suite *s = suite_create("options");
    TCase *t = tcase_create("options");

    tcase_add_test(t, table_names_and_env);
    tcase_add_test(t, table_rows_are_consistent);
    tcase_add_test(t, reals_round_trip);
    tcase_add_test(t, command_lines);
    tcase_add_test(t, environment_of_a_job);
    tcase_add_test(t, limits_defaults);
    tcase_add_test(t, policy_and_placement);
    tcase_add_test(t, integer_boundaries);
    tcase_add_test(t, dry_run_takes_no_value);
    tcase_add_test(t, model_names_and_paths);
    tcase_add_test(t, env_names_and_short_buffers);
    tcase_add_test(t, plugstack_limits);
    tcase_add_test(t, plugstack_policies);
    tcase_add_test(t, plugstack_defaults);
    tcase_add_test(t, plugstack_unknown_key);
    tcase_add_test(t, allowed_phrases);
    tcase_add_test(t, checkpoint_every_values);
    tcase_add_test(t, resume_values);
    tcase_add_test(t, variables_through_their_rows);
    tcase_add_test(t, usage_lists_the_environment);
    suite_add_tcase(s, t);
    return s;
}
