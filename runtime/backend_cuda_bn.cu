/* backend_cuda_bn.cu - batch normalisation of the CUDA backend: cuDNN, CUDNN_BATCHNORM_SPATIAL.
 *
 * x, y, dy, dx are [n, c, hw] and described to cuDNN as [n, c, hw, 1]; gamma, beta, the
 * running and the saved statistics are [c], described as [1, c, 1, 1].
 *
 * The semantics are backend.h's, which are cuDNN's:
 * - exponentialAverageFactor = momentum: running = (1 - momentum) running + momentum batch;
 * - the running variance is updated with the unbiased batch variance (times m / (m - 1),
 *   m = n hw) while y is normalised with the biased one. cuDNN's API reference only says
 *   "running variance"; that it is the unbiased one is what PyTorch relies on (its cuDNN and
 *   native batch norms agree) and has been measured, e.g. apache/mxnet#21111 (cuDNN unbiased,
 *   MXNet's own kernel biased) and NervanaSystems/ngraph#893 ("CUDNN always returns the
 *   unbiased variance"). tests/gpu/check_ops.c compares it with the CPU backend.
 * - resultSaveInvVariance is 1 / sqrt(var + eps) (an inverse standard deviation, despite the
 *   name), which is our save_invstd; backward reads save_mean and save_invstd back.
 */
#include "backend_cuda.cuh"

static const float one = 1.0f, zero = 0.0f;

/* Validates the shape and sets the context's data [n, c, hw, 1] and statistics [1, c, 1, 1]
 * descriptors for one call. */
static int set_bn(struct hp_cuda *cu, const struct hp_bn_desc *d)
{
    if (d->n <= 0 || d->c <= 0 || d->hw <= 0 || !(d->eps > 0.0f) || !(d->momentum >= 0.0f) ||
        !(d->momentum <= 1.0f)) {
        hp_error("cuda: invalid batch norm [%d, %d, %d] eps %g momentum %g", d->n, d->c, d->hw,
                 (double)d->eps, (double)d->momentum);
        return -HP_EINVAL;
    }
    HP_CUDA_CHECK(cudnnSetTensor4dDescriptor(cu->xdesc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n,
                                             d->c, d->hw, 1));
    HP_CUDA_CHECK(cudnnSetTensor4dDescriptor(cu->statdesc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                             d->c, 1, 1));
    return 0;
}

int hp_cuda_bn_forward_train(struct hp_backend *be, const struct hp_bn_desc *d, const float *x,
                             const float *gamma, const float *beta, float *y, float *running_mean,
                             float *running_var, float *save_mean, float *save_invstd)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    int rc = set_bn(cu, d);

    if (rc)
        return rc;
    HP_CUDA_CHECK(cudnnBatchNormalizationForwardTraining(
        cu->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, cu->xdesc, x, cu->xdesc, y, cu->statdesc,
        gamma, beta, (double)d->momentum, running_mean, running_var, (double)d->eps, save_mean,
        save_invstd));
    return 0;
}

int hp_cuda_bn_forward_eval(struct hp_backend *be, const struct hp_bn_desc *d, const float *x,
                            const float *gamma, const float *beta, const float *running_mean,
                            const float *running_var, float *y)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    int rc = set_bn(cu, d);

    if (rc)
        return rc;
    HP_CUDA_CHECK(cudnnBatchNormalizationForwardInference(
        cu->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, cu->xdesc, x, cu->xdesc, y, cu->statdesc,
        gamma, beta, running_mean, running_var, (double)d->eps));
    return 0;
}

/* dx, dgamma and dbeta are overwritten (all blend factors beta = 0). */
int hp_cuda_bn_backward(struct hp_backend *be, const struct hp_bn_desc *d, const float *x,
                        const float *dy, const float *gamma, const float *save_mean,
                        const float *save_invstd, float *dx, float *dgamma, float *dbeta)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    int rc = set_bn(cu, d);

    if (rc)
        return rc;
    HP_CUDA_CHECK(cudnnBatchNormalizationBackward(
        cu->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, cu->xdesc, x, cu->xdesc, dy,
        cu->xdesc, dx, cu->statdesc, gamma, dgamma, dbeta, (double)d->eps, save_mean, save_invstd));
    return 0;
}
