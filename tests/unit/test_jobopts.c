/* test_jobopts.c - the --hetpipe-* option rules, their boundaries, and the plugstack.conf
 * arguments that set the site's limits and defaults (common/jobopts.c). */
#include "suites.h"
#include "util.h"

#include "jobopts.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[4096];

/* check o's value under l (files checked); 0 or -1 */
static int chk(enum hp_jobopt o, const char *value, const struct hp_joblimits *l)
{
    char what[64];

    snprintf(what, sizeof(what), "--hetpipe-%s", hp_jobopts[o].name);
    return hp_jobopt_check(o, what, value, l, 1, err, sizeof(err));
}

#define ASSERT_OK(o, v, l) ck_assert_msg(chk((o), (v), (l)) == 0, "'%s' refused: %s", (v), err)
#define ASSERT_BAD(o, v, l)                                                                        \
    do {                                                                                           \
        ck_assert_msg(chk((o), (v), (l)) == -1, "'%s' accepted", (v));                             \
        ck_assert_msg(strstr(err, "--hetpipe-") != NULL, "no option in '%s'", err);                \
    } while (0)

START_TEST(table_names_and_env)
{
    static const char *const names[] = {"policy", "placement", "staleness", "nm",
                                        "model",  "batch",     "epochs",    "dry-run"};
    static const char *const envs[] = {"HETPIPE_POLICY", "HETPIPE_PLACEMENT", "HETPIPE_STALENESS",
                                       "HETPIPE_NM",     "HETPIPE_MODEL",     "HETPIPE_BATCH",
                                       "HETPIPE_EPOCHS", "HETPIPE_DRY_RUN"};

    for (int o = 0; o < HP_JOBOPT_COUNT; o++) {
        ck_assert_str_eq(hp_jobopts[o].name, names[o]);
        ck_assert_str_eq(hp_jobopts[o].env, envs[o]);
        ck_assert_ptr_nonnull(hp_jobopts[o].help);
        if (o == HP_JOBOPT_DRY_RUN)
            ck_assert_ptr_null(hp_jobopts[o].arginfo);
        else
            ck_assert_ptr_nonnull(hp_jobopts[o].arginfo);
    }
    ck_assert_str_eq(hp_jobopts[HP_JOBOPT_POLICY].arginfo, "auto|np|ed|hd|dp");
}
END_TEST

START_TEST(limits_defaults)
{
    struct hp_joblimits l;

    hp_joblimits_init(&l);
    ck_assert_uint_eq(l.policies, HP_JOBOPT_POLICY_ALL);
    ck_assert_int_eq(l.max_staleness, 64);
    ck_assert_int_eq(l.max_nm, 64);
    ck_assert_int_eq(l.max_batch, 65536);
    ck_assert_int_eq(l.max_epochs, 10000);
    ck_assert_str_eq(l.models_dir, HP_DATADIR "/models");
    ck_assert_str_eq(l.config, HP_SYSCONFDIR "/hetpipe.conf");
    ck_assert_int_eq(l.config_given, 0);
    for (int o = 0; o < HP_JOBOPT_COUNT; o++)
        ck_assert_ptr_null(l.defaults[o]);
}
END_TEST

START_TEST(policy_and_placement)
{
    struct hp_joblimits l;

    hp_joblimits_init(&l);
    for (const char *const *p = (const char *const[]){"auto", "np", "ed", "hd", "dp", NULL}; *p;
         p++)
        ASSERT_OK(HP_JOBOPT_POLICY, *p, &l);
    ASSERT_BAD(HP_JOBOPT_POLICY, "fast", &l);
    ck_assert_str_eq(err, "--hetpipe-policy=fast: unknown policy; allowed: auto, np, ed, hd, dp");
    ASSERT_BAD(HP_JOBOPT_POLICY, "", &l);
    ASSERT_BAD(HP_JOBOPT_POLICY, "ED", &l);
    ASSERT_BAD(HP_JOBOPT_POLICY, "ed ", &l);
    ck_assert_int_eq(hp_jobopt_check(HP_JOBOPT_POLICY, "x", NULL, &l, 0, err, sizeof(err)), -1);

    ASSERT_OK(HP_JOBOPT_PLACEMENT, "local", &l);
    ASSERT_OK(HP_JOBOPT_PLACEMENT, "default", &l);
    ASSERT_BAD(HP_JOBOPT_PLACEMENT, "near", &l);
    ck_assert_str_eq(err, "--hetpipe-placement=near: unknown placement; allowed: local, default");
    ASSERT_BAD(HP_JOBOPT_PLACEMENT, "", &l);
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
    struct hp_joblimits l;

    hp_joblimits_init(&l);
    ASSERT_OK(HP_JOBOPT_STALENESS, "0", &l);
    ASSERT_OK(HP_JOBOPT_STALENESS, "64", &l);
    ASSERT_OK(HP_JOBOPT_STALENESS, "007", &l); /* decimal, not octal */
    ASSERT_BAD(HP_JOBOPT_STALENESS, "65", &l);
    ASSERT_BAD(HP_JOBOPT_STALENESS, "-1", &l);
    ck_assert_str_eq(err, "--hetpipe-staleness=-1: must be an integer from 0 to 64");
    ASSERT_BAD(HP_JOBOPT_STALENESS, "1000000000", &l);

    ASSERT_OK(HP_JOBOPT_BATCH, "1", &l);
    ASSERT_OK(HP_JOBOPT_BATCH, "65536", &l);
    ASSERT_BAD(HP_JOBOPT_BATCH, "0", &l);
    ASSERT_BAD(HP_JOBOPT_BATCH, "65537", &l);
    ck_assert_str_eq(err, "--hetpipe-batch=65537: must be an integer from 1 to 65536");
    ASSERT_BAD(HP_JOBOPT_BATCH, "-1", &l);

    ASSERT_OK(HP_JOBOPT_EPOCHS, "1", &l);
    ASSERT_OK(HP_JOBOPT_EPOCHS, "10000", &l);
    ASSERT_BAD(HP_JOBOPT_EPOCHS, "0", &l);
    ASSERT_BAD(HP_JOBOPT_EPOCHS, "10001", &l);

    ASSERT_OK(HP_JOBOPT_NM, "auto", &l);
    ASSERT_OK(HP_JOBOPT_NM, "1", &l);
    ASSERT_OK(HP_JOBOPT_NM, "64", &l);
    ASSERT_BAD(HP_JOBOPT_NM, "0", &l);
    ck_assert_str_eq(err, "--hetpipe-nm=0: must be auto or an integer from 1 to 64");
    ASSERT_BAD(HP_JOBOPT_NM, "65", &l);
    ASSERT_BAD(HP_JOBOPT_NM, "-3", &l);
    ASSERT_BAD(HP_JOBOPT_NM, "Auto", &l);

    for (const char *const *j = junk; *j; j++) {
        ASSERT_BAD(HP_JOBOPT_STALENESS, *j, &l);
        ASSERT_BAD(HP_JOBOPT_NM, *j, &l);
        ASSERT_BAD(HP_JOBOPT_BATCH, *j, &l);
        ASSERT_BAD(HP_JOBOPT_EPOCHS, *j, &l);
    }
    /* the limits move the boundaries */
    l.max_staleness = 3;
    l.max_nm = 2;
    l.max_batch = 128;
    l.max_epochs = 5;
    ASSERT_OK(HP_JOBOPT_STALENESS, "3", &l);
    ASSERT_BAD(HP_JOBOPT_STALENESS, "4", &l);
    ck_assert_str_eq(err, "--hetpipe-staleness=4: must be an integer from 0 to 3");
    ASSERT_OK(HP_JOBOPT_NM, "2", &l);
    ASSERT_BAD(HP_JOBOPT_NM, "3", &l);
    ASSERT_OK(HP_JOBOPT_BATCH, "128", &l);
    ASSERT_BAD(HP_JOBOPT_BATCH, "129", &l);
    ASSERT_OK(HP_JOBOPT_EPOCHS, "5", &l);
    ASSERT_BAD(HP_JOBOPT_EPOCHS, "6", &l);
}
END_TEST

START_TEST(dry_run_takes_no_value)
{
    struct hp_joblimits l;

    hp_joblimits_init(&l);
    ck_assert_int_eq(chk(HP_JOBOPT_DRY_RUN, NULL, &l), 0);
    ASSERT_OK(HP_JOBOPT_DRY_RUN, "", &l);
    ASSERT_OK(HP_JOBOPT_DRY_RUN, "1", &l); /* what the plugin exports */
    ASSERT_BAD(HP_JOBOPT_DRY_RUN, "yes", &l);
    ck_assert_str_eq(err, "--hetpipe-dry-run=yes: takes no value");
    ASSERT_BAD(HP_JOBOPT_DRY_RUN, "0", &l);
}
END_TEST

/* A model NAME is looked up in the models directory, a PATH must be a readable file. */
START_TEST(model_names_and_paths)
{
    struct hp_joblimits l;
    char dir[1024], ini[1100], sub[1100];

    hp_joblimits_init(&l);
    snprintf(dir, sizeof(dir), "%s", test_fresh_dir());
    snprintf(l.models_dir, sizeof(l.models_dir), "%s", dir);
    snprintf(ini, sizeof(ini), "%s/tiny.ini", dir);
    FILE *f = fopen(ini, "w");
    ck_assert_ptr_nonnull(f);
    fputs("[model]\n", f);
    fclose(f);
    snprintf(sub, sizeof(sub), "%s/sub.ini", dir); /* a directory named like a model */
    ck_assert_int_eq(mkdir(sub, 0755), 0);

    ASSERT_OK(HP_JOBOPT_MODEL, "tiny", &l);
    ASSERT_OK(HP_JOBOPT_MODEL, ini, &l);
    ASSERT_BAD(HP_JOBOPT_MODEL, "nosuchmodel", &l);
    ck_assert_ptr_nonnull(strstr(err, "--hetpipe-model=nosuchmodel: unknown model"));
    ck_assert_ptr_nonnull(strstr(err, dir));
    ck_assert_ptr_nonnull(strstr(err, "models there: sub, tiny")); /* sorted */
    ASSERT_BAD(HP_JOBOPT_MODEL, "", &l);
    ASSERT_BAD(HP_JOBOPT_MODEL, "a b", &l);
    ck_assert_ptr_nonnull(strstr(err, "not a model name"));
    ASSERT_BAD(HP_JOBOPT_MODEL, "tiny;rm", &l);
    ASSERT_BAD(HP_JOBOPT_MODEL, "/nonexistent/m.ini", &l);
    ck_assert_ptr_nonnull(strstr(err, "No such file or directory"));
    ASSERT_BAD(HP_JOBOPT_MODEL, "nonexistent.ini", &l); /* ends in .ini: a path */
    ASSERT_BAD(HP_JOBOPT_MODEL, sub, &l);
    ck_assert_ptr_nonnull(strstr(err, "not a regular file"));
    ASSERT_BAD(HP_JOBOPT_MODEL, "sub", &l);
    /* without check_files only the form counts */
    ck_assert_int_eq(hp_jobopt_check(HP_JOBOPT_MODEL, "m", "nosuchmodel", &l, 0, err, 64), 0);
    ck_assert_int_eq(hp_jobopt_check(HP_JOBOPT_MODEL, "m", "/nonexistent/m.ini", &l, 0, err, 64),
                     0);
    ck_assert_int_eq(hp_jobopt_check(HP_JOBOPT_MODEL, "m", "a b", &l, 0, err, 64), -1);
    ck_assert_int_eq(hp_jobopt_check(HP_JOBOPT_MODEL, "m", "", &l, 0, err, 64), -1);
    /* an empty models directory */
    unlink(ini);
    rmdir(sub);
    ASSERT_BAD(HP_JOBOPT_MODEL, "tiny", &l);
    ck_assert_ptr_nonnull(strstr(err, "models there: none"));
    rmdir(dir);
}
END_TEST

START_TEST(env_names_and_short_buffers)
{
    struct hp_joblimits l;
    char small[16];

    hp_joblimits_init(&l);
    ck_assert_int_eq(
        hp_jobopt_check(HP_JOBOPT_STALENESS, "HETPIPE_STALENESS", "x", &l, 0, err, sizeof(err)),
        -1);
    ck_assert_str_eq(err, "HETPIPE_STALENESS=x: must be an integer from 0 to 64");
    ck_assert_int_eq(
        hp_jobopt_check(HP_JOBOPT_POLICY, "HETPIPE_POLICY", "x", &l, 0, small, sizeof(small)), -1);
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1); /* cut, terminated */
    ck_assert_int_eq(hp_jobopt_check(HP_JOBOPT_COUNT, "x", "1", &l, 0, err, sizeof(err)), -1);
}
END_TEST

START_TEST(plugstack_limits)
{
    struct hp_joblimits l;

    hp_joblimits_init(&l);
    ck_assert_int_eq(hp_joblimits_arg(&l, "max_staleness=3", err, sizeof(err)), 0);
    ck_assert_int_eq(l.max_staleness, 3);
    ck_assert_int_eq(hp_joblimits_arg(&l, "max_staleness=0", err, sizeof(err)), 0);
    ck_assert_int_eq(l.max_staleness, 0);
    ck_assert_int_eq(hp_joblimits_arg(&l, "max_nm=8", err, sizeof(err)), 0);
    ck_assert_int_eq(l.max_nm, 8);
    ck_assert_int_eq(hp_joblimits_arg(&l, "max_batch=256", err, sizeof(err)), 0);
    ck_assert_int_eq(l.max_batch, 256);
    ck_assert_int_eq(hp_joblimits_arg(&l, "max_epochs=20", err, sizeof(err)), 0);
    ck_assert_int_eq(l.max_epochs, 20);
    /* bad values leave the limit as it was */
    static const char *const bad[] = {
        "max_staleness=x", "max_staleness=-1", "max_staleness=", "max_staleness", "max_nm=0",
        "max_nm=1025",     "max_batch=65537",  "max_epochs=0",   "max_epochs=1x", NULL};
    for (const char *const *b = bad; *b; b++) {
        ck_assert_msg(hp_joblimits_arg(&l, *b, err, sizeof(err)) == -1, "'%s' accepted", *b);
        ck_assert_msg(strstr(err, *b) != NULL, "'%s' not named in '%s'", *b, err);
    }
    ck_assert_int_eq(l.max_staleness, 0);
    ck_assert_int_eq(l.max_nm, 8);
    ck_assert_int_eq(l.max_batch, 256);
    ck_assert_int_eq(l.max_epochs, 20);
    ck_assert_int_eq(hp_joblimits_arg(&l, "max_staleness=x", err, sizeof(err)), -1);
    ck_assert_str_eq(err, "'max_staleness=x': max_staleness must be an integer from 0 to 1000000");

    ck_assert_int_eq(hp_joblimits_arg(&l, "config=/site/hetpipe.conf", err, sizeof(err)), 0);
    ck_assert_str_eq(l.config, "/site/hetpipe.conf");
    ck_assert_int_eq(l.config_given, 1);
    ck_assert_int_eq(hp_joblimits_arg(&l, "models=/site/models", err, sizeof(err)), 0);
    ck_assert_str_eq(l.models_dir, "/site/models");
    ck_assert_int_eq(hp_joblimits_arg(&l, "models=", err, sizeof(err)), -1);
    ck_assert_int_eq(hp_joblimits_arg(&l, "config", err, sizeof(err)), -1);
    ck_assert_str_eq(l.models_dir, "/site/models");
}
END_TEST

START_TEST(plugstack_policies)
{
    struct hp_joblimits l;

    hp_joblimits_init(&l);
    ck_assert_int_eq(hp_joblimits_arg(&l, "policies=ed,hd", err, sizeof(err)), 0);
    ck_assert_uint_eq(l.policies, HP_JOBOPT_POLICY_ED | HP_JOBOPT_POLICY_HD);
    ASSERT_OK(HP_JOBOPT_POLICY, "ed", &l);
    ASSERT_OK(HP_JOBOPT_POLICY, "hd", &l);
    ASSERT_BAD(HP_JOBOPT_POLICY, "np", &l);
    ck_assert_str_eq(err,
                     "--hetpipe-policy=np: policy not allowed on this cluster; allowed: ed, hd");
    ASSERT_BAD(HP_JOBOPT_POLICY, "fast", &l);
    ck_assert_str_eq(err, "--hetpipe-policy=fast: unknown policy; allowed: ed, hd");
    static const char *const bad[] = {"policies=",   "policies=ed,",   "policies=,ed",
                                      "policies=zz", "policies=ed hd", "policies",
                                      NULL};
    for (const char *const *b = bad; *b; b++)
        ck_assert_msg(hp_joblimits_arg(&l, *b, err, sizeof(err)) == -1, "'%s' accepted", *b);
    ck_assert_uint_eq(l.policies, HP_JOBOPT_POLICY_ED | HP_JOBOPT_POLICY_HD);
    ck_assert_int_eq(hp_joblimits_arg(&l, "policies=dp", err, sizeof(err)), 0);
    ck_assert_uint_eq(l.policies, HP_JOBOPT_POLICY_DP);
}
END_TEST

START_TEST(plugstack_defaults)
{
    struct hp_joblimits l;
    char arg[64] = "default_staleness=4";

    hp_joblimits_init(&l);
    ck_assert_int_eq(hp_joblimits_arg(&l, arg, err, sizeof(err)), 0);
    ck_assert_str_eq(l.defaults[HP_JOBOPT_STALENESS], "4");
    ck_assert_ptr_eq(l.defaults[HP_JOBOPT_STALENESS], arg + strlen("default_staleness="));
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_policy=ed", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_placement=local", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_nm=auto", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_batch=64", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_epochs=2", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_dry-run=", err, sizeof(err)), 0);
    ck_assert_str_eq(l.defaults[HP_JOBOPT_DRY_RUN], "");
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_dry_run=1", err, sizeof(err)), 0);

    /* each default is checked against the limits as they stand */
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_staleness=65", err, sizeof(err)), -1);
    ck_assert_str_eq(err, "default_staleness=65: must be an integer from 0 to 64");
    ck_assert_str_eq(l.defaults[HP_JOBOPT_STALENESS], "4"); /* unchanged */
    ck_assert_int_eq(hp_joblimits_arg(&l, "max_staleness=100", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_staleness=65", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_joblimits_arg(&l, "policies=np", err, sizeof(err)), 0);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_policy=ed", err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "default_policy=ed: policy not allowed"));
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_policy=fast", err, sizeof(err)), -1);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_nm=0", err, sizeof(err)), -1);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_batch=1x", err, sizeof(err)), -1);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_dry-run=yes", err, sizeof(err)), -1);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_model=", err, sizeof(err)), -1);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_policy", err, sizeof(err)), -1);

    /* a default model NAME must be in the models directory given before it */
    char dir[1024], ini[1100], models[1100];
    snprintf(dir, sizeof(dir), "%s", test_fresh_dir());
    snprintf(ini, sizeof(ini), "%s/tiny.ini", dir);
    FILE *f = fopen(ini, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_model=tiny", err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "unknown model"));
    snprintf(models, sizeof(models), "models=%s", dir);
    ck_assert_int_eq(hp_joblimits_arg(&l, models, err, sizeof(err)), 0);
    ck_assert_int_eq(hp_joblimits_arg(&l, "default_model=tiny", err, sizeof(err)), 0);
    ck_assert_str_eq(l.defaults[HP_JOBOPT_MODEL], "tiny");
    unlink(ini);
    rmdir(dir);
}
END_TEST

START_TEST(plugstack_unknown_key)
{
    struct hp_joblimits l;
    static const char *const bad[] = {
        "bogus=1", "bogus",           "default_=1",       "default_x=1",
        "",        "Max_staleness=3", "max_staleness =3", "default_dry-runs=1",
        NULL};

    hp_joblimits_init(&l);
    for (const char *const *b = bad; *b; b++) {
        ck_assert_msg(hp_joblimits_arg(&l, *b, err, sizeof(err)) == -1, "'%s' accepted", *b);
        ck_assert_msg(strstr(err, "unknown argument") != NULL, "'%s': %s", *b, err);
    }
    ck_assert_int_eq(hp_joblimits_arg(&l, "bogus=1", err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "'bogus=1': unknown argument; known: config, models, "
                                      "max_staleness, max_nm, max_batch, max_epochs, policies, "
                                      "default_policy"));
    ck_assert_ptr_nonnull(strstr(err, "default_dry-run"));
}
END_TEST

START_TEST(allowed_phrases)
{
    struct hp_joblimits l;
    char buf[256];

    hp_joblimits_init(&l);
    l.policies = HP_JOBOPT_POLICY_NP | HP_JOBOPT_POLICY_DP;
    hp_jobopt_allowed(HP_JOBOPT_POLICY, &l, buf, sizeof(buf));
    ck_assert_str_eq(buf, "np, dp");
    hp_jobopt_allowed(HP_JOBOPT_NM, &l, buf, sizeof(buf));
    ck_assert_str_eq(buf, "auto or an integer from 1 to 64");
    hp_jobopt_allowed(HP_JOBOPT_BATCH, &l, buf, 8);
    ck_assert_str_eq(buf, "an inte");
}
END_TEST

Suite *suite_jobopts(void)
{
    Suite *s = suite_create("jobopts");
    TCase *t = tcase_create("jobopts");

    tcase_add_test(t, table_names_and_env);
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
    suite_add_tcase(s, t);
    return s;
}
