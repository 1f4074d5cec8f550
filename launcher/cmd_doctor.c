/* cmd_doctor.c - `hetpipe doctor`: check an installation, one line per check, and say what to fix.
 *
 *   ok   <check>: <detail>
 *   FAIL <check>: <what is wrong>; fix: <how>
 *   skip <check>: <why>
 *
 * A check needing what this machine does not have (a GPU; Slurm with --no-slurm or without
 * srun) is skipped, not failed, unless asked for (--require-gpu). The library's own error
 * message for a failed check is captured (hp_log_capture) and becomes the check's line.
 * External commands run without a shell (proc.h) under a deadline, their exit status checked:
 * a missing or hanging tool is a FAIL or a skip, never a crash or a hang.
 *
 * UCX, PMIx and the CUDA backend are what the ranks use, and hetpipe links none of them: their
 * checks read what `hetpipe-rank --self-check` prints ("key = value" lines: runtime/rank.c),
 * so they see what a rank started from here would see. When the rank program does not run,
 * they are skipped (its own FAIL says why); when its self-check gives nothing, the first of
 * them fails with what went wrong.
 *
 * Exit status: 0 without a FAIL, 1 with one, 2 for a bad option.
 */
#include "commands.h"

#include "backend_module.h"
#include "data.h"
#include "error.h"
#include "gpudb.h"
#include "log.h"
#include "model.h"
#include "proc.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef HP_SLURM_PLUGINDIR
#define HP_SLURM_PLUGINDIR "/usr/lib/x86_64-linux-gnu/slurm-wlm"
#endif

#define CMD_TIMEOUT_S 10
#define SELF_CHECK_TIMEOUT_S 30   /* hetpipe-rank --self-check: a UCX context, CUDA's libraries */
#define CMD_OUTPUT_MAX (1u << 20) /* bytes of a command's output kept */

struct doctor {
    int nfail;
    int require_gpu, no_slurm;
    const char *config_opt, *data_opt; /* --config, --data */
    char config[PATH_MAX];             /* the site config, absolute; "" when none was found */
    char srun[PATH_MAX];               /* the srun the Slurm checks use; "" when they are skipped */
    char skip_slurm[256];              /* why the Slurm checks are skipped; "" when they run */
    char err[2048];                    /* the error captured from the check that runs */
    char rank[PATH_MAX];               /* the rank program; "" when it does not run */
    char *self; /* what hetpipe-rank --self-check printed (NULL: it was not run) */
    char self_why[PATH_MAX + 4096]; /* why its output may lack a key (how the self-check ended) */
    int self_said;                  /* a check has reported that a key is missing */
};

static const char synopsis[] =
    "usage: hetpipe doctor [options]\n"
    "Check this installation, one line per check: 'ok', 'FAIL ...; fix: ...' or 'skip' (what\n"
    "this machine does not have, e.g. no GPU); exit 0 without a FAIL, 1 with one.\n";

static void say(const char *tag, const char *check, const char *fmt, va_list ap)
{
    printf("%-4s %s: ", tag, check);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
}

static void __attribute__((format(printf, 2, 3))) ok(const char *check, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    say("ok", check, fmt, ap);
    va_end(ap);
}

static void __attribute__((format(printf, 2, 3))) skip(const char *check, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    say("skip", check, fmt, ap);
    va_end(ap);
}

/* "FAIL check: <what>; fix: <fix>", with `what` from fmt. */
static void __attribute__((format(printf, 4, 5)))
fail(struct doctor *d, const char *check, const char *fix, const char *fmt, ...)
{
    va_list ap;

    printf("FAIL %s: ", check);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("; fix: %s\n", fix);
    fflush(stdout);
    d->nfail++;
}

/* The captured error, or `fallback` when the failing call logged none. */
static const char *captured(const struct doctor *d, const char *fallback)
{
    return d->err[0] ? d->err : fallback;
}

/* ---- external commands ---------------------------------------------------------------- */

/* The executable `name` in $PATH into buf (size n); 0, or -HP_ENOTFOUND. */
static int find_in_path(const char *name, char *buf, size_t n)
{
    const char *path = getenv("PATH");

    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        const size_t len = colon ? (size_t)(colon - path) : strlen(path);
        struct stat sb;
        if (len > 0 && (size_t)snprintf(buf, n, "%.*s/%s", (int)len, path, name) < n &&
            stat(buf, &sb) == 0 && S_ISREG(sb.st_mode) && access(buf, X_OK) == 0)
            return 0;
        path += len + (colon ? 1 : 0);
    }
    return -HP_ENOTFOUND;
}

/* Run prog with up to two arguments under the deadline (proc.h); 0, or a negative code when
 * it could not be run at all (logged). */
static int cmd_run(const char *prog, const char *arg1, const char *arg2, struct hp_proc_result *r)
{
    const char *av[] = {prog, arg1, arg2, NULL};

    return hp_proc_run(av, CMD_TIMEOUT_S, CMD_OUTPUT_MAX, r);
}

/* The last non-blank line of `text` (with `word` in it, when word is not NULL and such a
 * line exists), trimmed, into buf (size n). */
static void last_line(const char *text, const char *word, char *buf, size_t n)
{
    const char *end = text + strlen(text), *start = end, *found = NULL, *found_end = NULL;

    buf[0] = '\0';
    while (end > text) {
        while (end > text &&
               (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
            end--;
        start = end;
        while (start > text && start[-1] != '\n')
            start--;
        while (start < end && (*start == ' ' || *start == '\t'))
            start++;
        if (start == end)
            break;
        if (!found_end) { /* the last line, unless a line with `word` comes up */
            found = start;
            found_end = end;
        }
        if (!word || memmem(start, (size_t)(end - start), word, strlen(word))) {
            found = start;
            found_end = end;
            break;
        }
        end = start;
    }
    if (found)
        snprintf(buf, n, "%.*s", (int)(found_end - found), found);
}

/* The first line of `text` that starts with `prefix` (case-insensitive; after leading
 * blanks), pointing past those blanks into text; NULL when none. */
static const char *find_line(const char *text, const char *prefix)
{
    const size_t len = strlen(prefix);

    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        while (*l == ' ' || *l == '\t')
            l++;
        if (strncasecmp(l, prefix, len) == 0)
            return l;
    }
    return NULL;
}

/* What went wrong with a command that did not exit 0, into buf (size n): how it ended and its
 * last fatal message (Slurm's commands say "fatal:" for what stopped them), else last line. */
static void cmd_failure(const char *what, const struct hp_proc_result *r, char *buf, size_t n)
{
    char last[512];

    last_line(r->out ? r->out : "", "fatal:", last, sizeof(last));
    if (r->status == 124 || r->status == 137)
        snprintf(buf, n, "'%s' did not answer within %d s", what, CMD_TIMEOUT_S);
    else if (r->status == 127 || r->status == 126)
        snprintf(buf, n, "'%s' cannot be run (exit %d)%s%s", what, r->status, *last ? ": " : "",
                 last);
    else if (r->status < 0)
        snprintf(buf, n, "'%s' was killed%s%s", what, *last ? ": " : "", last);
    else
        snprintf(buf, n, "'%s' failed (exit %d)%s%s", what, r->status, *last ? ": " : "", last);
}

/* ---- the checks ----------------------------------------------------------------------- */

static void check_config(struct doctor *d)
{
    static const char *const fix_find =
        "install it as " HP_SYSCONFDIR "/hetpipe.conf (make install), or give --config FILE or "
        "set HETPIPE_CONF";
    char path[PATH_MAX], fix[PATH_MAX + 256];
    struct hp_gpudb db = {0};
    int rc;

    if (d->config_opt) {
        snprintf(path, sizeof(path), "%s", d->config_opt);
        if (access(path, R_OK) != 0) {
            fail(d, "config", fix_find, "'%s': %s", path, strerror(errno));
            return;
        }
    } else {
        hp_log_capture(d->err, sizeof(d->err));
        rc = hp_gpudb_default_path(path, sizeof(path));
        hp_log_capture(NULL, 0);
        if (rc) {
            fail(d, "config", fix_find, "%s", captured(d, hp_strerror(rc)));
            return;
        }
    }
    hp_log_capture(d->err, sizeof(d->err));
    rc = hp_gpudb_load(path, &db);
    hp_log_capture(NULL, 0);
    snprintf(fix, sizeof(fix),
             "correct '%s' (the shipped etc/hetpipe.conf shows every key), or give --config FILE "
             "or set HETPIPE_CONF",
             path);
    if (rc) {
        const char *e = captured(d, hp_strerror(rc));
        if (strstr(e, path))
            fail(d, "config", fix, "%s", e);
        else
            fail(d, "config", fix, "'%s': %s", path, e);
        return;
    }
    if (!realpath(path, d->config))
        snprintf(d->config, sizeof(d->config), "%s", path);
    ok("config", "%s: %d GPU types", d->config, db.ntypes);
    hp_gpudb_release(&db);
}

static void check_models(struct doctor *d)
{
    static const char *const names[] = {"cnn", "vgg19", "resnet152"};
    static const char *const fix =
        "install them (make install puts them in " HP_DATADIR "/models), or set "
        "HETPIPE_MODELS to a directory of model .ini files";
    char path[PATH_MAX], dir[PATH_MAX] = "";

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct hp_model *m = NULL;
        int rc;

        hp_log_capture(d->err, sizeof(d->err));
        rc = hp_model_resolve(names[i], path, sizeof(path));
        if (!rc)
            rc = hp_model_load(path, &m);
        hp_log_capture(NULL, 0);
        if (rc) {
            fail(d, "models", fix, "%s: %s", names[i], captured(d, hp_strerror(rc)));
            return;
        }
        hp_model_destroy(m);
        if (i == 0) {
            char *slash;
            if (!realpath(path, dir))
                snprintf(dir, sizeof(dir), "%s", path);
            slash = strrchr(dir, '/');
            if (slash)
                *slash = '\0';
        }
    }
    ok("models", "cnn, vgg19, resnet152 load (from %s)", dir);
}

static void check_data(struct doctor *d)
{
    static const char *const files[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
    static const char *const fix = "apt-get install dataset-fashion-mnist, or give --data DIR "
                                   "(or set HETPIPE_DATA) where its four .gz files are";
    const char *dir = hp_dataset_dir(d->data_opt);
    char missing[512] = "", path[PATH_MAX];
    struct hp_dataset test = {0};
    struct stat sb;
    int rc;

    if (stat(dir, &sb) != 0) {
        fail(d, "data set", fix, "'%s': %s", dir, strerror(errno));
        return;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fail(d, "data set", fix, "'%s': not a directory", dir);
        return;
    }
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        if (access(path, R_OK) != 0) {
            size_t k = strlen(missing);
            snprintf(missing + k, sizeof(missing) - k, "%s%s", k ? ", " : "", files[i]);
        }
    }
    if (missing[0]) {
        fail(d, "data set", fix, "'%s': Fashion-MNIST file(s) missing or unreadable: %s", dir,
             missing);
        return;
    }
    /* the test split read in full: gzip stream, IDX headers, sizes and labels */
    hp_log_capture(d->err, sizeof(d->err));
    rc = hp_dataset_load_fashion_mnist(dir, 0, &test);
    hp_log_capture(NULL, 0);
    if (rc) {
        fail(d, "data set", "apt-get install --reinstall dataset-fashion-mnist, or give --data DIR",
             "%s", captured(d, hp_strerror(rc)));
        return;
    }
    ok("data set", "%s: Fashion-MNIST, 4 files readable, %d test images checked", dir, test.n);
    hp_dataset_release(&test);
}

/* The fix for a rank program that exited with `status` and printed `out`. */
static const char *rank_fix(int status, const char *out)
{
    if (status == 127 && strstr(out, "error while loading shared libraries"))
        return "install the shared library it names (UCX: apt-get install libucx0; PMIx: "
               "libpmix2), or rebuild it (make) or reinstall it (make install)";
    return "rebuild (make) or reinstall it (make install)";
}

static void check_rank(struct doctor *d)
{
    static const char *const fix = "build it (make) or install it beside hetpipe (make install), "
                                   "or set HETPIPE_RANK_BIN";
    char path[PATH_MAX], what[PATH_MAX + 64], why[PATH_MAX + 600];
    struct hp_proc_result r;
    int rc;

    hp_log_capture(d->err, sizeof(d->err));
    rc = hp_rank_binary("doctor", path, sizeof(path));
    hp_log_capture(NULL, 0);
    if (rc) {
        fail(d, "rank program", fix, "%s", captured(d, "hetpipe-rank not found"));
        return;
    }
    hp_log_capture(d->err, sizeof(d->err));
    rc = cmd_run(path, "--help", NULL, &r);
    hp_log_capture(NULL, 0);
    if (rc) {
        fail(d, "rank program", fix, "%s", captured(d, hp_strerror(rc)));
        return;
    }
    if (r.status != 0) {
        snprintf(what, sizeof(what), "%s --help", path);
        if (r.status != 126 && r.status != 127)
            r.out[0] = '\0'; /* what --help prints is no reason; the dynamic loader's is */
        cmd_failure(what, &r, why, sizeof(why));
        fail(d, "rank program", rank_fix(r.status, r.out), "%s", why);
    } else {
        ok("rank program", "%s runs", path);
        snprintf(d->rank, sizeof(d->rank), "%s", path);
    }
    free(r.out);
}

/* Run hetpipe-rank --self-check once, when the rank program runs: d->self, d->self_why. */
static void run_self_check(struct doctor *d)
{
    const char *av[] = {d->rank, "--self-check", NULL};
    char what[PATH_MAX + 64];
    struct hp_proc_result r;

    if (!d->rank[0]) {
        snprintf(d->self_why, sizeof(d->self_why),
                 "not checked: the rank program does not run (see its line above)");
        return;
    }
    snprintf(what, sizeof(what), "%s --self-check", d->rank);
    hp_log_capture(d->err, sizeof(d->err));
    const int rc = hp_proc_run(av, SELF_CHECK_TIMEOUT_S, CMD_OUTPUT_MAX, &r);
    hp_log_capture(NULL, 0);
    if (rc) {
        snprintf(d->self_why, sizeof(d->self_why), "cannot run '%s': %s", what,
                 captured(d, hp_strerror(rc)));
        return;
    }
    if (r.status == 124)
        snprintf(d->self_why, sizeof(d->self_why), "'%s' did not answer within %d s", what,
                 SELF_CHECK_TIMEOUT_S);
    else if (r.status == 0)
        snprintf(d->self_why, sizeof(d->self_why),
                 "'%s' printed no such line (a hetpipe-rank of another version?)", what);
    else
        cmd_failure(what, &r, d->self_why, sizeof(d->self_why));
    d->self = r.out;
}

/* The value of `key` in the self-check's output into buf (size n): 0. Else -1, after the
 * first check to miss one has said why (FAIL, or skip when the rank program does not run)
 * and a later one that it was not checked. */
static int self_value(struct doctor *d, const char *check, const char *key, char *buf, size_t n)
{
    const size_t len = strlen(key);

    for (const char *l = d->self; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (strncmp(l, key, len) == 0 && strncmp(l + len, " = ", 3) == 0) {
            snprintf(buf, n, "%.*s", (int)(strchrnul(l, '\n') - l - len - 3), l + len + 3);
            return 0;
        }
    if (!d->rank[0])
        skip(check, "%s", d->self_why);
    else if (d->self_said)
        skip(check, "not checked: the rank program's self-check gave nothing (see above)");
    else
        fail(d, check,
             "rebuild hetpipe-rank with this hetpipe (make), or reinstall both (make install)",
             "no '%s' from the rank program's self-check: %s", key, d->self_why);
    d->self_said = 1;
    return -1;
}

static void check_ucx(struct doctor *d)
{
    char version[128], transports[1024], context[2048];

    if (self_value(d, "UCX", "ucx.version", version, sizeof(version)) ||
        self_value(d, "UCX", "ucx.transports", transports, sizeof(transports)) ||
        self_value(d, "UCX", "ucx.context", context, sizeof(context)))
        return;
    if (strcmp(context, "ok") != 0) {
        fail(d, "UCX",
             "check UCX_TLS and UCX_NET_DEVICES ('ucx_info -d' lists this machine's transports), "
             "or reinstall UCX (apt-get install libucx0)",
             "UCX %s: %s", version, strncmp(context, "failed: ", 8) == 0 ? context + 8 : context);
        return;
    }
    ok("UCX", "UCX %s: context and worker created; transports %s", version, transports);
}

static void check_pmix(struct doctor *d)
{
    char v[256];

    if (self_value(d, "PMIx", "pmix.version", v, sizeof(v)))
        return;
    if (!*v) {
        fail(d, "PMIx", "reinstall PMIx (apt-get install libpmix2)",
             "the PMIx library reports no version");
        return;
    }
    ok("PMIx", "%s", v);
}

/* A CUDA check that did not pass: a FAIL with --require-gpu (or when `always`), else a skip. */
static void __attribute__((format(printf, 5, 6)))
cuda_not_ok(struct doctor *d, int always, const char *fix, const char *skip_tail, const char *fmt,
            ...)
{
    char what[3 * PATH_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (d->require_gpu || always)
        fail(d, "CUDA", fix, "%s", what);
    else
        skip("CUDA", "%s%s", what, skip_tail);
}

static void check_cuda(struct doctor *d)
{
    const char *fix_build = "install the CUDA toolkit with cuBLAS and cuDNN, then rebuild with "
                            "make HP_CUDA=1 (and make install)";
    const char *fix_libs = "install the CUDA libraries the module needs (the CUDA runtime, cuBLAS, "
                           "cuDNN), or add their directory to LD_LIBRARY_PATH";
    const char *fix_dev = "install the NVIDIA driver (nvidia-smi must list the GPU) and run on a "
                          "GPU node";
    char module[PATH_MAX], searched[3 * PATH_MAX], driver[16], load[3 * PATH_MAX], n[32];
    char dev0[1024];

    if (self_value(d, "CUDA", "cuda.module", module, sizeof(module)) ||
        self_value(d, "CUDA", "cuda.driver", driver, sizeof(driver)))
        return;
    if (strcmp(module, "none") == 0) {
        if (self_value(d, "CUDA", "cuda.searched", searched, sizeof(searched)))
            return;
        cuda_not_ok(d, 0, fix_build, ": CPU only", "no CUDA backend (%s not found in %s)",
                    HP_BACKEND_CUDA_FILE, searched);
        return;
    }
    if (self_value(d, "CUDA", "cuda.load", load, sizeof(load)))
        return;
    if (strcmp(load, "ok") != 0) {
        /* with a driver here, the ranks fall back to the CPU: worth a FAIL */
        cuda_not_ok(d, strcmp(driver, "yes") == 0, fix_libs, " (no NVIDIA driver here: CPU only)",
                    "%s", strncmp(load, "failed: ", 8) == 0 ? load + 8 : load);
        return;
    }
    if (self_value(d, "CUDA", "cuda.devices", n, sizeof(n)))
        return;
    if (atoi(n) <= 0) {
        cuda_not_ok(d, 0, fix_dev, " (no GPU or no driver)",
                    "the CUDA backend %s loads, but this machine has no usable CUDA device",
                    module);
        return;
    }
    if (self_value(d, "CUDA", "cuda.device0", dev0, sizeof(dev0)))
        return;
    if (strncmp(dev0, "failed: ", 8) == 0)
        fail(d, "CUDA", fix_dev, "%s device(s), but device 0 does not work: %s", n, dev0 + 8);
    else
        ok("CUDA", "%s device(s); %s works (cuBLAS, cuDNN)", n, dev0);
}

/* ---- Slurm ---------------------------------------------------------------------------- */

/* Slurm's slurm.conf as clients find it: $SLURM_CONF, else Debian's. */
static const char *slurm_conf(void)
{
    const char *c = getenv("SLURM_CONF");

    return c && *c ? c : "/etc/slurm/slurm.conf";
}

/* The plugstack.conf the cluster uses: PlugStackConfig of `scontrol show config`, else
 * plugstack.conf beside slurm.conf (Slurm's default). Into buf (size n). */
static void plugstack_path(const char *scontrol, char *buf, size_t n)
{
    struct hp_proc_result r = {0};

    buf[0] = '\0';
    if (scontrol[0]) {
        if (cmd_run(scontrol, "show", "config", &r) == 0 && r.status == 0) {
            /* "PlugStackConfig         = /etc/slurm/plugstack.conf" */
            const char *l = find_line(r.out, "PlugStackConfig"), *eq = l ? strchr(l, '=') : NULL;
            if (eq && eq < strchrnul(l, '\n')) {
                eq++;
                while (*eq == ' ')
                    eq++;
                snprintf(buf, n, "%.*s", (int)(strchrnul(eq, '\n') - eq), eq);
            }
        }
        free(r.out);
    }
    if (!buf[0]) {
        const char *conf = slurm_conf(), *slash = strrchr(conf, '/');
        snprintf(buf, n, "%.*s/plugstack.conf", slash ? (int)(slash - conf) : 1,
                 slash ? conf : ".");
    }
}

/* The plugin to name in the fix: the installed one, else the one beside this hetpipe (a build
 * tree), else where make install puts it. */
static void plugin_path(char *buf, size_t n)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 32);

    snprintf(buf, n, "%s/spank_hetpipe.so", HP_SLURM_PLUGINDIR);
    if (access(buf, R_OK) == 0 || len <= 0)
        return;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    strcpy(slash + 1, "spank_hetpipe.so");
    if (access(exe, R_OK) == 0)
        snprintf(buf, n, "%s", exe);
}

static void check_slurm(struct doctor *d)
{
    const char *const checks[] = {"Slurm discovery", "Slurm controller", "Slurm plugin",
                                  "PMIx in srun"};
    char scontrol[PATH_MAX] = "", why[1024], plugstack[PATH_MAX], plugin[PATH_MAX];
    char fix[3 * PATH_MAX + 256];
    struct hp_proc_result r;

    if (d->skip_slurm[0]) {
        for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
            skip(checks[i], "%s", d->skip_slurm);
        return;
    }
    /* scontrol from PATH, else beside srun */
    if (find_in_path("scontrol", scontrol, sizeof(scontrol))) {
        char *slash;
        snprintf(scontrol, sizeof(scontrol), "%s", d->srun);
        slash = strrchr(scontrol, '/');
        if (slash && (size_t)(slash - scontrol) + 10 < sizeof(scontrol))
            strcpy(slash + 1, "scontrol");
        if (!slash || access(scontrol, X_OK) != 0)
            scontrol[0] = '\0';
    }

    if (HP_HAVE_SLURM)
        ok("Slurm discovery", "built with libslurm: hetpipe launch asks slurmctld for the job's "
                              "typed GPUs");
    else
        fail(d, "Slurm discovery",
             "apt-get install libslurm-dev, then make clean && make (and make install)",
             "built without libslurm: hetpipe launch cannot discover a job's GPUs");

    if (!scontrol[0])
        fail(d, "Slurm controller", "apt-get install slurm-client",
             "scontrol not found on PATH or beside %s", d->srun);
    else if (cmd_run(scontrol, "ping", NULL, &r) == 0) {
        char line[512];
        last_line(r.out, "Slurmctld", line, sizeof(line));
        snprintf(fix, sizeof(fix),
                 "start slurmctld (systemctl start slurmctld), or set SLURM_CONF to the "
                 "cluster's slurm.conf (now %s)",
                 slurm_conf());
        if (r.status == 0 && strstr(r.out, " is UP"))
            ok("Slurm controller", "%s", line);
        else if (r.status == 0 || r.status == 1) /* ping answers "... is DOWN" with exit 1 */
            fail(d, "Slurm controller", fix, "scontrol ping: %s", line[0] ? line : "no answer");
        else {
            cmd_failure("scontrol ping", &r, why, sizeof(why));
            fail(d, "Slurm controller", fix, "%s", why);
        }
        free(r.out);
    } else
        fail(d, "Slurm controller", "check the system's process limits", "cannot run scontrol");

    if (cmd_run(d->srun, "--help", NULL, &r) == 0) {
        if (r.status != 0) {
            cmd_failure("srun --help", &r, why, sizeof(why));
            snprintf(fix, sizeof(fix), "set SLURM_CONF to the cluster's slurm.conf (now %s)",
                     slurm_conf());
            fail(d, "Slurm plugin", fix, "%s", why);
        } else if (!strstr(r.out, "--hetpipe-policy")) {
            plugstack_path(scontrol, plugstack, sizeof(plugstack));
            plugin_path(plugin, sizeof(plugin));
            snprintf(fix, sizeof(fix),
                     "add the line 'required %s config=%s' to %s (PlugStackConfig in slurm.conf; "
                     "see spank_hetpipe(8))",
                     plugin, d->config[0] ? d->config : HP_SYSCONFDIR "/hetpipe.conf", plugstack);
            fail(d, "Slurm plugin", fix,
                 "srun --help has no --hetpipe-policy: spank_hetpipe.so is not loaded");
        } else
            ok("Slurm plugin", "spank_hetpipe.so loaded (srun --help offers --hetpipe-*)");
        free(r.out);
    } else
        fail(d, "Slurm plugin", "check the system's process limits", "cannot run %s", d->srun);

    if (cmd_run(d->srun, "--mpi=list", NULL, &r) == 0) {
        const char *fix_pmix = "install Slurm's PMIx plugin (Debian: apt-get install "
                               "slurm-wlm-basic-plugins, mpi_pmix.so), or build Slurm --with-pmix";
        /* Slurm 22.05 lists one plugin a line, indented: "pmix", then "pmix_v4", ... */
        const char *l = find_line(r.out, "pmix");
        const int found = l && (l[4] == '\0' || l[4] == '\n' || l[4] == ' ' || l[4] == '_');
        if (r.status != 0) {
            cmd_failure("srun --mpi=list", &r, why, sizeof(why));
            snprintf(fix, sizeof(fix), "set SLURM_CONF to the cluster's slurm.conf (now %s)",
                     slurm_conf());
            fail(d, "PMIx in srun", fix, "%s", why);
        } else if (!found)
            fail(d, "PMIx in srun", fix_pmix,
                 "srun --mpi=list does not list pmix: srun --mpi=pmix cannot start the ranks");
        else
            ok("PMIx in srun", "srun --mpi=list lists pmix");
        free(r.out);
    } else
        fail(d, "PMIx in srun", "check the system's process limits", "cannot run %s", d->srun);
}

int hp_cmd_doctor(int argc, char **argv)
{
    struct hp_options o;
    struct doctor *d;
    int rc = hp_cmd_options(HP_CMD_DOCTOR, synopsis, argc, argv, &o, 0, NULL);

    if (rc >= 0)
        return rc;
    d = calloc(1, sizeof(*d));
    if (!d) {
        hp_error("doctor: out of memory");
        return 1;
    }
    d->config_opt = o.config;
    d->data_opt = o.data;
    d->require_gpu = (int)o.require_gpu;
    d->no_slurm = (int)o.no_slurm;
    if (d->no_slurm)
        snprintf(d->skip_slurm, sizeof(d->skip_slurm), "--no-slurm");
    else {
        char err[512];
        if (hp_opt_env(&o, HP_OPT_SRUN, err, sizeof(err)) == 0) /* as hetpipe launch; one that
                                                                   does not run fails the checks */
            snprintf(d->srun, sizeof(d->srun), "%s", o.srun);
        else if (find_in_path("srun", d->srun, sizeof(d->srun)))
            snprintf(d->skip_slurm, sizeof(d->skip_slurm),
                     "no srun on PATH (not a Slurm client; apt-get install slurm-client)");
    }

    check_config(d);
    check_models(d);
    check_data(d);
    check_rank(d);
    run_self_check(d);
    check_ucx(d);
    check_pmix(d);
    check_cuda(d);
    check_slurm(d);

    rc = d->nfail ? 1 : 0;
    if (d->nfail)
        printf("hetpipe doctor: %d check(s) failed\n", d->nfail);
    free(d->self);
    free(d);
    return rc;
}
