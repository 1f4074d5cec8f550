/* backend_cuda.cuh - private to the CUDA backend (backend_cuda*.cu): the context, the one
 * status check, launch geometry and the op functions each .cu file contributes to the table.
 *
 * The backend keeps to one device and one host thread at a time: every op is issued on the
 * context's stream, and the pooling / batch-norm descriptors and the loss scratch are reused
 * from call to call, so one context must not be driven by two threads at once.
 */
#ifndef HP_BACKEND_CUDA_CUH
#define HP_BACKEND_CUDA_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "backend.h"
#include "error.h"
#include "log.h"
}

/* Largest workspace a convolution algorithm may ask for; larger ones are passed over. */
#define HP_CUDA_CONV_WS_CAP ((size_t)256 << 20)

/* Blocks of sumsq's first pass: fixed, so that its result does not depend on the device. */
#define HP_CUDA_SUMSQ_BLOCKS 256

/* softmax_xent's result, reduced on the device and copied to the host in one transfer. */
struct hp_cuda_xent_result {
    double loss_sum;
    int correct;
};

struct hp_cuda {
    struct hp_backend be; /* first: the struct hp_backend * handed out points here */
    int device;
    int sm_count;
    cudaStream_t stream; /* every op of this backend runs on it */
    cublasHandle_t cublas;
    cudnnHandle_t cudnn;
    /* Reused by pooling and batch norm, set again on every call (host-side only). */
    cudnnTensorDescriptor_t xdesc, ydesc, statdesc;
    cudnnPoolingDescriptor_t pooldesc;
    /* softmax_xent scratch: per-row loss [xent_rows] and hit [xent_rows] (0/1), grown once
     * when a batch has more rows; the reduced result [1]. All device memory. */
    size_t xent_rows;
    float *xent_loss;
    int *xent_hit;
    struct hp_cuda_xent_result *xent_out;
    /* sumsq: the blocks' partial sums [HP_CUDA_SUMSQ_BLOCKS] and their total [1] (device) */
    double *sumsq_part;
    /* embed_forward: the first row with a bad token id [1] (device; backend_cuda_seq.cu) */
    unsigned *seq_flag;
    /* attention backward's scratch (device, attn_ws_bytes, grown on demand; may be NULL) */
    float *attn_ws;
    size_t attn_ws_bytes;
};

static inline struct hp_cuda *hp_cuda_of(struct hp_backend *be)
{
    return (struct hp_cuda *)be;
}

/* The one status check: 0 if `st` is a success, else logs "cuda: <function> failed: <the
 * library's message> (<file>:<line>)" and returns -HP_EBACKEND (-HP_ENOMEM for an
 * allocation failure). `call` is the call's source text; only the function name is shown. */
int hp_cuda_status(cudaError_t st, const char *call, const char *file, int line);
int hp_cuda_status(cublasStatus_t st, const char *call, const char *file, int line);
int hp_cuda_status(cudnnStatus_t st, const char *call, const char *file, int line);

/* HP_CUDA_CALL(call) evaluates to 0 or the logged error code; HP_CUDA_CHECK returns it. */
#define HP_CUDA_CALL(call) hp_cuda_status((call), #call, __FILE__, __LINE__)
#define HP_CUDA_CHECK(call)                                                                        \
    do {                                                                                           \
        int hp_cuda_rc_ = HP_CUDA_CALL(call);                                                      \
        if (hp_cuda_rc_)                                                                           \
            return hp_cuda_rc_;                                                                    \
    } while (0)
/* After a kernel launch: the launch error (bad configuration, no kernel image), if any. */
#define HP_CUDA_LAUNCHED(kernel) hp_cuda_status(cudaGetLastError(), #kernel, __FILE__, __LINE__)

/* Threads per block of the element-wise kernels, and a grid for n elements: enough blocks to
 * fill the device several times over; the kernels are grid-stride loops. */
#define HP_CUDA_THREADS 256
static inline unsigned hp_cuda_grid(const struct hp_cuda *cu, size_t n)
{
    size_t blocks = (n + HP_CUDA_THREADS - 1) / HP_CUDA_THREADS;
    size_t cap = (size_t)cu->sm_count * 32;

    if (blocks > cap)
        blocks = cap;
    return blocks ? (unsigned)blocks : 1u;
}

/* The loop every element-wise kernel runs: i over [0, n) with a grid-sized stride. */
#define GRID_STRIDE(i, n)                                                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

/* backend_cuda.cu: the devices the CUDA runtime reports (0 without a driver), and a backend
 * on one of them (hp_backend_cuda_device_count and hp_backend_cuda_create of backend.h, which
 * reach these through the module's entry point, backend_cuda_module.cu). */
int hp_cuda_device_count(void);
int hp_cuda_create(int device, struct hp_backend **out);

/* backend_cuda_conv.cu: convolution and pooling (cuDNN). */
int hp_cuda_conv_create(struct hp_backend *be, const struct hp_conv_desc *d, struct hp_conv **out,
                        size_t *workspace);
void hp_cuda_conv_destroy(struct hp_backend *be, struct hp_conv *conv);
int hp_cuda_conv_forward(struct hp_backend *be, struct hp_conv *conv, const float *x,
                         const float *w, const float *b, float *y, void *ws);
int hp_cuda_conv_backward(struct hp_backend *be, struct hp_conv *conv, const float *x,
                          const float *w, const float *dy, float *dx, float *dw, float *db,
                          void *ws);
int hp_cuda_maxpool_forward(struct hp_backend *be, const struct hp_pool_desc *d, const float *x,
                            float *y);
int hp_cuda_maxpool_backward(struct hp_backend *be, const struct hp_pool_desc *d, const float *x,
                             const float *y, const float *dy, float *dx);
int hp_cuda_avgpool_forward(struct hp_backend *be, const struct hp_pool_desc *d, const float *x,
                            float *y);
int hp_cuda_avgpool_backward(struct hp_backend *be, const struct hp_pool_desc *d, const float *dy,
                             float *dx);

/* backend_cuda_bn.cu: batch normalisation (cuDNN, spatial mode). */
int hp_cuda_bn_forward_train(struct hp_backend *be, const struct hp_bn_desc *d, const float *x,
                             const float *gamma, const float *beta, float *y, float *running_mean,
                             float *running_var, float *save_mean, float *save_invstd);
int hp_cuda_bn_forward_eval(struct hp_backend *be, const struct hp_bn_desc *d, const float *x,
                            const float *gamma, const float *beta, const float *running_mean,
                            const float *running_var, float *y);
int hp_cuda_bn_backward(struct hp_backend *be, const struct hp_bn_desc *d, const float *x,
                        const float *dy, const float *gamma, const float *save_mean,
                        const float *save_invstd, float *dx, float *dgamma, float *dbeta);

/* backend_cuda_elementwise.cu: own kernels for the element-wise ops, the optimisers (SGD,
 * AdamW) and gradient clipping's sum of squares and scaling. */
int hp_cuda_bias_add(struct hp_backend *be, float *y, const float *b, int rows, int cols);
int hp_cuda_bias_grad(struct hp_backend *be, const float *dy, float *db, int rows, int cols);
int hp_cuda_relu_forward(struct hp_backend *be, const float *x, float *y, size_t n);
int hp_cuda_relu_backward(struct hp_backend *be, const float *y, const float *dy, float *dx,
                          size_t n);
int hp_cuda_dropout_forward(struct hp_backend *be, const float *x, float *y, float *mask, size_t n,
                            float p, uint64_t seed);
int hp_cuda_dropout_backward(struct hp_backend *be, const float *dy, const float *mask, float *dx,
                             size_t n);
int hp_cuda_add(struct hp_backend *be, const float *a, const float *b, float *y, size_t n);
int hp_cuda_axpy(struct hp_backend *be, float alpha, const float *x, float *y, size_t n);
int hp_cuda_sgd_update(struct hp_backend *be, float *w, const float *g, float *m, size_t n,
                       float lr, float momentum, float wd);
int hp_cuda_adamw_update(struct hp_backend *be, float *w, const float *g, float *m, float *v,
                         size_t n, const struct hp_adamw_desc *d);
int hp_cuda_sumsq(struct hp_backend *be, const float *x, size_t n, double *out);
int hp_cuda_scale(struct hp_backend *be, float *x, size_t n, float alpha);

/* backend_cuda_loss.cu: softmax cross-entropy. */
int hp_cuda_softmax_xent(struct hp_backend *be, const float *logits, const int32_t *labels, int n,
                         int classes, float grad_scale, float *dlogits, double *loss_sum,
                         int *correct);

/* backend_cuda_seq.cu: the sequence ops (embedding, layer norm, attention, GELU). */
int hp_cuda_embed_forward(struct hp_backend *be, const float *ids, const float *wte,
                          const float *wpe, float *y, int n, int T, int d, int vocab);
int hp_cuda_embed_backward(struct hp_backend *be, const float *ids, const float *dy, float *dwte,
                           float *dwpe, int n, int T, int d, int vocab);
int hp_cuda_layernorm_forward(struct hp_backend *be, const float *x, const float *gamma,
                              const float *beta, float *y, float *mean, float *rstd, int rows,
                              int d, float eps);
int hp_cuda_layernorm_backward(struct hp_backend *be, const float *x, const float *dy,
                               const float *gamma, const float *mean, const float *rstd, float *dx,
                               float *dgamma, float *dbeta, int rows, int d);
int hp_cuda_attention_forward(struct hp_backend *be, const struct hp_attn_desc *a, const float *qkv,
                              float *y, float *probs);
int hp_cuda_attention_backward(struct hp_backend *be, const struct hp_attn_desc *a,
                               const float *qkv, const float *probs, const float *dy, float *dqkv,
                               float *ws);
int hp_cuda_gelu_forward(struct hp_backend *be, const float *x, float *y, size_t n);
int hp_cuda_gelu_backward(struct hp_backend *be, const float *x, const float *dy, float *dx,
                          size_t n);

#endif
