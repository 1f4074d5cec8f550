/* backend_cuda.cu - the CUDA backend: context, memory, GEMM and the ops table.
 *
 * The context owns one stream, a cuBLAS and a cuDNN handle bound to it, a few reusable cuDNN
 * descriptors, the softmax_xent scratch and sumsq's partial sums. Every op is enqueued on the
 * stream (so ops are asynchronous); sync, download, upload, softmax_xent and sumsq wait for it.
 * Convolution and pooling are in backend_cuda_conv.cu, batch norm in backend_cuda_bn.cu, own
 * kernels in backend_cuda_elementwise.cu and backend_cuda_loss.cu, the sequence ops (embedding,
 * layer norm, attention, GELU) in backend_cuda_seq.cu.
 *
 * The module's entry point (backend_cuda_module.cu) hands hp_cuda_device_count and
 * hp_cuda_create to the loader (backend_module.c).
 *
 * Precision: all math is true fp32. cuBLAS runs in CUBLAS_DEFAULT_MATH, which never lowers
 * fp32 inputs to TF32 (that takes CUBLAS_TF32_TENSOR_OP_MATH); cuDNN convolutions are set to
 * CUDNN_FMA_MATH (backend_cuda_conv.cu), since cuDNN's default math permits TF32 on sm_80+.
 */
#include "backend_cuda.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows of softmax_xent scratch allocated at create time (grown if a batch has more). */
#define XENT_INITIAL_ROWS 4096

/* ---- the status check ----------------------------------------------------------------- */

/* Length of the function name at the start of a call's source text. */
static int call_name_len(const char *call)
{
    const char *paren = strchr(call, '(');

    return paren ? (int)(paren - call) : (int)strlen(call);
}

int hp_cuda_status(cudaError_t st, const char *call, const char *file, int line)
{
    if (st == cudaSuccess)
        return 0;
    /* reset the runtime's last error, so that a later launch check does not report it again */
    (void)cudaGetLastError();
    hp_error("cuda: %.*s failed: %s (%s) (%s:%d)", call_name_len(call), call,
             cudaGetErrorString(st), cudaGetErrorName(st), file, line);
    return st == cudaErrorMemoryAllocation ? -HP_ENOMEM : -HP_EBACKEND;
}

int hp_cuda_status(cublasStatus_t st, const char *call, const char *file, int line)
{
    if (st == CUBLAS_STATUS_SUCCESS)
        return 0;
    hp_error("cuda: %.*s failed: %s (%s) (%s:%d)", call_name_len(call), call,
             cublasGetStatusString(st), cublasGetStatusName(st), file, line);
    return st == CUBLAS_STATUS_ALLOC_FAILED ? -HP_ENOMEM : -HP_EBACKEND;
}

int hp_cuda_status(cudnnStatus_t st, const char *call, const char *file, int line)
{
    char detail[256];

    if (st == CUDNN_STATUS_SUCCESS)
        return 0;
    /* cuDNN 9 keeps a message about the last failure; it says which parameter was wrong. */
    detail[0] = '\0';
    cudnnGetLastErrorString(detail, sizeof(detail));
    for (size_t n = strlen(detail); n > 0 && (detail[n - 1] == '\n' || detail[n - 1] == ' ');)
        detail[--n] = '\0';
    hp_error("cuda: %.*s failed: %s%s%s (%s:%d)", call_name_len(call), call,
             cudnnGetErrorString(st), detail[0] ? ": " : "", detail, file, line);
    return -HP_EBACKEND;
}

/* ---- memory --------------------------------------------------------------------------- */

static int cuda_alloc(struct hp_backend *be, size_t bytes, void **ptr)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    void *p = NULL;
    cudaError_t st;
    int rc;

    if (bytes == 0)
        return -HP_EINVAL;
    st = cudaMalloc(&p, bytes);
    if (st != cudaSuccess) {
        (void)cudaGetLastError();
        hp_error("cuda: cannot allocate %zu bytes on %s: %s", bytes, be->name,
                 cudaGetErrorString(st));
        return st == cudaErrorMemoryAllocation ? -HP_ENOMEM : -HP_EBACKEND;
    }
    /* Zeroed in stream order, so that every later op on the stream sees zeros. */
    rc = HP_CUDA_CALL(cudaMemsetAsync(p, 0, bytes, cu->stream));
    if (rc) {
        cudaFree(p);
        return rc;
    }
    *ptr = p;
    return 0;
}

static void cuda_free(struct hp_backend *be, void *ptr)
{
    /* cudaFree waits for the device, so memory still used by queued ops is not reused. */
    if (ptr)
        (void)HP_CUDA_CALL(cudaFree(ptr));
}

/* Waits for the copy: the caller may reuse (or free) host_src as soon as this returns, also
 * when it is pinned memory, which cudaMemcpyAsync would read later. */
static int cuda_upload(struct hp_backend *be, void *dst, const void *host_src, size_t bytes)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (bytes == 0)
        return 0;
    HP_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, cu->stream));
    HP_CUDA_CHECK(cudaStreamSynchronize(cu->stream));
    return 0;
}

static int cuda_download(struct hp_backend *be, void *host_dst, const void *src, size_t bytes)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (bytes == 0)
        return 0;
    HP_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, cu->stream));
    HP_CUDA_CHECK(cudaStreamSynchronize(cu->stream));
    return 0;
}

static int cuda_copy(struct hp_backend *be, void *dst, const void *src, size_t bytes)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (bytes == 0 || dst == src)
        return 0;
    HP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu->stream));
    return 0;
}

static int cuda_zero(struct hp_backend *be, void *ptr, size_t bytes)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (bytes == 0)
        return 0;
    HP_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, cu->stream));
    return 0;
}

static int cuda_sync(struct hp_backend *be)
{
    HP_CUDA_CHECK(cudaStreamSynchronize(hp_cuda_of(be)->stream));
    return 0;
}

/* ---- GEMM ----------------------------------------------------------------------------- */

/* Row-major C [m, n] = alpha op(A) op(B) + beta C through column-major cuBLAS: a row-major
 * matrix with leading dimension ld is the column-major transpose with the same ld, so
 * C^T [n, m] = op(B)^T op(A)^T is one column-major sgemm with the operands swapped. */
static int cuda_gemm(struct hp_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (m == 0 || n == 0)
        return 0;
    HP_CUDA_CHECK(cublasSgemm(cu->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                              ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda,
                              &beta, c, ldc));
    return 0;
}

/* ---- the context ---------------------------------------------------------------------- */

/* Releases whatever init_context acquired (NULL members are skipped), in reverse order. */
static void release_context(struct hp_cuda *cu)
{
    if (cu->stream)
        (void)HP_CUDA_CALL(cudaStreamSynchronize(cu->stream));
    if (cu->attn_ws)
        (void)HP_CUDA_CALL(cudaFree(cu->attn_ws));
    if (cu->seq_flag)
        (void)HP_CUDA_CALL(cudaFree(cu->seq_flag));
    if (cu->sumsq_part)
        (void)HP_CUDA_CALL(cudaFree(cu->sumsq_part));
    if (cu->xent_out)
        (void)HP_CUDA_CALL(cudaFree(cu->xent_out));
    if (cu->xent_hit)
        (void)HP_CUDA_CALL(cudaFree(cu->xent_hit));
    if (cu->xent_loss)
        (void)HP_CUDA_CALL(cudaFree(cu->xent_loss));
    if (cu->pooldesc)
        (void)HP_CUDA_CALL(cudnnDestroyPoolingDescriptor(cu->pooldesc));
    if (cu->statdesc)
        (void)HP_CUDA_CALL(cudnnDestroyTensorDescriptor(cu->statdesc));
    if (cu->ydesc)
        (void)HP_CUDA_CALL(cudnnDestroyTensorDescriptor(cu->ydesc));
    if (cu->xdesc)
        (void)HP_CUDA_CALL(cudnnDestroyTensorDescriptor(cu->xdesc));
    if (cu->cudnn)
        (void)HP_CUDA_CALL(cudnnDestroy(cu->cudnn));
    if (cu->cublas)
        (void)HP_CUDA_CALL(cublasDestroy(cu->cublas));
    if (cu->stream)
        (void)HP_CUDA_CALL(cudaStreamDestroy(cu->stream));
}

static int init_context(struct hp_cuda *cu)
{
    HP_CUDA_CHECK(cudaStreamCreate(&cu->stream));
    HP_CUDA_CHECK(cublasCreate(&cu->cublas));
    HP_CUDA_CHECK(cublasSetStream(cu->cublas, cu->stream));
    HP_CUDA_CHECK(cublasSetMathMode(cu->cublas, CUBLAS_DEFAULT_MATH));
    HP_CUDA_CHECK(cudnnCreate(&cu->cudnn));
    HP_CUDA_CHECK(cudnnSetStream(cu->cudnn, cu->stream));
    HP_CUDA_CHECK(cudnnCreateTensorDescriptor(&cu->xdesc));
    HP_CUDA_CHECK(cudnnCreateTensorDescriptor(&cu->ydesc));
    HP_CUDA_CHECK(cudnnCreateTensorDescriptor(&cu->statdesc));
    HP_CUDA_CHECK(cudnnCreatePoolingDescriptor(&cu->pooldesc));
    HP_CUDA_CHECK(cudaMalloc((void **)&cu->xent_loss, XENT_INITIAL_ROWS * sizeof(float)));
    HP_CUDA_CHECK(cudaMalloc((void **)&cu->xent_hit, XENT_INITIAL_ROWS * sizeof(int)));
    HP_CUDA_CHECK(cudaMalloc((void **)&cu->xent_out, sizeof(struct hp_cuda_xent_result)));
    cu->xent_rows = XENT_INITIAL_ROWS;
    HP_CUDA_CHECK(
        cudaMalloc((void **)&cu->sumsq_part, (HP_CUDA_SUMSQ_BLOCKS + 1) * sizeof(double)));
    HP_CUDA_CHECK(cudaMalloc((void **)&cu->seq_flag, sizeof(unsigned)));
    return 0;
}

static void cuda_destroy(struct hp_backend *be)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    release_context(cu);
    free(cu);
}

static int cuda_memory_used(struct hp_backend *be, size_t *now, size_t *peak)
{
    size_t free_b = 0, total_b = 0;

    (void)be;
    HP_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    *now = *peak = total_b - free_b;
    return 0;
}

static const struct hp_backend_ops cuda_ops = {
    .destroy = cuda_destroy,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .zero = cuda_zero,
    .sync = cuda_sync,
    .gemm = cuda_gemm,
    .bias_add = hp_cuda_bias_add,
    .bias_grad = hp_cuda_bias_grad,
    .conv_create = hp_cuda_conv_create,
    .conv_destroy = hp_cuda_conv_destroy,
    .conv_forward = hp_cuda_conv_forward,
    .conv_backward = hp_cuda_conv_backward,
    .relu_forward = hp_cuda_relu_forward,
    .relu_backward = hp_cuda_relu_backward,
    .maxpool_forward = hp_cuda_maxpool_forward,
    .maxpool_backward = hp_cuda_maxpool_backward,
    .avgpool_forward = hp_cuda_avgpool_forward,
    .avgpool_backward = hp_cuda_avgpool_backward,
    .bn_forward_train = hp_cuda_bn_forward_train,
    .bn_forward_eval = hp_cuda_bn_forward_eval,
    .bn_backward = hp_cuda_bn_backward,
    .dropout_forward = hp_cuda_dropout_forward,
    .dropout_backward = hp_cuda_dropout_backward,
    .add = hp_cuda_add,
    .axpy = hp_cuda_axpy,
    .softmax_xent = hp_cuda_softmax_xent,
    .sgd_update = hp_cuda_sgd_update,
    .adamw_update = hp_cuda_adamw_update,
    .sumsq = hp_cuda_sumsq,
    .scale = hp_cuda_scale,
    .memory_used = cuda_memory_used,
    .embed_forward = hp_cuda_embed_forward,
    .embed_backward = hp_cuda_embed_backward,
    .layernorm_forward = hp_cuda_layernorm_forward,
    .layernorm_backward = hp_cuda_layernorm_backward,
    .attention_forward = hp_cuda_attention_forward,
    .attention_backward = hp_cuda_attention_backward,
    .gelu_forward = hp_cuda_gelu_forward,
    .gelu_backward = hp_cuda_gelu_backward,
};

/* Devices the runtime reports. Without a driver (or with a too old one) cudaGetDeviceCount
 * fails; that, like zero devices, means none. */
int hp_cuda_device_count(void)
{
    int count = 0;
    cudaError_t st = cudaGetDeviceCount(&count);

    if (st != cudaSuccess) {
        (void)cudaGetLastError(); /* clear it, so that it is not reported by a later call */
        hp_debug("cuda: no usable device: %s (%s)", cudaGetErrorString(st), cudaGetErrorName(st));
        return 0;
    }
    return count;
}

int hp_cuda_create(int device, struct hp_backend **out)
{
    struct hp_cuda *cu;
    cudaDeviceProp prop;
    int count = hp_cuda_device_count();
    int rc;

    /* No device is a normal condition for the caller to report (backend.c does); it is only
     * logged here when a device exists but not the one asked for. */
    if (count <= 0)
        return -HP_ENODEV;
    if (device < 0 || device >= count) {
        hp_error("cuda: no device %d (this machine has %d)", device, count);
        return -HP_ENODEV;
    }
    HP_CUDA_CHECK(cudaSetDevice(device));
    HP_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    if (prop.major * 10 + prop.minor < 75) {
        hp_error("cuda: device %d '%s' has compute capability %d.%d; this build needs 7.5 or "
                 "newer",
                 device, prop.name, prop.major, prop.minor);
        return -HP_ENODEV;
    }

    cu = (struct hp_cuda *)calloc(1, sizeof(*cu));
    if (!cu)
        return -HP_ENOMEM;
    cu->be.ops = &cuda_ops;
    cu->be.kind = HP_DEVICE_CUDA;
    snprintf(cu->be.name, sizeof(cu->be.name), "cuda:%d (%.40s)", device, prop.name);
    cu->device = device;
    cu->sm_count = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;

    rc = init_context(cu);
    if (rc)
        goto fail;
    hp_debug("cuda: %s: compute capability %d.%d, %d SMs, cuDNN %zu, math fp32 (no TF32)",
             cu->be.name, prop.major, prop.minor, cu->sm_count, cudnnGetVersion());
    *out = &cu->be;
    return 0;

fail:
    release_context(cu);
    free(cu);
    return rc;
}
