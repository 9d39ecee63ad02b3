"""CuPy RawKernel twin of tools/cita/kernels.sim_values (`cita-sim value --device cuda`).

One CUDA thread per (context, candidate) runs its R rollouts with the same counter-based streams as the
Numba kernel (splitmix64 of (seed, key, k, r) seeding xoroshiro128+), the same step semantics and the
same order of floating-point operations, compiled without fused multiply-adds (--fmad=false) so the
arithmetic matches the CPU's; the Numba kernel stays the reference (tests/cita/test_gpu.py compares the
two under -m gpu). CuPy is imported only when the kernel is first used.
"""

from __future__ import annotations

import numpy as np

_THREADS = 128

_SOURCE = r"""
typedef unsigned long long u64;
#define GOLD 0x9E3779B97F4A7C15ULL

__device__ __forceinline__ u64 mix(u64 z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
__device__ __forceinline__ u64 rotl(u64 x, int k) { return (x << k) | (x >> (64 - k)); }
__device__ __forceinline__ double next_u(u64* s0, u64* s1) {
    u64 a = *s0, b = *s1;
    u64 result = a + b;
    b ^= a;
    *s0 = rotl(a, 24) ^ b ^ (b << 16);
    *s1 = rotl(b, 37);
    return (double)(result >> 11) * (1.0 / 9007199254740992.0);
}
// tools/cita/kernels._execute: returns failed, updates *done
__device__ __forceinline__ int execute(int j, u64 goal, const u64* pre, u64* done, u64 mut, u64 multi,
                                       double ok_prob, double u) {
    u64 bit = 1ULL << j;
    int is_mut = (mut & bit) != 0;
    if (goal & bit) {
        if ((pre[j] & *done) != pre[j]) return is_mut;
        if (*done & bit) return is_mut && (multi & bit) == 0;
        if (u < ok_prob) *done |= bit;
        return 0;
    }
    return is_mut;
}

extern "C" __global__ void sim_values(const double* probs, const double* rho, const u64* goal, const u64* prereq,
        const u64* done0, const int* cand, const double* cand_ok, u64 mut, const u64* multi, double eps,
        double gamma, double beta, const int* steps, int R, u64 seed, const u64* keys,
        int C, int K, int n, int D, double* mean, double* var) {
    long long ck = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (ck >= (long long)C * K) return;
    int c = (int)(ck / K), k = (int)(ck % K);
    int a = cand[ck];
    if (a < 0) return;
    const u64* pre = prereq + (long long)c * n;
    double weights[65];
    double hits = 0.0;
    for (int r = 0; r < R; ++r) {
        u64 x = seed;
        x = (x ^ (keys[c] * GOLD)) + GOLD;
        x = (x ^ ((u64)k * 0xD1B54A32D192ED03ULL)) + GOLD;
        x = (x ^ ((u64)r * 0x8CB92BA72F3D8DD7ULL)) + GOLD;
        u64 s0 = mix(x);
        x += GOLD;
        u64 s1 = mix(x);
        if (s0 == 0 && s1 == 0) s1 = 1;
        double u = next_u(&s0, &s1);
        int d = min((int)(u * D), D - 1);
        u64 done = done0[c];
        double result;
        if (a == n) {
            result = done == goal[c] ? 1.0 : 0.0;
        } else {
            u = next_u(&s0, &s1);
            if (execute(a, goal[c], pre, &done, mut, multi[c], cand_ok[ck], u)) {
                result = 0.0;
            } else {
                int prev = a;
                result = -1.0;
                const double* row;
                for (int t = 0; t < steps[c] && result < 0.0; ++t) {
                    row = probs + ((long long)d * (n + 1) + prev) * (n + 1);
                    double total = 0.0;
                    for (int j = 0; j <= n; ++j) {
                        double g;
                        if (j == n) {
                            g = done == goal[c] ? 1.0 + gamma : 1.0;
                        } else {
                            u64 bit = 1ULL << j;
                            int ready = (goal[c] & bit) != 0 && (done & bit) == 0 && (pre[j] & done) == pre[j];
                            g = ready ? 1.0 + gamma : 1.0;
                        }
                        weights[j] = row[j] * pow(g, beta);
                        total += weights[j];
                    }
                    u = next_u(&s0, &s1);
                    double acc = 0.0;
                    int pick = n;
                    for (int j = 0; j <= n; ++j) {
                        acc += (1.0 - eps) * (total > 0 ? weights[j] / total : 0.0) + eps / (n + 1);
                        if (u < acc) { pick = j; break; }
                    }
                    if (pick == n) { result = done == goal[c] ? 1.0 : 0.0; break; }
                    u = next_u(&s0, &s1);
                    if (execute(pick, goal[c], pre, &done, mut, multi[c], rho[(long long)d * n + pick], u)) {
                        result = 0.0;
                        break;
                    }
                    prev = pick;
                }
                if (result < 0.0) result = done == goal[c] ? 1.0 : 0.0;
            }
        }
        hits += result;
    }
    double m = hits / R;
    mean[ck] = m;
    var[ck] = m * (1.0 - m);
}
"""

_KERNEL = None


def _kernel():
    global _KERNEL
    if _KERNEL is None:
        import cupy

        _KERNEL = cupy.RawKernel(_SOURCE, "sim_values", options=("--fmad=false",))
    return _KERNEL


def sim_values_cuda(
    probs, rho, goal, prereq, done, cand, cand_ok, mut, multi, eps, gamma, beta, steps, R, seed, keys=None
):
    """tools/cita/kernels.sim_values on a CUDA device: same arguments, (mean[C,K], var[C,K]) as NumPy arrays."""
    import cupy

    C, K = cand.shape
    n = rho.shape[1]
    if n + 1 > 65:
        raise ValueError(f"{n} tools in one context (> 64)")
    if keys is None:
        keys = np.arange(C).astype(np.uint64)

    def dev(x, dtype):
        return cupy.ascontiguousarray(cupy.asarray(np.asarray(x), dtype=dtype))

    mean = cupy.zeros((C, K))
    var = cupy.zeros((C, K))
    if C * K:
        _kernel()(
            ((C * K + _THREADS - 1) // _THREADS,),
            (_THREADS,),
            (
                dev(probs, cupy.float64),
                dev(rho, cupy.float64),
                dev(goal, cupy.uint64),
                dev(prereq, cupy.uint64),
                dev(done, cupy.uint64),
                dev(cand, cupy.int32),
                dev(cand_ok, cupy.float64),
                np.uint64(mut),
                dev(multi, cupy.uint64),
                np.float64(eps),
                np.float64(gamma),
                np.float64(beta),
                dev(steps, cupy.int32),
                np.int32(R),
                np.uint64(seed),
                dev(keys, cupy.uint64),
                np.int32(C),
                np.int32(K),
                np.int32(n),
                np.int32(probs.shape[0]),
                mean,
                var,
            ),
        )
    return cupy.asnumpy(mean), cupy.asnumpy(var)
