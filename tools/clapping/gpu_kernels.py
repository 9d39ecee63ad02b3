"""CuPy RawKernels for the two fused compress-and-update steps, and their array-module mirrors.

Same contracts and same numbers as the Numba kernels in core/kernels/compress.py:
- `delta_topk_update(a, m, k)`: per row the k largest |a - m| (ties to the lower column), indices
  ascending, values a - m; m[row, idx] += values in place.
- `delta_quant_pack(a, m, bits, seed, stochastic)`: per-row max-abs scale, codes packed 8 // bits to a
  byte, stochastic rounding from the same (seed, row, column) hash; m += decoded value.
- `unpack_accumulate(packed, scale, bits, d, out, accumulate)`: the receiver's decode.

The GPU top-k finds each row's k-th largest magnitude by a 31-step descent on the float32 bit
pattern (non-negative floats order like their bits; one block counts per step), then writes the kept
columns in order with block-wide prefix sums: no sort, one block per row. `topk_threshold_xp` and
`delta_quant_pack_xp` run the same arithmetic with any array module (NumPy here), so the algorithm is
tested on CPU; the CUDA sources themselves only under `-m gpu` and in bench/clapping/gpu.py.
CuPy is imported only when a kernel is first used.
"""

from __future__ import annotations

import numpy as np

_THREADS = 256

_COMMON = r"""
__device__ __forceinline__ unsigned long long splitmix(unsigned long long x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}
// block-wide inclusive sum of one int per thread (blockDim.x == 256), result for this thread
__device__ int block_scan(int v, int* buf) {
    int t = threadIdx.x;
    buf[t] = v;
    __syncthreads();
    for (int off = 1; off < 256; off <<= 1) {
        int add = t >= off ? buf[t - off] : 0;
        __syncthreads();
        buf[t] += add;
        __syncthreads();
    }
    int out = buf[t];
    __syncthreads();
    return out;
}
__device__ int block_sum(int v, int* buf) {
    int total = block_scan(v, buf);
    __shared__ int last;
    if (threadIdx.x == 255) last = total;
    __syncthreads();
    int r = last;
    __syncthreads();
    return r;
}
"""

_TOPK_SOURCE = (
    _COMMON
    + r"""
extern "C" __global__ void delta_topk_update(const float* a, float* m, long long* idx, float* val, int d, int k) {
    __shared__ int buf[256];
    const float* ar = a + (long long)blockIdx.x * d;
    float* mr = m + (long long)blockIdx.x * d;
    long long* ir = idx + (long long)blockIdx.x * k;
    float* vr = val + (long long)blockIdx.x * k;
    // the k-th largest magnitude: the largest bit pattern T with count(|a - m| >= T) >= k
    unsigned int prefix = 0;
    for (int bit = 30; bit >= 0; --bit) {
        unsigned int candidate = prefix | (1u << bit);
        int count = 0;
        for (int c = threadIdx.x; c < d; c += 256) {
            float v = fabsf(ar[c] - mr[c]);
            count += __float_as_uint(v) >= candidate;
        }
        if (block_sum(count, buf) >= k) prefix = candidate;
    }
    int above = 0;
    for (int c = threadIdx.x; c < d; c += 256) above += __float_as_uint(fabsf(ar[c] - mr[c])) > prefix;
    int ties_left = k - block_sum(above, buf);
    int written = 0;
    for (int base = 0; base < d; base += 256) {
        int c = base + threadIdx.x;
        float delta = 0.0f;
        int gt = 0, eq = 0;
        if (c < d) {
            delta = ar[c] - mr[c];
            unsigned int bits = __float_as_uint(fabsf(delta));
            gt = bits > prefix;
            eq = bits == prefix;
        }
        int tie_rank = block_scan(eq, buf) - eq;  // ties before this column in this chunk
        int keep = gt || (eq && tie_rank < ties_left);
        int pos = block_scan(keep, buf) - keep;
        if (keep) {
            ir[written + pos] = c;
            vr[written + pos] = delta;
            mr[c] += delta;
        }
        int chunk_ties = block_sum(eq, buf);
        written += block_sum(keep, buf);
        ties_left -= min(chunk_ties, max(ties_left, 0));
    }
}
"""
)

_QUANT_SOURCE = (
    _COMMON
    + r"""
extern "C" __global__ void delta_quant_pack(const float* a, float* m, unsigned char* packed, float* scale,
                                            int d, int bits, unsigned long long seed, int stochastic, int update) {
    __shared__ float red[256];
    const float* ar = a + (long long)blockIdx.x * d;
    float* mr = m + (long long)blockIdx.x * d;
    int per_byte = 8 / bits;
    int n_bytes = (d + per_byte - 1) / per_byte;
    unsigned char* pr = packed + (long long)blockIdx.x * n_bytes;
    float s = 0.0f;
    for (int c = threadIdx.x; c < d; c += 256) s = fmaxf(s, fabsf(ar[c] - mr[c]));
    red[threadIdx.x] = s;
    __syncthreads();
    for (int off = 128; off > 0; off >>= 1) {
        if (threadIdx.x < off) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + off]);
        __syncthreads();
    }
    s = red[0];
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
    int levels = (1 << bits) - 1;
    double to_levels = s == 0.0f ? 0.0 : 0.5 * levels / (double)s;
    unsigned long long key = splitmix(seed ^ splitmix((unsigned long long)blockIdx.x * 1000003ULL));
    for (int b = threadIdx.x; b < n_bytes; b += 256) {
        int byte = 0;
        double u0 = 0.5, u1 = 0.5;
        for (int j = 0; j < per_byte; ++j) {
            int c = b * per_byte + j;
            if (c >= d) break;
            if (stochastic && (c % 2 == 0 || j == 0)) {  // a byte may start on an odd column (bits = 8)
                unsigned long long h = splitmix(key + (unsigned long long)(c / 2) * 0x9E3779B97F4A7C15ULL);
                u0 = (double)(h & 0xFFFFFFFFULL) * (1.0 / 4294967296.0);
                u1 = (double)(h >> 32) * (1.0 / 4294967296.0);
            }
            float x = ar[c] - mr[c];
            int q = min((int)((double)(x + s) * to_levels + (c % 2 == 0 ? u0 : u1)), levels);
            byte |= q << (j * bits);
            if (update) mr[c] = (float)((double)mr[c] + ((double)q / levels * 2.0 - 1.0) * (double)s);
        }
        pr[b] = (unsigned char)byte;
    }
}

extern "C" __global__ void unpack_accumulate(const unsigned char* packed, const float* scale, float* out,
                                             int rows, int d, int bits, int accumulate) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)rows * d) return;
    int r = i / d, c = i % d;
    int per_byte = 8 / bits;
    int n_bytes = (d + per_byte - 1) / per_byte;
    int levels = (1 << bits) - 1;
    int q = (packed[(long long)r * n_bytes + c / per_byte] >> ((c % per_byte) * bits)) & levels;
    float v = (float)(((double)q / levels * 2.0 - 1.0) * (double)scale[r]);
    out[i] = accumulate ? (float)((double)out[i] + v) : v;
}
"""
)

_cache: dict = {}


def _kernel(name: str):
    """Compile (once) and return the named RawKernel; CuPy is imported here, not at module import."""
    if name not in _cache:
        import cupy

        source = _TOPK_SOURCE if name == "delta_topk_update" else _QUANT_SOURCE
        _cache[name] = cupy.RawKernel(source, name)
    return _cache[name]


def delta_topk_update(a, m, k: int):
    """CuPy arrays a, m (rows, d) float32, C-contiguous; m is updated in place. Returns (idx int64, val)."""
    import cupy

    rows, d = a.shape
    idx = cupy.empty((rows, k), dtype=cupy.int64)
    val = cupy.empty((rows, k), dtype=cupy.float32)
    _kernel("delta_topk_update")((rows,), (_THREADS,), (a, m, idx, val, np.int32(d), np.int32(k)))
    return idx, val


def delta_quant_pack(a, m, bits: int, seed: int, stochastic: bool = True, update: bool = True):
    """CuPy arrays; returns (packed uint8 (rows, ceil(d*bits/8)), scale float32 (rows,)); m += decode when update."""
    import cupy

    rows, d = a.shape
    per_byte = 8 // bits
    packed = cupy.zeros((rows, (d + per_byte - 1) // per_byte), dtype=cupy.uint8)
    scale = cupy.empty(rows, dtype=cupy.float32)
    args = (a, m, packed, scale, np.int32(d), np.int32(bits), np.uint64(seed), np.int32(stochastic), np.int32(update))
    _kernel("delta_quant_pack")((rows,), (_THREADS,), args)
    return packed, scale


def quant_pack(x, bits: int, seed: int, stochastic: bool = True):
    """Quantise x itself (no reference): the delta kernel against a zero reference that it does not update."""
    import cupy

    return delta_quant_pack(x, cupy.zeros_like(x), bits, seed, stochastic, update=False)


def unpack_accumulate(packed, scale, bits: int, d: int, out, accumulate: bool) -> None:
    rows = packed.shape[0]
    blocks = (rows * d + _THREADS - 1) // _THREADS
    args = (packed, scale, out, np.int32(rows), np.int32(d), np.int32(bits), np.int32(accumulate))
    _kernel("unpack_accumulate")((blocks,), (_THREADS,), args)


# ------------------------------------------------------------ array-module mirrors (CPU-testable)


def topk_threshold_xp(a, m, k: int, xp=np):
    """The GPU kernel's threshold search with array operations: per row, the bit pattern of the k-th
    largest |a - m| found by descending from bit 30 (a float32's sign bit is 0 for magnitudes)."""
    bits = xp.abs(a - m).astype(xp.float32).view(xp.uint32)
    prefix = xp.zeros(a.shape[0], dtype=xp.uint32)
    for bit in range(30, -1, -1):
        candidate = prefix | xp.uint32(1 << bit)
        enough = (bits >= candidate[:, None]).sum(axis=1) >= k
        prefix = xp.where(enough, candidate, prefix)
    return prefix


def delta_topk_update_xp(a, m, k: int, xp=np):
    """The kernel's selection rule (above the threshold, then ties in column order) with array operations."""
    delta = (a - m).astype(xp.float32)
    bits = xp.abs(delta).view(xp.uint32)
    prefix = topk_threshold_xp(a, m, k, xp)[:, None]
    gt = bits > prefix
    eq = bits == prefix
    ties_left = k - gt.sum(axis=1, keepdims=True)
    keep = gt | (eq & (xp.cumsum(eq, axis=1) - eq <= ties_left - 1))
    idx = xp.nonzero(keep)[1].reshape(a.shape[0], k).astype(xp.int64)  # row-major: columns ascending
    val = xp.take_along_axis(delta, idx, axis=1)
    rows = xp.arange(a.shape[0])[:, None]
    m[rows, idx] += val
    return idx, val


def _splitmix_xp(x, xp):
    x = x + xp.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> xp.uint64(30))) * xp.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> xp.uint64(27))) * xp.uint64(0x94D049BB133111EB)
    return x ^ (x >> xp.uint64(31))


def delta_quant_pack_xp(a, m, bits: int, seed: int, stochastic: bool = True, xp=np):
    """The kernel's arithmetic (float32 delta and scale, float64 rounding and decode) with array operations."""
    rows, d = a.shape
    per_byte = 8 // bits
    levels = (1 << bits) - 1
    x = (a - m).astype(xp.float32)
    s = xp.abs(x).max(axis=1)
    safe = xp.where(s == 0, xp.float32(1), s).astype(xp.float64)
    to_levels = xp.where(s == 0, 0.0, 0.5 * levels / safe)[:, None]
    if stochastic:
        with np.errstate(over="ignore"):
            row_ids = xp.arange(rows, dtype=xp.uint64) * xp.uint64(1000003)
            keys = _splitmix_xp(xp.uint64(seed) ^ _splitmix_xp(row_ids, xp), xp)
            pairs = xp.arange((d + 1) // 2, dtype=xp.uint64) * xp.uint64(0x9E3779B97F4A7C15)
            h = _splitmix_xp(keys[:, None] + pairs[None, :], xp)
        draws = xp.stack([(h & xp.uint64(0xFFFFFFFF)), h >> xp.uint64(32)], axis=2).reshape(rows, -1)[:, :d]
        u = draws.astype(xp.float64) * (1.0 / 4294967296.0)
    else:
        u = xp.full((rows, d), 0.5)
    q = xp.minimum(((x + s[:, None]).astype(xp.float64) * to_levels + u).astype(xp.int64), levels)
    m[:] = (m.astype(xp.float64) + (q / levels * 2.0 - 1.0) * s[:, None].astype(xp.float64)).astype(xp.float32)
    padded = xp.zeros((rows, -(-d // per_byte) * per_byte), dtype=xp.int64)
    padded[:, :d] = q
    shifts = xp.arange(per_byte, dtype=xp.int64) * bits
    packed = (padded.reshape(rows, -1, per_byte) << shifts).sum(axis=2).astype(xp.uint8)
    return packed, s.astype(xp.float32)


def unpack_accumulate_xp(packed, scale, bits: int, d: int, out, accumulate: bool, xp=np) -> None:
    """The decode kernel's arithmetic (float64 value, one rounding to float32) with array operations."""
    per_byte = 8 // bits
    levels = (1 << bits) - 1
    shifts = xp.arange(per_byte, dtype=xp.uint8) * xp.uint8(bits)
    q = ((packed[:, :, None] >> shifts) & xp.uint8(levels)).reshape(packed.shape[0], -1)[:, :d]
    value = (q.astype(xp.float64) / levels * 2.0 - 1.0) * scale.astype(xp.float64)[:, None]
    out[:] = (out.astype(xp.float64) + value).astype(xp.float32) if accumulate else value.astype(xp.float32)
