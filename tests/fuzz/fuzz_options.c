/* fuzz_options.c - the option values of the options table (common/options.c), as the CLI, the
 * HETPIPE_* variables, plan files and the SPANK plugin give them, and hetpipe's command lines
 * (common/cli.c).
 *
 * Input: a mode byte, a selector byte, then the rest:
 *   mode % 3 == 0: the rest is the value of option (selector % HP_OPT_COUNT), under the hard
 *                  limits; mode bit 2: the value is missing (NULL); bit 3: files checked;
 *   mode % 3 == 1: the same under the plugin's default site limits (what slurmstepd checks);
 *   mode % 3 == 2: the rest is the arguments of command (selector % HP_CMD_COUNT), one a line.
 * A value that is accepted must be formatted back (hp_opt_format) into text that is accepted
 * again as the same value (--checkpoint-every's times, --resume's auto or path included), and
 * hp_opt_check must agree with hp_opt_set. Rows without a flag (a HETPIPE_* variable only)
 * are values like the others; a variable is read as hp_opt_env reads it.
 */
#include "cli.h"
#include "fuzz.h"
#include "options.h"

#define ARGS_MAX 64

static struct hp_optlimits site;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    hp_optlimits_init(&site, 1);
    return 0;
}

static int same_value(const struct hp_options *a, const struct hp_options *b, enum hp_opt o)
{
    const char *x = (const char *)a + hp_opts[o].offset, *y = (const char *)b + hp_opts[o].offset;

    switch (hp_opts[o].type) {
    case HP_OT_REAL: {
        double d, e;
        memcpy(&d, x, sizeof(d));
        memcpy(&e, y, sizeof(e));
        return d == e;
    }
    case HP_OT_TEXT:
    case HP_OT_MODEL: {
        const char *s, *t;
        memcpy(&s, x, sizeof(s));
        memcpy(&t, y, sizeof(t));
        return s && t && strcmp(s, t) == 0;
    }
    case HP_OT_EVERY: {
        struct hp_opt_every e, f;
        memcpy(&e, x, sizeof(e));
        memcpy(&f, y, sizeof(f));
        return e.samples == f.samples && e.seconds == f.seconds;
    }
    case HP_OT_AUTOPATH: {
        struct hp_opt_autopath p, q;
        memcpy(&p, x, sizeof(p));
        memcpy(&q, y, sizeof(q));
        return p.automatic == q.automatic &&
               (p.path == q.path || (p.path && q.path && strcmp(p.path, q.path) == 0));
    }
    default:
        return memcmp(x, y, sizeof(long)) == 0;
    }
}

static void one_value(int mode, int sel, const char *value)
{
    const enum hp_opt o = (enum hp_opt)(sel % HP_OPT_COUNT);
    const struct hp_optlimits *l = mode % 3 == 1 ? &site : NULL;
    const int check_files = (mode >> 3) & 1;
    const char *v = (mode >> 2) & 1 ? NULL : value;
    struct hp_options a, b;
    char err[2048], text[4200], allowed[1200];
    int rc, rc2;

    hp_options_init(&a, (enum hp_cmd)((sel >> 4) % HP_CMD_COUNT));
    rc = hp_opt_set(&a, o, "--fuzz", v, l, check_files, err, sizeof(err));
    rc2 = hp_opt_check(o, "--fuzz", v, l, check_files, err, sizeof(err));
    if (rc != rc2 || (rc && !err[0]))
        abort(); /* set and check disagree, or a refusal without a message */
    hp_opt_allowed(o, l, allowed, (size_t)(mode >> 4) + 1); /* small buffers too */
    hp_opt_allowed(o, l, allowed, sizeof(allowed));
    hp_opt_find(value, (enum hp_cmd)((sel >> 4) % HP_CMD_COUNT));
    if (hp_opts[o].env && v && *v && !l && !check_files) {
        /* the variable, read through the row, agrees with the option */
        setenv(hp_opts[o].env, v, 1);
        if ((hp_opt_env(&b, o, text, sizeof(text)) == 0) != (rc == 0))
            abort();
        unsetenv(hp_opts[o].env);
    }
    if (rc) {
        snprintf(fuzz_log, sizeof(fuzz_log), "%s", err);
        return;
    }
    rc = hp_opt_format(&a, o, text, sizeof(text));
    if (rc < 0)
        abort(); /* an accepted value that cannot be written */
    if (rc == 1)
        return;
    hp_options_init(&b, HP_CMD_RANK);
    if (hp_opt_set(&b, o, "--fuzz", text, l, check_files, err, sizeof(err)) ||
        !same_value(&a, &b, o)) {
        fprintf(stderr, "option %s: '%s' formats as '%s', which %s\n",
                hp_opts[o].flag ? hp_opts[o].flag : hp_opts[o].env, v ? v : "(null)", text,
                err[0] ? err : "reads back as another value");
        abort();
    }
}

static void command_line(int sel, char *rest)
{
    const enum hp_cmd cmd = (enum hp_cmd)(sel % HP_CMD_COUNT);
    char *argv[ARGS_MAX + 2], store[8192];
    const char *av[2 * HP_OPT_COUNT + 2];
    struct hp_options o;
    int argc = 0, first = 0, ac = 0;

    argv[argc++] = "hetpipe";
    for (char *p = rest; argc <= ARGS_MAX;) {
        argv[argc++] = p;
        p = strchr(p, '\n');
        if (!p)
            break;
        *p++ = '\0';
    }
    argv[argc] = NULL;
    hp_options_init(&o, cmd);
    if (hp_cli_parse(cmd, "hetpipe fuzz [OPTIONS]", argc, argv, &o, &first) == 0) {
        if (first < 1 || first > argc)
            abort();
        hp_cli_rank_args(&o, cmd, av, &ac, (int)(sizeof(av) / sizeof(av[0])) - 1, store,
                         sizeof(store));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s;

    if (size < 2)
        return 0;
    fuzz_begin();
    s = fuzz_str(data + 2, size - 2);
    if (data[0] % 3 == 2)
        command_line(data[1], s);
    else
        one_value(data[0], data[1], s);
    free(s);
    return 0;
}
