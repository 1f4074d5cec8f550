/* spank_hetpipe.c - the SPANK plugin: --hetpipe-* options for sbatch, salloc and srun, checked
 * at submit time, carried to the tasks as HETPIPE_* environment; and in slurmstepd, each task
 * bound to the GPU its binding file gives it.
 *
 *   required /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_hetpipe.so [config=PATH] [models=DIR]
 *            [max_*=N] [policies=a,b] [default_<option>=VALUE]
 *
 * Loaded into sbatch/salloc (allocator), srun (local), slurmstepd (remote) and slurmd. In
 * slurmstepd the plugin never exits, aborts or writes to stdout: it logs with slurm_error()
 * and returns an error (or, for a task it cannot bind, tells the task why in
 * HETPIPE_BIND_ERROR). See man/spank_hetpipe.8.
 */
#include "binding.h"
#include "options.h"
#include "parse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/spank.h>

#define EXPORT __attribute__((visibility("default")))

#pragma GCC visibility push(default)
SPANK_PLUGIN(hetpipe, 1);
#pragma GCC visibility pop

#define VALUE_MAX 1024
#define NODE_MAX 64

static struct hp_optlimits limits;
/* copies of the plugstack arguments: limits.defaults point into it */
static char argstore[8192];
/* The job options given, by enum hp_opt (only the job options' entries are used); value[o]
 * is "" for the flag. */
static char value[HP_OPT_COUNT][VALUE_MAX];
static int given[HP_OPT_COUNT];

static char optname[HP_OPT_COUNT][SPANK_OPTION_MAXLEN + 1];
static char usage[HP_OPT_COUNT][2400];
static struct spank_option opts[HP_OPT_COUNT];

/* Allocator (sbatch, salloc) and local (srun) contexts check the options where the user can
 * see the error and the job is not yet queued. */
static int submitting(void)
{
    spank_context_t c = spank_context();

    return c == S_CTX_ALLOCATOR || c == S_CTX_LOCAL;
}

static int option_cb(int val, const char *arg, int remote)
{
    const enum hp_opt o = (enum hp_opt)val;
    const char *v = arg ? arg : "";
    char err[2048], what[SPANK_OPTION_MAXLEN + 3];

    if (!hp_opt_is_job(o)) {
        slurm_error("spank_hetpipe: option callback for unknown option %d", val);
        return -1;
    }
    if (strlen(v) >= VALUE_MAX) {
        slurm_error("--%s: the value is longer than %d bytes", optname[o], VALUE_MAX - 1);
        /* in slurmstepd the option is left out (see below) */
        return remote ? 0 : -1;
    }
    snprintf(what, sizeof(what), "--hetpipe-%s", hp_opts[o].flag);
    if (hp_opt_check(o, what, arg, &limits, !remote && submitting(), err, sizeof(err))) {
        slurm_error("%s", err);
        /* slurmstepd: srun or sbatch checked it; a value that does not pass here (it came
         * some other way) is left out rather than failing the step */
        return remote ? 0 : -1;
    }
    snprintf(value[o], sizeof(value[o]), "%s", hp_opts[o].type != HP_OT_FLAG ? v : "");
    given[o] = 1;
    return 0;
}

/* Build the option table, with usage texts that give the allowed values and the default. */
static void build_options(void)
{
    for (int o = 0; o < HP_OPT_COUNT; o++) {
        char allowed[1200], dflt[VALUE_MAX + 32];
        if (!hp_opt_is_job((enum hp_opt)o))
            continue;
        const int flag = hp_opts[o].type == HP_OT_FLAG;
        /* what a job gets without the option: hetpipe launch's default */
        const char *builtin = hp_opt_default((enum hp_opt)o, HP_CMD_LAUNCH);

        snprintf(optname[o], sizeof(optname[o]), "hetpipe-%s", hp_opts[o].flag);
        hp_opt_allowed((enum hp_opt)o, &limits, allowed, sizeof(allowed));
        if (limits.defaults[o])
            snprintf(dflt, sizeof(dflt), "%s, the site's", flag ? "on" : limits.defaults[o]);
        else
            snprintf(dflt, sizeof(dflt), "%s", flag ? "off" : builtin ? builtin : "none");
        if (flag)
            snprintf(usage[o], sizeof(usage[o]), "%s (default: %s)", hp_opts[o].help, dflt);
        else
            snprintf(usage[o], sizeof(usage[o]), "%s: %s (default: %s)", hp_opts[o].help, allowed,
                     dflt);
        opts[o] = (struct spank_option){
            .name = optname[o],
            .arginfo = (char *)hp_opts[o].arg,
            .usage = usage[o],
            .has_arg = flag ? 0 : 1,
            .val = o,
            .cb = option_cb,
        };
    }
}

/* Parse the plugstack.conf arguments into limits; a bad one is logged and ignored. */
static void parse_args(int ac, char **av)
{
    size_t used = 0;
    char err[2048];

    hp_optlimits_init(&limits, 1);
    for (int i = 0; i < ac; i++) {
        size_t len = strlen(av[i]);
        if (used + len + 1 > sizeof(argstore)) {
            slurm_error("spank_hetpipe: plugstack.conf argument '%s': the arguments exceed %zu "
                        "bytes; ignored",
                        av[i], sizeof(argstore));
            continue;
        }
        char *copy = memcpy(argstore + used, av[i], len + 1);
        if (hp_optlimits_arg(&limits, copy, err, sizeof(err)))
            slurm_error("spank_hetpipe: plugstack.conf argument %s; ignored", err);
        else
            used += len + 1;
    }
    /* a default checked before a later limit or models= may no longer pass */
    for (int o = 0; o < HP_OPT_COUNT; o++) {
        char what[64];
        if (!hp_opt_is_job((enum hp_opt)o))
            continue;
        snprintf(what, sizeof(what), "default_%s", hp_opts[o].flag);
        if (limits.defaults[o] &&
            hp_opt_check((enum hp_opt)o, what, limits.defaults[o], &limits, 0, err, sizeof(err))) {
            slurm_error("spank_hetpipe: plugstack.conf argument %s (checked against all "
                        "the arguments); ignored",
                        err);
            limits.defaults[o] = NULL;
        }
    }
}

EXPORT int slurm_spank_init(spank_t sp, int ac, char **av)
{
    spank_context_t c = spank_context();

    memset(given, 0, sizeof(given));
    parse_args(ac, av);
    build_options();
    for (int o = 0; o < HP_OPT_COUNT; o++) {
        if (!hp_opt_is_job((enum hp_opt)o))
            continue;
        spank_err_t rc = spank_option_register(sp, &opts[o]);
        if (rc != ESPANK_SUCCESS &&
            (c == S_CTX_ALLOCATOR || c == S_CTX_LOCAL || c == S_CTX_REMOTE)) {
            slurm_error("spank_hetpipe: cannot register --%s: %s", optname[o], spank_strerror(rc));
            return -1;
        }
    }
    return 0;
}

EXPORT int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    char err[2048];
    int rc = 0;

    if (!submitting())
        return 0;
    for (int o = 0; o < HP_OPT_COUNT; o++) {
        char what[SPANK_OPTION_MAXLEN + 3];
        if (!given[o])
            continue;
        snprintf(what, sizeof(what), "--hetpipe-%s", hp_opts[o].flag);
        if (hp_opt_check((enum hp_opt)o, what, value[o], &limits, 1, err, sizeof(err))) {
            slurm_error("%s", err);
            rc = -1;
        }
    }
    return rc;
}

static int setenv_logged(spank_t sp, const char *var, const char *val, int overwrite)
{
    spank_err_t rc = spank_setenv(sp, var, val, overwrite);

    if (rc == ESPANK_SUCCESS || (rc == ESPANK_ENV_EXISTS && !overwrite))
        return 0;
    slurm_error("spank_hetpipe: cannot set %s=%s: %s", var, val, spank_strerror(rc));
    return -1;
}

/* slurmstepd, once per step and node: the options (else the site's defaults, unless the job
 * brings its own value) become the job's environment. */
EXPORT int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    int rc = 0;

    if (spank_remote(sp) != 1)
        return 0;
    for (int o = 0; o < HP_OPT_COUNT; o++) {
        const int is_flag = hp_opts[o].type == HP_OT_FLAG;
        if (!hp_opt_is_job((enum hp_opt)o))
            continue;
        if (given[o])
            rc |= setenv_logged(sp, hp_opts[o].env, is_flag ? "1" : value[o], 1);
        else if (limits.defaults[o])
            rc |= setenv_logged(sp, hp_opts[o].env, is_flag ? "1" : limits.defaults[o], 0);
    }
    if (limits.config_given)
        rc |= setenv_logged(sp, hp_opts[HP_OPT_CONFIG].env, limits.config, 0);
    return rc ? -1 : 0;
}

/* ---- binding ---------------------------------------------------------------------------- */

/* Task `task`'s line of the binding file at path (binding.h checks every line). */
static int binding_find(const char *path, unsigned task, struct hp_binding *e, char *why, size_t n)
{
    struct hp_binding *b = NULL;
    int count = 0;

    if (hp_binding_read(path, &b, &count, why, n))
        return -1;
    if (task >= (unsigned)count) {
        snprintf(why, n, "it has no line for this task (it has tasks 0 to %d)", count - 1);
        free(b);
        return -1;
    }
    *e = b[task];
    free(b);
    return 0;
}

/* The job's variable var into buf (size n); "" when unset. 0, or -1 (logged) on another
 * failure. */
static int getenv_opt(spank_t sp, const char *var, char *buf, int n)
{
    spank_err_t rc = spank_getenv(sp, var, buf, n);

    if (rc == ESPANK_SUCCESS)
        return 0;
    buf[0] = '\0';
    if (rc == ESPANK_ENV_NOEXIST)
        return 0;
    slurm_error("spank_hetpipe: cannot read %s: %s", var, spank_strerror(rc));
    return -1;
}

static int bind_fail(spank_t sp, const char *msg)
{
    slurm_error("%s", msg);
    if (spank_unsetenv(sp, hp_opts[HP_OPT_BOUND].env) != ESPANK_SUCCESS)
        slurm_error("spank_hetpipe: cannot unset %s", hp_opts[HP_OPT_BOUND].env);
    setenv_logged(sp, hp_opts[HP_OPT_BIND_ERROR].env, msg, 1);
    return 0;
}

/* A task bound: no error left from before. */
static int bound(spank_t sp)
{
    if (spank_unsetenv(sp, hp_opts[HP_OPT_BIND_ERROR].env) != ESPANK_SUCCESS)
        slurm_error("spank_hetpipe: cannot unset %s", hp_opts[HP_OPT_BIND_ERROR].env);
    return 0;
}

/* slurmstepd, in each task as the user, before exec: with HETPIPE_BINDING set, bind the task
 * to the GPU its line in the binding file names (or to none for a '-'), after checking that
 * the task runs on the planned node and that the step has that GPU there. A failure is put
 * in HETPIPE_BIND_ERROR for hetpipe-rank to report; the task still starts. */
EXPORT int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    char path[4096], node[NODE_MAX] = "", step[1024], cvd[1024], why[1024], msg[8192];
    char dev[64], procid[32];
    struct hp_binding e = {0};
    uint32_t task = 0;
    spank_err_t rc;

    if (spank_remote(sp) != 1)
        return 0;
    rc = spank_getenv(sp, hp_opts[HP_OPT_BINDING].env, path, sizeof(path));
    if (rc == ESPANK_ENV_NOEXIST)
        return 0;
    if (rc != ESPANK_SUCCESS) {
        snprintf(msg, sizeof(msg), "spank_hetpipe: cannot read %s: %s", hp_opts[HP_OPT_BINDING].env,
                 spank_strerror(rc));
        return bind_fail(sp, msg);
    }
    if (hp_opt_check(HP_OPT_BINDING, hp_opts[HP_OPT_BINDING].env, path, NULL, 0, why,
                     sizeof(why))) {
        snprintf(msg, sizeof(msg), "spank_hetpipe: %s", why);
        return bind_fail(sp, msg);
    }
    /* The binding's TASK is SLURM_PROCID. In a heterogeneous step S_TASK_GLOBAL_ID counts
     * from 0 in each component while SLURM_PROCID runs on across them, so that comes first. */
    rc = spank_get_item(sp, S_TASK_GLOBAL_ID, &task);
    if (rc != ESPANK_SUCCESS) {
        snprintf(msg, sizeof(msg), "spank_hetpipe: binding file %s: cannot get the task id: %s",
                 path, spank_strerror(rc));
        return bind_fail(sp, msg);
    }
    if (getenv_opt(sp, "SLURM_PROCID", procid, sizeof(procid)) == 0 && procid[0]) {
        long p;
        if (hp_parse_long(procid, 0, 1L << 30, &p)) {
            snprintf(msg, sizeof(msg),
                     "spank_hetpipe: binding file %s: SLURM_PROCID '%s' is not a task id", path,
                     procid);
            return bind_fail(sp, msg);
        }
        task = (uint32_t)p;
    }
    if (getenv_opt(sp, "SLURMD_NODENAME", node, sizeof(node)) || !node[0]) {
        if (gethostname(node, sizeof(node)) != 0)
            snprintf(node, sizeof(node), "?");
        node[sizeof(node) - 1] = '\0';
    }
    if (getenv_opt(sp, "SLURM_STEP_GPUS", step, sizeof(step)) ||
        getenv_opt(sp, "CUDA_VISIBLE_DEVICES", cvd, sizeof(cvd))) {
        snprintf(msg, sizeof(msg),
                 "spank_hetpipe: binding file %s, task %u: cannot read the step's GPUs", path,
                 task);
        return bind_fail(sp, msg);
    }
    if (binding_find(path, task, &e, why, sizeof(why))) {
        snprintf(msg, sizeof(msg),
                 "spank_hetpipe: binding file %s, task %u: %s (the task runs on %s, where the "
                 "step has %s%s)",
                 path, task, why, node, step[0] ? "GPU(s) " : "no GPUs", step);
        return bind_fail(sp, msg);
    }
    if (e.device >= 0)
        snprintf(dev, sizeof(dev), "%d", e.device);
    else
        snprintf(dev, sizeof(dev), "-");
    if (strcmp(e.node, node) != 0) {
        snprintf(msg, sizeof(msg),
                 "spank_hetpipe: binding file %s: task %u is planned on node %s (GPU %s), but "
                 "the step runs it on %s (with %s%s there): the step's task layout does not "
                 "match the plan",
                 path, task, e.node, dev, node, step[0] ? "GPU(s) " : "no GPUs", step);
        return bind_fail(sp, msg);
    }
    if (e.device < 0) {
        /* a parameter-server task: no GPU */
        if (setenv_logged(sp, "CUDA_VISIBLE_DEVICES", "", 1) ||
            setenv_logged(sp, hp_opts[HP_OPT_BOUND].env, "1", 1))
            return 0;
        return bound(sp);
    }
    if (hp_binding_visible_device(step, cvd, e.device, dev, sizeof(dev), why, sizeof(why))) {
        snprintf(msg, sizeof(msg),
                 "spank_hetpipe: binding file %s: task %u is planned on GPU %d of %s, but %s "
                 "there: ask Slurm for that GPU (--gres, --gpus-per-node) or plan inside this "
                 "allocation",
                 path, task, e.device, node, why);
        return bind_fail(sp, msg);
    }
    snprintf(procid, sizeof(procid), "%d", e.device);
    if (setenv_logged(sp, "CUDA_VISIBLE_DEVICES", dev, 1) ||
        setenv_logged(sp, hp_opts[HP_OPT_GPU].env, procid, 1) ||
        setenv_logged(sp, hp_opts[HP_OPT_BOUND].env, "1", 1))
        return 0;
    return bound(sp);
}
