#include "methods/gmm/simd_diag.h"

#include <algorithm>
#include <atomic>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
// GCC 12 reports its own _mm512_cvtps_pd (built on _mm512_undefined_pd) as maybe-uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define FEDNODE_HAVE_AVX512_KERNELS 1
#define FEDNODE_AVX512 __attribute__((target("avx512f,avx512vl,fma")))
#endif

namespace fednode::gmm_detail {

namespace {
std::atomic<bool> enabled{true};

bool cpu_has_avx512() {
#ifdef FEDNODE_HAVE_AVX512_KERNELS
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("fma");
  }();
  return has;
#else
  return false;
#endif
}
}  // namespace

bool simd_kernels_active() { return enabled.load(std::memory_order_relaxed) && cpu_has_avx512(); }
void set_simd_kernels_enabled(bool on) { enabled.store(on, std::memory_order_relaxed); }

#ifdef FEDNODE_HAVE_AVX512_KERNELS

namespace {

// Mask of the first `count` (<= 8) lanes.
inline __mmask8 lanes(Index count) {
  return static_cast<__mmask8>(count >= 8 ? 0xFF : (1u << count) - 1u);
}

// The block packed as [column chunk][row][8 lanes]: both kernels then read 8 consecutive
// values of one row from one 64-byte line, and a chunk's rows are contiguous.
FEDNODE_AVX512 void pack_rows(const float* X, Index d, Index begin, Index rows, const double* offset,
                              double* pack) {
  const Index chunks = (d + 7) / 8;
  // Row by row: each row of X is read sequentially, which the prefetchers follow.
  for (Index i = 0; i < rows; ++i) {
    const float* x = X + (begin + i) * d;
    for (Index c = 0; c < chunks; ++c) {
      const Index j = c * 8;
      const __mmask8 m = lanes(d - j);
      const __m512d o = _mm512_maskz_loadu_pd(m, offset + j);
      const __m256 xf = _mm256_maskz_loadu_ps(m, x + j);
      _mm512_storeu_pd(pack + (c * rows + i) * 8, _mm512_maskz_sub_pd(m, _mm512_cvtps_pd(xf), o));
    }
  }
}

// Log-density terms of R rows for a tile of KT components over the column chunks [c0, c1):
// R x KT vector accumulators, carried between slices in `carry` and reduced across lanes after
// the last one. wm, wp are packed [chunk][component][8 lanes].
template <int KT, int R, bool Squares, bool Norms>
FEDNODE_AVX512 void estep_rows(const double* pack, Index rows, Index c0, Index c1,
                               Index i0, int K, int k0, const double* wm, const double* wp,
                               double* carry, bool first, bool last, double* out, double* norms) {
  __m512d acc[R][KT], nacc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    nacc[r] = first ? _mm512_setzero_pd() : _mm512_loadu_pd(carry + (R * KT + r) * 8);
#pragma GCC unroll 16
    for (int t = 0; t < KT; ++t)
      acc[r][t] = first ? _mm512_setzero_pd() : _mm512_loadu_pd(carry + (r * KT + t) * 8);
  }
  for (Index c = c0; c < c1; ++c) {
    __m512d v[R], s[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      v[r] = _mm512_loadu_pd(pack + (c * rows + i0 + r) * 8);
      s[r] = _mm512_mul_pd(v[r], v[r]);
      if (Norms) nacc[r] = _mm512_add_pd(nacc[r], s[r]);
    }
    const double* a_base = wm + (c * K + k0) * 8;
    const double* b_base = Squares ? wp + (c * K + k0) * 8 : nullptr;
#pragma GCC unroll 16
    for (int t = 0; t < KT; ++t) {
      const __m512d a = _mm512_loadu_pd(a_base + t * 8);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_pd(v[r], a, acc[r][t]);
      if (Squares) {
        const __m512d b = _mm512_loadu_pd(b_base + t * 8);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_pd(s[r], b, acc[r][t]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    if (last) {
#pragma GCC unroll 16
      for (int t = 0; t < KT; ++t) out[(i0 + r) * K + k0 + t] = _mm512_reduce_add_pd(acc[r][t]);
      if (Norms) norms[i0 + r] = _mm512_reduce_add_pd(nacc[r]);
    } else {
#pragma GCC unroll 16
      for (int t = 0; t < KT; ++t) _mm512_storeu_pd(carry + (r * KT + t) * 8, acc[r][t]);
      if (Norms) _mm512_storeu_pd(carry + (R * KT + r) * 8, nacc[r]);
    }
  }
}

// Column chunks per slice: a slice of wm and wp for 10 components (20 KiB) stays in L1 while
// every row of the block passes over it.
constexpr Index kSliceChunks = 16;
// Doubles of carried accumulators per pair of rows (2 x 10 components + 2 norms, 8 lanes each).
constexpr Index kCarryPerPair = (2 * 10 + 2) * 8;

template <int KT, bool Squares, bool Norms>
void estep_tile(const double* pack, Index rows, Index d, int K, int k0, const double* wm,
                const double* wp, double* out, double* norms, double* carry) {
  const Index chunks = (d + 7) / 8;
  for (Index c0 = 0; c0 < chunks; c0 += kSliceChunks) {
    const Index c1 = std::min(chunks, c0 + kSliceChunks);
    const bool first = c0 == 0, last = c1 == chunks;
    Index i = 0;
    for (; i + 2 <= rows; i += 2)
      estep_rows<KT, 2, Squares, Norms>(pack, rows, c0, c1, i, K, k0, wm, wp,
                                        carry + (i / 2) * kCarryPerPair, first, last, out, norms);
    if (i < rows)
      estep_rows<KT, 1, Squares, Norms>(pack, rows, c0, c1, i, K, k0, wm, wp,
                                        carry + (i / 2) * kCarryPerPair, first, last, out, norms);
  }
}

// One tile of KT components for 8 feature columns at a time, summed over the block's rows.
template <int KT, bool Squares>
FEDNODE_AVX512 void mstep_tile(const double* pack, Index rows, Index d, const double* resp, int K,
                               int k0, double* S) {
  const Index width = Squares ? 2 * d : d, chunks = (d + 7) / 8;
  for (Index c = 0; c < chunks; ++c) {
    const Index j = c * 8;
    const __mmask8 m = lanes(d - j);
    const double* col = pack + c * rows * 8;
    __m512d av[KT], as[KT];
#pragma GCC unroll 16
    for (int t = 0; t < KT; ++t) av[t] = as[t] = _mm512_setzero_pd();
    for (Index i = 0; i < rows; ++i) {
      const __m512d v = _mm512_loadu_pd(col + i * 8);
      const __m512d s = _mm512_mul_pd(v, v);
      const double* r = resp + i * K + k0;
#pragma GCC unroll 16
      for (int t = 0; t < KT; ++t) {
        const __m512d b = _mm512_set1_pd(r[t]);
        av[t] = _mm512_fmadd_pd(v, b, av[t]);
        if (Squares) as[t] = _mm512_fmadd_pd(s, b, as[t]);
      }
    }
#pragma GCC unroll 16
    for (int t = 0; t < KT; ++t) {
      double* sv = S + (k0 + t) * width + j;
      _mm512_mask_storeu_pd(sv, m, _mm512_add_pd(_mm512_maskz_loadu_pd(m, sv), av[t]));
      if (Squares) {
        double* ss = sv + d;
        _mm512_mask_storeu_pd(ss, m, _mm512_add_pd(_mm512_maskz_loadu_pd(m, ss), as[t]));
      }
    }
  }
}

// Tiles of at most kTile components; the last one takes the remainder.
constexpr int kTile = 10;

template <template <int> class Op, class... Args>
void over_tiles(int K, Args&&... args) {
  for (int k0 = 0; k0 < K; k0 += kTile) {
    switch (std::min(kTile, K - k0)) {
      case 1: Op<1>::run(k0, args...); break;
      case 2: Op<2>::run(k0, args...); break;
      case 3: Op<3>::run(k0, args...); break;
      case 4: Op<4>::run(k0, args...); break;
      case 5: Op<5>::run(k0, args...); break;
      case 6: Op<6>::run(k0, args...); break;
      case 7: Op<7>::run(k0, args...); break;
      case 8: Op<8>::run(k0, args...); break;
      case 9: Op<9>::run(k0, args...); break;
      default: Op<10>::run(k0, args...); break;
    }
  }
}

template <bool Squares>
struct EStep {
  template <int KT>
  struct Tile {
    static void run(int k0, const double* pack, Index rows, Index d, int K, const double* wm,
                    const double* wp, double* out, double* norms, double* carry) {
      // Row norms are needed once: in the first tile.
      if (norms && k0 == 0)
        estep_tile<KT, Squares, true>(pack, rows, d, K, k0, wm, wp, out, norms, carry);
      else
        estep_tile<KT, Squares, false>(pack, rows, d, K, k0, wm, wp, out, nullptr, carry);
    }
  };
};

template <bool Squares>
struct MStep {
  template <int KT>
  struct Tile {
    static void run(int k0, const double* pack, Index rows, Index d, const double* resp, int K,
                    double* S) {
      mstep_tile<KT, Squares>(pack, rows, d, resp, K, k0, S);
    }
  };
};

}  // namespace

std::vector<double> simd_pack_weights(const double* W, Index d, int K) {
  const Index chunks = (d + 7) / 8;
  std::vector<double> out(static_cast<size_t>(chunks * K * 8), 0.0);
  for (Index j = 0; j < d; ++j)
    for (int k = 0; k < K; ++k) out[static_cast<size_t>(((j / 8) * K + k) * 8 + j % 8)] = W[j * K + k];
  return out;
}

void simd_pack_block(const MatrixF& X, Index begin, Index rows, const VectorD& offset,
                     double* pack) {
  pack_rows(X.data(), X.cols(), begin, rows, offset.data(), pack);
}

void simd_estep(const double* pack, Index rows, Index d, int K, const double* wm,
                const double* wp, double* out, double* norms, std::vector<double>& carry) {
  carry.resize(static_cast<size_t>((rows + 1) / 2 * kCarryPerPair));
  if (wp)
    over_tiles<EStep<true>::Tile>(K, pack, rows, d, K, wm, wp, out, norms, carry.data());
  else
    over_tiles<EStep<false>::Tile>(K, pack, rows, d, K, wm, wp, out, norms, carry.data());
}

void simd_mstep(const double* pack, Index rows, Index d, const double* resp, int K, bool squares,
                double* S) {
  if (squares)
    over_tiles<MStep<true>::Tile>(K, pack, rows, d, resp, K, S);
  else
    over_tiles<MStep<false>::Tile>(K, pack, rows, d, resp, K, S);
}

#else  // no AVX-512 kernels on this compiler/architecture: simd_kernels_active() is false

std::vector<double> simd_pack_weights(const double*, Index, int) { return {}; }
void simd_pack_block(const MatrixF&, Index, Index, const VectorD&, double*) {}
void simd_estep(const double*, Index, Index, int, const double*, const double*, double*, double*,
                std::vector<double>&) {}
void simd_mstep(const double*, Index, Index, const double*, int, bool, double*) {}

#endif

}  // namespace fednode::gmm_detail
