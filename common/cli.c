/* cli.c - command lines from the options table (cli.h). */
#include "cli.h"

#include "log.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define OPT_VAL_BASE 256

static const char *const cmd_names[HP_CMD_COUNT] = {
    [HP_CMD_TRAIN] = "train",   [HP_CMD_MODEL] = "model",       [HP_CMD_TIME] = "time",
    [HP_CMD_PLAN] = "plan",     [HP_CMD_PROFILE] = "profile",   [HP_CMD_RUN] = "run",
    [HP_CMD_LAUNCH] = "launch", [HP_CMD_RANK] = "hetpipe-rank", [HP_CMD_DOCTOR] = "doctor",
    [HP_CMD_REPORT] = "report", [HP_CMD_TIMELINE] = "timeline", [HP_CMD_DATA] = "data",
};

const char *hp_cli_name(enum hp_cmd cmd)
{
    return (unsigned)cmd < HP_CMD_COUNT ? cmd_names[cmd] : "?";
}

/* cmd takes option o on its command line */
static int takes(enum hp_opt o, enum hp_cmd cmd)
{
    return hp_opts[o].flag && (hp_opts[o].cmds & (1u << cmd)) != 0;
}

/* "hetpipe train" or "hetpipe-rank": what the user typed, for "see ... --help" */
static void full_name(enum hp_cmd cmd, char *buf, size_t n)
{
    if (cmd == HP_CMD_RANK)
        snprintf(buf, n, "%s", cmd_names[cmd]);
    else
        snprintf(buf, n, "hetpipe %s", cmd_names[cmd]);
}

/* Print text at column `indent`, wrapped before column 100; the first line starts at `col`. */
static void wrap(FILE *f, const char *text, int col, int indent)
{
    const char *p = text;

    while (*p) {
        size_t word = strcspn(p, " ");
        if (col > indent && col + 1 + (int)word > 100) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", (int)word, p);
        col += (int)word;
        p += word;
        p += strspn(p, " ");
    }
    fputc('\n', f);
}

static int reads(enum hp_opt o, enum hp_cmd cmd)
{
    return hp_opts[o].env && (hp_opts[o].env_cmds & (1u << cmd)) != 0;
}

/* One entry of the usage: head ("  --batch N"), then text at column 27. */
static void entry(FILE *f, const char *head, const char *text)
{
    fputs(head, f);
    if ((int)strlen(head) < 27)
        fprintf(f, "%*s", 27 - (int)strlen(head), "");
    else
        fprintf(f, "\n%*s", 27, "");
    wrap(f, text, 27, 27);
}

/* The row's help, allowed values (numbers), default for cmd and variable, into text. */
static void describe(enum hp_opt o, enum hp_cmd cmd, char *text, size_t n)
{
    const struct hp_opt_info *r = &hp_opts[o];
    const char *def = hp_opt_default(o, cmd);
    char allowed[1200];

    snprintf(text, n, "%s", r->help);
    if (r->type == HP_OT_INT || r->type == HP_OT_REAL) {
        hp_opt_allowed(o, NULL, allowed, sizeof(allowed));
        snprintf(text + strlen(text), n - strlen(text), ": %s", allowed);
    }
    if (def && *def)
        snprintf(text + strlen(text), n - strlen(text), " (default %s)", def);
    if (r->flag && reads(o, cmd))
        snprintf(text + strlen(text), n - strlen(text), " [%s]", r->env);
}

void hp_cli_usage(FILE *f, enum hp_cmd cmd, const char *synopsis)
{
    char head[64], text[1600];
    int env = 0;

    fputs(synopsis, f);
    fprintf(f, "options:\n");
    for (int o = 0; o < HP_OPT_COUNT; o++) {
        const struct hp_opt_info *r = &hp_opts[o];
        if (!r->flag || !takes((enum hp_opt)o, cmd))
            continue;
        snprintf(head, sizeof(head), "  --%s%s%s", r->flag, r->arg ? " " : "",
                 r->arg ? r->arg : "");
        describe((enum hp_opt)o, cmd, text, sizeof(text));
        entry(f, head, text);
    }
    /* the variables that stand for no option */
    for (int o = 0; o < HP_OPT_COUNT; o++) {
        const struct hp_opt_info *r = &hp_opts[o];
        if (r->flag || !reads((enum hp_opt)o, cmd))
            continue;
        if (!env++)
            fprintf(f, "environment:\n");
        snprintf(head, sizeof(head), "  %s=%s", r->env, r->arg ? r->arg : "1");
        describe((enum hp_opt)o, cmd, text, sizeof(text));
        entry(f, head, text);
    }
}

/* getopt_long's table for cmd: its options (val = OPT_VAL_BASE + row) and --help. */
static struct option *option_list(enum hp_cmd cmd)
{
    struct option *l = calloc(HP_OPT_COUNT + 2, sizeof(*l));
    int n = 0;

    if (!l)
        return NULL;
    for (int o = 0; o < HP_OPT_COUNT; o++)
        if (takes((enum hp_opt)o, cmd))
            l[n++] = (struct option){
                hp_opts[o].flag, hp_opts[o].type == HP_OT_FLAG ? no_argument : required_argument,
                NULL, OPT_VAL_BASE + o};
    l[n] = (struct option){"help", no_argument, NULL, 'h'};
    return l;
}

/* The message for what getopt_long refused (opterr is off). */
static void refused(enum hp_cmd cmd, int c, int argc, char **argv)
{
    char name[64];
    const char *arg = optind - 1 < argc && optind > 0 ? argv[optind - 1] : "?";

    full_name(cmd, name, sizeof(name));
    if (c == ':' && optopt >= OPT_VAL_BASE && optopt < OPT_VAL_BASE + HP_OPT_COUNT)
        hp_error("option '--%s' needs a value (see %s --help)", hp_opts[optopt - OPT_VAL_BASE].flag,
                 name);
    else if (optopt >= OPT_VAL_BASE && optopt < OPT_VAL_BASE + HP_OPT_COUNT)
        hp_error("option '--%s' takes no value (see %s --help)",
                 hp_opts[optopt - OPT_VAL_BASE].flag, name);
    else
        hp_error("%s: unknown option '%s' (see %s --help)", cmd_names[cmd], arg, name);
}

int hp_cli_parse(enum hp_cmd cmd, const char *synopsis, int argc, char **argv, struct hp_options *o,
                 int *rest)
{
    struct option *l = option_list(cmd);
    char err[2048], what[64];
    int c, rc = 0;

    if (!l) {
        hp_error("%s: out of memory", cmd_names[cmd]);
        return -1;
    }
    optind = 0; /* GNU: start over (the tests parse several command lines in one process) */
    opterr = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, ":h", l, NULL)) != -1) {
        if (c == 'h') {
            hp_cli_usage(stdout, cmd, synopsis);
            rc = 1;
        } else if (c >= OPT_VAL_BASE && c < OPT_VAL_BASE + HP_OPT_COUNT) {
            const enum hp_opt id = (enum hp_opt)(c - OPT_VAL_BASE);
            snprintf(what, sizeof(what), "--%s", hp_opts[id].flag);
            if (hp_opt_set(o, id, what, optarg, NULL, 0, err, sizeof(err))) {
                hp_error("%s", err);
                rc = -1;
            }
        } else {
            refused(cmd, c, argc, argv);
            rc = -1;
        }
    }
    free(l);
    if (rc == 0 && o->quiet && o->verbose) {
        hp_error("%s: options '--quiet' and '--verbose' exclude each other", cmd_names[cmd]);
        rc = -1;
    }
    if (rc == 0 && rest)
        *rest = optind;
    return rc;
}

int hp_cli_from_env(struct hp_options *o, enum hp_cmd cmd)
{
    char err[2048];

    for (int i = 0; i < HP_OPT_COUNT; i++) {
        if (o->given[i] || !takes((enum hp_opt)i, cmd) || !reads((enum hp_opt)i, cmd))
            continue;
        if (hp_opt_env(o, (enum hp_opt)i, err, sizeof(err)) < 0) {
            hp_error("%s: %s", cmd_names[cmd], err);
            return -1;
        }
    }
    return 0;
}

int hp_cli_rank_args(const struct hp_options *o, enum hp_cmd cmd, const char **av, int *ac, int max,
                     char *store, size_t n)
{
    size_t used = 0;

    for (int i = 0; i < HP_OPT_COUNT; i++) {
        const struct hp_opt_info *r = &hp_opts[i];
        char *s = store + used;
        const char *dc = hp_opt_default((enum hp_opt)i, cmd);
        const char *dr = hp_opt_default((enum hp_opt)i, HP_CMD_RANK);
        if (!(r->flags & HP_OPTF_PASS) || !takes((enum hp_opt)i, cmd) ||
            !takes((enum hp_opt)i, HP_CMD_RANK))
            continue;
        /* what the user gave, and where cmd's default is not the rank's */
        if (!o->given[i] && (dc == dr || (dc && dr && strcmp(dc, dr) == 0)))
            continue;
        const size_t len = (size_t)snprintf(s, n - used, "--%s", r->flag) + 1;
        if (used + len >= n)
            goto full;
        const int f = hp_opt_format(o, (enum hp_opt)i, s + len, n - used - len);
        if (f == 1)
            continue; /* no value: a path not given, a flag off */
        if (f < 0 || *ac + 3 > max)
            goto full;
        av[(*ac)++] = s;
        if (r->type != HP_OT_FLAG) {
            av[(*ac)++] = s + len;
            used += len + strlen(s + len) + 1;
        } else {
            used += len;
        }
    }
    av[*ac] = NULL;
    return 0;
full:
    hp_error("%s: too many options to hand on to the ranks", cmd_names[cmd]);
    return -1;
}
