/* fuzz_plugstack.c - the SPANK plugin's plugstack.conf arguments (config=, models=, max_*=,
 * policies=, default_*=) and its --hetpipe-* option values under them, through the plugin's
 * own code: spank/spank_hetpipe.c is included here, with stubs for the spank_* and slurm_*
 * functions that Slurm's processes provide.
 *
 * Input: lines. Those before a line "--" are the plugstack.conf arguments (slurm_spank_init,
 * in sbatch: parse_args, then the option table built); those after it are job options
 * "NAME=VALUE" (or "NAME" for a flag), given to the option callback as sbatch would, then
 * slurm_spank_init_post_opt; then, as in slurmstepd, slurm_spank_user_init exports them.
 */
#include "../../spank/spank_hetpipe.c"

#include "fuzz.h"

#include <stdarg.h>

#define ARGS_MAX 64

static spank_context_t context = S_CTX_ALLOCATOR;
static char slurm_msg[4096];

/* ---- stubs: what slurmstepd, srun and sbatch provide ------------------------------------- */

spank_context_t spank_context(void)
{
    return context;
}

int spank_remote(spank_t spank)
{
    return context == S_CTX_REMOTE;
}

const char *spank_strerror(spank_err_t err)
{
    return "stub error";
}

spank_err_t spank_option_register(spank_t spank, struct spank_option *opt)
{
    if (!opt->name || strlen(opt->name) > SPANK_OPTION_MAXLEN || !opt->usage || !opt->cb)
        abort(); /* Slurm would refuse it */
    return ESPANK_SUCCESS;
}

spank_err_t spank_get_item(spank_t spank, spank_item_t item, ...)
{
    return ESPANK_ERROR;
}

spank_err_t spank_getenv(spank_t spank, const char *var, char *buf, int len)
{
    return ESPANK_ENV_NOEXIST;
}

spank_err_t spank_setenv(spank_t spank, const char *var, const char *val, int overwrite)
{
    if (!var || !val || !var[0] || strchr(var, '='))
        abort();
    return strlen(val) > 1 << 20 ? ESPANK_ERROR : ESPANK_SUCCESS;
}

spank_err_t spank_unsetenv(spank_t spank, const char *var)
{
    return ESPANK_SUCCESS;
}

void slurm_error(const char *format, ...)
{
    va_list ap;

    va_start(ap, format);
    vsnprintf(slurm_msg, sizeof(slurm_msg), format, ap);
    va_end(ap);
}

/* ---- the harness ------------------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    return 0;
}

/* The job option called name (its flag, as after --hetpipe-), or -1. */
static int job_option(const char *name)
{
    for (int o = 0; o < HP_OPT_COUNT; o++)
        if (hp_opt_is_job((enum hp_opt)o) && strcmp(name, hp_opts[o].flag) == 0)
            return o;
    return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_str(data, size), *av[ARGS_MAX + 1], *opt[ARGS_MAX];
    int ac = 0, nopt = 0, after = 0;

    fuzz_begin();
    slurm_msg[0] = '\0';
    for (char *p = s, *nl; p; p = nl) {
        nl = strchr(p, '\n');
        if (nl)
            *nl++ = '\0';
        if (!after && strcmp(p, "--") == 0)
            after = 1;
        else if (!after && ac < ARGS_MAX && *p) /* Slurm splits them at blanks: none empty */
            av[ac++] = p;
        else if (after && nopt < ARGS_MAX)
            opt[nopt++] = p;
    }
    av[ac] = NULL;
    context = S_CTX_ALLOCATOR;
    if (slurm_spank_init(NULL, ac, av))
        abort(); /* registering cannot fail with these stubs */
    for (int i = 0; i < nopt; i++) {
        char *eq = strchr(opt[i], '=');
        if (eq)
            *eq = '\0';
        int o = job_option(opt[i]);
        if (o >= 0)
            option_cb(o, eq ? eq + 1 : NULL, 0);
    }
    slurm_spank_init_post_opt(NULL, ac, av);
    context = S_CTX_REMOTE;
    slurm_spank_user_init(NULL, ac, av);
    if (!fuzz_log[0])
        snprintf(fuzz_log, sizeof(fuzz_log), "%s", slurm_msg); /* the last one */
    free(s);
    return 0;
}
