/* backend.h - the compute backend interface: a table of function pointers (the ggml way).
 *
 * The CPU backend (backend_cpu.c, OpenBLAS) is the reference, always built and linked; the
 * CUDA backend (backend_cuda*.cu, cuBLAS + cuDNN) has the same ops with the same semantics. It
 * is built, when nvcc is found, as a module of its own, hetpipe-cuda.so, which the programs
 * load on demand (backend_module.h): they link no CUDA library, and a build without nvcc
 * (HP_CUDA=0) simply has no module. The CUDA entry points below go through that loader. Every
 * op is checked CPU-vs-CUDA by tests/gpu/check_ops.c and against finite differences by
 * tests/unit.
 *
 * Conventions, for every op:
 * - All float and int32 pointers are device pointers of this backend (host memory for the
 *   CPU backend), obtained from ops->alloc. Tensors are dense, float32, NCHW (rows of a
 *   matrix are contiguous). Shapes are given in comments as [n, c, h, w].
 * - Ops return 0 or a negative code (-HP_EBACKEND on a library failure, logged once in the
 *   backend). They may be asynchronous on a device; ops->sync waits, and download waits.
 * - "backward" ops overwrite their outputs (dx, dw, db, ...) unless said otherwise; a NULL
 *   output that is marked optional is not computed.
 */
#ifndef HP_BACKEND_H
#define HP_BACKEND_H

#include <stddef.h>
#include <stdint.h>

enum hp_device_kind {
    HP_DEVICE_CPU = 0,
    HP_DEVICE_CUDA = 1,
};

/* 2-D convolution, cross-correlation as in cuDNN/PyTorch, symmetric zero padding.
 * x [n, c, h, w], w [k, c, r, s], b [k] (if has_bias), y [n, k, p, q] with
 * p = (h + 2 pad - r) / stride + 1, q = (w + 2 pad - s) / stride + 1. */
struct hp_conv_desc {
    int n, c, h, w;
    int k, r, s;
    int stride, pad;
    int p, q;
    int has_bias;
};

/* Pooling over [n, c, h, w] to [n, c, p, q], square window `kernel`, `stride`, zero padding
 * `pad`. Max pooling ignores padded cells; average pooling divides by kernel*kernel
 * (padding counted, cuDNN's COUNT_INCLUDE_PADDING, PyTorch's default). */
struct hp_pool_desc {
    int n, c, h, w;
    int kernel, stride, pad;
    int p, q;
};

/* Batch normalisation per channel over (n, h, w) ("spatial"). x and y [n, c, hw].
 * Train: mean and biased variance of the batch; y = gamma (x - mean) invstd + beta with
 * invstd = 1 / sqrt(var + eps); running_mean = (1 - momentum) running_mean + momentum mean;
 * running_var = (1 - momentum) running_var + momentum var * m / (m - 1), m = n * hw
 * (the unbiased variance, as cuDNN and PyTorch). Eval: the running statistics instead. */
struct hp_bn_desc {
    int n, c, hw;
    float eps;      /* >= 1e-5 (cuDNN's minimum) */
    float momentum; /* in [0, 1] */
};

/* One AdamW step (adamw_update): learning rate, decoupled weight decay (0 for the tensors
 * that take none), the moments' decay rates in [0, 1), eps > 0, and the step t >= 1 (the
 * count of updates so far, this one included: the bias corrections' exponent). */
struct hp_adamw_desc {
    float lr, wd, beta1, beta2, eps;
    long step;
};

struct hp_backend;
struct hp_conv; /* a backend's per-layer convolution state (descriptors, chosen algorithms) */

struct hp_backend_ops {
    void (*destroy)(struct hp_backend *be);

    /* Memory. alloc returns zeroed device memory of `bytes` (> 0) in *ptr. */
    int (*alloc)(struct hp_backend *be, size_t bytes, void **ptr);
    void (*free)(struct hp_backend *be, void *ptr);
    int (*upload)(struct hp_backend *be, void *dst, const void *host_src, size_t bytes);
    int (*download)(struct hp_backend *be, void *host_dst, const void *src, size_t bytes);
    int (*copy)(struct hp_backend *be, void *dst, const void *src, size_t bytes);
    int (*zero)(struct hp_backend *be, void *ptr, size_t bytes);
    int (*sync)(struct hp_backend *be);

    /* Row-major GEMM: C[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta C, where op(A) = A^T
     * if ta (A stored [k, m] with leading dimension lda), and likewise for B. */
    int (*gemm)(struct hp_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
    /* y[r, j] += b[j] for a [rows, cols] matrix. */
    int (*bias_add)(struct hp_backend *be, float *y, const float *b, int rows, int cols);
    /* db[j] = sum over r of dy[r, j]. */
    int (*bias_grad)(struct hp_backend *be, const float *dy, float *db, int rows, int cols);

    /* Convolution. conv_create validates and copies the descriptor, chooses algorithms, and
     * returns in *workspace the scratch bytes that forward and backward need (the caller
     * allocates the largest over its layers once and passes it in). */
    int (*conv_create)(struct hp_backend *be, const struct hp_conv_desc *d, struct hp_conv **out,
                       size_t *workspace);
    void (*conv_destroy)(struct hp_backend *be, struct hp_conv *conv);
    int (*conv_forward)(struct hp_backend *be, struct hp_conv *conv, const float *x, const float *w,
                        const float *b, float *y, void *ws);
    /* dx (optional: NULL skips it), dw and db (only if has_bias) are overwritten. */
    int (*conv_backward)(struct hp_backend *be, struct hp_conv *conv, const float *x,
                         const float *w, const float *dy, float *dx, float *dw, float *db,
                         void *ws);

    /* y = max(x, 0); dx = dy where y > 0, else 0. y may equal x; dx may equal dy. */
    int (*relu_forward)(struct hp_backend *be, const float *x, float *y, size_t n);
    int (*relu_backward)(struct hp_backend *be, const float *y, const float *dy, float *dx,
                         size_t n);

    /* Max pooling; backward routes dy to the first maximum of each window (x and y given). */
    int (*maxpool_forward)(struct hp_backend *be, const struct hp_pool_desc *d, const float *x,
                           float *y);
    int (*maxpool_backward)(struct hp_backend *be, const struct hp_pool_desc *d, const float *x,
                            const float *y, const float *dy, float *dx);
    int (*avgpool_forward)(struct hp_backend *be, const struct hp_pool_desc *d, const float *x,
                           float *y);
    int (*avgpool_backward)(struct hp_backend *be, const struct hp_pool_desc *d, const float *dy,
                            float *dx);

    /* Batch normalisation (see hp_bn_desc). save_mean and save_invstd [c] are written by the
     * training forward and read by backward. running_mean and running_var may both be NULL:
     * the training forward then leaves the running statistics alone (a recomputation). */
    int (*bn_forward_train)(struct hp_backend *be, const struct hp_bn_desc *d, const float *x,
                            const float *gamma, const float *beta, float *y, float *running_mean,
                            float *running_var, float *save_mean, float *save_invstd);
    int (*bn_forward_eval)(struct hp_backend *be, const struct hp_bn_desc *d, const float *x,
                           const float *gamma, const float *beta, const float *running_mean,
                           const float *running_var, float *y);
    int (*bn_backward)(struct hp_backend *be, const struct hp_bn_desc *d, const float *x,
                       const float *dy, const float *gamma, const float *save_mean,
                       const float *save_invstd, float *dx, float *dgamma, float *dbeta);

    /* Inverted dropout: mask[i] = 0 with probability p, else 1 / (1 - p), drawn with
     * hp_rng_uniform(seed, i) (rng.h), so that every backend draws the same mask;
     * y = x mask. Backward: dx = dy mask. */
    int (*dropout_forward)(struct hp_backend *be, const float *x, float *y, float *mask, size_t n,
                           float p, uint64_t seed);
    int (*dropout_backward)(struct hp_backend *be, const float *dy, const float *mask, float *dx,
                            size_t n);

    /* y = a + b (y may alias a or b); y += alpha x. */
    int (*add)(struct hp_backend *be, const float *a, const float *b, float *y, size_t n);
    int (*axpy)(struct hp_backend *be, float alpha, const float *x, float *y, size_t n);

    /* Softmax cross-entropy over logits [n, classes] with int32 labels [n] (each in
     * [0, classes), checked by the caller). Writes to host memory *loss_sum = sum over
     * samples of -log softmax(logits)[label] and *correct = the number of samples whose
     * arg-max (first maximum) equals the label. If dlogits is not NULL it is set to
     * (softmax - onehot) * grad_scale. Synchronous. */
    int (*softmax_xent)(struct hp_backend *be, const float *logits, const int32_t *labels, int n,
                        int classes, float grad_scale, float *dlogits, double *loss_sum,
                        int *correct);

    /* SGD with momentum and weight decay, PyTorch's rule: g' = g + wd w; m = mu m + g';
     * w = w - lr m. (With mu = 0, m is still written.) */
    int (*sgd_update)(struct hp_backend *be, float *w, const float *g, float *m, size_t n, float lr,
                      float momentum, float wd);

    /* AdamW (Loshchilov and Hutter; PyTorch's torch.optim.AdamW, non-fused), step t >= 1 of
     * d (the moments m and v start at zero before step 1):
     *   w = w (1 - lr wd); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
     *   w = w - (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
     * The bias corrections are computed in double from t, the rest in float per element. */
    int (*adamw_update)(struct hp_backend *be, float *w, const float *g, float *m, float *v,
                        size_t n, const struct hp_adamw_desc *d);
    /* *out = the sum of x[i]^2 over n floats, accumulated in double, to host memory (0 for
     * n = 0). Deterministic: the order of the additions depends on n only. Synchronous. */
    int (*sumsq)(struct hp_backend *be, const float *x, size_t n, double *out);
    /* x = alpha x. */
    int (*scale)(struct hp_backend *be, float *x, size_t n, float alpha);

    /* Memory really in use (not the allocator's count), for checking the memory model: the
     * CPU backend: the process's resident set now and its peak (VmRSS, VmHWM); CUDA: the
     * device's used memory (cudaMemGetInfo: total - free, every process on it) in both, as a
     * device has no peak counter. 0 or a negative code (logged). */
    int (*memory_used)(struct hp_backend *be, size_t *now, size_t *peak);
};

struct hp_backend {
    const struct hp_backend_ops *ops;
    enum hp_device_kind kind;
    char name[64]; /* "cpu", or "cuda:0 (NVIDIA H200)" */
    /* with hp_backend_track_memory: bytes allocated through ops->alloc now, and at most */
    size_t mem_in_use, mem_peak;
};

/* Count every ops->alloc and ops->free of `be` from now on (mem_in_use, mem_peak): what a
 * pipeline stage really holds on its device, to compare with the planner's memory model.
 * Library-internal allocations (cuBLAS/cuDNN handles) are not seen. 0 or -HP_ENOMEM. */
int hp_backend_track_memory(struct hp_backend *be);

/* The CPU backend; always available. *out is freed with be->ops->destroy(be). */
int hp_backend_cpu_create(struct hp_backend **out);

/* Threads of the CPU backend's BLAS (n >= 1); the default comes from OPENBLAS_NUM_THREADS. */
void hp_backend_cpu_set_threads(int n);
int hp_backend_cpu_threads(void);

/* The CUDA backend on device `device`, from the module (loaded now if it is not yet).
 * Returns -HP_EUNSUPPORTED when there is no module (not logged), -HP_EBACKEND when it cannot
 * be loaded (logged: the module's path and the library it lacks), -HP_ENODEV when no usable
 * device (or no driver) is present; never crashes for lack of one. */
int hp_backend_cuda_create(int device, struct hp_backend **out);

/* Number of usable CUDA devices: 0 without an NVIDIA driver (then nothing is loaded), without
 * the module, or when it cannot load (said once, as a warning), or without a device. */
int hp_backend_cuda_device_count(void);

/* By name: "cpu", "cuda" (device 0; an error naming what is missing if the module, a library
 * or a device is), "auto" (cuda if a device is present, else cpu; no module is loaded without
 * an NVIDIA driver). Logs and returns -HP_EINVAL for another name. */
int hp_backend_create(const char *name, struct hp_backend **out);

static inline void hp_backend_destroy(struct hp_backend *be)
{
    if (be)
        be->ops->destroy(be);
}

#endif
