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

// Names a vector width for the operations whose arguments do not (a splat, a mask of lanes),
// so that a kernel can be written once for vectors of either width.
template <int Lanes>
struct Width {};
// A mask with every lane on, known as such when the kernel is compiled: plain loads.
struct AllLanes {};

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
inline M8 lanes(Width<8>, Index count) { return lanes(count); }
inline V8 zero() { return _mm512_setzero_pd(); }
inline V8 load(const double* p) { return _mm512_loadu_pd(p); }
inline void store(double* p, V8 v) { _mm512_storeu_pd(p, v); }
inline V8 load_masked(M8 m, const double* p) { return _mm512_maskz_loadu_pd(m, p); }
inline void store_masked(double* p, M8 m, V8 v) { _mm512_mask_storeu_pd(p, m, v); }
inline V8 mul(V8 a, V8 b) { return _mm512_mul_pd(a, b); }
inline V8 add(V8 a, V8 b) { return _mm512_add_pd(a, b); }
inline V8 fmadd(V8 a, V8 b, V8 c) { return _mm512_fmadd_pd(a, b, c); }
inline V8 set1(double x) { return _mm512_set1_pd(x); }
inline V8 set1(Width<8>, double x) { return set1(x); }
inline double reduce_add(V8 v) { return _mm512_reduce_add_pd(v); }
// The 8 float32 values at x as doubles minus the offset o; lanes off in m are zero.
inline V8 centred(const float* x, V8 o, M8 m) {
  return _mm512_maskz_sub_pd(m, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x)), o);
}
inline V8 load_masked(AllLanes, const double* p) { return load(p); }
inline V8 centred(const float* x, V8 o, AllLanes) { return _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x)), o); }

// The E-step's register tile: 4 rows x 5 components (20 of the 32 registers), so that each
// weight loaded serves 4 rows; 2 x 10 loaded as many weights as it did FMAs, which bounded the
// kernel by loads on cores that load one 64-byte vector a cycle (Zen 4). The M-step's tile: 10
// components share each row loaded; its sparse form walks 4 column chunks at once.
constexpr int kEstepRows = 4, kEstepTile = 5, kMstepTile = 10, kListedGroup = 4;
constexpr int kMstepLanes = 8;

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
  if (m.full) return store(p, v);
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
inline V8 load_masked(AllLanes, const double* p) { return load(p); }
inline V8 centred(const float* x, V8 o, AllLanes) {
  const __m256 f = _mm256_loadu_ps(x);
  return {_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(f)), o.lo),
          _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)), o.hi)};
}

// Four lanes in one register: the dense M-step's vector, so that 6 components' sums of x and x^2
// (12 registers) fit beside the row; with V8 a tile of 5 spilled and one of 3 passed over the
// rows too often (one 128-row block on a Zen 3: 0.58 us a row against 0.76 with V8 x 5).
using V4 = __m256d;
struct M4 {
  __m128i floats;
  __m256i doubles;
  bool full;
};
inline M4 lanes(Width<4>, Index count) {
  const int n = static_cast<int>(std::min<Index>(count, 4));
  return {_mm_cmpgt_epi32(_mm_set1_epi32(n), _mm_setr_epi32(0, 1, 2, 3)),
          _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3)), n == 4};
}
inline V4 set1(Width<4>, double x) { return _mm256_set1_pd(x); }
inline V4 load_masked(M4 m, const double* p) { return m.full ? _mm256_loadu_pd(p) : _mm256_maskload_pd(p, m.doubles); }
inline void store_masked(double* p, M4 m, V4 v) {
  if (m.full) return _mm256_storeu_pd(p, v);
  _mm256_maskstore_pd(p, m.doubles, v);
}
inline V4 mul(V4 a, V4 b) { return _mm256_mul_pd(a, b); }
inline V4 add(V4 a, V4 b) { return _mm256_add_pd(a, b); }
inline V4 fmadd(V4 a, V4 b, V4 c) { return _mm256_fmadd_pd(a, b, c); }
inline V4 centred(const float* x, V4 o, M4 m) {
  return _mm256_sub_pd(_mm256_cvtps_pd(m.full ? _mm_loadu_ps(x) : _mm_maskload_ps(x, m.floats)), o);
}
inline V4 centred(const float* x, V4 o, AllLanes) { return _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x)), o); }

// Sixteen 256-bit registers: an E-step tile of 1 row x 5 components (10 registers, the row and
// its squares 4 more; 2 x 5, 2 x 3, 1 x 4 and 1 x 10 measured slower on a Zen 3), the dense
// M-step's 6 components of V4 above, and 2 column chunks at once in the sparse M-step.
constexpr int kEstepRows = 1, kEstepTile = 5, kMstepTile = 6, kListedGroup = 2;
constexpr int kMstepLanes = 4;

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
