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
std::atomic<MstepKernel> mstep_kernel{MstepKernel::Auto};

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
void set_mstep_kernel(MstepKernel kernel) { mstep_kernel.store(kernel, std::memory_order_relaxed); }

#ifdef FEDNODE_HAVE_AVX512_KERNELS

namespace {

// Mask of the first `count` (<= 8) lanes.
inline __mmask8 lanes(Index count) {
  return static_cast<__mmask8>(count >= 8 ? 0xFF : (1u << count) - 1u);
}

// The 8 values of row `x` from column j on, as doubles minus the offset; lanes past d (masked
// off in m) are zero, as are the packed weights there.
FEDNODE_AVX512 inline __m512d centred(const float* x, const double* offset, Index j, __mmask8 m) {
  return _mm512_maskz_sub_pd(m, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x + j)),
                             _mm512_maskz_loadu_pd(m, offset + j));
}

// Log-density terms of R rows for a tile of KT components over the column chunks [c0, c1):
// R x KT vector accumulators, carried between slices in `carry` and reduced across lanes after
// the last one. wm, wp are packed [chunk][component][8 lanes].
template <int KT, int R, bool Squares, bool Norms>
FEDNODE_AVX512 void estep_rows(const Block& block, Index c0, Index c1, Index i0, int K, int k0,
                               const double* wm, const double* wp,
                               double* carry, bool first, bool last, double* out, double* norms) {
  __m512d acc[R][KT], nacc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    nacc[r] = first ? _mm512_setzero_pd() : _mm512_loadu_pd(carry + (R * KT + r) * 8);
#pragma GCC unroll 16
    for (int t = 0; t < KT; ++t)
      acc[r][t] = first ? _mm512_setzero_pd() : _mm512_loadu_pd(carry + (r * KT + t) * 8);
  }
  const float* x = block.X + (block.begin + i0) * block.d;
  for (Index c = c0; c < c1; ++c) {
    const __mmask8 m = lanes(block.d - c * 8);
    __m512d v[R], s[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      v[r] = centred(x + r * block.d, block.offset, c * 8, m);
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

// Column chunks per slice: a slice of wm and wp (at most 20 KiB) stays in L1 while every row
// of the block passes over it.
constexpr Index kSliceChunks = 16;
// The E-step's register tile: 4 rows x 5 components (20 accumulators), so that each weight
// loaded serves 4 rows; 2 x 10 loaded as many weights as it did FMAs, which bounded the kernel
// by loads on cores that load one 64-byte vector a cycle (Zen 4).
constexpr int kEstepRows = 4, kEstepTile = 5;
// Doubles of carried accumulators per group of rows (rows x components + a norm a row, 8 lanes).
constexpr Index kCarryPerGroup = (kEstepRows * kEstepTile + kEstepRows) * 8;

template <int KT, bool Squares, bool Norms>
void estep_tile(const Block& block, int K, int k0, const double* wm, const double* wp, double* out,
                double* norms, double* carry) {
  const Index chunks = (block.d + 7) / 8, rows = block.rows;
  for (Index c0 = 0; c0 < chunks; c0 += kSliceChunks) {
    const Index c1 = std::min(chunks, c0 + kSliceChunks);
    const bool first = c0 == 0, last = c1 == chunks;
    Index i = 0;
    for (; i + kEstepRows <= rows; i += kEstepRows)
      estep_rows<KT, kEstepRows, Squares, Norms>(block, c0, c1, i, K, k0, wm, wp,
                                                 carry + (i / kEstepRows) * kCarryPerGroup, first, last, out, norms);
    // The last group's rows, two and one at a time, in the group's own carry.
    double* rest = carry + (i / kEstepRows) * kCarryPerGroup;
    if (i + 2 <= rows) {
      estep_rows<KT, 2, Squares, Norms>(block, c0, c1, i, K, k0, wm, wp, rest, first, last, out, norms);
      rest += (2 * KT + 2) * 8;
      i += 2;
    }
    if (i < rows) estep_rows<KT, 1, Squares, Norms>(block, c0, c1, i, K, k0, wm, wp, rest, first, last, out, norms);
  }
}

// One tile of KT components for 8 feature columns at a time, summed over the block's rows.
template <int KT, bool Squares>
FEDNODE_AVX512 void mstep_tile(const Block& block, const double* resp, int K, int k0, double* S) {
  const Index d = block.d, width = Squares ? 2 * d : d, chunks = (d + 7) / 8;
  const float* x = block.X + block.begin * d;
  for (Index c = 0; c < chunks; ++c) {
    const Index j = c * 8;
    const __mmask8 m = lanes(d - j);
    const __m512d o = _mm512_maskz_loadu_pd(m, block.offset + j);
    __m512d av[KT], as[KT];
#pragma GCC unroll 16
    for (int t = 0; t < KT; ++t) av[t] = as[t] = _mm512_setzero_pd();
    for (Index i = 0; i < block.rows; ++i) {
      const __m512d v = _mm512_maskz_sub_pd(m, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x + i * d + j)), o);
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

// The M-step of one component over the rows with a nonzero responsibility (`rows`, ascending),
// G column chunks at a time from chunk c0: the dense kernel's accumulators, fed the same terms in
// the same order, less the terms r * v with r exactly zero, which leave an accumulator as it was.
// G chunks give 2G independent chains, so the FMA latency does not serialise one row's terms.
template <int G, bool Squares>
FEDNODE_AVX512 void mstep_listed(const Block& block, const double* resp, int K, int k, const Index* rows,
                                 Index count, Index c0, double* S) {
  const Index d = block.d, width = Squares ? 2 * d : d;
  __mmask8 m[G];
  __m512d o[G], av[G], as[G];
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
    m[g] = lanes(d - (c0 + g) * 8);
    o[g] = _mm512_maskz_loadu_pd(m[g], block.offset + (c0 + g) * 8);
    av[g] = as[g] = _mm512_setzero_pd();
  }
  const float* x = block.X + block.begin * d + c0 * 8;
  for (Index t = 0; t < count; ++t) {
    const Index i = rows[t];
    const __m512d b = _mm512_set1_pd(resp[i * K + k]);
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const __m512d v = _mm512_maskz_sub_pd(m[g], _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m[g], x + i * d + g * 8)), o[g]);
      av[g] = _mm512_fmadd_pd(v, b, av[g]);
      if (Squares) as[g] = _mm512_fmadd_pd(_mm512_mul_pd(v, v), b, as[g]);
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
    double* sv = S + k * width + (c0 + g) * 8;
    _mm512_mask_storeu_pd(sv, m[g], _mm512_add_pd(_mm512_maskz_loadu_pd(m[g], sv), av[g]));
    if (Squares) {
      double* ss = sv + d;
      _mm512_mask_storeu_pd(ss, m[g], _mm512_add_pd(_mm512_maskz_loadu_pd(m[g], ss), as[g]));
    }
  }
}

template <bool Squares>
void mstep_sparse(const Block& block, const double* resp, int K, double* S, std::vector<Index>& rows) {
  const Index chunks = (block.d + 7) / 8;
  rows.resize(static_cast<size_t>(block.rows));
  for (int k = 0; k < K; ++k) {
    Index count = 0;
    for (Index i = 0; i < block.rows; ++i)
      if (resp[i * K + k] != 0) rows[static_cast<size_t>(count++)] = i;
    if (count == 0) continue;
    Index c = 0;
    for (; c + 4 <= chunks; c += 4) mstep_listed<4, Squares>(block, resp, K, k, rows.data(), count, c, S);
    for (; c < chunks; ++c) mstep_listed<1, Squares>(block, resp, K, k, rows.data(), count, c, S);
  }
}

// Tiles of at most Tile (<= 10) components; the last one takes the remainder.
template <int Tile, template <int> class Op, class... Args>
void over_tiles(int K, Args&&... args) {
  static_assert(Tile >= 1 && Tile <= 10);
  for (int k0 = 0; k0 < K; k0 += Tile) {
    switch (std::min(Tile, K - k0)) {
      case 1: Op<1>::run(k0, args...); break;
      case 2: if constexpr (Tile >= 2) Op<2>::run(k0, args...); break;
      case 3: if constexpr (Tile >= 3) Op<3>::run(k0, args...); break;
      case 4: if constexpr (Tile >= 4) Op<4>::run(k0, args...); break;
      case 5: if constexpr (Tile >= 5) Op<5>::run(k0, args...); break;
      case 6: if constexpr (Tile >= 6) Op<6>::run(k0, args...); break;
      case 7: if constexpr (Tile >= 7) Op<7>::run(k0, args...); break;
      case 8: if constexpr (Tile >= 8) Op<8>::run(k0, args...); break;
      case 9: if constexpr (Tile >= 9) Op<9>::run(k0, args...); break;
      default: if constexpr (Tile >= 10) Op<10>::run(k0, args...); break;
    }
  }
}

// The M-step's tile: 10 components share each row loaded.
constexpr int kMstepTile = 10;

template <bool Squares>
struct EStep {
  template <int KT>
  struct Tile {
    static void run(int k0, const Block& block, int K, const double* wm, const double* wp, double* out,
                    double* norms, double* carry) {
      // Row norms are needed once: in the first tile.
      if (norms && k0 == 0)
        estep_tile<KT, Squares, true>(block, K, k0, wm, wp, out, norms, carry);
      else
        estep_tile<KT, Squares, false>(block, K, k0, wm, wp, out, nullptr, carry);
    }
  };
};

template <bool Squares>
struct MStep {
  template <int KT>
  struct Tile {
    static void run(int k0, const Block& block, const double* resp, int K, double* S) {
      mstep_tile<KT, Squares>(block, resp, K, k0, S);
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

void simd_estep(const Block& block, int K, const double* wm, const double* wp, double* out, double* norms,
                std::vector<double>& carry) {
  carry.resize(static_cast<size_t>((block.rows + kEstepRows - 1) / kEstepRows * kCarryPerGroup));
  if (wp)
    over_tiles<kEstepTile, EStep<true>::Tile>(K, block, K, wm, wp, out, norms, carry.data());
  else
    over_tiles<kEstepTile, EStep<false>::Tile>(K, block, K, wm, wp, out, norms, carry.data());
}

void simd_mstep(const Block& block, const double* resp, int K, bool squares, double* S,
                std::vector<Index>& rows) {
  // Separated components leave most responsibilities exactly zero (exp underflows): then
  // visiting only the nonzero ones is cheaper than the dense tile, which loads a row once for
  // all components, and gives the same bits.
  const MstepKernel kernel = mstep_kernel.load(std::memory_order_relaxed);
  bool sparse = kernel == MstepKernel::Sparse;
  if (kernel == MstepKernel::Auto) {
    Index nonzero = 0;
    for (Index e = 0; e < block.rows * K; ++e) nonzero += resp[e] != 0;
    sparse = nonzero * kSparseRatio <= block.rows * K;
  }
  if (sparse) {
    if (squares)
      mstep_sparse<true>(block, resp, K, S, rows);
    else
      mstep_sparse<false>(block, resp, K, S, rows);
    return;
  }
  if (squares)
    over_tiles<kMstepTile, MStep<true>::Tile>(K, block, resp, K, S);
  else
    over_tiles<kMstepTile, MStep<false>::Tile>(K, block, resp, K, S);
}

#else  // no AVX-512 kernels on this compiler/architecture: simd_kernels_active() is false

std::vector<double> simd_pack_weights(const double*, Index, int) { return {}; }
void simd_estep(const Block&, int, const double*, const double*, double*, double*, std::vector<double>&) {}
void simd_mstep(const Block&, const double*, int, bool, double*, std::vector<Index>&) {}

#endif

}  // namespace fednode::gmm_detail
