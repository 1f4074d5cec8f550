/* options.h - the options table of record.
 *
 * Every option of the hetpipe commands, of hetpipe-rank and of the SPANK plugin has one row
 * in hp_opts[]: its command-line flag, for job options its --hetpipe-* name (the flag with
 * "hetpipe-" before it) and HETPIPE_* variable, its plan-file key, its type, default, hard
 * limits, the commands that take it and its help text. Parsing, limits, defaults and usage
 * texts all come from the row, so a value is checked against one set of hard limits wherever
 * it enters (command line, environment, plan file, plugstack.conf), once per process
 * boundary; a site's plugstack.conf may only narrow the limits (struct hp_optlimits).
 *
 * Values live in struct hp_options, one field per row: INT, WORD and FLAG rows in a long (a
 * WORD's value is its index in the row's words), REAL rows in a double, TEXT and MODEL rows in
 * a const char * (pointing into what was parsed: argv, the environment, or a loaded file).
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
    HP_CMD_COUNT
};

enum hp_opt {
    /* job options: also --hetpipe-NAME on sbatch, salloc and srun, HETPIPE_NAME in the job */
    HP_OPT_POLICY,
    HP_OPT_PLACEMENT,
    HP_OPT_STALENESS,
    HP_OPT_NM,
    HP_OPT_RECOMPUTE,
    HP_OPT_MODEL,
    HP_OPT_BATCH,
    HP_OPT_EPOCHS,
    HP_OPT_CHECKPOINT_DIR,
    HP_OPT_CHECKPOINT_EVERY,
    HP_OPT_CHECKPOINT_KEEP,
    HP_OPT_RESUME,
    HP_OPT_TIMELINE,
    HP_OPT_DRY_RUN,
    /* planning */
    HP_OPT_NM_MAX,
    HP_OPT_SEED,
    HP_OPT_CLUSTER,
    HP_OPT_CONFIG,
    HP_OPT_PROFILE,
    HP_OPT_OUT,
    HP_OPT_QUIET,
    HP_OPT_VERBOSE,
    /* training: hetpipe train, and every rank */
    HP_OPT_LR,
    HP_OPT_MOMENTUM,
    HP_OPT_WEIGHT_DECAY,
    HP_OPT_SCHEDULE,
    HP_OPT_TRAIN_LIMIT,
    HP_OPT_TEST_LIMIT,
    HP_OPT_LOG_EVERY,
    HP_OPT_DATA,
    HP_OPT_METRICS,
    HP_OPT_STEP_LOG,
    HP_OPT_SAVE_PARAMS,
    HP_OPT_DEVICE,
    HP_OPT_THREADS,
    /* ranks of a job */
    HP_OPT_WEIGHT_LOG,
    HP_OPT_STATS,
    HP_OPT_TRACE,
    HP_OPT_EVAL_EVERY,
    HP_OPT_STOP_AT,
    HP_OPT_TIMEOUT,
    HP_OPT_NO_STASH,
    HP_OPT_EMULATE,
    /* hetpipe run, hetpipe launch, hetpipe-rank */
    HP_OPT_LOCAL,
    HP_OPT_KEEP,
    HP_OPT_RUN_DIR,
    HP_OPT_PLAN,
    HP_OPT_SRUN,
    HP_OPT_RANK,
    HP_OPT_BOOT_DIR,
    HP_OPT_SELF_CHECK,
    /* hetpipe model, time, profile */
    HP_OPT_UNITS,
    HP_OPT_STEPS,
    HP_OPT_WARMUP,
    HP_OPT_OP_PROFILE,
    HP_OPT_TYPE,
    /* hetpipe doctor */
    HP_OPT_REQUIRE_GPU,
    HP_OPT_NO_SLURM,
    HP_OPT_COUNT
};

/* The job options are the table's first rows. */
#define HP_OPT_JOB_COUNT (HP_OPT_DRY_RUN + 1)

enum hp_opt_type {
    HP_OT_INT,   /* a decimal integer in [min, max], or one of the row's special words */
    HP_OT_REAL,  /* a number in [min, max], or one of the row's special words */
    HP_OT_WORD,  /* one of the row's words; the value is its index */
    HP_OT_TEXT,  /* a non-empty string (a path, a name) */
    HP_OT_MODEL, /* a model: NAME (letters, digits, '_', '.', '-') or a PATH (has a '/' or
                    ends in .ini) */
    HP_OT_FLAG   /* no value; 1 when given */
};

/* Values of the schedule and device words (their order in the table). */
enum hp_schedule { HP_SCHEDULE_COSINE, HP_SCHEDULE_CONSTANT };
enum hp_device_choice { HP_DEVICE_CHOICE_CPU, HP_DEVICE_CHOICE_CUDA, HP_DEVICE_CHOICE_AUTO };

/* A word that stands for a number ("auto" = 0 for --nm). */
struct hp_opt_special {
    const char *word;
    double value;
};

/* run and launch hand the option on to every rank (hetpipe-rank's command line). */
#define HP_OPTF_PASS 1u

struct hp_opt_info {
    const char *flag; /* "staleness": --staleness on the command line */
    const char *env;  /* job options: "HETPIPE_STALENESS" (and --hetpipe-staleness); else NULL */
    const char *plan_key; /* its key in the plan file's [plan] section, or NULL */
    enum hp_opt_type type;
    const char *arg; /* the value's name in usage texts ("D", "auto|N", "FILE"); NULL: flag */
    const char *const *words;             /* WORD: the values, NULL-terminated */
    const struct hp_opt_special *special; /* INT, REAL: words for numbers, {NULL} ended */
    double min, max;                      /* INT, REAL: the hard limits */
    double site_max; /* job INT options: the plugin's limit unless plugstack.conf says */
    const char *def; /* the default, as it would be written; NULL: none (0, NULL) */
    const char *cmd_def[HP_CMD_COUNT]; /* a command's own default, where it differs */
    unsigned cmds;                     /* the commands that take it: bit 1 << enum hp_cmd */
    unsigned flags;                    /* HP_OPTF_* */
    size_t offset;                     /* of its value in struct hp_options */
    const char *help;                  /* what it does, one phrase */
};

/* Indexed by enum hp_opt. */
extern const struct hp_opt_info hp_opts[HP_OPT_COUNT];

/* Every option's value (see the table for each one's type, limits and default). */
struct hp_options {
    long policy, placement, staleness, nm, recompute, batch, epochs, dry_run;
    const char *model;
    const char *checkpoint_dir, *checkpoint_every, *resume, *timeline;
    long checkpoint_keep;
    long nm_max, seed, quiet, verbose;
    const char *cluster, *config, *profile, *out;
    double lr, momentum, weight_decay;
    long schedule, train_limit, test_limit, log_every, device, threads;
    const char *data, *metrics, *step_log, *save_params;
    const char *weight_log, *stats, *trace;
    long eval_every, no_stash;
    double stop_at, timeout, emulate;
    long local, keep, rank, self_check;
    const char *run_dir, *plan, *srun, *boot_dir;
    long units, steps, warmup, op_profile;
    const char *type;
    long require_gpu, no_slurm;
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

/* 1 if option o is a job option (--hetpipe-*, HETPIPE_*). */
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
