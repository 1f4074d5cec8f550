/* options.h - the options table of record.
 *
 * Every option of the hetpipe commands, of hetpipe-rank and of the SPANK plugin, and every
 * HETPIPE_* variable, has one row: one HP_OPTION entry in common/options.def, from which the
 * enum hp_opt, the field of struct hp_options and the row of hp_opts[] all come. A row holds
 * the command-line flag (none for a variable only), the HETPIPE_* variable and the commands
 * that read it, for job options (HP_OPTF_JOB) the --hetpipe-* name (the flag with "hetpipe-"
 * before it) under which the plugin takes it at submit and exports it as the variable, its
 * plan-file key, its type, default, hard limits, the commands that take it and its help text.
 * Parsing, limits, defaults, usage texts and the plan file's option keys all come from the
 * row, so a value is checked by the same code against one set of hard limits wherever it
 * enters (command line, environment, plan file, plugstack.conf, the plugin at submit), once
 * per process boundary; a site's plugstack.conf may only narrow the limits (hp_optlimits).
 *
 * Values live in struct hp_options, one field per row, of the row's type: INT, WORD and FLAG
 * rows a long (a WORD's value is its index in the row's words), REAL rows a double, TEXT and
 * MODEL rows a const char * (pointing into what was parsed: argv, the environment, or a
 * loaded file), EVERY rows a struct hp_opt_every, AUTOPATH rows a struct hp_opt_autopath.
 *
 * libc only: the SPANK plugin links this file inside slurmstepd, so nothing here logs;
 * problems are described in the caller's buffer (err, errlen: always terminated).
 */
#ifndef HP_OPTIONS_H
#define HP_OPTIONS_H

#include <stddef.h>

/* The commands, as scopes of the table's rows. */
enum hp_cmd {
    HP_CMD_TRAIN,
    HP_CMD_MODEL,
    HP_CMD_TIME,
    HP_CMD_PLAN,
    HP_CMD_PROFILE,
    HP_CMD_RUN,
    HP_CMD_LAUNCH,
    HP_CMD_RANK,
    HP_CMD_DOCTOR,
    HP_CMD_REPORT,
    HP_CMD_TIMELINE,
    HP_CMD_DATA,
    HP_CMD_COUNT
};

/* The rows, in the order of options.def. */
enum hp_opt {
#define HP_OPTION(id, field, type, ...) HP_OPT_##id,
#include "options.def"
#undef HP_OPTION
    HP_OPT_COUNT
};

enum hp_opt_type {
    HP_OT_INT,      /* a decimal integer in [min, max], or one of the row's special words */
    HP_OT_REAL,     /* a number in [min, max], or one of the row's special words */
    HP_OT_WORD,     /* one of the row's words; the value is its index */
    HP_OT_TEXT,     /* a non-empty string (a path, a name) */
    HP_OT_MODEL,    /* a model: NAME (letters, digits, '_', '.', '-') or a PATH (has a '/' or
                       ends in .ini) */
    HP_OT_FLAG,     /* no value; 1 when given */
    HP_OT_EVERY,    /* a count or a duration: N (an integer in [min, max]), or Nmin, Nh or Ns
                       (N a number from 1e-3 to 1e7 of the unit) */
    HP_OT_AUTOPATH, /* "auto", or a path: non-empty, no control characters */
};

/* An EVERY value: a count, or a time in seconds; both 0 when unset. */
struct hp_opt_every {
    long samples;
    double seconds;
};

/* An AUTOPATH value: automatic ("auto"), or path; NULL and 0 when unset. */
struct hp_opt_autopath {
    const char *path; /* into what was parsed, as for TEXT */
    int automatic;
};

/* The C type of a row's value, by its TYPE in options.def. */
#define HP_OPT_CTYPE_INT long
#define HP_OPT_CTYPE_REAL double
#define HP_OPT_CTYPE_WORD long
#define HP_OPT_CTYPE_TEXT const char *
#define HP_OPT_CTYPE_MODEL const char *
#define HP_OPT_CTYPE_FLAG long
#define HP_OPT_CTYPE_EVERY struct hp_opt_every
#define HP_OPT_CTYPE_AUTOPATH struct hp_opt_autopath

/* Values of the schedule, optimizer, device, HETPIPE_LIVENESS and HETPIPE_CLOCK_SYNC words (their
 * order in the table). */
enum hp_schedule { HP_SCHEDULE_COSINE, HP_SCHEDULE_CONSTANT };
enum hp_optimizer { HP_OPTIMIZER_SGD, HP_OPTIMIZER_ADAMW };
enum hp_ckpt_write { HP_CKPT_WRITE_BACKGROUND, HP_CKPT_WRITE_WAIT };
enum hp_device_choice { HP_DEVICE_CHOICE_CPU, HP_DEVICE_CHOICE_CUDA, HP_DEVICE_CHOICE_AUTO };
enum hp_liveness { HP_LIVENESS_WATCH, HP_LIVENESS_EXIT };
enum hp_clock_sync { HP_CLOCK_SYNC_AUTO, HP_CLOCK_SYNC_MEASURE };
enum hp_split_choice { HP_SPLIT_CHOICE_TRAIN, HP_SPLIT_CHOICE_VAL, HP_SPLIT_CHOICE_BOTH };

/* A word that stands for a number ("auto" = 0 for --nm). */
struct hp_opt_special {
    const char *word;
    double value;
};

/* run and launch hand the option on to every rank (hetpipe-rank's command line). */
#define HP_OPTF_PASS 1u
/* A job option: also --hetpipe-FLAG on sbatch, salloc and srun, which the plugin checks at
 * submit and exports as the row's variable (it has a flag and a variable). */
#define HP_OPTF_JOB 2u
/* Its plan key came later: a plan file without it is read with the row's default. */
#define HP_OPTF_PLAN_OPTIONAL 4u

struct hp_opt_info {
    const char *flag;     /* "staleness": --staleness on the command line; NULL: a variable only */
    const char *env;      /* its variable ("HETPIPE_STALENESS"), or NULL */
    unsigned env_cmds;    /* the commands that read env: bit 1 << enum hp_cmd */
    const char *plan_key; /* its key in the plan file's [plan] section, or NULL */
    enum hp_opt_type type;
    const char *arg; /* the value's name in usage texts ("D", "auto|N", "FILE"); NULL: flag */
    const char *const *words;             /* WORD: the values, NULL-terminated */
    const struct hp_opt_special *special; /* INT, REAL: words for numbers, {NULL} ended */
    double min, max;                      /* INT, REAL, EVERY (its count): the hard limits */
    double site_max; /* job INT options: the plugin's limit unless plugstack.conf says */
    const char *def; /* the default, as it would be written; NULL: none (0, NULL) */
    const char *cmd_def[HP_CMD_COUNT]; /* a command's own default, where it differs */
    unsigned cmds;                     /* the commands that take the flag: bit 1 << enum hp_cmd */
    unsigned flags;                    /* HP_OPTF_* */
    size_t offset;                     /* of its value in struct hp_options */
    size_t size;                       /* of its value */
    const char *help;                  /* what it does, one phrase */
};

/* Indexed by enum hp_opt. */
extern const struct hp_opt_info hp_opts[HP_OPT_COUNT];

/* Every option's value, one field per row (see the table for each one's type, limits and
 * default). */
struct hp_options {
#define HP_OPTION(id, field, type, ...) HP_OPT_CTYPE_##type field;
#include "options.def"
#undef HP_OPTION
    unsigned char given[HP_OPT_COUNT]; /* set from the command line or the environment */
};

/* What a site allows (the plugin's plugstack.conf arguments), within the hard limits.
 * Caller-owned; no heap. */
struct hp_optlimits {
    double max[HP_OPT_COUNT];           /* INT options: the largest value allowed */
    unsigned words[HP_OPT_COUNT];       /* WORD options: bit i allows words[i] */
    char models_dir[1024];              /* where a model NAME is looked up: HP_DATADIR "/models" */
    char config[1024];                  /* the site config: HP_SYSCONFDIR "/hetpipe.conf" */
    int config_given;                   /* config= was among the arguments */
    const char *defaults[HP_OPT_COUNT]; /* the site's defaults for job options, NULL: none;
                                           they point into the argument they came from */
};

/* 1 if option o is a job option (HP_OPTF_JOB: --hetpipe-*, exported as HETPIPE_*). */
int hp_opt_is_job(enum hp_opt o);

/* The row of flag `name` among the options of command cmd, or -1. */
int hp_opt_find(const char *name, enum hp_cmd cmd);

/* The default of option o for command cmd, as text (NULL: none). */
const char *hp_opt_default(enum hp_opt o, enum hp_cmd cmd);

/* Every field of o set to command cmd's defaults, nothing given. */
void hp_options_init(struct hp_options *o, enum hp_cmd cmd);

/* The hard limits (and for job options the plugin's default site limits when `site`). */
void hp_optlimits_init(struct hp_optlimits *l, int site);

/* Parse `value` for option o and store it in opts (given set). `what` names where it came from
 * in the message ("--batch", "--hetpipe-batch", "HETPIPE_BATCH", "plan.ini: [plan]: batch").
 * l: the limits (NULL: the hard ones). check_files: a model must exist (NAME as
 * l->models_dir/NAME.ini, or PATH a readable regular file). A FLAG takes NULL, "" or "1"
 * (what the plugin exports). 0, or -1 with err "WHAT=VALUE: why; allowed" and opts unchanged:
 *   "--hetpipe-staleness=-1: must be an integer from 0 to 64" */
int hp_opt_set(struct hp_options *opts, enum hp_opt o, const char *what, const char *value,
               const struct hp_optlimits *l, int check_files, char *err, size_t errlen);

/* Option o's variable (hp_opts[o].env) from the environment into opts, through hp_opt_set
 * with the variable's name as `what` and the hard limits: the one way a HETPIPE_* variable is
 * read. 0 when it was set (given set); 1 when it is unset or empty, or o has no variable
 * (opts unchanged); -1 with err "HETPIPE_STALENESS=-1: must be an integer from 0 to 1000000"
 * (opts unchanged). Whether the command line wins is the caller's choice (opts->given). */
int hp_opt_env(struct hp_options *opts, enum hp_opt o, char *err, size_t errlen);

/* As hp_opt_set without storing the value (the plugin keeps the text). */
int hp_opt_check(enum hp_opt o, const char *what, const char *value, const struct hp_optlimits *l,
                 int check_files, char *err, size_t errlen);

/* What option o allows under l, as a phrase that follows "must be" ("an integer from 0 to 64",
 * "auto or an integer from 1 to 64", "auto, np, ed, hd, dp"). */
void hp_opt_allowed(enum hp_opt o, const struct hp_optlimits *l, char *buf, size_t n);

/* Option o's value in opts as text that hp_opt_set reads back to the same value (a number
 * with as few digits as that takes). 0; 1 when there is none (a NULL string, a FLAG not
 * given); -1 when it does not fit in buf (size n). */
int hp_opt_format(const struct hp_options *opts, enum hp_opt o, char *buf, size_t n);

/* The word of WORD option o with index v ("?" out of range). */
const char *hp_opt_word(enum hp_opt o, long v);

/* Apply one plugstack.conf argument to l: config=PATH, models=DIR, max_NAME=N (job INT
 * options), policies=a,b,... , default_NAME=VALUE (a job option; '-' may be written '_'; the
 * value checked against l as it stands, so give limits first; l->defaults then point into
 * arg, so keep it alive). 0, or -1 with err naming the argument and what is allowed; l is
 * unchanged on error. */
int hp_optlimits_arg(struct hp_optlimits *l, const char *arg, char *err, size_t errlen);

#endif
