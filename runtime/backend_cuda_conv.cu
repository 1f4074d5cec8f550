/* backend_cuda_conv.cu - convolution and pooling of the CUDA backend, with cuDNN's legacy API.
 *
 * Tensors are NCHW float: x [n, c, h, w], w [k, c, r, s], b [1, k, 1, 1], y [n, k, p, q].
 * conv_create builds the descriptors once per layer and picks the three algorithms; the ops
 * then only enqueue cuDNN calls on the backend's stream.
 */
#include "backend_cuda.cuh"

#include <stdlib.h>

/* A layer's convolution: a copy of its shape, cuDNN's descriptors of it, and the forward,
 * backward-data and backward-filter algorithms with the workspace each needs. */
struct hp_conv {
    struct hp_conv_desc d;
    cudnnTensorDescriptor_t xdesc, ydesc, bdesc;
    cudnnFilterDescriptor_t wdesc;
    cudnnConvolutionDescriptor_t cdesc;
    cudnnConvolutionFwdAlgo_t fwd_algo;
    cudnnConvolutionBwdDataAlgo_t bwd_data_algo;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo;
    size_t fwd_ws, bwd_data_ws, bwd_filter_ws;
    size_t ws; /* the largest of the three: what forward and backward are given */
};

static const float one = 1.0f, zero = 0.0f;

/* ---- algorithm choice ----------------------------------------------------------------- */

/* Each picker takes cuDNN's heuristic ranking (cudnnGet*Algorithm_v7, no benchmarking) and
 * keeps the first entry that reports success, is not a tensor-op one, and whose workspace,
 * asked again for the descriptor as set, fits HP_CUDA_CONV_WS_CAP. The descriptor is
 * CUDNN_FMA_MATH before the query and stays so (cuDNN then ranks FMA configurations; PyTorch,
 * with TF32 off, asserts that the chosen entry's math type is FMA and sets it on the
 * descriptor, which is what we have). If nothing qualifies, ALGO_0 (implicit GEMM), which
 * needs little or no workspace, is the fallback. No preference is given to deterministic
 * algorithms: the non-deterministic ones (atomics) may be chosen for backward. */
static int tensor_op(cudnnMathType_t m)
{
    return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

static int pick_fwd(struct hp_cuda *cu, struct hp_conv *cv)
{
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;

    HP_CUDA_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
        cu->cudnn, cv->xdesc, cv->wdesc, cv->cdesc, cv->ydesc, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
        &count, perf));
    for (int i = 0; i < count; i++) {
        size_t bytes = 0;
        if (perf[i].status != CUDNN_STATUS_SUCCESS || tensor_op(perf[i].mathType))
            continue;
        if (cudnnGetConvolutionForwardWorkspaceSize(cu->cudnn, cv->xdesc, cv->wdesc, cv->cdesc,
                                                    cv->ydesc, perf[i].algo,
                                                    &bytes) != CUDNN_STATUS_SUCCESS ||
            bytes > HP_CUDA_CONV_WS_CAP)
            continue;
        cv->fwd_algo = perf[i].algo;
        cv->fwd_ws = bytes;
        return 0;
    }
    cv->fwd_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    HP_CUDA_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
        cu->cudnn, cv->xdesc, cv->wdesc, cv->cdesc, cv->ydesc, cv->fwd_algo, &cv->fwd_ws));
    return 0;
}

static int pick_bwd_data(struct hp_cuda *cu, struct hp_conv *cv)
{
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int count = 0;

    HP_CUDA_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        cu->cudnn, cv->wdesc, cv->ydesc, cv->cdesc, cv->xdesc,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
    for (int i = 0; i < count; i++) {
        size_t bytes = 0;
        if (perf[i].status != CUDNN_STATUS_SUCCESS || tensor_op(perf[i].mathType))
            continue;
        if (cudnnGetConvolutionBackwardDataWorkspaceSize(cu->cudnn, cv->wdesc, cv->ydesc, cv->cdesc,
                                                         cv->xdesc, perf[i].algo,
                                                         &bytes) != CUDNN_STATUS_SUCCESS ||
            bytes > HP_CUDA_CONV_WS_CAP)
            continue;
        cv->bwd_data_algo = perf[i].algo;
        cv->bwd_data_ws = bytes;
        return 0;
    }
    cv->bwd_data_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    HP_CUDA_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
        cu->cudnn, cv->wdesc, cv->ydesc, cv->cdesc, cv->xdesc, cv->bwd_data_algo,
        &cv->bwd_data_ws));
    return 0;
}

static int pick_bwd_filter(struct hp_cuda *cu, struct hp_conv *cv)
{
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int count = 0;

    HP_CUDA_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        cu->cudnn, cv->xdesc, cv->ydesc, cv->cdesc, cv->wdesc,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
    for (int i = 0; i < count; i++) {
        size_t bytes = 0;
        if (perf[i].status != CUDNN_STATUS_SUCCESS || tensor_op(perf[i].mathType))
            continue;
        if (cudnnGetConvolutionBackwardFilterWorkspaceSize(cu->cudnn, cv->xdesc, cv->ydesc,
                                                           cv->cdesc, cv->wdesc, perf[i].algo,
                                                           &bytes) != CUDNN_STATUS_SUCCESS ||
            bytes > HP_CUDA_CONV_WS_CAP)
            continue;
        cv->bwd_filter_algo = perf[i].algo;
        cv->bwd_filter_ws = bytes;
        return 0;
    }
    cv->bwd_filter_algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
    HP_CUDA_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        cu->cudnn, cv->xdesc, cv->ydesc, cv->cdesc, cv->wdesc, cv->bwd_filter_algo,
        &cv->bwd_filter_ws));
    return 0;
}

/* ---- convolution ---------------------------------------------------------------------- */

static int conv_shape_ok(const struct hp_conv_desc *d)
{
    return d->n > 0 && d->c > 0 && d->h > 0 && d->w > 0 && d->k > 0 && d->r > 0 && d->s > 0 &&
           d->stride > 0 && d->pad >= 0 && d->p > 0 && d->q > 0 &&
           d->p == (d->h + 2 * d->pad - d->r) / d->stride + 1 &&
           d->q == (d->w + 2 * d->pad - d->s) / d->stride + 1;
}

/* Destroys the descriptors that exist and frees the struct. */
static void conv_release(struct hp_conv *cv)
{
    if (cv->cdesc)
        (void)HP_CUDA_CALL(cudnnDestroyConvolutionDescriptor(cv->cdesc));
    if (cv->wdesc)
        (void)HP_CUDA_CALL(cudnnDestroyFilterDescriptor(cv->wdesc));
    if (cv->bdesc)
        (void)HP_CUDA_CALL(cudnnDestroyTensorDescriptor(cv->bdesc));
    if (cv->ydesc)
        (void)HP_CUDA_CALL(cudnnDestroyTensorDescriptor(cv->ydesc));
    if (cv->xdesc)
        (void)HP_CUDA_CALL(cudnnDestroyTensorDescriptor(cv->xdesc));
    free(cv);
}

static int conv_init(struct hp_cuda *cu, struct hp_conv *cv)
{
    const struct hp_conv_desc *d = &cv->d;
    int on, ok, op, oq, rc;

    HP_CUDA_CHECK(cudnnCreateTensorDescriptor(&cv->xdesc));
    HP_CUDA_CHECK(cudnnCreateTensorDescriptor(&cv->ydesc));
    HP_CUDA_CHECK(cudnnCreateTensorDescriptor(&cv->bdesc));
    HP_CUDA_CHECK(cudnnCreateFilterDescriptor(&cv->wdesc));
    HP_CUDA_CHECK(cudnnCreateConvolutionDescriptor(&cv->cdesc));
    HP_CUDA_CHECK(cudnnSetTensor4dDescriptor(cv->xdesc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n,
                                             d->c, d->h, d->w));
    HP_CUDA_CHECK(cudnnSetTensor4dDescriptor(cv->ydesc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n,
                                             d->k, d->p, d->q));
    HP_CUDA_CHECK(
        cudnnSetTensor4dDescriptor(cv->bdesc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, d->k, 1, 1));
    HP_CUDA_CHECK(cudnnSetFilter4dDescriptor(cv->wdesc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d->k,
                                             d->c, d->r, d->s));
    HP_CUDA_CHECK(cudnnSetConvolution2dDescriptor(cv->cdesc, d->pad, d->pad, d->stride, d->stride,
                                                  1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    HP_CUDA_CHECK(cudnnSetConvolutionGroupCount(cv->cdesc, 1));
    /* FMA only: CUDNN_DEFAULT_MATH lets cuDNN use TF32 tensor cores for fp32 on sm_80+. */
    HP_CUDA_CHECK(cudnnSetConvolutionMathType(cv->cdesc, CUDNN_FMA_MATH));

    HP_CUDA_CHECK(
        cudnnGetConvolution2dForwardOutputDim(cv->cdesc, cv->xdesc, cv->wdesc, &on, &ok, &op, &oq));
    if (on != d->n || ok != d->k || op != d->p || oq != d->q) {
        hp_error("cuda: convolution output [%d, %d, %d, %d] differs from cuDNN's [%d, %d, %d, %d]",
                 d->n, d->k, d->p, d->q, on, ok, op, oq);
        return -HP_ESHAPE;
    }

    rc = pick_fwd(cu, cv);
    if (!rc)
        rc = pick_bwd_data(cu, cv);
    if (!rc)
        rc = pick_bwd_filter(cu, cv);
    if (rc)
        return rc;
    cv->ws = cv->fwd_ws;
    if (cv->bwd_data_ws > cv->ws)
        cv->ws = cv->bwd_data_ws;
    if (cv->bwd_filter_ws > cv->ws)
        cv->ws = cv->bwd_filter_ws;
    hp_debug("cuda: conv x [%d, %d, %d, %d] w [%d, %d, %d, %d] stride %d pad %d: fwd algo %d "
             "(%zu B), bwd data algo %d (%zu B), bwd filter algo %d (%zu B)",
             d->n, d->c, d->h, d->w, d->k, d->c, d->r, d->s, d->stride, d->pad, (int)cv->fwd_algo,
             cv->fwd_ws, (int)cv->bwd_data_algo, cv->bwd_data_ws, (int)cv->bwd_filter_algo,
             cv->bwd_filter_ws);
    return 0;
}

int hp_cuda_conv_create(struct hp_backend *be, const struct hp_conv_desc *d, struct hp_conv **out,
                        size_t *workspace)
{
    struct hp_conv *cv;
    int rc;

    if (!conv_shape_ok(d)) {
        hp_error("cuda: invalid convolution shape x [%d, %d, %d, %d] w [%d, %d, %d, %d] stride "
                 "%d pad %d -> [%d, %d]",
                 d->n, d->c, d->h, d->w, d->k, d->c, d->r, d->s, d->stride, d->pad, d->p, d->q);
        return -HP_ESHAPE;
    }
    cv = (struct hp_conv *)calloc(1, sizeof(*cv));
    if (!cv)
        return -HP_ENOMEM;
    cv->d = *d;
    rc = conv_init(hp_cuda_of(be), cv);
    if (rc) {
        conv_release(cv);
        return rc;
    }
    *workspace = cv->ws;
    *out = cv;
    return 0;
}

void hp_cuda_conv_destroy(struct hp_backend *be, struct hp_conv *conv)
{
    if (conv)
        conv_release(conv);
}

/* The caller allocates at least conv->ws bytes (reported by conv_create); NULL if that is 0. */
static int conv_ws_ok(const struct hp_conv *cv, const void *ws)
{
    if (cv->ws && !ws) {
        hp_error("cuda: convolution needs a workspace of %zu bytes, got none", cv->ws);
        return 0;
    }
    return 1;
}

int hp_cuda_conv_forward(struct hp_backend *be, struct hp_conv *conv, const float *x,
                         const float *w, const float *b, float *y, void *ws)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (!conv_ws_ok(conv, ws))
        return -HP_EINVAL;
    HP_CUDA_CHECK(cudnnConvolutionForward(cu->cudnn, &one, conv->xdesc, x, conv->wdesc, w,
                                          conv->cdesc, conv->fwd_algo, ws, conv->fwd_ws, &zero,
                                          conv->ydesc, y));
    /* y += b, broadcast over n, p and q */
    if (conv->d.has_bias)
        HP_CUDA_CHECK(cudnnAddTensor(cu->cudnn, &one, conv->bdesc, b, &one, conv->ydesc, y));
    return 0;
}

int hp_cuda_conv_backward(struct hp_backend *be, struct hp_conv *conv, const float *x,
                          const float *w, const float *dy, float *dx, float *dw, float *db,
                          void *ws)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (!conv_ws_ok(conv, ws))
        return -HP_EINVAL;
    /* beta = 0 everywhere: the outputs are overwritten, never accumulated into. */
    if (conv->d.has_bias)
        HP_CUDA_CHECK(
            cudnnConvolutionBackwardBias(cu->cudnn, &one, conv->ydesc, dy, &zero, conv->bdesc, db));
    HP_CUDA_CHECK(cudnnConvolutionBackwardFilter(cu->cudnn, &one, conv->xdesc, x, conv->ydesc, dy,
                                                 conv->cdesc, conv->bwd_filter_algo, ws,
                                                 conv->bwd_filter_ws, &zero, conv->wdesc, dw));
    if (dx)
        HP_CUDA_CHECK(cudnnConvolutionBackwardData(cu->cudnn, &one, conv->wdesc, w, conv->ydesc, dy,
                                                   conv->cdesc, conv->bwd_data_algo, ws,
                                                   conv->bwd_data_ws, &zero, conv->xdesc, dx));
    return 0;
}

/* ---- pooling -------------------------------------------------------------------------- */

/* Validates the shape and sets the context's x [n, c, h, w], y [n, c, p, q] and pooling
 * descriptors for one call. */
static int set_pool(struct hp_cuda *cu, const struct hp_pool_desc *d, cudnnPoolingMode_t mode)
{
    if (d->n <= 0 || d->c <= 0 || d->h <= 0 || d->w <= 0 || d->kernel <= 0 || d->stride <= 0 ||
        d->pad < 0 || d->p <= 0 || d->q <= 0 ||
        d->p != (d->h + 2 * d->pad - d->kernel) / d->stride + 1 ||
        d->q != (d->w + 2 * d->pad - d->kernel) / d->stride + 1) {
        hp_error("cuda: invalid pooling shape [%d, %d, %d, %d] kernel %d stride %d pad %d -> "
                 "[%d, %d]",
                 d->n, d->c, d->h, d->w, d->kernel, d->stride, d->pad, d->p, d->q);
        return -HP_ESHAPE;
    }
    HP_CUDA_CHECK(cudnnSetTensor4dDescriptor(cu->xdesc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n,
                                             d->c, d->h, d->w));
    HP_CUDA_CHECK(cudnnSetTensor4dDescriptor(cu->ydesc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n,
                                             d->c, d->p, d->q));
    HP_CUDA_CHECK(cudnnSetPooling2dDescriptor(cu->pooldesc, mode, CUDNN_NOT_PROPAGATE_NAN,
                                              d->kernel, d->kernel, d->pad, d->pad, d->stride,
                                              d->stride));
    return 0;
}

/* Max pooling: cuDNN pads max pooling with the lowest float, so padded cells never win (and a
 * window entirely in the padding gives -FLT_MAX, as the CPU backend does). The deterministic
 * mode is used for both directions. backend.h routes the gradient to the FIRST maximum of a
 * window; cuDNN documents only that this mode is deterministic, not which of several equal
 * maxima it picks, so on ties the two backends may route dy to different cells (the sum over
 * the window is the same). Random test inputs have no ties. */
#define HP_CUDA_MAXPOOL CUDNN_POOLING_MAX_DETERMINISTIC

int hp_cuda_maxpool_forward(struct hp_backend *be, const struct hp_pool_desc *d, const float *x,
                            float *y)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    int rc = set_pool(cu, d, HP_CUDA_MAXPOOL);

    if (rc)
        return rc;
    HP_CUDA_CHECK(
        cudnnPoolingForward(cu->cudnn, cu->pooldesc, &one, cu->xdesc, x, &zero, cu->ydesc, y));
    return 0;
}

int hp_cuda_maxpool_backward(struct hp_backend *be, const struct hp_pool_desc *d, const float *x,
                             const float *y, const float *dy, float *dx)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    int rc = set_pool(cu, d, HP_CUDA_MAXPOOL);

    if (rc)
        return rc;
    HP_CUDA_CHECK(cudnnPoolingBackward(cu->cudnn, cu->pooldesc, &one, cu->ydesc, y, cu->ydesc, dy,
                                       cu->xdesc, x, &zero, cu->xdesc, dx));
    return 0;
}

/* Average pooling divides by kernel * kernel, padded cells included (COUNT_INCLUDE_PADDING). */
int hp_cuda_avgpool_forward(struct hp_backend *be, const struct hp_pool_desc *d, const float *x,
                            float *y)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    int rc = set_pool(cu, d, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING);

    if (rc)
        return rc;
    HP_CUDA_CHECK(
        cudnnPoolingForward(cu->cudnn, cu->pooldesc, &one, cu->xdesc, x, &zero, cu->ydesc, y));
    return 0;
}

/* cudnnPoolingBackward takes y and x as well, which average pooling does not depend on; dy and
 * dx, of the same shapes, stand in for them so that valid device memory is passed. */
int hp_cuda_avgpool_backward(struct hp_backend *be, const struct hp_pool_desc *d, const float *dy,
                             float *dx)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    int rc = set_pool(cu, d, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING);

    if (rc)
        return rc;
    HP_CUDA_CHECK(cudnnPoolingBackward(cu->cudnn, cu->pooldesc, &one, cu->ydesc, dy, cu->ydesc, dy,
                                       cu->xdesc, dx, &zero, cu->xdesc, dx));
    return 0;
}
