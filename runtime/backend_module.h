/* backend_module.h - the CUDA backend as a module loaded on demand: the ABI between a program
 * (the host: hetpipe, hetpipe-rank) and hetpipe-cuda.so, and the loader.
 *
 * hetpipe-cuda.so (runtime/backend_cuda*.cu, entry point in runtime/backend_cuda_module.cu)
 * links cuBLAS, cuDNN and the CUDA runtime; the programs link none of them, so they start,
 * small and fast, on a machine without CUDA. The module exports one symbol,
 * HP_BACKEND_CUDA_ENTRY (runtime/backend_cuda.map), a function that takes the host's table and
 * returns the module's. It needs nothing from the program: its only call into the rest of
 * hetpipe, hp_log, is forwarded to the host's hp_vlog (common/log.h).
 *
 * The module is looked for, in order, in:
 *   1. the directory of the running program (/proc/self/exe): a build tree, build/hetpipe
 *      beside build/hetpipe-cuda.so;
 *   2. <that directory>/../lib/hetpipe: an installed tree under any prefix (or DESTDIR);
 *   3. HP_LIBDIR/hetpipe: where make install put it (LIBDIR at build time).
 * $HETPIPE_CUDA_MODULE, when set, names the module file instead (test programs under
 * build/tests, a module kept elsewhere). Paths may hold any character; no shell is involved.
 *
 * It is loaded once per process (dlopen RTLD_NOW | RTLD_LOCAL), on first use, never unloaded;
 * the outcome is kept. Nothing is loaded while no NVIDIA driver is visible, unless CUDA is
 * asked for by name (--device cuda: then a missing library is named in the error).
 */
#ifndef HP_BACKEND_MODULE_H
#define HP_BACKEND_MODULE_H

#include "backend.h"
#include "log.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Bump on any change to the tables below or to struct hp_backend / hp_backend_ops
 * (backend.h): a module of another ABI is refused, not called. */
#define HP_BACKEND_ABI 1
#define HP_BACKEND_CUDA_ENTRY "hp_backend_module_cuda_v1"
#define HP_BACKEND_CUDA_FILE "hetpipe-cuda.so"

/* What the host gives the module (it must outlive the module: static storage). */
struct hp_backend_host {
    int abi; /* HP_BACKEND_ABI */
    /* the host's logger: every message of the module goes through it */
    void (*vlog)(enum hp_log_level level, const char *fmt, va_list ap);
};

/* What the module gives back (static storage in the module). */
struct hp_backend_module {
    int abi;         /* HP_BACKEND_ABI of the module's build */
    size_t ops_size; /* sizeof(struct hp_backend_ops) of the module's build */
    const char *name;
    /* as hp_backend_cuda_device_count and hp_backend_cuda_create (backend.h) */
    int (*device_count)(void);
    int (*create)(int device, struct hp_backend **out);
};

/* The entry point's type: NULL when the host's ABI is not the module's. */
typedef const struct hp_backend_module *(*hp_backend_module_entry_fn)(
    const struct hp_backend_host *host);

/* Find the CUDA backend module without loading it: its path into path (size n), 0; or
 * -HP_ENOTFOUND with path "" and the places looked in ("DIR1, DIR2, DIR3") in searched (size
 * m; may be NULL). Not logged. */
int hp_backend_module_find(char *path, size_t n, char *searched, size_t m);

/* Load the CUDA backend module (once per process; later calls return the first outcome). 0
 * with *out set; -HP_ENOTFOUND (none found) or -HP_EBACKEND (dlopen failed: a library it
 * needs is missing; or a module of another ABI). *why (may be NULL) gets a static text: the
 * module's path when loaded, else why not, and what to do. Not logged. */
int hp_backend_module_load(const struct hp_backend_module **out, const char **why);

/* 1 when an NVIDIA driver is visible (/dev/nvidiactl or /proc/driver/nvidia/version exists;
 * nothing is opened), else 0. */
int hp_backend_cuda_driver_visible(void);

/* For hetpipe-rank --self-check: the module's state as "key = value" lines on f:
 *   cuda.module = PATH | none           (cuda.searched = DIR1, DIR2, DIR3 when none)
 *   cuda.driver = yes | no              (hp_backend_cuda_driver_visible)
 *   cuda.load = ok | failed: WHY        (when found: loaded here even without a driver)
 *   cuda.devices = N                    (when loaded)
 *   cuda.device0 = NAME | failed: WHY   (when N > 0: a backend made on device 0 and freed)
 * Always 0: a machine without CUDA is not a failure of the check. */
int hp_backend_module_self_check(FILE *f);

#endif
