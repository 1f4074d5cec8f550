/* backend_module.c - the CUDA backend loaded on demand from hetpipe-cuda.so
 * (backend_module.h), and backend.h's CUDA entry points over it. */
#include "backend_module.h"

#include "error.h"
#include "log.h"
#include "options.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef HP_LIBDIR
#define HP_LIBDIR "/usr/local/lib"
#endif

#define NDIRS 3

static const struct hp_backend_host host = {.abi = HP_BACKEND_ABI, .vlog = hp_vlog};

/* The outcome of the one load, written once (pthread_once) and read after. */
static struct {
    pthread_once_t once;
    int rc; /* 0 loaded, -HP_ENOTFOUND, -HP_EBACKEND */
    const struct hp_backend_module *module;
    char why[3 * PATH_MAX + 512];
} cuda = {.once = PTHREAD_ONCE_INIT};

static pthread_once_t warn_once = PTHREAD_ONCE_INIT;

/* The directories to search, in order, without repeats: dirs[i] (each PATH_MAX). Returns how
 * many. The program's directory comes from /proc/self/exe (links resolved), so its parent is
 * found lexically. */
static int module_dirs(char dirs[NDIRS][PATH_MAX])
{
    char exe[PATH_MAX], cand[NDIRS][PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    int n = 0, ncand = 0;

    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash && slash != exe) {
            *slash = '\0'; /* the program's directory */
            snprintf(cand[ncand++], PATH_MAX, "%s", exe);
            slash = strrchr(exe, '/');
            if (slash && (size_t)(slash - exe) + sizeof("/lib/hetpipe") <= PATH_MAX)
                snprintf(cand[ncand++], PATH_MAX, "%.*s/lib/hetpipe", (int)(slash - exe), exe);
        }
    }
    snprintf(cand[ncand++], PATH_MAX, "%s/hetpipe", HP_LIBDIR);
    for (int i = 0; i < ncand; i++) {
        int seen = 0;
        for (int j = 0; j < n; j++)
            seen |= strcmp(dirs[j], cand[i]) == 0;
        if (!seen)
            memcpy(dirs[n++], cand[i], PATH_MAX);
    }
    return n;
}

static int is_file(const char *path)
{
    struct stat sb;

    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

int hp_backend_module_find(char *path, size_t n, char *searched, size_t m)
{
    struct hp_options o = {.cuda_module = NULL};
    char err[512], dirs[NDIRS][PATH_MAX];
    const char *env = hp_opt_env(&o, HP_OPT_CUDA_MODULE, err, sizeof(err)) == 0 ? o.cuda_module
                                                                               : NULL;
    int ndirs;

    if (!path || n == 0)
        return -HP_EINVAL;
    path[0] = '\0';
    if (searched && m)
        searched[0] = '\0';
    if (env && *env) {
        if (is_file(env) && (size_t)snprintf(path, n, "%s", env) < n)
            return 0;
        path[0] = '\0';
        if (searched && m)
            snprintf(searched, m, "'%s' (%s)", env, hp_opts[HP_OPT_CUDA_MODULE].env);
        return -HP_ENOTFOUND;
    }
    ndirs = module_dirs(dirs);
    for (int i = 0; i < ndirs; i++) {
        if ((size_t)snprintf(path, n, "%s/%s", dirs[i], HP_BACKEND_CUDA_FILE) < n && is_file(path))
            return 0;
        if (searched && m) {
            const size_t k = strlen(searched);
            snprintf(searched + k, m - k, "%s%s", i ? ", " : "", dirs[i]);
        }
    }
    path[0] = '\0';
    return -HP_ENOTFOUND;
}

/* dlopen and check the module at path; fills `cuda`. */
static void load_module(const char *path)
{
    hp_backend_module_entry_fn entry;
    const struct hp_backend_module *m;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

    cuda.rc = -HP_EBACKEND;
    if (!h) {
        const char *e = dlerror();
        /* a library it needs is missing, or the module itself is broken */
        const int missing = e && strstr(e, "cannot open shared object file");
        snprintf(cuda.why, sizeof(cuda.why), "cannot load the CUDA backend '%s': %s (%s)", path,
                 e ? e : "unknown dlopen error",
                 missing ? "install the CUDA libraries it needs: the CUDA runtime, cuBLAS and "
                           "cuDNN, or add their directory to LD_LIBRARY_PATH; or use --device cpu"
                         : "rebuild it with this hetpipe (make) or reinstall both (make install)");
        return;
    }
    *(void **)&entry = dlsym(h, HP_BACKEND_CUDA_ENTRY);
    m = entry ? entry(&host) : NULL;
    if (!m || m->abi != HP_BACKEND_ABI || m->ops_size != sizeof(struct hp_backend_ops)) {
        snprintf(cuda.why, sizeof(cuda.why),
                 "cannot use the CUDA backend '%s': %s, this hetpipe's is %d (rebuild it with "
                 "this hetpipe (make) or reinstall both (make install))",
                 path,
                 !entry ? "it has no entry point " HP_BACKEND_CUDA_ENTRY ", so no backend ABI"
                 : !m   ? "it refuses this hetpipe's backend ABI"
                        : "its backend ABI is another",
                 HP_BACKEND_ABI);
        dlclose(h);
        return;
    }
    cuda.module = m;
    cuda.rc = 0;
    snprintf(cuda.why, sizeof(cuda.why), "%s", path);
}

static void load_once(void)
{
    char path[PATH_MAX], searched[3 * PATH_MAX + 64];

    if (hp_backend_module_find(path, sizeof(path), searched, sizeof(searched)) == 0) {
        load_module(path);
        if (!cuda.rc)
            hp_debug("cuda: backend module %s loaded", path);
        return;
    }
    cuda.rc = -HP_ENOTFOUND;
    snprintf(cuda.why, sizeof(cuda.why),
             "%s not found in %s; rebuild with nvcc, HP_CUDA=1 (and make install)",
             HP_BACKEND_CUDA_FILE, searched);
}

int hp_backend_module_load(const struct hp_backend_module **out, const char **why)
{
    pthread_once(&cuda.once, load_once);
    if (why)
        *why = cuda.why;
    if (out)
        *out = cuda.module;
    return cuda.rc;
}

int hp_backend_cuda_driver_visible(void)
{
    return access("/dev/nvidiactl", F_OK) == 0 || access("/proc/driver/nvidia/version", F_OK) == 0;
}

static void warn_unloadable(void)
{
    hp_warn("an NVIDIA driver is here, but %s: using the CPU", cuda.why);
}

/* Without a driver, nothing is loaded. With one, a module that cannot load is said once (the
 * job then runs on the CPU); no module at all is a build without CUDA, and is not. */
int hp_backend_cuda_device_count(void)
{
    const struct hp_backend_module *m;
    int rc;

    if (!hp_backend_cuda_driver_visible())
        return 0;
    rc = hp_backend_module_load(&m, NULL);
    if (rc == -HP_EBACKEND)
        pthread_once(&warn_once, warn_unloadable);
    return rc ? 0 : m->device_count();
}

int hp_backend_cuda_create(int device, struct hp_backend **out)
{
    const struct hp_backend_module *m;
    const char *why;
    int rc = hp_backend_module_load(&m, &why);

    if (rc == -HP_ENOTFOUND)
        return -HP_EUNSUPPORTED;
    if (rc) {
        hp_error("%s", why);
        return rc;
    }
    return m->create(device, out);
}

int hp_backend_module_self_check(FILE *f)
{
    const struct hp_backend_module *m;
    char path[PATH_MAX], searched[3 * PATH_MAX + 64], err[1024];
    const char *why;
    struct hp_backend *be = NULL;

    if (hp_backend_module_find(path, sizeof(path), searched, sizeof(searched)) == 0)
        fprintf(f, "cuda.module = %s\n", path);
    else
        fprintf(f, "cuda.module = none\ncuda.searched = %s\n", searched);
    fprintf(f, "cuda.driver = %s\n", hp_backend_cuda_driver_visible() ? "yes" : "no");
    if (!path[0])
        return 0;
    if (hp_backend_module_load(&m, &why)) {
        fprintf(f, "cuda.load = failed: %s\n", why);
        return 0;
    }
    const int n = m->device_count();
    fprintf(f, "cuda.load = ok\ncuda.devices = %d\n", n);
    if (n <= 0)
        return 0;
    hp_log_capture(err, sizeof(err));
    const int rc = m->create(0, &be);
    hp_log_capture(NULL, 0);
    if (rc)
        fprintf(f, "cuda.device0 = failed: %s\n", err[0] ? err : hp_strerror(rc));
    else
        fprintf(f, "cuda.device0 = %s\n", be->name);
    hp_backend_destroy(be);
    return 0;
}
