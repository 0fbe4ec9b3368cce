// Seeded random streams. Every draw in fednode comes from a stream derived from
// (run seed, node, class, purpose), so that the simulator and the networked node draw the
// same numbers, and no two (node, class) pairs ever share a stream (FedPFT's reference reuses
// one seed for every GMM, which makes all synthetic draws identical across classes and clients).
// The generators are written out here rather than taken from <random>'s distributions, whose
// output is implementation-defined: the same seed must give the same features everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace fednode {

enum class Purpose : uint64_t {
  Partition = 1,
  KMeansInit = 2,
  GmmSampling = 3,
  DpNoise = 4,
  HeadInit = 5,
  HeadShuffle = 6,
  Prototypes = 7,
  FeatureExpansion = 8,  // the shared random projection of features/expansion.h
  HeadValidation = 9,    // the held-out part of a head's training set (methods/heads/train_common.h)
  DpStatsNoise = 10,     // DP-FedCGS's noise on A, N and B (drawn with core/secret_rng.h)
  ModelInit = 11,        // a federation's shared model initialisation (FedMITR's ViT)
  ModelInversion = 12,   // FedMITR's receiver: each stage's noise, targets and distillation order
  Synthesis = 13,        // FGL: the latent noise a generator draws a request's images from
  GeneratorTraining = 14,  // `fednode train-generator`: initialisation, batches and noise
  TopologyBuild = 20,  // random graphs of `fednode topology graph`
  Generic = 99,
};

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Mixes any number of keys into one 64-bit seed; order matters.
inline uint64_t derive_seed(uint64_t base, std::initializer_list<uint64_t> keys) {
  uint64_t state = base;
  uint64_t out = splitmix64(state);
  for (uint64_t k : keys) {
    state ^= k + 0x632BE59BD9B4E019ULL + (out << 6) + (out >> 2);
    out = splitmix64(state);
  }
  return out;
}

// Standard normals by Box-Muller from a source of uniforms in [0, 1), two at a time, the second
// kept for the next call: shared by Rng and SecretRng (core/secret_rng.h).
class BoxMuller {
 public:
  template <class Uniform>
  double draw(Uniform&& uniform) {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1;
    do u1 = uniform(); while (u1 <= 0.0);
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  double spare_ = 0;
  bool has_spare_ = false;
};

// xoshiro256** with explicit, portable uniform and normal draws.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t sm = seed;
    for (auto& w : s_) w = splitmix64(sm);
  }
  static Rng stream(uint64_t base, Purpose p, uint64_t node = 0, uint64_t cls = 0) {
    return Rng(derive_seed(base, {static_cast<uint64_t>(p), node, cls}));
  }

  using result_type = uint64_t;
  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return ~0ULL; }
  uint64_t operator()() { return next(); }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n), unbiased.
  uint64_t below(uint64_t n) {
    if (n == 0) return 0;
    const uint64_t limit = max() - max() % n;
    uint64_t v;
    do v = next(); while (v >= limit);
    return v % n;
  }
  // Standard normal by Box-Muller, caching the second value.
  double normal() {
    return normals_.draw([this] { return uniform(); });
  }
  // Gamma(shape, 1) by Marsaglia-Tsang; used for Dirichlet draws.
  double gamma(double shape) {
    if (shape < 1.0) {
      const double u = uniform();
      return gamma(shape + 1.0) * std::pow(u > 0 ? u : 1e-300, 1.0 / shape);
    }
    const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x, v;
      do {
        x = normal();
        v = 1.0 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const double u = uniform();
      if (u < 1 - 0.0331 * x * x * x * x) return d * v;
      if (std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v;
    }
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  BoxMuller normals_;
};

}  // namespace fednode
