// The bulk float16 conversions used for tensors (portable and F16C paths) are bit-identical to
// core/float16.h, which the simulator uses: a 16-bit transfer over the network and in the
// simulator must give the same numbers.
#include "protocol/half.h"

#include "core/float16.h"
#include "core/rng.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

namespace fednode {
namespace {

using wire::bits_float;
using wire::float_bits;

std::vector<float> interesting_floats() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00u) == 0x7C00u) continue;  // Inf and NaN: refused before conversion
    const float f = half_to_float(static_cast<uint16_t>(h));
    v.push_back(f);
    v.push_back(std::nextafter(f, 1e30f));
    v.push_back(std::nextafter(f, -1e30f));
    // Halfway to the next half: the ties that round-to-even decides.
    const float g = half_to_float(static_cast<uint16_t>(h + 1));
    if (std::isfinite(g)) v.push_back(static_cast<float>((static_cast<double>(f) + g) / 2));
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e5f, -1e5f, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-8f, 3e-8f, 5.96e-8f,
                  2.98e-8f, 2.9802322e-8f})
    v.push_back(f);
  Rng rng = Rng::stream(16, Purpose::Generic);
  for (int i = 0; i < 200000; ++i) {
    const float f = bits_float(static_cast<uint32_t>(rng.next()));
    if (std::isfinite(f)) v.push_back(f);
  }
  return v;
}

uint16_t stored(const std::vector<char>& bytes, size_t i) {
  return static_cast<uint16_t>(static_cast<unsigned char>(bytes[2 * i]) |
                               (static_cast<unsigned char>(bytes[2 * i + 1]) << 8));
}

TEST(ProtocolHalf, ScalarMatchesReferenceOnEveryHalfAndEdge) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float a = half_to_float(static_cast<uint16_t>(h)), b = wire::fast_half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(a)) EXPECT_TRUE(std::isnan(b));
    else ASSERT_EQ(float_bits(a), float_bits(b)) << std::hex << h;
  }
  for (float f : interesting_floats()) ASSERT_EQ(float_to_half(f), wire::fast_float_to_half(f)) << f;
}

TEST(ProtocolHalf, BulkPathsMatchReference) {
  const std::vector<float> floats = interesting_floats();
  std::vector<double> doubles(floats.begin(), floats.end());
  // Doubles that are not floats exercise the double -> float -> half path.
  Rng rng = Rng::stream(17, Purpose::Generic);
  for (int i = 0; i < 100000; ++i) doubles.push_back((rng.uniform() - 0.5) * std::ldexp(1.0, static_cast<int>(rng.below(60)) - 40));
  for (bool portable : {true, false}) {
    std::vector<char> out(2 * doubles.size());
    wire::doubles_to_halves(doubles.data(), out.data(), doubles.size(), false, portable);
    for (size_t i = 0; i < doubles.size(); ++i) {
      const uint16_t expected = float_to_half(static_cast<float>(std::max(std::min(doubles[i], double(FLT_MAX)), -double(FLT_MAX))));
      ASSERT_EQ(stored(out, i), expected) << doubles[i] << (portable ? " portable" : " f16c");
    }
    std::vector<char> out32(2 * floats.size());
    wire::floats_to_halves(floats.data(), out32.data(), floats.size(), false, portable);
    for (size_t i = 0; i < floats.size(); ++i) ASSERT_EQ(stored(out32, i), float_to_half(floats[i])) << floats[i];

    std::vector<char> all(2 * 0x10000);
    for (uint32_t h = 0; h < 0x10000; ++h) {
      all[2 * h] = static_cast<char>(h & 0xFF);
      all[2 * h + 1] = static_cast<char>(h >> 8);
    }
    std::vector<float> back32(0x10000);
    std::vector<double> back64(0x10000);
    EXPECT_TRUE(wire::halves_to_floats(all.data(), back32.data(), 0x10000, false, portable));  // Inf/NaN are in there
    EXPECT_TRUE(wire::halves_to_doubles(all.data(), back64.data(), 0x10000, false, portable));
    for (uint32_t h = 0; h < 0x10000; ++h) {
      if ((h & 0x7C00u) == 0x7C00u) continue;
      ASSERT_EQ(float_bits(back32[h]), float_bits(half_to_float(static_cast<uint16_t>(h)))) << h;
      ASSERT_EQ(back64[h], static_cast<double>(half_to_float(static_cast<uint16_t>(h)))) << h;
    }
  }
}

TEST(ProtocolHalf, Flags) {
  for (bool portable : {true, false}) {
    for (size_t n : {size_t{3}, size_t{8}, size_t{19}}) {
      for (size_t at = 0; at < n; ++at) {
        std::vector<double> v(n, 1.5);
        std::vector<char> out(2 * n);
        EXPECT_FALSE(wire::doubles_to_halves(v.data(), out.data(), n, true, portable));
        for (double bad : {1e5, std::numeric_limits<double>::infinity(), std::nan(""), 1e300}) {
          v[at] = bad;
          EXPECT_TRUE(wire::doubles_to_halves(v.data(), out.data(), n, false, portable)) << bad << " at " << at;
        }
        v[at] = 1e-9;  // becomes 0: flagged only when asked
        EXPECT_FALSE(wire::doubles_to_halves(v.data(), out.data(), n, false, portable));
        EXPECT_TRUE(wire::doubles_to_halves(v.data(), out.data(), n, true, portable));
        std::vector<float> back(n);
        v[at] = 2.0;
        wire::doubles_to_halves(v.data(), out.data(), n, false, portable);
        EXPECT_FALSE(wire::halves_to_floats(out.data(), back.data(), n, false, portable));
        out[2 * at + 1] = static_cast<char>(0x7C);  // Inf
        EXPECT_TRUE(wire::halves_to_floats(out.data(), back.data(), n, false, portable));
      }
    }
  }
}

// Variances: +-0 and negative values are flagged when asked, by encoders and decoders alike, at
// any place in a run (the F16C path's blocks of 8 and the tail).
TEST(ProtocolHalf, FlagsValuesThatAreNotPositive) {
  for (bool portable : {true, false}) {
    for (size_t n : {size_t{3}, size_t{8}, size_t{19}}) {
      for (size_t at = 0; at < n; ++at) {
        for (double bad : {-1.5, -0.0, 0.0, -1e-9, -65504.0}) {
          std::vector<double> v(n, 1.5);
          std::vector<char> out(2 * n);
          v[at] = bad;
          EXPECT_TRUE(wire::doubles_to_halves(v.data(), out.data(), n, true, portable)) << bad << " at " << at;
          EXPECT_FALSE(wire::doubles_to_halves(v.data(), out.data(), n, false, portable)) << bad << " at " << at;
          std::vector<float> vf(v.begin(), v.end());
          EXPECT_TRUE(wire::floats_to_halves(vf.data(), out.data(), n, true, portable)) << bad << " at " << at;
          std::vector<double> back(n);
          std::vector<float> back32(n);
          EXPECT_TRUE(wire::halves_to_doubles(out.data(), back.data(), n, true, portable)) << bad << " at " << at;
          EXPECT_TRUE(wire::halves_to_floats(out.data(), back32.data(), n, true, portable)) << bad << " at " << at;
          EXPECT_FALSE(wire::halves_to_doubles(out.data(), back.data(), n, false, portable)) << bad << " at " << at;
          EXPECT_EQ(back[at], static_cast<double>(static_cast<float>(bad == -1e-9 ? -0.0 : bad)));
        }
        // The smallest positive half is positive.
        std::vector<char> tiny(2 * n, 0);
        for (size_t i = 0; i < n; ++i) tiny[2 * i] = 1;
        std::vector<double> back(n);
        EXPECT_FALSE(wire::halves_to_doubles(tiny.data(), back.data(), n, true, portable));
      }
    }
  }
}

}  // namespace
}  // namespace fednode
