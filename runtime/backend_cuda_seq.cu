/* backend_cuda_seq.cu - the sequence ops of the CUDA backend (backend.h, "the sequence ops";
 * the CPU reference is backend_cpu.c): token and position embedding, layer norm, causal
 * multi-head attention and GELU (tanh form). The per-position linear layer ("plinear") and the
 * per-position softmax cross-entropy of hp_net_loss_tokens need no op of their own: net.c runs
 * them through gemm, bias_add, bias_grad (backend_cuda.cu, backend_cuda_elementwise.cu) and
 * softmax_xent (backend_cuda_loss.cu) with rows = sequences x positions.
 *
 * The kernels, all on the backend's stream:
 * - embed_forward_kernel: y[r, j] = wte[ids[r], j] + wpe[r % T, j], a grid-stride loop over
 *   the n T d outputs; an id that is not an integer in [0, vocab) is not gathered and its row
 *   is recorded (integer atomicMin: the first bad row, whatever the order) in the context's
 *   seq_flag, which embed_forward copies back (so it waits for the stream) to fail with
 *   -HP_EINVAL and the CPU backend's message.
 * - embed_dwpe_kernel: dwpe[t, j] = the sum over sequences b = 0, 1, ... of dy[b, t, j], one
 *   thread per output.
 * - embed_dwte_kernel: dwte by ownership, without atomics and without sorting: a block owns a
 *   tile of EMB_VOCAB token rows x EMB_COLS columns, reads every position's id (staged through
 *   shared memory) in order and adds the dy rows of its own tokens into a shared accumulator,
 *   each thread its own column. Every dwte element is written (0 for an absent token).
 * - layernorm_forward_kernel, layernorm_dx_kernel: a warp per row (grid-stride over rows);
 *   the forward's mean, then the sum of squared deviations (two passes, as the CPU), rstd =
 *   1 / sqrtf(var + eps); mean and rstd [rows] are saved. dx = rstd (dy gamma - mean(dy gamma)
 *   - xhat mean(dy gamma xhat)).
 * - layernorm_dparam_kernel: dgamma = sum over rows of dy xhat, dbeta = sum of dy: a block of
 *   LN_COLS x LN_ROWS threads per tile of LN_COLS columns (bias_grad's pattern), each thread a
 *   fixed set of rows, the LN_ROWS partial sums added in a fixed order. It runs before
 *   layernorm_dx_kernel, so dx may alias dy.
 * - Attention: q k^T and p v (forward), p^T dy, dy v^T, ds k and ds^T q (backward) are
 *   cuBLAS strided-batched GEMMs (fp32, no TF32: backend_cuda.cu) over the heads of one
 *   sequence, or over the sequences for one head (whichever count is larger is the batch, the
 *   other the loop: attn_walk). causal_softmax_kernel turns each score row i into
 *   probabilities over j <= i and zeros j > i; causal_dsoftmax_kernel computes ds = p (dp -
 *   sum_j p dp) in place of dp. Both are a warp per row. Backward needs dp [T, T] per (sequence,
 *   head): the context's attn_ws (grown on demand, up to ATTN_WS_CAP bytes, not counted by
 *   hp_backend_track_memory, like cuBLAS's own workspace) holds a chunk of them; when a single
 *   T x T matrix exceeds the cap, or the scratch cannot be allocated, the caller's workspace
 *   (T x T floats, backend.h) is used one head at a time.
 * - gelu_forward_kernel, gelu_backward_kernel: element-wise, grid-stride, the CPU's formulas
 *   (tanh(u) = 1 - 2 / (exp(2u) + 1)).
 *
 * Launch bounds: every kernel loops (grid-stride or over its row/column range) and assumes no
 * size beyond the block size it is launched with: ROW_THREADS for the warp-per-row kernels,
 * EMB_COLS for embed_dwte_kernel, LN_COLS x LN_ROWS for layernorm_dparam_kernel, HP_CUDA_THREADS
 * for the element-wise ones. Rows and columns may have any length (T, d and vocab are only
 * bounded by int); static shared memory is at most 36 KiB (embed_dwte_kernel).
 *
 * Determinism: no float atomics anywhere. Every sum is computed by one thread in a fixed order
 * or by warp shuffles / shared-memory trees whose shape depends on the sizes only, so every
 * result is the same from run to run. Embedding backward adds in the CPU's order (positions
 * ascending, in float), so dwte and dwpe equal the CPU's bit for bit; the forward's one
 * addition too. The other ops differ from the CPU in rounding only (float instead of double
 * partial sums, another summation order, fused multiply-adds, the device's expf).
 */
#include "backend_cuda.cuh"

#include <math.h>

#define FULL_MASK 0xffffffffu
#define ROW_WARPS 4 /* rows (one per warp) per block of the row kernels */
#define ROW_THREADS (32 * ROW_WARPS)
#define EMB_VOCAB 64   /* token rows per block of embed_dwte_kernel */
#define EMB_COLS 128   /* columns per block (its threads) */
#define EMB_STAGE 1024 /* ids staged in shared memory at a time */
#define LN_COLS 32
#define LN_ROWS 16
#define ATTN_WS_CAP ((size_t)64 << 20) /* bytes of the context's attention scratch, at most */

/* ---- helpers -------------------------------------------------------------------------- */

/* The sum (and maximum) of a warp's 32 values, in every lane; the same tree every time. */
static __device__ __forceinline__ float warp_sum(float v)
{
    for (int off = 16; off > 0; off /= 2)
        v += __shfl_xor_sync(FULL_MASK, v, off);
    return v;
}

static __device__ __forceinline__ float warp_max(float v)
{
    for (int off = 16; off > 0; off /= 2)
        v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, off));
    return v;
}

/* Row loop of the warp-per-row kernels (blocks of ROW_THREADS): the warp's rows `row`, with
 * its lane. `row` is the same in all 32 lanes, so the whole warp enters and leaves together
 * (the shuffles need all 32). */
#define WARP_ROWS(row, lane, rows)                                                                 \
    const int lane = threadIdx.x % 32;                                                             \
    for (size_t row = (size_t)blockIdx.x * ROW_WARPS + threadIdx.x / 32; row < (rows);             \
         row += (size_t)gridDim.x * ROW_WARPS)

static unsigned rows_grid(const struct hp_cuda *cu, size_t rows)
{
    size_t blocks = (rows + ROW_WARPS - 1) / ROW_WARPS;
    const size_t cap = (size_t)cu->sm_count * 64;

    if (blocks > cap)
        blocks = cap;
    return blocks ? (unsigned)blocks : 1u;
}

/* ---- embedding ------------------------------------------------------------------------ */

/* total = rows x d outputs, rows = n T. bad: the first row whose id is not an integer in
 * [0, vocab) (UINT_MAX if none), set by an integer atomicMin. */
static __global__ void embed_forward_kernel(const float *ids, const float *wte, const float *wpe,
                                            float *y, int T, int d, int vocab, size_t total,
                                            unsigned *bad)
{
    GRID_STRIDE(i, total)
    {
        const size_t r = i / (size_t)d;
        const int j = (int)(i % (size_t)d), t = (int)(r % (size_t)T);
        const float id = ids[r];
        if (!(id >= 0.0f && id < (float)vocab) || (float)(int)id != id) {
            if (j == 0)
                atomicMin(bad, (unsigned)r);
            continue;
        }
        y[i] = wte[(size_t)(int)id * d + j] + wpe[(size_t)t * d + j];
    }
}

int hp_cuda_embed_forward(struct hp_backend *be, const float *ids, const float *wte,
                          const float *wpe, float *y, int n, int T, int d, int vocab)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    const size_t total = (size_t)n * T * d;
    unsigned bad = 0;
    float id = 0.0f;
    int rc;

    if (n < 0 || T <= 0 || d <= 0 || vocab <= 0) {
        hp_error("cuda: invalid embedding shape (n %d, T %d, d %d, vocab %d)", n, T, d, vocab);
        return -HP_ESHAPE;
    }
    if (total == 0)
        return 0;
    HP_CUDA_CHECK(cudaMemsetAsync(cu->seq_flag, 0xff, sizeof(unsigned), cu->stream));
    embed_forward_kernel<<<hp_cuda_grid(cu, total), HP_CUDA_THREADS, 0, cu->stream>>>(
        ids, wte, wpe, y, T, d, vocab, total, cu->seq_flag);
    rc = HP_CUDA_LAUNCHED(embed_forward_kernel);
    if (rc)
        return rc;
    HP_CUDA_CHECK(
        cudaMemcpyAsync(&bad, cu->seq_flag, sizeof(bad), cudaMemcpyDeviceToHost, cu->stream));
    HP_CUDA_CHECK(cudaStreamSynchronize(cu->stream));
    if (bad == 0xffffffffu)
        return 0;
    HP_CUDA_CHECK(cudaMemcpy(&id, ids + bad, sizeof(id), cudaMemcpyDeviceToHost));
    hp_error("cuda: token id %g at position %u of sequence %u is not an integer in 0..%d",
             (double)id, bad % (unsigned)T, bad / (unsigned)T, vocab - 1);
    return -HP_EINVAL;
}

/* dwpe [T, d]: one thread per element, sequences added in order. */
static __global__ void embed_dwpe_kernel(const float *dy, float *dwpe, int n, int T, int d)
{
    const size_t total = (size_t)T * d;

    GRID_STRIDE(i, total)
    {
        float s = 0.0f;
        for (int b = 0; b < n; b++)
            s += dy[(size_t)b * total + i];
        dwpe[i] = s;
    }
}

/* Block (x, y) = token rows [x EMB_VOCAB, +EMB_VOCAB) x columns [y EMB_COLS, +EMB_COLS), with
 * EMB_COLS threads. The block reads all `rows` ids in order (EMB_STAGE at a time into shared
 * memory, each as its row in the tile or -1), and thread tid adds dy[r, j] of the rows whose
 * token it owns into acc[token][tid]: one thread per (token, column), positions ascending. */
static __global__ void embed_dwte_kernel(const float *ids, const float *dy, float *dwte,
                                         size_t rows, int d, int vocab)
{
    __shared__ float acc[EMB_VOCAB][EMB_COLS];
    __shared__ int tok[EMB_STAGE];
    const int tid = threadIdx.x;
    const int v0 = blockIdx.x * EMB_VOCAB, j = blockIdx.y * EMB_COLS + tid;
    const int nv = vocab - v0 < EMB_VOCAB ? vocab - v0 : EMB_VOCAB;

    for (int v = 0; v < EMB_VOCAB; v++)
        acc[v][tid] = 0.0f;
    for (size_t r0 = 0; r0 < rows; r0 += EMB_STAGE) {
        const int m = rows - r0 < EMB_STAGE ? (int)(rows - r0) : EMB_STAGE;
        __syncthreads(); /* the previous stage is consumed */
        for (int k = tid; k < m; k += EMB_COLS) {
            const float id = ids[r0 + k];
            tok[k] = id >= (float)v0 && id < (float)(v0 + nv) ? (int)id - v0 : -1;
        }
        __syncthreads();
        if (j < d)
            for (int k = 0; k < m; k++) {
                const int t = tok[k];
                if (t >= 0)
                    acc[t][tid] += dy[(r0 + k) * (size_t)d + j];
            }
    }
    if (j < d)
        for (int v = 0; v < nv; v++)
            dwte[(size_t)(v0 + v) * d + j] = acc[v][tid];
}

/* The ids were checked by the forward pass that made dy. */
int hp_cuda_embed_backward(struct hp_backend *be, const float *ids, const float *dy, float *dwte,
                           float *dwpe, int n, int T, int d, int vocab)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    const dim3 tiles((unsigned)((vocab + EMB_VOCAB - 1) / EMB_VOCAB),
                     (unsigned)((d + EMB_COLS - 1) / EMB_COLS));
    int rc;

    if (n < 0 || T <= 0 || d <= 0 || vocab <= 0 || tiles.y > 65535u) {
        hp_error("cuda: invalid embedding shape (n %d, T %d, d %d, vocab %d)", n, T, d, vocab);
        return -HP_ESHAPE;
    }
    embed_dwpe_kernel<<<hp_cuda_grid(cu, (size_t)T * d), HP_CUDA_THREADS, 0, cu->stream>>>(dy, dwpe,
                                                                                           n, T, d);
    rc = HP_CUDA_LAUNCHED(embed_dwpe_kernel);
    if (rc)
        return rc;
    embed_dwte_kernel<<<tiles, EMB_COLS, 0, cu->stream>>>(ids, dy, dwte, (size_t)n * T, d, vocab);
    return HP_CUDA_LAUNCHED(embed_dwte_kernel);
}

/* ---- layer norm ----------------------------------------------------------------------- */

static __global__ void layernorm_forward_kernel(const float *x, const float *gamma,
                                                const float *beta, float *y, float *mean,
                                                float *rstd, size_t rows, int d, float eps)
{
    WARP_ROWS(row, lane, rows)
    {
        const float *xr = x + row * d;
        float *yr = y + row * d;
        float s = 0.0f, v = 0.0f;
        for (int j = lane; j < d; j += 32)
            s += xr[j];
        const float m = warp_sum(s) / (float)d;
        for (int j = lane; j < d; j += 32)
            v += (xr[j] - m) * (xr[j] - m);
        const float is = 1.0f / sqrtf(warp_sum(v) / (float)d + eps);
        for (int j = lane; j < d; j += 32)
            yr[j] = (xr[j] - m) * is * gamma[j] + beta[j];
        if (lane == 0) {
            mean[row] = m;
            rstd[row] = is;
        }
    }
}

int hp_cuda_layernorm_forward(struct hp_backend *be, const float *x, const float *gamma,
                              const float *beta, float *y, float *mean, float *rstd, int rows,
                              int d, float eps)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (rows < 0 || d <= 0) {
        hp_error("cuda: invalid layer norm shape [%d, %d]", rows, d);
        return -HP_ESHAPE;
    }
    if (rows == 0)
        return 0;
    layernorm_forward_kernel<<<rows_grid(cu, (size_t)rows), ROW_THREADS, 0, cu->stream>>>(
        x, gamma, beta, y, mean, rstd, (size_t)rows, d, eps);
    return HP_CUDA_LAUNCHED(layernorm_forward_kernel);
}

/* Blocks of LN_COLS x LN_ROWS threads; thread (tx, ty) sums rows ty, ty + LN_ROWS, ... of
 * column j0 + tx, then row 0 of the block adds the LN_ROWS partial sums in order. */
static __global__ void layernorm_dparam_kernel(const float *x, const float *dy, const float *mean,
                                               const float *rstd, float *dgamma, float *dbeta,
                                               int rows, int d)
{
    __shared__ float pg[LN_ROWS][LN_COLS + 1], pb[LN_ROWS][LN_COLS + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;

    for (int j0 = blockIdx.x * LN_COLS; j0 < d; j0 += gridDim.x * LN_COLS) {
        const int j = j0 + tx;
        float sg = 0.0f, sb = 0.0f;
        if (j < d)
            for (int r = ty; r < rows; r += LN_ROWS) {
                const size_t at = (size_t)r * d + j;
                const float g = dy[at];
                sg += g * ((x[at] - mean[r]) * rstd[r]);
                sb += g;
            }
        pg[ty][tx] = sg;
        pb[ty][tx] = sb;
        __syncthreads();
        if (ty == 0 && j < d) {
            for (int k = 1; k < LN_ROWS; k++) {
                sg += pg[k][tx];
                sb += pb[k][tx];
            }
            dgamma[j] = sg;
            dbeta[j] = sb;
        }
        __syncthreads();
    }
}

static __global__ void layernorm_dx_kernel(const float *x, const float *dy, const float *gamma,
                                           const float *mean, const float *rstd, float *dx,
                                           size_t rows, int d)
{
    WARP_ROWS(row, lane, rows)
    {
        const float *xr = x + row * d, *g = dy + row * d;
        const float m = mean[row], is = rstd[row];
        float s1 = 0.0f, s2 = 0.0f;
        for (int j = lane; j < d; j += 32) {
            const float dxh = g[j] * gamma[j];
            s1 += dxh;
            s2 += dxh * ((xr[j] - m) * is);
        }
        const float a = warp_sum(s1) / (float)d, b = warp_sum(s2) / (float)d;
        float *dr = dx + row * d;
        for (int j = lane; j < d; j += 32)
            dr[j] = is * (g[j] * gamma[j] - a - (xr[j] - m) * is * b);
    }
}

int hp_cuda_layernorm_backward(struct hp_backend *be, const float *x, const float *dy,
                               const float *gamma, const float *mean, const float *rstd, float *dx,
                               float *dgamma, float *dbeta, int rows, int d)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    unsigned tiles;
    int rc;

    if (rows < 0 || d <= 0) {
        hp_error("cuda: invalid layer norm shape [%d, %d]", rows, d);
        return -HP_ESHAPE;
    }
    tiles = (unsigned)((d + LN_COLS - 1) / LN_COLS);
    if (tiles > 65535u)
        tiles = 65535u;
    /* rows = 0 gives zeros: every thread's sum is empty */
    layernorm_dparam_kernel<<<tiles, dim3(LN_COLS, LN_ROWS), 0, cu->stream>>>(
        x, dy, mean, rstd, dgamma, dbeta, rows, d);
    rc = HP_CUDA_LAUNCHED(layernorm_dparam_kernel);
    if (rc || !dx || rows == 0)
        return rc;
    layernorm_dx_kernel<<<rows_grid(cu, (size_t)rows), ROW_THREADS, 0, cu->stream>>>(
        x, dy, gamma, mean, rstd, dx, (size_t)rows, d);
    return HP_CUDA_LAUNCHED(layernorm_dx_kernel);
}

/* ---- attention ------------------------------------------------------------------------ */

/* rows = count x T rows of T scores, row i of each T x T matrix at row % T: p = exp(s - max)
 * / sum over j <= i (the diagonal is always in: the sum is >= 1), 0 for j > i. */
static __global__ void causal_softmax_kernel(float *p, int T, size_t rows)
{
    WARP_ROWS(row, lane, rows)
    {
        const int i = (int)(row % (size_t)T);
        float *pr = p + row * T;
        float mx = -INFINITY, s = 0.0f;
        for (int j = lane; j <= i; j += 32)
            mx = fmaxf(mx, pr[j]);
        mx = warp_max(mx);
        for (int j = lane; j <= i; j += 32) {
            const float e = expf(pr[j] - mx);
            pr[j] = e;
            s += e;
        }
        const float inv = 1.0f / warp_sum(s);
        for (int j = lane; j < T; j += 32) /* each lane rereads only what it wrote */
            pr[j] = j <= i ? pr[j] * inv : 0.0f;
    }
}

/* ds [count, T, T] (contiguous; dp on entry) = p (dp - sum_j p dp) for j <= i, 0 above the
 * diagonal; matrix k of p starts at p + k pstride. rows = count x T. */
static __global__ void causal_dsoftmax_kernel(const float *p, size_t pstride, float *ds, int T,
                                              size_t rows)
{
    WARP_ROWS(row, lane, rows)
    {
        const int i = (int)(row % (size_t)T);
        const float *pr = p + (row / (size_t)T) * pstride + (size_t)i * T;
        float *sr = ds + row * T;
        float dot = 0.0f;
        for (int j = lane; j <= i; j += 32)
            dot += pr[j] * sr[j];
        dot = warp_sum(dot);
        for (int j = lane; j < T; j += 32)
            sr[j] = j <= i ? pr[j] * (sr[j] - dot) : 0.0f;
    }
}

/* Row-major strided-batched GEMM (cuda_gemm's operand swap, backend_cuda.cu): for each of
 * `count` matrices, C = alpha op(A) op(B) + beta C, with A, B, C advancing by sa, sb, sc
 * floats. */
static int gemm_batched(struct hp_cuda *cu, int ta, int tb, int m, int n, int k, float alpha,
                        const float *a, int lda, long long sa, const float *b, int ldb,
                        long long sb, float beta, float *c, int ldc, long long sc, int count)
{
    HP_CUDA_CHECK(cublasSgemmStridedBatched(cu->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb,
                                            sb, a, lda, sa, &beta, c, ldc, sc, count));
    return 0;
}

/* How the (sequence, head) pairs are visited: a loop of `outer` steps, each a batch of
 * `inner` pairs; a pair's q (k, v: + d, + 2 d) starts at qkv + o qkv_o + i qkv_i, its head of
 * y (dy) at y + o y_o + i y_i, its probabilities at probs + o p_o + i p_i. */
struct attn_walk {
    int outer, inner;
    long long qkv_o, qkv_i, y_o, y_i, p_o, p_i;
};

static struct attn_walk attn_walk_of(const struct hp_attn_desc *a)
{
    const long long T = a->T, d = a->d, dh = a->d / a->heads, TT = T * T;
    struct attn_walk w;

    if (a->heads <= a->n) /* a loop over the heads, the sequences batched */
        w = (struct attn_walk){a->heads, a->n, dh, T * 3 * d, dh, T * d, TT, a->heads * TT};
    else /* a loop over the sequences, the heads batched */
        w = (struct attn_walk){a->n, a->heads, T * 3 * d, dh, T * d, dh, a->heads * TT, TT};
    return w;
}

static int attn_check(const struct hp_attn_desc *a)
{
    if (a->n <= 0 || a->T <= 0 || a->heads <= 0 || a->d <= 0 || a->d % a->heads != 0 ||
        (long long)a->n * a->heads > 0x7fffffffLL) {
        hp_error("cuda: invalid attention shape (n %d, T %d, d %d, heads %d)", a->n, a->T, a->d,
                 a->heads);
        return -HP_ESHAPE;
    }
    return 0;
}

int hp_cuda_attention_forward(struct hp_backend *be, const struct hp_attn_desc *a, const float *qkv,
                              float *y, float *probs)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    const int T = a->T, d = a->d, dh = a->heads > 0 ? a->d / a->heads : 1;
    const float scale = 1.0f / sqrtf((float)dh);
    const struct attn_walk w = attn_walk_of(a);
    int rc;

    if ((rc = attn_check(a)))
        return rc;
    /* scores: p [T, T] = scale q k^T of every pair */
    for (int o = 0; o < w.outer; o++) {
        const float *q = qkv + o * w.qkv_o;
        rc = gemm_batched(cu, 0, 1, T, T, dh, scale, q, 3 * d, w.qkv_i, q + d, 3 * d, w.qkv_i, 0.0f,
                          probs + o * w.p_o, T, w.p_i, w.inner);
        if (rc)
            return rc;
    }
    /* probs [n, heads, T, T] is contiguous: one launch for all its rows */
    const size_t rows = (size_t)a->n * a->heads * T;
    causal_softmax_kernel<<<rows_grid(cu, rows), ROW_THREADS, 0, cu->stream>>>(probs, T, rows);
    if ((rc = HP_CUDA_LAUNCHED(causal_softmax_kernel)))
        return rc;
    /* y_h [T, dh] = p v */
    for (int o = 0; o < w.outer; o++) {
        rc = gemm_batched(cu, 0, 0, T, dh, T, 1.0f, probs + o * w.p_o, T, w.p_i,
                          qkv + o * w.qkv_o + 2 * d, 3 * d, w.qkv_i, 0.0f, y + o * w.y_o, d, w.y_i,
                          w.inner);
        if (rc)
            return rc;
    }
    return 0;
}

/* Scratch for dp of up to `inner` pairs: *buf with room for *chunk T x T matrices, the
 * context's attn_ws (grown now if need be) or, for one matrix at a time, the caller's ws. */
static void attn_scratch(struct hp_cuda *cu, int T, int inner, float *ws, float **buf, int *chunk)
{
    const size_t per = (size_t)T * T * sizeof(float);
    size_t want = ATTN_WS_CAP / per;

    if (want > (size_t)inner)
        want = (size_t)inner;
    *buf = ws;
    *chunk = 1;
    if (want <= 1)
        return;
    if (cu->attn_ws_bytes < want * per) {
        if (cu->attn_ws)
            (void)HP_CUDA_CALL(cudaFree(cu->attn_ws)); /* waits for work that may use it */
        cu->attn_ws = NULL;
        cu->attn_ws_bytes = 0;
        if (cudaMalloc((void **)&cu->attn_ws, want * per) != cudaSuccess) {
            (void)cudaGetLastError(); /* not an error: the caller's workspace will do */
            cu->attn_ws = NULL;
            hp_debug("cuda: no %zu bytes for attention scratch; one head at a time", want * per);
            return;
        }
        cu->attn_ws_bytes = want * per;
    }
    *buf = cu->attn_ws;
    *chunk = (int)want;
}

/* Backward of `g` pairs from pair (o, i0): dv, dp (into ds), ds, dq, dk. */
static int attn_backward_chunk(struct hp_cuda *cu, const struct hp_attn_desc *a,
                               const struct attn_walk *w, int o, int i0, int g, const float *qkv,
                               const float *probs, const float *dy, float *dqkv, float *ds)
{
    const int T = a->T, d = a->d, dh = a->d / a->heads;
    const long long TT = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)dh);
    const long long at = o * w->qkv_o + i0 * w->qkv_i;
    const float *q = qkv + at, *k = q + d, *v = q + 2 * d;
    const float *p = probs + o * w->p_o + i0 * w->p_i, *gh = dy + o * w->y_o + i0 * w->y_i;
    float *dq = dqkv + at, *dk = dq + d, *dv = dq + 2 * d;
    const size_t rows = (size_t)g * T;
    int rc;

    /* dv = p^T dy_h; dp = dy_h v^T */
    if ((rc = gemm_batched(cu, 1, 0, T, dh, T, 1.0f, p, T, w->p_i, gh, d, w->y_i, 0.0f, dv, 3 * d,
                           w->qkv_i, g)) ||
        (rc = gemm_batched(cu, 0, 1, T, T, dh, 1.0f, gh, d, w->y_i, v, 3 * d, w->qkv_i, 0.0f, ds, T,
                           TT, g)))
        return rc;
    causal_dsoftmax_kernel<<<rows_grid(cu, rows), ROW_THREADS, 0, cu->stream>>>(p, (size_t)w->p_i,
                                                                                ds, T, rows);
    if ((rc = HP_CUDA_LAUNCHED(causal_dsoftmax_kernel)))
        return rc;
    /* dq = scale ds k; dk = scale ds^T q */
    if ((rc = gemm_batched(cu, 0, 0, T, dh, T, scale, ds, T, TT, k, 3 * d, w->qkv_i, 0.0f, dq,
                           3 * d, w->qkv_i, g)))
        return rc;
    return gemm_batched(cu, 1, 0, T, dh, T, scale, ds, T, TT, q, 3 * d, w->qkv_i, 0.0f, dk, 3 * d,
                        w->qkv_i, g);
}

int hp_cuda_attention_backward(struct hp_backend *be, const struct hp_attn_desc *a,
                               const float *qkv, const float *probs, const float *dy, float *dqkv,
                               float *ws)
{
    struct hp_cuda *cu = hp_cuda_of(be);
    const struct attn_walk w = attn_walk_of(a);
    float *buf;
    int chunk, rc;

    if ((rc = attn_check(a)))
        return rc;
    attn_scratch(cu, a->T, w.inner, ws, &buf, &chunk);
    if (!buf) {
        hp_error("cuda: attention backward needs a workspace of %d x %d floats", a->T, a->T);
        return -HP_EINVAL;
    }
    for (int o = 0; o < w.outer; o++)
        for (int i0 = 0; i0 < w.inner; i0 += chunk) {
            const int g = w.inner - i0 < chunk ? w.inner - i0 : chunk;
            rc = attn_backward_chunk(cu, a, &w, o, i0, g, qkv, probs, dy, dqkv, buf);
            if (rc)
                return rc;
        }
    return 0;
}

/* ---- GELU ----------------------------------------------------------------------------- */

#define GELU_S 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

/* tanh(u) = 1 - 2 / (exp(2u) + 1), as the CPU backend computes it (+-1 at the extremes). */
static __device__ __forceinline__ float gelu_tanh(float u)
{
    return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f);
}

static __global__ void gelu_forward_kernel(const float *x, float *y, size_t n)
{
    GRID_STRIDE(i, n)
    {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + gelu_tanh(GELU_S * (v + GELU_C * v * v * v)));
    }
}

static __global__ void gelu_backward_kernel(const float *x, const float *dy, float *dx, size_t n)
{
    GRID_STRIDE(i, n)
    {
        const float v = x[i], t = gelu_tanh(GELU_S * (v + GELU_C * v * v * v));
        const float dt = GELU_S * (1.0f + 3.0f * GELU_C * v * v) * (1.0f - t * t);
        dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * dt);
    }
}

int hp_cuda_gelu_forward(struct hp_backend *be, const float *x, float *y, size_t n)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (n == 0)
        return 0;
    gelu_forward_kernel<<<hp_cuda_grid(cu, n), HP_CUDA_THREADS, 0, cu->stream>>>(x, y, n);
    return HP_CUDA_LAUNCHED(gelu_forward_kernel);
}

int hp_cuda_gelu_backward(struct hp_backend *be, const float *x, const float *dy, float *dx,
                          size_t n)
{
    struct hp_cuda *cu = hp_cuda_of(be);

    if (n == 0)
        return 0;
    gelu_backward_kernel<<<hp_cuda_grid(cu, n), HP_CUDA_THREADS, 0, cu->stream>>>(x, dy, dx, n);
    return HP_CUDA_LAUNCHED(gelu_backward_kernel);
}
