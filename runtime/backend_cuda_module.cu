/* backend_cuda_module.cu - the entry point of hetpipe-cuda.so (runtime/backend_module.h), the
 * one symbol the module exports (runtime/backend_cuda.map), and the module's hp_log.
 *
 * The rest of the CUDA backend calls only hp_log from the rest of hetpipe; here it forwards to
 * the host's logger, so the module needs no symbol from the program that loads it (it is
 * linked with -Wl,--no-undefined).
 */
#include "backend_cuda.cuh"

#include <stdarg.h>

extern "C" {
#include "backend_module.h"
}

static void (*host_vlog)(enum hp_log_level level, const char *fmt, va_list ap);

extern "C" void hp_log(enum hp_log_level level, const char *fmt, ...)
{
    va_list ap;

    if (!host_vlog)
        return;
    va_start(ap, fmt);
    host_vlog(level, fmt, ap);
    va_end(ap);
}

static const struct hp_backend_module cuda_module = {
    HP_BACKEND_ABI, sizeof(struct hp_backend_ops), "cuda", hp_cuda_device_count, hp_cuda_create,
};

extern "C" __attribute__((visibility("default"))) const struct hp_backend_module *
hp_backend_module_cuda_v1(const struct hp_backend_host *host)
{
    if (!host || host->abi != HP_BACKEND_ABI || !host->vlog)
        return NULL;
    host_vlog = host->vlog;
    return &cuda_module;
}
