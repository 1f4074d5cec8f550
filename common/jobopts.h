/* jobopts.h - the --hetpipe-* job options: their table, the site's limits and defaults, and
 * the validation of a value. Shared by the SPANK plugin (which checks the options at submit
 * time and carries them to the tasks as HETPIPE_* environment) and the launcher (which reads
 * that environment). Depends on libc only: the plugin is loaded into sbatch, srun and
 * slurmstepd and links nothing else.
 */
#ifndef HP_JOBOPTS_H
#define HP_JOBOPTS_H

#include <stddef.h>

enum hp_jobopt {
    HP_JOBOPT_POLICY,
    HP_JOBOPT_PLACEMENT,
    HP_JOBOPT_STALENESS,
    HP_JOBOPT_NM,
    HP_JOBOPT_MODEL,
    HP_JOBOPT_BATCH,
    HP_JOBOPT_EPOCHS,
    HP_JOBOPT_DRY_RUN,
    HP_JOBOPT_COUNT
};

struct hp_jobopt_info {
    const char *name;    /* "policy": the option --hetpipe-policy, the argument default_policy */
    const char *env;     /* "HETPIPE_POLICY": how the task sees it */
    const char *arginfo; /* "auto|np|ed|hd|dp"; NULL for the flag dry-run (no value) */
    const char *help;    /* what it does, one phrase (the allowed values: hp_jobopt_allowed) */
};

/* Indexed by enum hp_jobopt. */
extern const struct hp_jobopt_info hp_jobopts[HP_JOBOPT_COUNT];

/* Bits of hp_joblimits.policies: 1u << the policy's enum hp_policy value (launcher/plan.h). */
#define HP_JOBOPT_POLICY_NP (1u << 0)
#define HP_JOBOPT_POLICY_ED (1u << 1)
#define HP_JOBOPT_POLICY_HD (1u << 2)
#define HP_JOBOPT_POLICY_AUTO (1u << 3)
#define HP_JOBOPT_POLICY_DP (1u << 4)
#define HP_JOBOPT_POLICY_ALL 0x1fu

/* Hard limits: a site may lower the maxima, never raise them past what hetpipe accepts. */
#define HP_JOBOPT_STALENESS_LIMIT 1000000
#define HP_JOBOPT_NM_LIMIT 1024
#define HP_JOBOPT_BATCH_LIMIT 65536
#define HP_JOBOPT_EPOCHS_LIMIT 10000

/* What a site allows, from the plugin's plugstack.conf arguments. Caller-owned; no heap. */
struct hp_joblimits {
    unsigned policies;     /* allowed policies, HP_JOBOPT_POLICY_* bits; all by default */
    int max_staleness;     /* default 64 */
    int max_nm;            /* default 64 */
    int max_batch;         /* default 65536 */
    int max_epochs;        /* default 10000 */
    char models_dir[1024]; /* where a model NAME is looked up: HP_DATADIR "/models" */
    char config[1024];     /* the site config: HP_SYSCONFDIR "/hetpipe.conf" */
    int config_given;      /* config= was among the arguments (the plugin exports HETPIPE_CONF) */
    /* admin defaults, NULL = none; they point into the hp_joblimits_arg argument they came
     * from, which must outlive the struct */
    const char *defaults[HP_JOBOPT_COUNT];
};

/* Set l to the defaults above. */
void hp_joblimits_init(struct hp_joblimits *l);

/* Write into buf (size n, always terminated) what option o allows under l, as a phrase that
 * follows "must be" ("an integer from 0 to 64", "auto or an integer from 1 to 64") or, for
 * policy and placement, a list ("auto, np, ed, hd, dp"). */
void hp_jobopt_allowed(enum hp_jobopt o, const struct hp_joblimits *l, char *buf, size_t n);

/* 0 if value is allowed for option o under l; else -1 with err (size errlen, always
 * terminated) a full sentence naming `what` ("--hetpipe-staleness", "HETPIPE_STALENESS") and
 * the allowed values: "--hetpipe-staleness=-1: must be an integer from 0 to 64". value may be
 * NULL only for dry-run, which takes no value (NULL, "" and "1", what the plugin exports, are
 * allowed; anything else is refused). check_files: also check that a model NAME exists as
 * l->models_dir/NAME.ini, or that a PATH (it contains '/' or ends in .ini) is a readable
 * regular file. Integers are strict decimal: no sign but '-', no blanks, nothing after. */
int hp_jobopt_check(enum hp_jobopt o, const char *what, const char *value,
                    const struct hp_joblimits *l, int check_files, char *err, size_t errlen);

/* Apply one plugstack.conf argument to l: config=PATH, models=DIR, max_staleness=N,
 * max_nm=N, max_batch=N, max_epochs=N, policies=a,b,..., default_<name>=VALUE (name as in
 * hp_jobopts, '-' or '_'; the value checked with hp_jobopt_check against l as it stands, so
 * give the limits first; l->defaults[o] then points into arg, so keep arg alive). 0, or -1
 * with err naming the argument and what is allowed (for an unknown key: the known ones); l is
 * unchanged on error. */
int hp_joblimits_arg(struct hp_joblimits *l, const char *arg, char *err, size_t errlen);

#endif
