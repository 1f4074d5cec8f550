/* backend.c - choosing a backend by name. */
#include "backend.h"

#include "error.h"
#include "log.h"

#include <string.h>

int hp_backend_create(const char *name, struct hp_backend **out)
{
    int rc;

    if (strcmp(name, "cpu") == 0)
        return hp_backend_cpu_create(out);
    if (strcmp(name, "cuda") == 0) {
        rc = hp_backend_cuda_create(0, out);
        if (rc == -HP_EUNSUPPORTED)
            hp_error("device 'cuda': this hetpipe was built without the CUDA backend "
                     "(rebuild with nvcc on PATH, or HP_CUDA=1)");
        else if (rc == -HP_ENODEV)
            hp_error("device 'cuda': no usable CUDA device or driver on this machine "
                     "(use --device cpu or auto)");
        return rc;
    }
    if (strcmp(name, "auto") == 0) {
        if (hp_backend_cuda_device_count() > 0 && hp_backend_cuda_create(0, out) == 0)
            return 0;
        return hp_backend_cpu_create(out);
    }
    hp_error("unknown device '%s' (allowed: cpu, cuda, auto)", name);
    return -HP_EINVAL;
}
