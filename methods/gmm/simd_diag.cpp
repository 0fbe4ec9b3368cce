#include "methods/gmm/simd_diag.h"

#include <algorithm>
#include <atomic>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#ifndef __clang__
// GCC 12 reports its own _mm512_cvtps_pd (built on _mm512_undefined_pd) as maybe-uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define FEDNODE_HAVE_SIMD_KERNELS 1
#endif

namespace fednode::gmm_detail {

namespace {
std::atomic<bool> enabled{true};
std::atomic<MstepKernel> mstep_kernel{MstepKernel::Auto};
std::atomic<bool> avx512_allowed{true};

enum class Isa { None, Avx2, Avx512 };

Isa cpu_best_isa() {
#ifdef FEDNODE_HAVE_SIMD_KERNELS
  static const Isa isa = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("fma")) return Isa::None;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) return Isa::Avx512;
    return __builtin_cpu_supports("avx2") ? Isa::Avx2 : Isa::None;
  }();
  return isa;
#else
  return Isa::None;
#endif
}

Isa cpu_isa() {
  const Isa best = cpu_best_isa();
  return best == Isa::Avx512 && !avx512_allowed.load(std::memory_order_relaxed) ? Isa::Avx2 : best;
}

#ifdef FEDNODE_HAVE_SIMD_KERNELS

// Everything up to the matching pop is compiled for the instruction set (GCC and clang each
// have their own pragma for it); the functions run only where cpu_isa() found it.
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,fma")
#endif
namespace avx512 {

using V8 = __m512d;
using M8 = __mmask8;  // lane i is used if bit i is set

// The first `count` (<= 8) lanes.
inline M8 lanes(Index count) { return static_cast<M8>(count >= 8 ? 0xFF : (1u << count) - 1u); }
inline V8 zero() { return _mm512_setzero_pd(); }
inline V8 load(const double* p) { return _mm512_loadu_pd(p); }
inline void store(double* p, V8 v) { _mm512_storeu_pd(p, v); }
inline V8 load_masked(M8 m, const double* p) { return _mm512_maskz_loadu_pd(m, p); }
inline void store_masked(double* p, M8 m, V8 v) { _mm512_mask_storeu_pd(p, m, v); }
inline V8 mul(V8 a, V8 b) { return _mm512_mul_pd(a, b); }
inline V8 add(V8 a, V8 b) { return _mm512_add_pd(a, b); }
inline V8 fmadd(V8 a, V8 b, V8 c) { return _mm512_fmadd_pd(a, b, c); }
inline V8 set1(double x) { return _mm512_set1_pd(x); }
inline double reduce_add(V8 v) { return _mm512_reduce_add_pd(v); }
// The 8 float32 values at x as doubles minus the offset o; lanes off in m are zero.
inline V8 centred(const float* x, V8 o, M8 m) {
  return _mm512_maskz_sub_pd(m, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x)), o);
}

// The E-step's register tile: 4 rows x 5 components (20 of the 32 registers), so that each
// weight loaded serves 4 rows; 2 x 10 loaded as many weights as it did FMAs, which bounded the
// kernel by loads on cores that load one 64-byte vector a cycle (Zen 4). The M-step's tile: 10
// components share each row loaded; its sparse form walks 4 column chunks at once.
constexpr int kEstepRows = 4, kEstepTile = 5, kMstepTile = 10, kListedGroup = 4;

#include "methods/gmm/simd_kernels.inc"

}  // namespace avx512
#ifdef __clang__
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace avx2 {

// Eight lanes in two 256-bit registers: the same lanes as AVX-512's, so the same layout of the
// packed weights and the same arithmetic in every lane.
struct V8 {
  __m256d lo, hi;
};
struct M8 {
  __m256i floats;  // 8 x 32-bit lanes, all ones where used
  __m256i lo, hi;  // 4 x 64-bit lanes each
  // All 8 lanes: plain loads. VMASKMOVPS/PD held the kernels back on a Zen 3 (bench_em's
  // diagonal fit on one thread 0.065-0.075 s with masked loads everywhere, 0.040-0.049 s without).
  bool full;
};

inline M8 lanes(Index count) {
  const int n = static_cast<int>(std::min<Index>(count, 8));
  return {_mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
          _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3)),
          _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(4, 5, 6, 7)), n == 8};
}
inline V8 zero() { return {_mm256_setzero_pd(), _mm256_setzero_pd()}; }
inline V8 load(const double* p) { return {_mm256_loadu_pd(p), _mm256_loadu_pd(p + 4)}; }
inline void store(double* p, V8 v) {
  _mm256_storeu_pd(p, v.lo);
  _mm256_storeu_pd(p + 4, v.hi);
}
// AVX's masked loads read nothing (and fault on nothing) in the lanes that are off, which are zero.
inline V8 load_masked(M8 m, const double* p) {
  if (m.full) return load(p);
  return {_mm256_maskload_pd(p, m.lo), _mm256_maskload_pd(p + 4, m.hi)};
}
inline void store_masked(double* p, M8 m, V8 v) {
  _mm256_maskstore_pd(p, m.lo, v.lo);
  _mm256_maskstore_pd(p + 4, m.hi, v.hi);
}
inline V8 mul(V8 a, V8 b) { return {_mm256_mul_pd(a.lo, b.lo), _mm256_mul_pd(a.hi, b.hi)}; }
inline V8 add(V8 a, V8 b) { return {_mm256_add_pd(a.lo, b.lo), _mm256_add_pd(a.hi, b.hi)}; }
inline V8 fmadd(V8 a, V8 b, V8 c) { return {_mm256_fmadd_pd(a.lo, b.lo, c.lo), _mm256_fmadd_pd(a.hi, b.hi, c.hi)}; }
inline V8 set1(double x) { return {_mm256_set1_pd(x), _mm256_set1_pd(x)}; }
// _mm512_reduce_add_pd's order: the upper half plus the lower, then its 128-bit halves, then
// the two lanes.
inline double reduce_add(V8 v) {
  const __m256d t = _mm256_add_pd(v.hi, v.lo);
  const __m128d u = _mm_add_pd(_mm256_extractf128_pd(t, 1), _mm256_castpd256_pd128(t));
  return u[0] + u[1];
}
// Masked-off lanes load as 0 and their offsets as 0: 0 - 0 = +0, as AVX-512's zero-masking.
inline V8 centred(const float* x, V8 o, M8 m) {
  const __m256 f = m.full ? _mm256_loadu_ps(x) : _mm256_maskload_ps(x, m.floats);
  return {_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(f)), o.lo),
          _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)), o.hi)};
}

// Sixteen 256-bit registers: an E-step tile of 1 row x 5 components (10 registers, the row and
// its squares 4 more) and 2 column chunks at once in the sparse M-step. The dense M-step's tile
// of 5 components spills some of its 20 accumulators but passes over the rows half as often as
// the 3 that fit: on a Zen 3 (bench_em, overlapping data, CPU time) 0.52-0.59 s against
// 0.67-0.76 s for the diagonal fit; 2 x 5 and 1 x 10 E-step tiles measured the same as 1 x 5.
constexpr int kEstepRows = 1, kEstepTile = 5, kMstepTile = 5, kListedGroup = 2;

#include "methods/gmm/simd_kernels.inc"

}  // namespace avx2
#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // FEDNODE_HAVE_SIMD_KERNELS
}  // namespace

bool simd_kernels_active() { return enabled.load(std::memory_order_relaxed) && cpu_isa() != Isa::None; }
void set_simd_kernels_enabled(bool on) { enabled.store(on, std::memory_order_relaxed); }
void set_mstep_kernel(MstepKernel kernel) { mstep_kernel.store(kernel, std::memory_order_relaxed); }
bool cpu_has_avx512_kernels() { return cpu_best_isa() == Isa::Avx512; }
void set_avx512_kernels_allowed(bool allowed) { avx512_allowed.store(allowed, std::memory_order_relaxed); }

std::vector<double> simd_pack_weights(const double* W, Index d, int K) {
  const Index chunks = (d + 7) / 8;
  std::vector<double> out(static_cast<size_t>(chunks * K * 8), 0.0);
  for (Index j = 0; j < d; ++j)
    for (int k = 0; k < K; ++k) out[static_cast<size_t>(((j / 8) * K + k) * 8 + j % 8)] = W[j * K + k];
  return out;
}

void simd_estep(const Block& block, int K, const double* wm, const double* wp, double* out, double* norms,
                std::vector<double>& carry) {
#ifdef FEDNODE_HAVE_SIMD_KERNELS
  switch (cpu_isa()) {
    case Isa::Avx512: avx512::estep(block, K, wm, wp, out, norms, carry); break;
    case Isa::Avx2: avx2::estep(block, K, wm, wp, out, norms, carry); break;
    case Isa::None: break;  // callers ask simd_kernels_active() first
  }
#endif
}

void simd_mstep(const Block& block, const double* resp, int K, bool squares, double* S,
                std::vector<Index>& rows) {
#ifdef FEDNODE_HAVE_SIMD_KERNELS
  switch (cpu_isa()) {
    case Isa::Avx512: avx512::mstep(block, resp, K, squares, S, rows); break;
    case Isa::Avx2: avx2::mstep(block, resp, K, squares, S, rows); break;
    case Isa::None: break;
  }
#endif
}

}  // namespace fednode::gmm_detail
