// Kernels of afd-probe, compiled at run time with NVRTC (no headers: bf16 is handled as raw bits).
//
// Fill and check kernels make random data and verify it after timing; the model kernels are the
// non-GEMM parts of one DeepSeek-style decoder layer (RMSNorm, MLA decode, routing, SiLU, MoE gather and
// combine), a grouped GEMM for the routed experts (optionally with SiLU·mul fused), and a comparison
// kernel the GEMM autotuner checks candidates with. The other GEMMs run through cuBLAS.

typedef unsigned short bf16;
typedef unsigned long long u64;

struct alignas(16) u4 {
    unsigned x, y, z, w;
};

#define NEG_INF (__int_as_float(0xff800000))

__device__ __forceinline__ float bf2f(bf16 v) { return __uint_as_float(((unsigned)v) << 16); }

__device__ __forceinline__ bf16 f2bf(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7f800000u) == 0x7f800000u) {
        return (bf16)((u >> 16) | ((u & 0xffffu) ? 0x40u : 0u));
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16)(u >> 16);
}

__device__ __forceinline__ u64 mix64(u64 z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Uniform in [-1, 1), a pure function of (seed, index).
__device__ __forceinline__ float uniform_pm1(u64 seed, u64 i) {
    u64 h = mix64(seed ^ mix64(i));
    return (float)(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block; every thread gets the total. blockDim.x must be a multiple of 32, at most 1024.
__device__ float block_sum(float v) {
    __shared__ float partial[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    float total = 0.0f;
    int warps = blockDim.x >> 5;
    for (int i = 0; i < warps; ++i) total += partial[i];
    return total;
}

extern "C" __global__ void fill_bf16(bf16* dst, u64 n, u64 seed, float scale) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        dst[i] = f2bf(uniform_pm1(seed, i) * scale);
    }
}

extern "C" __global__ void fill_u32(unsigned* dst, u64 n, u64 seed) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        dst[i] = (unsigned)mix64(seed ^ mix64(i));
    }
}

// Counts words that differ from fill_u32's pattern, starting at pattern index `offset`.
extern "C" __global__ void check_u32(const unsigned* src, u64 n, u64 seed, u64 offset, u64* wrong) {
    u64 bad = 0;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        bad += (src[i] != (unsigned)mix64(seed ^ mix64(offset + i))) ? 1 : 0;
    }
    if (bad) atomicAdd(wrong, bad);
}

// Counts words that differ from `value`.
extern "C" __global__ void check_const_u32(const unsigned* src, u64 n, unsigned value, u64* wrong) {
    u64 bad = 0;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        bad += (src[i] != value) ? 1 : 0;
    }
    if (bad) atomicAdd(wrong, bad);
}

extern "C" __global__ void count_nonfinite(const bf16* x, u64 n, u64* count) {
    u64 bad = 0;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        bad += ((x[i] & 0x7f80u) == 0x7f80u) ? 1 : 0;
    }
    if (bad) atomicAdd(count, bad);
}

// The smallest kernel: the launch probe counts how many ran.
extern "C" __global__ void add_one(float* x) {
    if (threadIdx.x == 0 && blockIdx.x == 0) x[0] += 1.0f;
}

// residual += add (when add is not null); out = RMSNorm(residual) * weight. One block per token.
extern "C" __global__ void add_rmsnorm(const bf16* add, bf16* residual, bf16* out, const bf16* weight,
                                       int hidden, float eps) {
    u64 t = blockIdx.x;
    bf16* res = residual + t * hidden;
    bf16* o = out + t * hidden;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        float v = bf2f(res[i]);
        if (add) {
            bf16 r = f2bf(v + bf2f(add[t * hidden + i]));
            res[i] = r;
            v = bf2f(r);
        }
        ss += v * v;
    }
    float inv = rsqrtf(block_sum(ss) / (float)hidden + eps);
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        o[i] = f2bf(bf2f(res[i]) * inv * bf2f(weight[i]));
    }
}

__device__ __forceinline__ void rope_pair(float x1, float x2, float position, int i, float* y1, float* y2) {
    float inv_freq = __powf(10000.0f, -(float)(2 * i) / 64.0f);
    float s, c;
    sincosf(position * inv_freq, &s, &c);
    *y1 = x1 * c - x2 * s;
    *y2 = x2 * c + x1 * s;
}

// Per token (one block of 128 threads): RMSNorm of the latent KV and RoPE of its rope part, written into
// the KV cache row; RoPE of every head's query rope part into q_pe.
//   q    [T, heads, nope + 64]      kva [T, 576]       q_pe [T, heads, 64]
//   cache row of token t: kv_cache + t * seq_stride + (pos + t * tok_step) * 576
extern "C" __global__ void mla_prep(const bf16* q, const bf16* kva, const bf16* norm_w, bf16* q_pe,
                                    bf16* kv_cache, long long seq_stride, int pos, int tok_step,
                                    int heads, int nope, float eps) {
    u64 t = blockIdx.x;
    int tid = threadIdx.x;
    const bf16* kv = kva + t * 576;
    int position = pos + (int)t * tok_step;
    bf16* row = kv_cache + (long long)t * seq_stride + (long long)position * 576;
    float v[4];
    float ss = 0.0f;
    for (int j = 0; j < 4; ++j) {
        v[j] = bf2f(kv[tid * 4 + j]);
        ss += v[j] * v[j];
    }
    float inv = rsqrtf(block_sum(ss) / 512.0f + eps);
    for (int j = 0; j < 4; ++j) row[tid * 4 + j] = f2bf(v[j] * inv * bf2f(norm_w[tid * 4 + j]));
    if (tid < 32) {
        float y1, y2;
        rope_pair(bf2f(kv[512 + tid]), bf2f(kv[512 + tid + 32]), (float)position, tid, &y1, &y2);
        row[512 + tid] = f2bf(y1);
        row[512 + tid + 32] = f2bf(y2);
    }
    int head_dim = nope + 64;
    for (int k = tid; k < heads * 32; k += blockDim.x) {
        int h = k >> 5, i = k & 31;
        const bf16* src = q + (t * heads + h) * head_dim + nope;
        float y1, y2;
        rope_pair(bf2f(src[i]), bf2f(src[i + 32]), (float)position, i, &y1, &y2);
        bf16* dst = q_pe + (t * heads + h) * 64;
        dst[i] = f2bf(y1);
        dst[i + 32] = f2bf(y2);
    }
}

// ---------------------------------------------------------------------------------------------------
// MLA decode (absorbed form): for query q and head h,
//   score[t] = (q_lat[h] . c[t] + q_pe[h] . k_pe[t]) * scale,  out[h] = sum_t softmax(score)[t] c[t]
// where the cache row of token t is [c (512) | k_pe (64)]. Flash-decoding: grid (splits, queries, head
// groups of 16); each block walks its chunk of the context in tiles of 32 tokens with an online softmax
// and writes an unnormalised partial output with its running max and sum; mla_combine merges splits.
// Query i attends to len_base + i * len_step tokens of its sequence (decode: len_step 0; causal
// prefill over one shared sequence: kv_seq_stride 0, len_step 1).

#define MLA_LAT 512
#define MLA_DQK 576
#define MLA_TILE 32
#define MLA_ROW 584           // padded shared-memory row (bf16) so fragment loads avoid bank conflicts
#define MLA_PROW (MLA_TILE + 8)
#define MLA_THREADS 128

__device__ __forceinline__ void mma_bf16_16816(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                               unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned ld32(const bf16* p) { return *(const unsigned*)p; }

// 16-byte loads per thread per tile: 32 rows x 72 vectors / 128 threads.
#define MLA_TILE_LOADS (MLA_TILE * (MLA_DQK / 8) / MLA_THREADS)

__device__ __forceinline__ void mla_load_tile(u4* pre, const bf16* kv_seq, int t0, int end, int tid) {
#pragma unroll
    for (int j = 0; j < MLA_TILE_LOADS; ++j) {
        int i = tid + j * MLA_THREADS;
        int r = i / (MLA_DQK / 8), c = (i % (MLA_DQK / 8)) * 8;
        int tok = t0 + r;
        u4 v = {0u, 0u, 0u, 0u};
        if (tok < end) v = *(const u4*)(kv_seq + (long long)tok * MLA_DQK + c);
        pre[j] = v;
    }
}

__device__ __forceinline__ void mla_store_tile(const u4* pre, bf16* sKV, int tid) {
#pragma unroll
    for (int j = 0; j < MLA_TILE_LOADS; ++j) {
        int i = tid + j * MLA_THREADS;
        int r = i / (MLA_DQK / 8), c = (i % (MLA_DQK / 8)) * 8;
        *(u4*)(sKV + r * MLA_ROW + c) = pre[j];
    }
}

template <bool MMA, bool PREFETCH>
__device__ void mla_decode_body(const bf16* __restrict__ q_lat, const bf16* __restrict__ q_pe,
                                const bf16* __restrict__ kv, long long kv_seq_stride, int len_base,
                                int len_step, int chunk, int n_splits, int heads, float scale,
                                float* __restrict__ part_o, float* __restrict__ part_ml) {
    extern __shared__ unsigned char smem[];  // dynamic shared memory starts 16-byte aligned; offsets below keep it
    bf16* sQ = (bf16*)smem;                                // [16][MLA_ROW]
    bf16* sKV = sQ + 16 * MLA_ROW;                         // [MLA_TILE][MLA_ROW]
    float* sS = (float*)(sKV + MLA_TILE * MLA_ROW);        // [16][MLA_TILE]
    bf16* sP = (bf16*)(sS + 16 * MLA_TILE);                // [16][MLA_PROW]
    float* sAlpha = (float*)(sP + 16 * MLA_PROW);          // [16]
    float* sM = sAlpha + 16;                               // [16]
    float* sL = sM + 16;                                   // [16]

    const int split = blockIdx.x, query = blockIdx.y, group = blockIdx.z;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int len = len_base + query * len_step;
    const int begin = split * chunk;
    const int end = min(begin + chunk, len);
    const bf16* kv_seq = kv + (long long)query * kv_seq_stride;

#pragma unroll
    for (int j = 0; j < 16 * (MLA_DQK / 8) / MLA_THREADS; ++j) {
        int i = tid + j * MLA_THREADS;
        int h = i / (MLA_DQK / 8), c = (i % (MLA_DQK / 8)) * 8;
        long long head = (long long)query * heads + group * 16 + h;
        u4 v;
        if (c < MLA_LAT) v = *(const u4*)(q_lat + head * MLA_LAT + c);
        else v = *(const u4*)(q_pe + head * 64 + (c - MLA_LAT));
        *(u4*)(sQ + h * MLA_ROW + c) = v;
    }
    if (tid < 16) {
        sM[tid] = NEG_INF;
        sL[tid] = 0.0f;
    }
    float acc[16][4];
    for (int i = 0; i < 16; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    __syncthreads();

    // PREFETCH keeps the next tile's rows in registers while this tile is computed, so global-load
    // latency overlaps the tensor-core work; without it every tile waits for its own loads.
    u4 pre[MLA_TILE_LOADS];
    if (PREFETCH && begin < end) mla_load_tile(pre, kv_seq, begin, end, tid);
    for (int t0 = begin; t0 < end; t0 += MLA_TILE) {
        if (PREFETCH) {
            mla_store_tile(pre, sKV, tid);
            __syncthreads();
            if (t0 + MLA_TILE < end) mla_load_tile(pre, kv_seq, t0 + MLA_TILE, end, tid);
        } else {
            for (int i = tid; i < MLA_TILE * (MLA_DQK / 8); i += MLA_THREADS) {
                int r = i / (MLA_DQK / 8), c = (i % (MLA_DQK / 8)) * 8;
                int tok = t0 + r;
                u4 v = {0u, 0u, 0u, 0u};
                if (tok < end) v = *(const u4*)(kv_seq + (long long)tok * MLA_DQK + c);
                *(u4*)(sKV + r * MLA_ROW + c) = v;
            }
            __syncthreads();
        }

        // Scores of the 16 heads against the tile's tokens.
        if (MMA) {
            float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            const bf16* kb = sKV + (warp * 8 + g) * MLA_ROW;
#pragma unroll 4
            for (int k0 = 0; k0 < MLA_DQK; k0 += 16) {
                unsigned a0 = ld32(sQ + g * MLA_ROW + k0 + t4 * 2);
                unsigned a1 = ld32(sQ + (g + 8) * MLA_ROW + k0 + t4 * 2);
                unsigned a2 = ld32(sQ + g * MLA_ROW + k0 + 8 + t4 * 2);
                unsigned a3 = ld32(sQ + (g + 8) * MLA_ROW + k0 + 8 + t4 * 2);
                unsigned b0 = ld32(kb + k0 + t4 * 2);
                unsigned b1 = ld32(kb + k0 + 8 + t4 * 2);
                mma_bf16_16816(s, a0, a1, a2, a3, b0, b1);
            }
            int col = warp * 8 + t4 * 2;
            int tok = t0 + col;
            sS[g * MLA_TILE + col] = (tok < end) ? s[0] * scale : NEG_INF;
            sS[g * MLA_TILE + col + 1] = (tok + 1 < end) ? s[1] * scale : NEG_INF;
            sS[(g + 8) * MLA_TILE + col] = (tok < end) ? s[2] * scale : NEG_INF;
            sS[(g + 8) * MLA_TILE + col + 1] = (tok + 1 < end) ? s[3] * scale : NEG_INF;
        } else {
            int h = tid >> 3, c0 = (tid & 7) * 4;
            for (int j = 0; j < 4; ++j) {
                const bf16* qr = sQ + h * MLA_ROW;
                const bf16* kr = sKV + (c0 + j) * MLA_ROW;
                float dot = 0.0f;
                for (int k = 0; k < MLA_DQK; k += 2) {
                    unsigned qa = ld32(qr + k), ka = ld32(kr + k);
                    dot += __uint_as_float(qa << 16) * __uint_as_float(ka << 16);
                    dot += __uint_as_float(qa & 0xffff0000u) * __uint_as_float(ka & 0xffff0000u);
                }
                sS[h * MLA_TILE + c0 + j] = (t0 + c0 + j < end) ? dot * scale : NEG_INF;
            }
        }
        __syncthreads();

        // Online softmax: 8 threads per head row, 4 columns each.
        {
            int row = tid >> 3, part = tid & 7;
            float v[4];
            float mx = NEG_INF;
            for (int j = 0; j < 4; ++j) {
                v[j] = sS[row * MLA_TILE + part * 4 + j];
                mx = fmaxf(mx, v[j]);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            float m_old = sM[row];
            float m_new = fmaxf(m_old, mx);
            float sum = 0.0f;
            for (int j = 0; j < 4; ++j) {
                float p = (m_new == NEG_INF) ? 0.0f : __expf(v[j] - m_new);
                bf16 pb = f2bf(p);
                sum += bf2f(pb);
                sP[row * MLA_PROW + part * 4 + j] = pb;
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 4);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            __syncwarp();
            if (part == 0) {
                float alpha = (m_old == NEG_INF) ? 0.0f : __expf(m_old - m_new);
                sAlpha[row] = alpha;
                sL[row] = sL[row] * alpha + sum;
                sM[row] = m_new;
            }
        }
        __syncthreads();

        if (MMA) {
            // acc (16 heads x this warp's 128 columns) = alpha * acc + P (16 x 32) . V (32 x 128)
            float al0 = sAlpha[g], al1 = sAlpha[g + 8];
            for (int nt = 0; nt < 16; ++nt) {
                acc[nt][0] *= al0;
                acc[nt][1] *= al0;
                acc[nt][2] *= al1;
                acc[nt][3] *= al1;
            }
            for (int kk = 0; kk < MLA_TILE; kk += 16) {
                unsigned a0 = ld32(sP + g * MLA_PROW + kk + t4 * 2);
                unsigned a1 = ld32(sP + (g + 8) * MLA_PROW + kk + t4 * 2);
                unsigned a2 = ld32(sP + g * MLA_PROW + kk + 8 + t4 * 2);
                unsigned a3 = ld32(sP + (g + 8) * MLA_PROW + kk + 8 + t4 * 2);
                const bf16* v0 = sKV + (kk + t4 * 2) * MLA_ROW + warp * 128 + g;
#pragma unroll
                for (int nt = 0; nt < 16; ++nt) {
                    const bf16* v = v0 + nt * 8;
                    unsigned b0 = (unsigned)v[0] | ((unsigned)v[MLA_ROW] << 16);
                    unsigned b1 = (unsigned)v[8 * MLA_ROW] | ((unsigned)v[9 * MLA_ROW] << 16);
                    mma_bf16_16816(acc[nt], a0, a1, a2, a3, b0, b1);
                }
            }
        } else {
            // Thread owns columns tid*4 .. tid*4+3 of all 16 heads.
            for (int h = 0; h < 16; ++h) {
                float al = sAlpha[h];
                for (int j = 0; j < 4; ++j) acc[h][j] *= al;
            }
            for (int tok = 0; tok < MLA_TILE; ++tok) {
                float v[4];
                for (int j = 0; j < 4; ++j) v[j] = bf2f(sKV[tok * MLA_ROW + tid * 4 + j]);
                for (int h = 0; h < 16; ++h) {
                    float p = bf2f(sP[h * MLA_PROW + tok]);
                    for (int j = 0; j < 4; ++j) acc[h][j] += p * v[j];
                }
            }
        }
        __syncthreads();
    }

    long long base = ((long long)query * n_splits + split) * heads + group * 16;
    float* po = part_o + base * MLA_LAT;
    if (MMA) {
        for (int nt = 0; nt < 16; ++nt) {
            int col = warp * 128 + nt * 8 + t4 * 2;
            po[g * MLA_LAT + col] = acc[nt][0];
            po[g * MLA_LAT + col + 1] = acc[nt][1];
            po[(g + 8) * MLA_LAT + col] = acc[nt][2];
            po[(g + 8) * MLA_LAT + col + 1] = acc[nt][3];
        }
    } else {
        for (int h = 0; h < 16; ++h)
            for (int j = 0; j < 4; ++j) po[h * MLA_LAT + tid * 4 + j] = acc[h][j];
    }
    if (tid < 16) {
        part_ml[(base + tid) * 2] = sM[tid];
        part_ml[(base + tid) * 2 + 1] = sL[tid];
    }
}

#define MLA_KERNEL(NAME, MMA, PREFETCH)                                                                  \
    extern "C" __global__ void __launch_bounds__(MLA_THREADS)                                            \
        NAME(const bf16* q_lat, const bf16* q_pe, const bf16* kv, long long kv_seq_stride, int len_base, \
             int len_step, int chunk, int n_splits, int heads, float scale, float* part_o, float* part_ml) { \
        mla_decode_body<MMA, PREFETCH>(q_lat, q_pe, kv, kv_seq_stride, len_base, len_step, chunk,         \
                                       n_splits, heads, scale, part_o, part_ml);                          \
    }

MLA_KERNEL(mla_decode_mma_prefetch, true, true)
MLA_KERNEL(mla_decode_mma, true, false)
MLA_KERNEL(mla_decode_simple, false, false)

// Merges the splits of each (query, head): grid queries * heads, 128 threads, 4 columns each.
extern "C" __global__ void mla_combine(const float* part_o, const float* part_ml, bf16* out, int n_splits,
                                       int heads) {
    long long qh = blockIdx.x;
    long long query = qh / heads, head = qh % heads;
    float m = NEG_INF;
    for (int s = 0; s < n_splits; ++s) m = fmaxf(m, part_ml[((query * n_splits + s) * heads + head) * 2]);
    float l = 0.0f, o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int s = 0; s < n_splits; ++s) {
        long long idx = (query * n_splits + s) * heads + head;
        float ms = part_ml[idx * 2];
        if (ms == NEG_INF) continue;
        float w = __expf(ms - m);
        l += part_ml[idx * 2 + 1] * w;
        const float* po = part_o + idx * MLA_LAT + threadIdx.x * 4;
        for (int j = 0; j < 4; ++j) o[j] += w * po[j];
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int j = 0; j < 4; ++j) out[qh * MLA_LAT + threadIdx.x * 4 + j] = f2bf(o[j] * inv);
}

// ---------------------------------------------------------------------------------------------------
// MoE pieces.

// One warp per token: softmax over the router logits, then the top k by repeated arg-max.
extern "C" __global__ void router_topk(const float* logits, int tokens, int n_experts, int k, float* topk_w,
                                      int* topk_id) {
    int token = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (token >= tokens) return;
    const float* l = logits + (u64)token * n_experts;
    float mx = NEG_INF;
    for (int e = lane; e < n_experts; e += 32) mx = fmaxf(mx, l[e]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int e = lane; e < n_experts; e += 32) sum += __expf(l[e] - mx);
    sum = warp_sum(sum);
    unsigned taken = 0;
    for (int j = 0; j < k; ++j) {
        float best = NEG_INF;
        int best_e = 0x7fffffff;
        for (int i = 0, e = lane; e < n_experts; ++i, e += 32) {
            if (!((taken >> i) & 1u) && (l[e] > best || (l[e] == best && e < best_e))) {
                best = l[e];
                best_e = e;
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, best, o);
            int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
            if (ob > best || (ob == best && oe < best_e)) {
                best = ob;
                best_e = oe;
            }
        }
        if (best_e != 0x7fffffff && (best_e & 31) == lane) taken |= 1u << (best_e >> 5);
        if (lane == 0) {
            topk_w[(u64)token * k + j] = __expf(best - mx) / sum;
            topk_id[(u64)token * k + j] = best_e;
        }
    }
}

// xg[row] = x[gather[row]] (zeros for padding rows). One block per row; hidden % 8 == 0.
extern "C" __global__ void moe_gather(const bf16* x, const int* gather, bf16* xg, int hidden) {
    u64 row = blockIdx.x;
    int src = gather[row];
    u4* d = (u4*)(xg + row * hidden);
    const u4* s = (const u4*)(x + (u64)(src < 0 ? 0 : src) * hidden);
    u4 zero = {0u, 0u, 0u, 0u};
    for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) d[i] = src >= 0 ? s[i] : zero;
}

// out[t] = shared[t] + sum_j w[t, j] * y[slots[t, j]]. One block per token.
extern "C" __global__ void moe_combine(const bf16* y, const bf16* shared_y, const int* slots, const float* w,
                                       bf16* out, int k, int hidden) {
    u64 t = blockIdx.x;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        float acc = shared_y ? bf2f(shared_y[t * hidden + c]) : 0.0f;
        for (int j = 0; j < k; ++j) {
            int s = slots[t * k + j];
            if (s >= 0) acc += w[t * k + j] * bf2f(y[(u64)s * hidden + c]);
        }
        out[t * hidden + c] = f2bf(acc);
    }
}

__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.0f + __expf(-g)) * u; }

// Two packed bf16 gate values and two up values in, two packed bf16 results out.
__device__ __forceinline__ unsigned silu_mul2(unsigned g, unsigned u) {
    float g0 = __uint_as_float(g << 16), g1 = __uint_as_float(g & 0xffff0000u);
    float u0 = __uint_as_float(u << 16), u1 = __uint_as_float(u & 0xffff0000u);
    return (unsigned)f2bf(silu_times(g0, u0)) | ((unsigned)f2bf(silu_times(g1, u1)) << 16);
}

// out[r, c] = silu(gu[r, c]) * gu[r, inter + c] for rows x inter. One thread per 16-byte vector of
// 8 outputs when inter % 8 == 0 (buffers are 256-byte aligned), so even one row spreads over many
// threads; one per output otherwise.
extern "C" __global__ void silu_mul(const bf16* gu, bf16* out, u64 rows, int inter) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    if ((inter & 7) == 0) {
        const u64 vec = (u64)(inter >> 3);
        const u64 n = rows * vec;
        for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += stride) {
            u64 r = n <= 0xffffffffull ? (u64)((unsigned)i / (unsigned)vec) : i / vec;
            u64 c = (i - r * vec) * 8;
            const bf16* gate = gu + r * 2 * (u64)inter + c;
            u4 gv = *(const u4*)gate, uv = *(const u4*)(gate + inter);
            u4 ov;
            ov.x = silu_mul2(gv.x, uv.x);
            ov.y = silu_mul2(gv.y, uv.y);
            ov.z = silu_mul2(gv.z, uv.z);
            ov.w = silu_mul2(gv.w, uv.w);
            *(u4*)(out + r * (u64)inter + c) = ov;
        }
    } else {
        const u64 n = rows * (u64)inter;
        for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += stride) {
            u64 r = i / inter, c = i % inter;
            out[i] = f2bf(silu_times(bf2f(gu[r * 2 * inter + c]), bf2f(gu[r * 2 * inter + inter + c])));
        }
    }
}

// sums[0] += sum (a - ref)^2 and sums[1] += sum ref^2 over n values (a non-finite value of `a` adds
// +inf), for the relative L2 difference of a GEMM candidate's output from the reference.
extern "C" __global__ void compare_bf16(const bf16* a, const bf16* ref, u64 n, double* sums) {
    double d = 0.0, r = 0.0;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        float y = bf2f(ref[i]);
        float e = ((a[i] & 0x7f80u) == 0x7f80u) ? __int_as_float(0x7f800000) : bf2f(a[i]) - y;
        d += (double)e * (double)e;
        r += (double)y * (double)y;
    }
    for (int o = 16; o > 0; o >>= 1) {
        d += __shfl_xor_sync(0xffffffffu, d, o);
        r += __shfl_xor_sync(0xffffffffu, r, o);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&sums[0], d);
        atomicAdd(&sums[1], r);
    }
}

// ---------------------------------------------------------------------------------------------------
// Routed-expert GEMMs that stream each expert's weights once. For active expert a:
//   y_a[M, N] = x_a[M, K] . W_a^T,  W_a [N, K] row-major at w_ptrs[a], x_a at x + a * x_stride (rows of
//   K), y_a at y + a * y_stride (row stride ldy).
// A block computes BN weight rows x BM tokens. K is walked in 64-wide slices through a 4-stage cp.async
// pipeline (one __syncthreads per slice); warps tile the block WW (weight rows) x TW (tokens); weight rows
// are the A operand and tokens the B operand of mma.sync m16n8k16, so every weight byte is loaded from
// global memory once and read from shared memory by TW warps. Shared rows are padded to 72 elements, so
// fragment loads hit 32 distinct banks.
// SILU: W_a is the gate/up matrix [2 * inter, K] (gate rows, then up rows) with N = 2 * inter. A block
// stages BN/2 gate rows and the matching BN/2 up rows, each warp holds gate and up accumulators of the
// same outputs, and the block writes act = silu(bf16(gate)) * bf16(up) (inter columns, row stride ldy)
// instead of the GEMM output: the same rounding as the GEMM-then-silu_mul path.
// Grid: token tiles x column tiles x experts, flattened with token tiles fastest (blocks sharing a
// weight tile run together, so a second token tile finds it in L2). Padding rows (token >= M) load as
// zeros and are not stored. Requires K % 64 == 0 and N (or inter) a multiple of the block's columns.

#define EG_BK 64
#define EG_LD 72
#define EG_STAGES 4

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned r;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
    return r;
}

// 16 bytes global -> shared, bypassing L1; src_bytes 0 writes zeros.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// First staged row of warp column `wr`'s 16-row tile j.
template <int BN, int WN, int J, bool SILU>
__device__ __forceinline__ int eg_row(int wr, int j) {
    if (SILU) return j < J / 2 ? wr * (WN / 2) + j * 16 : BN / 2 + wr * (WN / 2) + (j - J / 2) * 16;
    return wr * WN + j * 16;
}

__device__ __forceinline__ bf16 silu_mul1(float g, float u) {
    return f2bf(silu_times(bf2f(f2bf(g)), bf2f(f2bf(u))));
}

template <int BN, int BM, int WW, int TW, bool SILU>
__device__ __forceinline__ void expert_gemm_body(const u64* __restrict__ w_ptrs, const bf16* __restrict__ x,
                                                 bf16* __restrict__ y, int M, int N, int K, int ldy,
                                                 long long x_stride, long long y_stride) {
    constexpr int THREADS = 32 * WW * TW;
    constexpr int WN = BN / WW;  // weight rows per warp
    constexpr int WT = BM / TW;  // tokens per warp
    constexpr int J = WN / 16;   // 16-row A tiles per warp
    constexpr int T8 = WT / 8;   // 8-token B tiles per warp
    constexpr int STAGE = (BN + BM) * EG_LD;
    constexpr int COLS = SILU ? BN / 2 : BN;  // result columns per block
    constexpr int YLD = COLS + 8;
    static_assert((BN * 8) % THREADS == 0 && (BM * 8) % THREADS == 0, "loads must split evenly");
    static_assert(!SILU || (J % 2 == 0), "fused blocks pair gate and up tiles");
    static_assert(BM * YLD <= EG_STAGES * STAGE, "the result tile reuses the pipeline's shared memory");
    extern __shared__ unsigned char eg_smem[];
    bf16* sbase = (bf16*)eg_smem;

    const int inter = N / 2;
    const int n_tiles = (SILU ? inter : N) / COLS;
    const int m_tiles = (M + BM - 1) / BM;
    int idx = blockIdx.x;
    const int mt = idx % m_tiles;
    idx /= m_tiles;
    const int nt = idx % n_tiles;
    const int a = idx / n_tiles;
    const bf16* w = (const bf16*)w_ptrs[a];
    const bf16* xa = x + a * x_stride + (long long)mt * BM * K;
    bf16* ya = y + a * y_stride + (long long)mt * BM * ldy + (long long)nt * COLS;
    const int m_valid = min(BM, M - mt * BM);

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int wr = warp % WW, wt = warp / WW;
    const int k_tiles = K / EG_BK;

    auto load = [&](int slot, int kt) {
        bf16* sW = sbase + slot * STAGE;
        bf16* sX = sW + BN * EG_LD;
        const int k0 = kt * EG_BK;
#pragma unroll
        for (int j = 0; j < BN * 8 / THREADS; ++j) {
            int i = tid + j * THREADS;
            int r = i >> 3, c = (i & 7) * 8;
            int row = SILU ? (r < BN / 2 ? nt * (BN / 2) + r : inter + nt * (BN / 2) + (r - BN / 2)) : nt * BN + r;
            cp_async16(sW + r * EG_LD + c, w + (long long)row * K + k0 + c, 16);
        }
#pragma unroll
        for (int j = 0; j < BM * 8 / THREADS; ++j) {
            int i = tid + j * THREADS;
            int r = i >> 3, c = (i & 7) * 8;
            bool ok = r < m_valid;
            cp_async16(sX + r * EG_LD + c, xa + (long long)(ok ? r : 0) * K + k0 + c, ok ? 16 : 0);
        }
    };

    float acc[J][T8][4];
#pragma unroll
    for (int j = 0; j < J; ++j)
#pragma unroll
        for (int t = 0; t < T8; ++t) acc[j][t][0] = acc[j][t][1] = acc[j][t][2] = acc[j][t][3] = 0.0f;

#pragma unroll
    for (int s = 0; s < EG_STAGES - 1; ++s) {
        if (s < k_tiles) load(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<EG_STAGES - 2>();
        __syncthreads();
        // The slot refilled here was read in iteration kt - 1, which every warp has finished.
        const int next = kt + EG_STAGES - 1;
        if (next < k_tiles) load(next % EG_STAGES, next);
        cp_async_commit();
        const bf16* sW = sbase + (kt % EG_STAGES) * STAGE;
        const bf16* sX = sW + BN * EG_LD;
#pragma unroll
        for (int kk = 0; kk < EG_BK; kk += 16) {
            unsigned b[T8][2];
#pragma unroll
            for (int t = 0; t < T8; ++t) {
                const bf16* p = sX + (wt * WT + t * 8 + g) * EG_LD + kk + t4 * 2;
                b[t][0] = ld32(p);
                b[t][1] = ld32(p + 8);
            }
#pragma unroll
            for (int j = 0; j < J; ++j) {
                const bf16* p = sW + (eg_row<BN, WN, J, SILU>(wr, j) + g) * EG_LD + kk + t4 * 2;
                unsigned a0 = ld32(p), a1 = ld32(p + 8 * EG_LD), a2 = ld32(p + 8), a3 = ld32(p + 8 * EG_LD + 8);
#pragma unroll
                for (int t = 0; t < T8; ++t) mma_bf16_16816(acc[j][t], a0, a1, a2, a3, b[t][0], b[t][1]);
            }
        }
    }
    cp_async_wait<0>();
    __syncthreads();

    // Result tile [token][column] in shared memory, then 16-byte row stores.
    bf16* sY = sbase;
    if (SILU) {
#pragma unroll
        for (int j = 0; j < J / 2; ++j)
#pragma unroll
            for (int t = 0; t < T8; ++t) {
                int n = wr * (WN / 2) + j * 16 + g;
                int tok = wt * WT + t * 8 + t4 * 2;
                const float* gt = acc[j][t];
                const float* ut = acc[j + J / 2][t];
                sY[tok * YLD + n] = silu_mul1(gt[0], ut[0]);
                sY[(tok + 1) * YLD + n] = silu_mul1(gt[1], ut[1]);
                sY[tok * YLD + n + 8] = silu_mul1(gt[2], ut[2]);
                sY[(tok + 1) * YLD + n + 8] = silu_mul1(gt[3], ut[3]);
            }
    } else {
#pragma unroll
        for (int j = 0; j < J; ++j)
#pragma unroll
            for (int t = 0; t < T8; ++t) {
                int n = wr * WN + j * 16 + g;
                int tok = wt * WT + t * 8 + t4 * 2;
                sY[tok * YLD + n] = f2bf(acc[j][t][0]);
                sY[(tok + 1) * YLD + n] = f2bf(acc[j][t][1]);
                sY[tok * YLD + n + 8] = f2bf(acc[j][t][2]);
                sY[(tok + 1) * YLD + n + 8] = f2bf(acc[j][t][3]);
            }
    }
    __syncthreads();
    for (int i = tid; i < BM * (COLS / 8); i += THREADS) {
        int tok = i / (COLS / 8), c = (i % (COLS / 8)) * 8;
        if (tok < m_valid) *(u4*)(ya + (long long)tok * ldy + c) = *(const u4*)(sY + tok * YLD + c);
    }
}

// Tiles (weight rows, tokens, warps along rows, warps along tokens, blocks per SM wanted); the Rust
// side lists the same tiles in gemm_choice::TILES.
#define EXPERT_GEMM(BN, BM, WW, TW, MIN_BLOCKS)                                                              \
    extern "C" __global__ void __launch_bounds__(32 * WW * TW, MIN_BLOCKS)                                  \
        expert_gemm_##BN##x##BM(const u64* w_ptrs, const bf16* x, bf16* y, int M, int N, int K, int ldy,  \
                                long long x_stride, long long y_stride) {                                   \
        expert_gemm_body<BN, BM, WW, TW, false>(w_ptrs, x, y, M, N, K, ldy, x_stride, y_stride);            \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(32 * WW * TW, MIN_BLOCKS)                                  \
        expert_gemm_silu_##BN##x##BM(const u64* w_ptrs, const bf16* x, bf16* y, int M, int N, int K,       \
                                     int ldy, long long x_stride, long long y_stride) {                     \
        expert_gemm_body<BN, BM, WW, TW, true>(w_ptrs, x, y, M, N, K, ldy, x_stride, y_stride);             \
    }

EXPERT_GEMM(128, 16, 4, 1, 2)
EXPERT_GEMM(128, 32, 4, 1, 2)
EXPERT_GEMM(128, 64, 4, 2, 2)
EXPERT_GEMM(64, 64, 2, 2, 3)
EXPERT_GEMM(64, 128, 2, 4, 2)
EXPERT_GEMM(128, 128, 4, 2, 1)
