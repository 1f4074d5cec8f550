/* backend_cuda_elementwise.cu - the CUDA backend's own kernels: bias, ReLU, dropout, add, axpy,
 * the SGD and AdamW updates, scaling and the sum of squares (a reduction to the host, which
 * waits for the stream). All are grid-stride loops over size_t indices on the backend's stream;
 * each op returns the launch status (execution errors surface at the next sync).
 */
#include "backend_cuda.cuh"

#include "rng.h"

/* ---- bias ----------------------------------------------------------------------------- */

/* y [rows, cols] += b [cols] broadcast over rows; total = rows * cols. */
static __global__ void bias_add_kernel(float *y, const float *b, size_t cols, size_t total)
{
    GRID_STRIDE(i, total)
    {
        y[i] += b[i % cols];
    }
}

int hp_cuda_bias_add(struct hp_backend *be, float *y, const float *b, int rows, int cols)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    const size_t total = (size_t)rows * (size_t)cols;

    if (rows <= 0 || cols <= 0)
        return 0;
    bias_add_kernel<<<hp_cuda_grid(cu, total), HP_CUDA_THREADS, 0, cu->stream>>>(y, b, cols, total);
    return HP_CUDA_LAUNCHED(bias_add_kernel);
}

/* Block of BIAS_COLS x BIAS_ROWS threads per tile of BIAS_COLS columns: thread (tx, ty) sums
 * rows ty, ty + BIAS_ROWS, ... of column j0 + tx (reads coalesced along a row), then the
 * BIAS_ROWS partial sums of a column are added in a fixed order, so the result is
 * deterministic. db [cols] is overwritten. */
#define BIAS_COLS 32
#define BIAS_ROWS 8
static __global__ void bias_grad_kernel(const float *dy, float *db, int rows, int cols)
{
    __shared__ float part[BIAS_ROWS][BIAS_COLS + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;

    for (int j0 = blockIdx.x * BIAS_COLS; j0 < cols; j0 += gridDim.x * BIAS_COLS) {
        const int j = j0 + tx;
        float s = 0.0f;
        if (j < cols)
            for (int r = ty; r < rows; r += BIAS_ROWS)
                s += dy[(size_t)r * cols + j];
        part[ty][tx] = s;
        __syncthreads();
        if (ty == 0 && j < cols) {
            for (int k = 1; k < BIAS_ROWS; k++)
                s += part[k][tx];
            db[j] = s;
        }
        __syncthreads();
    }
}

int hp_cuda_bias_grad(struct hp_backend *be, const float *dy, float *db, int rows, int cols)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    unsigned tiles;

    if (cols <= 0)
        return 0;
    if (rows <= 0) { /* the empty sum */
        HP_CUDA_CHECK(cudaMemsetAsync(db, 0, (size_t)cols * sizeof(float), cu->stream));
        return 0;
    }
    tiles = (unsigned)((cols + BIAS_COLS - 1) / BIAS_COLS);
    if (tiles > 65535u)
        tiles = 65535u;
    bias_grad_kernel<<<tiles, dim3(BIAS_COLS, BIAS_ROWS), 0, cu->stream>>>(dy, db, rows, cols);
    return HP_CUDA_LAUNCHED(bias_grad_kernel);
}

/* ---- ReLU ----------------------------------------------------------------------------- */

/* y = max(x, 0), written as the CPU backend does (x > 0 ? x : 0: NaN and -0 give +0). */
static __global__ void relu_forward_kernel(const float *x, float *y, size_t n)
{
    GRID_STRIDE(i, n)
    {
        const float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

static __global__ void relu_backward_kernel(const float *y, const float *dy, float *dx, size_t n)
{
    GRID_STRIDE(i, n)
    {
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    }
}

int hp_cuda_relu_forward(struct hp_backend *be, const float *x, float *y, size_t n)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (n == 0)
        return 0;
    relu_forward_kernel<<<hp_cuda_grid(cu, n), HP_CUDA_THREADS, 0, cu->stream>>>(x, y, n);
    return HP_CUDA_LAUNCHED(relu_forward_kernel);
}

int hp_cuda_relu_backward(struct hp_backend *be, const float *y, const float *dy, float *dx,
                          size_t n)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (n == 0)
        return 0;
    relu_backward_kernel<<<hp_cuda_grid(cu, n), HP_CUDA_THREADS, 0, cu->stream>>>(y, dy, dx, n);
    return HP_CUDA_LAUNCHED(relu_backward_kernel);
}

/* ---- dropout -------------------------------------------------------------------------- */

/* mask[i] = 0 if hp_rng_uniform(seed, i) < p, else keep = 1 / (1 - p) (computed on the host,
 * in float, exactly as the CPU backend does); y = x mask. The same (seed, i) gives the same
 * draw on the host and here, so masks equal the CPU backend's bit for bit. */
static __global__ void dropout_forward_kernel(const float *x, float *y, float *mask, size_t n,
                                              float p, float keep, uint64_t seed)
{
    GRID_STRIDE(i, n)
    {
        const float m = hp_rng_uniform(seed, i) < p ? 0.0f : keep;
        mask[i] = m;
        y[i] = x[i] * m;
    }
}

static __global__ void mul_kernel(const float *a, const float *b, float *y, size_t n)
{
    GRID_STRIDE(i, n)
    {
        y[i] = a[i] * b[i];
    }
}

int hp_cuda_dropout_forward(struct hp_backend *be, const float *x, float *y, float *mask, size_t n,
                            float p, uint64_t seed)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    const float keep = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;

    if (n == 0)
        return 0;
    dropout_forward_kernel<<<hp_cuda_grid(cu, n), HP_CUDA_THREADS, 0, cu->stream>>>(x, y, mask, n,
                                                                                    p, keep, seed);
    return HP_CUDA_LAUNCHED(dropout_forward_kernel);
}

int hp_cuda_dropout_backward(struct hp_backend *be, const float *dy, const float *mask, float *dx,
                             size_t n)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (n == 0)
        return 0;
    mul_kernel<<<hp_cuda_grid(cu, n), HP_CUDA_THREADS, 0, cu->stream>>>(dy, mask, dx, n);
    return HP_CUDA_LAUNCHED(mul_kernel);
}

/* ---- add, axpy ------------------------------------------------------------------------ */

/* y = a + b; y may be a or b (each element is read before it is written, by one thread). */
static __global__ void add_kernel(const float *a, const float *b, float *y, size_t n)
{
    GRID_STRIDE(i, n)
    {
        y[i] = a[i] + b[i];
    }
}

static __global__ void axpy_kernel(float alpha, const float *x, float *y, size_t n)
{
    GRID_STRIDE(i, n)
    {
        y[i] += alpha * x[i];
    }
}

int hp_cuda_add(struct hp_backend *be, const float *a, const float *b, float *y, size_t n)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (n == 0)
        return 0;
    add_kernel<<<hp_cuda_grid(cu, n), HP_CUDA_THREADS, 0, cu->stream>>>(a, b, y, n);
    return HP_CUDA_LAUNCHED(add_kernel);
}

int hp_cuda_axpy(struct hp_backend *be, float alpha, const float *x, float *y, size_t n)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (n == 0)
        return 0;
    axpy_kernel<<<hp_cuda_grid(cu, n), HP_CUDA_THREADS, 0, cu->stream>>>(alpha, x, y, n);
    return HP_CUDA_LAUNCHED(axpy_kernel);
}

/* ---- SGD ------------------------------------------------------------------------------ */

/* PyTorch's rule: g' = g + wd w; m = mu m + g'; w -= lr m (m written also when mu = 0). */
static __global__ void sgd_kernel(float *w, const float *g, float *m, size_t n, float lr, float mu,
                                  float wd)
{
    GRID_STRIDE(i, n)
    {
        const float wi = w[i];
        const float mi = mu * m[i] + (g[i] + wd * wi);
        m[i] = mi;
        w[i] = wi - lr * mi;
    }
}

int hp_cuda_sgd_update(struct hp_backend *be, float *w, const float *g, float *m, size_t n,
                       float lr, float momentum, float wd)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (n == 0)
        return 0;
    sgd_kernel<<<hp_cuda_grid(cu, n), HP_CUDA_THREADS, 0, cu->stream>>>(w, g, m, n, lr, momentum,
                                                                        wd);
    return HP_CUDA_LAUNCHED(sgd_kernel);
}

/* ---- AdamW, sum of squares, scale ---------------------------------------------------- */

/* As cpu_adamw_update (backend_cpu.c), with every operation rounded on its own (no fused
 * multiply-adds: the _rn intrinsics), so that the two backends round alike. */
static __global__ void adamw_kernel(float *w, const float *g, float *m, float *v, size_t n,
                                    float decay, float step_size, float bc2_sqrt, float a1,
                                    float a2, float b2, float eps)
{
    GRID_STRIDE(i, n)
    {
        const float gi = g[i], m0 = m[i];
        const float wi = __fmul_rn(w[i], decay);
        const float mi = a1 < 0.5f ? __fadd_rn(m0, __fmul_rn(a1, __fsub_rn(gi, m0)))
                                   : __fsub_rn(gi, __fmul_rn(__fsub_rn(gi, m0), 1.0f - a1));
        const float vi = __fadd_rn(__fmul_rn(v[i], b2), __fmul_rn(__fmul_rn(a2, gi), gi));
        const float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        m[i] = mi;
        v[i] = vi;
        w[i] = __fadd_rn(wi, __fdiv_rn(__fmul_rn(-step_size, mi), den));
    }
}

int hp_cuda_adamw_update(struct hp_backend *be, float *w, const float *g, float *m, float *v,
                         size_t n, const struct hp_adamw_desc *d)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    const double t = (double)d->step;
    const float decay = (float)(1.0 - (double)d->lr * (double)d->wd);
    const float step_size = (float)((double)d->lr / (1.0 - pow((double)d->beta1, t)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow((double)d->beta2, t));
    const float a1 = (float)(1.0 - (double)d->beta1), a2 = (float)(1.0 - (double)d->beta2);

    if (n == 0)
        return 0;
    adamw_kernel<<<hp_cuda_grid(cu, n), HP_CUDA_THREADS, 0, cu->stream>>>(
        w, g, m, v, n, decay, step_size, bc2_sqrt, a1, a2, d->beta2, d->eps);
    return HP_CUDA_LAUNCHED(adamw_kernel);
}

/* Partial sums of squares: block b of HP_CUDA_SUMSQ_BLOCKS (a fixed grid, so the order of
 * the additions depends on n only, not on the device) adds up its grid-stride share in
 * double, then the block's threads in a fixed tree; part[b] is its sum. */
static __global__ void sumsq_part_kernel(const float *x, size_t n, double *part)
{
    __shared__ double s[HP_CUDA_THREADS];
    double acc = 0.0;

    GRID_STRIDE(i, n)
    {
        const double xi = (double)x[i];
        acc += xi * xi;
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int half = HP_CUDA_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        part[blockIdx.x] = s[0];
}

/* part[HP_CUDA_SUMSQ_BLOCKS] = the sum of part[0 .. HP_CUDA_SUMSQ_BLOCKS), one thread, in
 * order. */
static __global__ void sumsq_total_kernel(double *part)
{
    double acc = 0.0;

    for (int b = 0; b < HP_CUDA_SUMSQ_BLOCKS; b++)
        acc += part[b];
    part[HP_CUDA_SUMSQ_BLOCKS] = acc;
}

int hp_cuda_sumsq(struct hp_backend *be, const float *x, size_t n, double *out)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    int rc;

    if (n == 0) {
        *out = 0.0;
        return 0;
    }
    sumsq_part_kernel<<<HP_CUDA_SUMSQ_BLOCKS, HP_CUDA_THREADS, 0, cu->stream>>>(x, n,
                                                                                cu->sumsq_part);
    rc = HP_CUDA_LAUNCHED(sumsq_part_kernel);
    if (rc)
        return rc;
    sumsq_total_kernel<<<1, 1, 0, cu->stream>>>(cu->sumsq_part);
    rc = HP_CUDA_LAUNCHED(sumsq_total_kernel);
    if (rc)
        return rc;
    HP_CUDA_CHECK(cudaMemcpyAsync(out, cu->sumsq_part + HP_CUDA_SUMSQ_BLOCKS, sizeof(double),
                                  cudaMemcpyDeviceToHost, cu->stream));
    HP_CUDA_CHECK(cudaStreamSynchronize(cu->stream));
    return 0;
}

static __global__ void scale_kernel(float *x, size_t n, float alpha)
{
    GRID_STRIDE(i, n)
    {
        x[i] *= alpha;
    }
}

int hp_cuda_scale(struct hp_backend *be, float *x, size_t n, float alpha)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (n == 0)
        return 0;
    scale_kernel<<<hp_cuda_grid(cu, n), HP_CUDA_THREADS, 0, cu->stream>>>(x, n, alpha);
    return HP_CUDA_LAUNCHED(scale_kernel);
}
