/* backend_cuda_none.c - the CUDA entry points of a build without CUDA (HP_CUDA=0). */
#include "backend.h"

#include "error.h"

int hp_backend_cuda_create(int device, struct hp_backend **out)
{
    return -HP_EUNSUPPORTED;
}

int hp_backend_cuda_device_count(void)
{
    return 0;
}
