#include "protocol/half.h"

#include <cfloat>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define FEDNODE_HAVE_F16C_PATH 1
#endif

namespace fednode::wire {
namespace {

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
void store_half(char* p, uint16_t h) { std::memcpy(p, &h, 2); }
uint16_t load_half(const char* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}
#else
void store_half(char* p, uint16_t h) {
  p[0] = static_cast<char>(h & 0xFF);
  p[1] = static_cast<char>(h >> 8);
}
uint16_t load_half(const char* p) {
  return static_cast<uint16_t>(static_cast<unsigned char>(p[0]) | (static_cast<unsigned char>(p[1]) << 8));
}
#endif

bool special(uint16_t h) { return (h & 0x7C00u) == 0x7C00u; }
bool nonpositive(uint16_t h) { return (h & 0x8000u) != 0 || (h & 0x7FFFu) == 0; }

// A double beyond float's range must not be converted (undefined behaviour); clamping keeps the
// conversion defined and still yields a float16 Inf, which flags the element.
float to_float(double v) {
  const double lim = static_cast<double>(FLT_MAX);
  return static_cast<float>(v < -lim ? -lim : (v > lim ? lim : v));
}
float to_float(float v) { return v; }

template <typename T>
bool encode_portable(const T* src, char* dst, size_t n, bool flag_nonpositive) {
  bool bad = false;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = fast_float_to_half(to_float(src[i]));
    bad |= special(h) || (flag_nonpositive && nonpositive(h));
    store_half(dst + 2 * i, h);
  }
  return bad;
}

template <typename T>
bool decode_portable(const char* src, T* dst, size_t n, bool flag_nonpositive) {
  bool bad = false;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = load_half(src + 2 * i);
    bad |= special(h) || (flag_nonpositive && nonpositive(h));
    dst[i] = static_cast<T>(fast_half_to_float(h));
  }
  return bad;
}

#ifdef FEDNODE_HAVE_F16C_PATH
// CPUID leaf 1, ECX bit 29 (F16C): clang 14's __builtin_cpu_supports knows "avx" but not "f16c".
bool cpu_has_f16c() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  }();
  return has;
}

// 8 halves: whether any is Inf/NaN, or (flag_nonpositive) +-0 or negative.
__attribute__((target("avx,f16c"))) __m128i flags(__m128i h, bool flag_nonpositive) {
  const __m128i exp = _mm_set1_epi16(0x7C00);
  __m128i f = _mm_cmpeq_epi16(_mm_and_si128(h, exp), exp);
  if (flag_nonpositive) {
    // As signed 16-bit integers the positive halves are exactly those above zero.
    f = _mm_or_si128(f, _mm_cmpgt_epi16(_mm_set1_epi16(1), h));
  }
  return f;
}

// cvtpd2ps turns doubles beyond float's range into Inf in hardware (no undefined behaviour at
// this level), and cvtps2ph rounds to nearest even, as float_to_half does.
__attribute__((target("avx,f16c"))) bool encode_f16c(const double* src, char* dst, size_t n, bool flag_nonpositive) {
  __m128i any = _mm_setzero_si128();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128 lo = _mm256_cvtpd_ps(_mm256_loadu_pd(src + i));
    const __m128 hi = _mm256_cvtpd_ps(_mm256_loadu_pd(src + i + 4));
    const __m128i h = _mm256_cvtps_ph(_mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1), _MM_FROUND_TO_NEAREST_INT);
    any = _mm_or_si128(any, flags(h, flag_nonpositive));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), h);
  }
  const bool tail = encode_portable(src + i, dst + 2 * i, n - i, flag_nonpositive);
  return (_mm_movemask_epi8(any) != 0) || tail;
}

__attribute__((target("avx,f16c"))) bool encode_f16c(const float* src, char* dst, size_t n, bool flag_nonpositive) {
  __m128i any = _mm_setzero_si128();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    any = _mm_or_si128(any, flags(h, flag_nonpositive));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), h);
  }
  const bool tail = encode_portable(src + i, dst + 2 * i, n - i, flag_nonpositive);
  return (_mm_movemask_epi8(any) != 0) || tail;
}

__attribute__((target("avx,f16c"))) bool decode_f16c(const char* src, double* dst, size_t n, bool flag_nonpositive) {
  __m128i any = _mm_setzero_si128();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    any = _mm_or_si128(any, flags(h, flag_nonpositive));
    const __m256 f = _mm256_cvtph_ps(h);
    _mm256_storeu_pd(dst + i, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
    _mm256_storeu_pd(dst + i + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
  }
  const bool tail = decode_portable(src + 2 * i, dst + i, n - i, flag_nonpositive);
  return (_mm_movemask_epi8(any) != 0) || tail;
}

__attribute__((target("avx,f16c"))) bool decode_f16c(const char* src, float* dst, size_t n, bool flag_nonpositive) {
  __m128i any = _mm_setzero_si128();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    any = _mm_or_si128(any, flags(h, flag_nonpositive));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  const bool tail = decode_portable(src + 2 * i, dst + i, n - i, flag_nonpositive);
  return (_mm_movemask_epi8(any) != 0) || tail;
}
#endif

}  // namespace

bool doubles_to_halves(const double* src, char* dst, size_t n, bool flag_nonpositive, bool portable) {
#ifdef FEDNODE_HAVE_F16C_PATH
  if (!portable && cpu_has_f16c()) return encode_f16c(src, dst, n, flag_nonpositive);
#endif
  return encode_portable(src, dst, n, flag_nonpositive);
}

bool floats_to_halves(const float* src, char* dst, size_t n, bool flag_nonpositive, bool portable) {
#ifdef FEDNODE_HAVE_F16C_PATH
  if (!portable && cpu_has_f16c()) return encode_f16c(src, dst, n, flag_nonpositive);
#endif
  return encode_portable(src, dst, n, flag_nonpositive);
}

bool halves_to_doubles(const char* src, double* dst, size_t n, bool flag_nonpositive, bool portable) {
#ifdef FEDNODE_HAVE_F16C_PATH
  if (!portable && cpu_has_f16c()) return decode_f16c(src, dst, n, flag_nonpositive);
#endif
  return decode_portable(src, dst, n, flag_nonpositive);
}

bool halves_to_floats(const char* src, float* dst, size_t n, bool flag_nonpositive, bool portable) {
#ifdef FEDNODE_HAVE_F16C_PATH
  if (!portable && cpu_has_f16c()) return decode_f16c(src, dst, n, flag_nonpositive);
#endif
  return decode_portable(src, dst, n, flag_nonpositive);
}

}  // namespace fednode::wire
