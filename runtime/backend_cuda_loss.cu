/* backend_cuda_loss.cu - softmax cross-entropy of the CUDA backend.
 *
 * Two kernels on the backend's stream: one block per row of logits [n, classes] computes the
 * row's arg-max (first maximum), its loss -log softmax[label] = log sum exp(z - zmax) -
 * (z[label] - zmax) and, if asked, dlogits [n, classes]; then one block adds the n losses (in
 * double) and hits in a fixed order into the context's result, which is copied to the host.
 * The per-row scratch is the context's (grown once if a batch has more rows than it holds).
 */
#include "backend_cuda.cuh"

#include <limits.h>
#include <math.h>

#define FULL_MASK 0xffffffffu
#define MAX_WARPS 32 /* of a block of at most 1024 threads */
#define REDUCE_THREADS 256

/* (value, index) of the first maximum: b wins over a if larger, or equal and earlier. */
static __device__ __forceinline__ void argmax_merge(float *v, int *i, float bv, int bi)
{
    if (bv > *v || (bv == *v && bi < *i)) {
        *v = bv;
        *i = bi;
    }
}

/* The block's first maximum; every thread gets it. blockDim.x is a multiple of 32. */
static __device__ void block_argmax(float *v, int *i)
{
    __shared__ float sv[MAX_WARPS];
    __shared__ int si[MAX_WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;

    for (int off = 16; off > 0; off /= 2)
        argmax_merge(v, i, __shfl_down_sync(FULL_MASK, *v, off),
                     __shfl_down_sync(FULL_MASK, *i, off));
    if (lane == 0) {
        sv[warp] = *v;
        si[warp] = *i;
    }
    __syncthreads();
    if (warp == 0) {
        *v = lane < warps ? sv[lane] : -INFINITY;
        *i = lane < warps ? si[lane] : INT_MAX;
        for (int off = 16; off > 0; off /= 2)
            argmax_merge(v, i, __shfl_down_sync(FULL_MASK, *v, off),
                         __shfl_down_sync(FULL_MASK, *i, off));
        if (lane == 0) {
            sv[0] = *v;
            si[0] = *i;
        }
    }
    __syncthreads();
    *v = sv[0];
    *i = si[0];
    __syncthreads(); /* sv, si may be reused by the caller's next reduction */
}

/* The block's sum; every thread gets it. */
static __device__ float block_sum(float s)
{
    __shared__ float part[MAX_WARPS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;

    for (int off = 16; off > 0; off /= 2)
        s += __shfl_down_sync(FULL_MASK, s, off);
    if (lane == 0)
        part[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < warps ? part[lane] : 0.0f;
        for (int off = 16; off > 0; off /= 2)
            s += __shfl_down_sync(FULL_MASK, s, off);
        if (lane == 0)
            part[0] = s;
    }
    __syncthreads();
    s = part[0];
    __syncthreads();
    return s;
}

/* One block per row. row_loss [n], row_hit [n]; dlogits [n, classes] or NULL. A label
 * outside [0, classes) (the caller checks) gives a NaN loss rather than a stray read. */
static __global__ void xent_rows_kernel(const float *logits, const int32_t *labels, int classes,
                                        float grad_scale, float *dlogits, float *row_loss,
                                        int *row_hit)
{
    const size_t row = blockIdx.x;
    const float *z = logits + row * (size_t)classes;
    const int label = labels[row];
    const int valid = label >= 0 && label < classes;
    float zmax = -INFINITY, sum = 0.0f;
    int arg = INT_MAX;

    /* Each thread scans j = tid, tid + blockDim.x, ... in order, keeping its first maximum. */
    for (int j = threadIdx.x; j < classes; j += blockDim.x)
        argmax_merge(&zmax, &arg, z[j], j);
    block_argmax(&zmax, &arg);

    for (int j = threadIdx.x; j < classes; j += blockDim.x)
        sum += expf(z[j] - zmax);
    sum = block_sum(sum);

    if (threadIdx.x == 0) {
        row_loss[row] = valid ? logf(sum) - (z[label] - zmax) : NAN;
        row_hit[row] = valid && arg == label;
    }
    if (dlogits) {
        float *dz = dlogits + row * (size_t)classes;
        __syncthreads(); /* z[label] is read above before dlogits, if it is logits, changes */
        for (int j = threadIdx.x; j < classes; j += blockDim.x) {
            const float pj = expf(z[j] - zmax) / sum;
            dz[j] = (pj - (j == label ? 1.0f : 0.0f)) * grad_scale;
        }
    }
}

/* One block of REDUCE_THREADS: out = (sum of row_loss in double, sum of row_hit). The order
 * of the additions depends on n only, so the result is deterministic. */
static __global__ void xent_reduce_kernel(const float *row_loss, const int *row_hit, int n,
                                          struct hp_cuda_xent_result *out)
{
    __shared__ double sl[REDUCE_THREADS];
    __shared__ int sh[REDUCE_THREADS];
    double l = 0.0;
    int h = 0;

    for (int i = threadIdx.x; i < n; i += REDUCE_THREADS) {
        l += row_loss[i];
        h += row_hit[i];
    }
    sl[threadIdx.x] = l;
    sh[threadIdx.x] = h;
    __syncthreads();
    for (int half = REDUCE_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) {
            sl[threadIdx.x] += sl[threadIdx.x + half];
            sh[threadIdx.x] += sh[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out->loss_sum = sl[0];
        out->correct = sh[0];
    }
}

/* Makes the per-row scratch hold n rows. cudaFree waits for queued work that may use it. */
static int reserve_rows(struct hp_cuda *cu, int n)
{
    if ((size_t)n <= cu->xent_rows)
        return 0;
    (void)HP_CUDA_CALL(cudaFree(cu->xent_loss));
    (void)HP_CUDA_CALL(cudaFree(cu->xent_hit));
    cu->xent_loss = NULL;
    cu->xent_hit = NULL;
    cu->xent_rows = 0;
    HP_CUDA_CHECK(cudaMalloc((void **)&cu->xent_loss, (size_t)n * sizeof(float)));
    HP_CUDA_CHECK(cudaMalloc((void **)&cu->xent_hit, (size_t)n * sizeof(int)));
    cu->xent_rows = (size_t)n;
    return 0;
}

int hp_cuda_softmax_xent(struct hp_backend *be, const float *logits, const int32_t *labels, int n,
                         int classes, float grad_scale, float *dlogits, double *loss_sum,
                         int *correct)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    struct hp_cuda_xent_result res;
    int threads = 32, rc;

    if (n < 0 || classes <= 0) {
        hp_error("cuda: invalid softmax_xent shape [%d, %d]", n, classes);
        return -HP_EINVAL;
    }
    if (n == 0) {
        *loss_sum = 0.0;
        *correct = 0;
        return 0;
    }
    rc = reserve_rows(cu, n);
    if (rc)
        return rc;
    /* a warp for up to 32 classes, up to 256 threads for 1000 */
    while (threads < 256 && threads < classes)
        threads *= 2;
    xent_rows_kernel<<<(unsigned)n, threads, 0, cu->stream>>>(logits, labels, classes, grad_scale,
                                                              dlogits, cu->xent_loss, cu->xent_hit);
    rc = HP_CUDA_LAUNCHED(xent_rows_kernel);
    if (rc)
        return rc;
    xent_reduce_kernel<<<1, REDUCE_THREADS, 0, cu->stream>>>(cu->xent_loss, cu->xent_hit, n,
                                                             cu->xent_out);
    rc = HP_CUDA_LAUNCHED(xent_reduce_kernel);
    if (rc)
        return rc;
    HP_CUDA_CHECK(
        cudaMemcpyAsync(&res, cu->xent_out, sizeof(res), cudaMemcpyDeviceToHost, cu->stream));
    HP_CUDA_CHECK(cudaStreamSynchronize(cu->stream));
    *loss_sum = res.loss_sum;
    *correct = res.correct;
    return 0;
}
