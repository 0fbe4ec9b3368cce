// Knowledge payloads: one variant per method (docs/protocol.md, "knowledge").
#include "protocol/payload_parts.h"
#include "methods/registry.h"
#include "protocol/tensor.h"
#include "protocol/wire_body_msgpack.h"

#include "core/float16.h"
#include "core/parallel.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

namespace fednode {

using namespace wire;

namespace {

// Below this many bytes of parameters, checking them on one thread is quicker than waking the pool.
constexpr uint64_t kParallelCheckBytes = uint64_t{1} << 20;

[[noreturn]] void fail(ProtocolErrorCode code, const std::string& message) { throw ProtocolError(code, message); }

std::string dims(Eigen::Index r, Eigen::Index c) { return std::to_string(r) + "x" + std::to_string(c); }

Eigen::Index covariance_rows(CovarianceType t, Eigen::Index K, Eigen::Index d) {
  return t == CovarianceType::Full ? K * d : K;
}
Eigen::Index covariance_cols(CovarianceType t, Eigen::Index d) {
  return t == CovarianceType::Spherical ? 1 : d;
}

// The rules of GaussianMixture::validate, each with its own code. Finiteness is checked only on
// request: tensor encoding and decoding already refuse NaN/Inf in the same pass as converting,
// and a second pass over megabytes of parameters is what this avoids.
void check_mixture(const GaussianMixture& g, int dim, const std::string& where, bool check_finite) {
  const Eigen::Index K = g.weights.size(), d = dim;
  if (K < 1) fail(ProtocolErrorCode::InvalidValue, where + ": mixture has no components");
  expect_dims(g.means, K, d, where + ".means");
  expect_dims(g.covariances, covariance_rows(g.type, K, d), covariance_cols(g.type, d), where + ".covariances");
  if (check_finite) {
    expect_finite(g.weights, where + ".weights");
    expect_finite(g.means, where + ".means");
    expect_finite(g.covariances, where + ".covariances");
  }
  if ((g.weights.array() < 0).any() || std::abs(g.weights.sum() - 1.0) > 1e-2)
    fail(ProtocolErrorCode::InvalidValue, where + ".weights: must be non-negative and sum to 1 (sum is " +
                                              std::to_string(g.weights.sum()) + ")");
  if (g.type == CovarianceType::Full) {
    for (Eigen::Index k = 0; k < K; ++k)
      if ((g.covariances.block(k * d, 0, d, d).diagonal().array() <= 0).any())
        fail(ProtocolErrorCode::InvalidValue, where + ".covariances: component " + std::to_string(k) +
                                                  " has a non-positive variance");
  } else if (!(g.covariances.minCoeff<Eigen::PropagateNumbers>() > 0)) {
    // A vectorised minimum, not (x <= 0).any(), which Eigen evaluates one value at a time: this
    // reads every variance of a multi-megabyte message before it is sent and after it arrives.
    // NaNs are ignored here as .any() ignored them; the conversion refuses them (check_finite).
    fail(ProtocolErrorCode::InvalidValue, where + ".covariances: variances must be positive");
  }
}

// A received spec must be one the receiver can run, and must describe the knowledge's images
// and classes; checked before its parameters are allocated.
void check_spec(const VitSpec& spec, const Knowledge& k, const std::string& at) {
  try {
    spec.validate(at);
  } catch (const InputError& e) {
    fail(ProtocolErrorCode::InvalidValue, e.what());
  }
  if (spec.classes != k.num_classes)
    fail(ProtocolErrorCode::DimensionMismatch, at + ": a model of " + std::to_string(spec.classes) +
                                                   " classes in knowledge of " + std::to_string(k.num_classes));
  if (spec.pixels() != k.dim)
    fail(ProtocolErrorCode::DimensionMismatch, at + ": a model of " + std::to_string(spec.pixels()) +
                                                   " pixels per image in knowledge of dimension " + std::to_string(k.dim));
}

// Knowledge of one entry per contributor (FedMITR's models, FGL's shards), no more, no fewer: the
// entries' owners, in order, are the contributors. `list` is the entries' path, `noun` one entry.
template <typename Entry>
void check_one_per_contributor(const std::vector<Entry>& entries, const Knowledge& k, const std::string& list,
                               const std::string& noun) {
  if (entries.size() != k.contributors.size())
    fail(ProtocolErrorCode::InvalidValue, list + ": " + std::to_string(entries.size()) + " " + noun + "s for " +
                                              std::to_string(k.contributors.size()) + " contributors");
  auto owner = k.contributors.begin();
  for (size_t i = 0; i < entries.size(); ++i, ++owner)
    if (entries[i].owner != *owner)
      fail(ProtocolErrorCode::InvalidValue, list + "[" + std::to_string(i) + "].owner: " +
                                                std::to_string(entries[i].owner) + ", expected contributor " +
                                                std::to_string(*owner) + " (one " + noun + " per contributor, in order)");
}

void check_models(const ModelKnowledge& m, const Knowledge& k, const std::string& where, bool check_finite) {
  check_one_per_contributor(m.models, k, where + ".body.models", "model");
  for (size_t i = 0; i < m.models.size(); ++i) {
    const auto& c = m.models[i];
    const std::string at = where + ".body.models[" + std::to_string(i) + "]";
    if (c.count < 1) fail(ProtocolErrorCode::InvalidValue, at + ".count: must be at least 1");
    check_spec(c.model.spec, k, at + ".spec");
    if (static_cast<int64_t>(c.model.parameters.size()) != c.model.spec.parameter_count())
      fail(ProtocolErrorCode::DimensionMismatch, at + ".parameters: " + std::to_string(c.model.parameters.size()) +
                                                     " values, the spec has " +
                                                     std::to_string(c.model.spec.parameter_count()));
    if (check_finite)
      for (float v : c.model.parameters)
        if (!std::isfinite(v)) fail(ProtocolErrorCode::InvalidValue, at + ".parameters: NaN or Inf");
  }
}

// Prompt text goes to a generator as a JSON string and to a command's input file: it must be
// UTF-8 without control characters, so that no peer can break a line of that file or a log.
void check_text(std::string_view s, const std::string& at, bool may_be_empty) {
  if (s.empty() && !may_be_empty) fail(ProtocolErrorCode::InvalidValue, at + ": empty");
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      if (b < 0x20 || b == 0x7f)
        fail(ProtocolErrorCode::InvalidValue, at + ": control character at byte " + std::to_string(i));
      ++i;
      continue;
    }
    const int extra = (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : (b & 0xF8) == 0xF0 ? 3 : -1;
    uint32_t code = extra == 1 ? b & 0x1F : extra == 2 ? b & 0x0F : b & 0x07;
    if (extra < 0 || i + static_cast<size_t>(extra) >= s.size())
      fail(ProtocolErrorCode::InvalidValue, at + ": not UTF-8 at byte " + std::to_string(i));
    for (int j = 1; j <= extra; ++j) {
      const auto c = static_cast<unsigned char>(s[i + static_cast<size_t>(j)]);
      if ((c & 0xC0) != 0x80) fail(ProtocolErrorCode::InvalidValue, at + ": not UTF-8 at byte " + std::to_string(i));
      code = (code << 6) | (c & 0x3F);
    }
    const uint32_t least = extra == 1 ? 0x80 : extra == 2 ? 0x800 : 0x10000;
    if (code < least || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF) || (code >= 0x80 && code < 0xA0))
      fail(ProtocolErrorCode::InvalidValue, at + ": not UTF-8 text at byte " + std::to_string(i));
    i += static_cast<size_t>(extra) + 1;
  }
}

// Per shard, classes as every per-class list; captions at most one per sample.
void check_prompts(const PromptKnowledge& p, const Knowledge& k, const std::string& where) {
  check_one_per_contributor(p.shards, k, where + ".body.shards", "shard");
  for (size_t i = 0; i < p.shards.size(); ++i) {
    const PromptShard& shard = p.shards[i];
    const std::string at = where + ".body.shards[" + std::to_string(i) + "]";
    if (shard.classes.empty()) fail(ProtocolErrorCode::InvalidValue, at + ".classes: empty");
    int previous = -1;
    for (size_t j = 0; j < shard.classes.size(); ++j) {
      const ClassPrompts& c = shard.classes[j];
      const std::string cat = at + ".classes[" + std::to_string(j) + "]";
      check_class_entry(c.label, c.count, previous, k.num_classes, cat);
      previous = c.label;
      check_text(c.name, cat + ".name", false);
      check_text(c.prompt, cat + ".prompt", false);
      check_text(c.negative_prompt, cat + ".negative_prompt", true);
      if (static_cast<int64_t>(c.captions.size()) > c.count)
        fail(ProtocolErrorCode::InvalidValue, cat + ".captions: " + std::to_string(c.captions.size()) +
                                                  " captions for " + std::to_string(c.count) + " samples");
      for (size_t n = 0; n < c.captions.size(); ++n)
        check_text(c.captions[n], cat + ".captions[" + std::to_string(n) + "]", false);
    }
  }
}

// FedPFT: classes as every per-class list, each mixture by GaussianMixture::validate's rules, and
// the covariance sketch within the mixtures' samples.
void check_gmm(const GmmKnowledge& g, const Knowledge& k, const std::string& where, bool check_finite) {
  int previous = -1;
  uint64_t values = 0;
  for (size_t i = 0; i < g.classes.size(); ++i) {
    const auto& c = g.classes[i];
    check_class_entry(c.label, c.count, previous, k.num_classes, where + ".body.classes[" + std::to_string(i) + "]");
    previous = c.label;
    values += static_cast<uint64_t>(c.mixture.means.size() + c.mixture.covariances.size());
  }
  // The mixtures' checks read every parameter: on the pool for a multi-megabyte message.
  for_each_chunk_ordered(g.classes.size(), values * sizeof(double) >= kParallelCheckBytes, [&](size_t i) {
    check_mixture(g.classes[i].mixture, k.dim, where + ".body.classes[" + std::to_string(i) + "]", check_finite);
  });
  const auto& s = g.within_class;
  if (!s) return;
  const std::string at = where + ".body.within_class";
  int64_t samples = 0;
  for (const auto& c : g.classes) samples += c.count;
  if (s->residuals < 0 || s->residuals > samples)
    fail(ProtocolErrorCode::InvalidValue, at + ".residuals: " + std::to_string(s->residuals) + " outside [0, " +
                                              std::to_string(samples) + "], the samples of the mixtures");
  expect_dims(s->variances, k.dim, 1, at + ".variances");
  if (s->factor.cols() != k.dim || s->factor.rows() > k.dim)
    fail(ProtocolErrorCode::DimensionMismatch, at + ".factor: is " + dims(s->factor.rows(), s->factor.cols()) +
                                                   ", expected at most " + std::to_string(k.dim) + " rows of " +
                                                   std::to_string(k.dim));
  if (check_finite) {
    expect_finite(s->variances, at + ".variances");
    expect_finite(s->factor, at + ".factor");
  }
  if ((s->variances.array() < 0).any()) fail(ProtocolErrorCode::InvalidValue, at + ".variances: a variance is negative");
  if (s->residuals == 0 && (s->factor.rows() > 0 || (s->variances.array() != 0).any()))
    fail(ProtocolErrorCode::InvalidValue, at + ": summarises no residuals but is not empty");
}

// FedCGS: shapes, counts (negative only with noise), noise variances, and masked parts whose
// plain counterparts are zero.
void check_stats(const StatsKnowledge& s, const Knowledge& k, const std::string& where, bool check_finite) {
  expect_dims(s.A, k.num_classes, k.dim, where + ".body.A");
  expect_dims(s.B, k.dim, k.dim, where + ".body.B");
  if (s.N.size() != static_cast<size_t>(k.num_classes))
    fail(ProtocolErrorCode::DimensionMismatch, where + ".body.N: " + std::to_string(s.N.size()) + " counts for " +
                                                   std::to_string(k.num_classes) + " classes");
  // DP-FedCGS's noisy counts may be negative (docs/protocol.md, 6.2).
  for (size_t c = 0; c < s.N.size(); ++c)
    if (s.N[c] < 0 && !s.noise.any())
      fail(ProtocolErrorCode::InvalidValue, where + ".body.N[" + std::to_string(c) + "]: negative");
  for (double v : {s.noise.a, s.noise.n, s.noise.b})
    if (!(v >= 0) || !std::isfinite(v))
      fail(ProtocolErrorCode::InvalidValue, where + ".body.noise: a variance is negative, NaN or Inf");
  if (const auto& m = s.masked) {
    const size_t C = static_cast<size_t>(k.num_classes), d = static_cast<size_t>(k.dim);
    if (m->group.empty()) fail(ProtocolErrorCode::InvalidValue, where + ".body.masked.group: empty");
    if (m->N.size() != C || m->A.size() != (m->counts_only ? 0 : C * d) ||
        m->B.size() != (m->counts_only ? 0 : d * (d + 1) / 2))
      fail(ProtocolErrorCode::DimensionMismatch, where + ".body.masked: parts of the wrong size");
    // The masked parts' plain counterparts are left off the wire: they must hold nothing.
    const bool plain_left_out_empty = std::all_of(s.N.begin(), s.N.end(), [](int64_t n) { return n == 0; }) &&
                                      (m->counts_only || (s.A.isZero(0.0) && s.B.isZero(0.0)));
    if (!plain_left_out_empty)
      fail(ProtocolErrorCode::InvalidValue, where + ".body: a masked part's plain counterpart is not zero");
  }
  if (check_finite) {
    expect_finite(s.A, where + ".body.A");
    expect_finite(s.B, where + ".body.B");
  }
}

// The codec of the method that sends `k`'s kind (methods/wire_body.h); null for the kinds still
// encoded here.
const KnowledgeCodec* codec_of(const Knowledge& k) { return method_named(k.method_name()).codec.get(); }

void check_structure(const Knowledge& k, const std::string& where, bool check_finite) {
  if (k.dim < 1) fail(ProtocolErrorCode::InvalidValue, where + ": dim must be at least 1");
  if (k.num_classes < 1) fail(ProtocolErrorCode::InvalidValue, where + ": classes must be at least 1");
  if (k.contributors.empty()) fail(ProtocolErrorCode::InvalidValue, where + ": names no contributors");
  if (const KnowledgeCodec* codec = codec_of(k)) return codec->check(k, where, check_finite);
  if (auto* g = std::get_if<GmmKnowledge>(&k.payload)) check_gmm(*g, k, where, check_finite);
  else if (auto* s = std::get_if<StatsKnowledge>(&k.payload)) check_stats(*s, k, where, check_finite);
  else if (auto* m = std::get_if<ModelKnowledge>(&k.payload)) check_models(*m, k, where, check_finite);
  else if (auto* q = std::get_if<PromptKnowledge>(&k.payload)) check_prompts(*q, k, where);
}

// A variance that rounds to zero in float16 would make the receiver reject the whole message.
// Diagonal and spherical variances are checked while they are converted (pack_tensor's
// `nonzero`); for full covariances only the diagonal must stay positive.
void check_half_diagonals(const GaussianMixture& g, const std::string& where) {
  if (g.type != CovarianceType::Full) return;
  const Eigen::Index d = g.dim();
  for (Eigen::Index k = 0; k < g.components(); ++k)
    for (Eigen::Index j = 0; j < d; ++j) {
      const double v = g.covariances(k * d + j, j);
      if (!(round_to_half(static_cast<float>(v)) > 0.0f))
        fail(ProtocolErrorCode::InvalidValue, where + ".covariances: variance " + std::to_string(v) +
                                                  " underflows float16 to 0; transfer in float32");
    }
}

using Shape = std::vector<uint64_t>;
uint64_t u(Eigen::Index v) { return static_cast<uint64_t>(v); }

void pack_sketch(Packer& pk, std::string& out, const CovarianceSketch& s, DType dtype, TensorJobs* jobs) {
  const std::string at = "knowledge.body.within_class";
  pk.pack_map(3);
  pack_str(pk, "residuals");
  pk.pack_uint64(static_cast<uint64_t>(s.residuals));
  pack_str(pk, "variances");
  pack_tensor(pk, out, dtype, Layout::Dense, Shape{u(s.variances.size())}, s.variances.data(), at + ".variances", false,
              jobs);
  pack_str(pk, "factor");
  pack_tensor(pk, out, dtype, Layout::Dense, Shape{u(s.factor.rows()), u(s.factor.cols())}, s.factor.data(),
              at + ".factor", false, jobs);
}

void pack_gmm(Packer& pk, std::string& out, const GmmKnowledge& g, DType dtype, TensorJobs& jobs) {
  pk.pack_map(g.within_class ? 2 : 1);
  pack_str(pk, "classes");
  pk.pack_array(static_cast<uint32_t>(g.classes.size()));
  for (size_t i = 0; i < g.classes.size(); ++i) {
    const auto& c = g.classes[i];
    const GaussianMixture& m = c.mixture;
    const std::string at = "knowledge.body.classes[" + std::to_string(i) + "]";
    if (dtype == DType::F16) check_half_diagonals(m, at);
    const uint64_t K = u(m.components()), d = u(m.dim());
    pk.pack_map(6);
    pack_str(pk, "label");
    pk.pack_uint32(static_cast<uint32_t>(c.label));
    pack_str(pk, "count");
    pk.pack_uint64(static_cast<uint64_t>(c.count));
    pack_str(pk, "covariance");
    pack_str(pk, to_string(m.type));
    pack_str(pk, "weights");
    pack_tensor(pk, out, dtype, Layout::Dense, Shape{K}, m.weights.data(), at + ".weights", false, &jobs);
    pack_str(pk, "means");
    pack_tensor(pk, out, dtype, Layout::Dense, Shape{K, d}, m.means.data(), at + ".means", false, &jobs);
    pack_str(pk, "covariances");
    const std::string covariances = at + ".covariances";
    switch (m.type) {
      case CovarianceType::Full:
        pack_tensor(pk, out, dtype, Layout::Upper, Shape{K, d, d}, m.covariances.data(), covariances, false, &jobs);
        break;
      case CovarianceType::Diag:
        pack_tensor(pk, out, dtype, Layout::Dense, Shape{K, d}, m.covariances.data(), covariances, true, &jobs);
        break;
      case CovarianceType::Spherical:
        pack_tensor(pk, out, dtype, Layout::Dense, Shape{K}, m.covariances.data(), covariances, true, &jobs);
        break;
    }
  }
  if (g.within_class) {
    pack_str(pk, "within_class");
    pack_sketch(pk, out, *g.within_class, dtype, &jobs);
  }
}

// Ring elements (core/fixed_ring.h) as one bin: 16 bytes each, the low 64-bit word first, both
// little-endian (docs/protocol.md 6.2, "Masked statistics").
void pack_ring(Packer& pk, const std::vector<Ring128>& v) {
  std::string bytes(v.size() * 16, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint64_t lo = ring_low(v[i]), hi = ring_high(v[i]);
    for (int b = 0; b < 8; ++b) {
      bytes[16 * i + static_cast<size_t>(b)] = static_cast<char>(lo >> (8 * b));
      bytes[16 * i + 8 + static_cast<size_t>(b)] = static_cast<char>(hi >> (8 * b));
    }
  }
  pack_bin(pk, bytes);
}

std::vector<Ring128> read_ring(const msgpack::object& o, size_t count, const std::string& path) {
  const std::string_view bytes = as_bin(o, path);
  if (bytes.size() != count * 16)
    fail(ProtocolErrorCode::DimensionMismatch, path + ": " + std::to_string(bytes.size()) + " bytes, expected " +
                                                   std::to_string(count) + " ring elements of 16");
  std::vector<Ring128> v(count);
  for (size_t i = 0; i < count; ++i) {
    uint64_t lo = 0, hi = 0;
    for (int b = 7; b >= 0; --b) {
      lo = (lo << 8) | static_cast<uint8_t>(bytes[16 * i + static_cast<size_t>(b)]);
      hi = (hi << 8) | static_cast<uint8_t>(bytes[16 * i + 8 + static_cast<size_t>(b)]);
    }
    v[i] = ring_from_words(lo, hi);
  }
  return v;
}

void pack_masked(Packer& pk, const MaskedStats& m) {
  pk.pack_map(m.counts_only ? 3 : 5);
  pack_str(pk, "group");
  pack_contributors(pk, m.group);
  pack_str(pk, "parts");
  pack_str(pk, m.counts_only ? "counts" : "all");
  pack_str(pk, "N");
  pack_ring(pk, m.N);
  if (!m.counts_only) {
    pack_str(pk, "A");
    pack_ring(pk, m.A);
    pack_str(pk, "B");
    pack_ring(pk, m.B);
  }
}

void pack_stats(Packer& pk, std::string& out, const StatsKnowledge& s, TensorJobs& jobs) {
  const uint64_t C = u(s.A.rows()), d = u(s.A.cols());
  const bool noisy = s.noise.any();
  // A masked part travels only in the ring: its plain counterpart, all zero, is left out.
  const bool plain_a_b = !s.masked || s.masked->counts_only;
  pk.pack_map((plain_a_b ? 2 : 0) + (s.masked ? 0 : 1) + (noisy ? 1 : 0) + (s.masked ? 1 : 0));
  if (plain_a_b) {
    pack_str(pk, "A");
    pack_tensor(pk, out, DType::F64, Layout::Dense, Shape{C, d}, s.A.data(), "knowledge.body.A", false, &jobs);
  }
  if (!s.masked) {
    pack_str(pk, "N");
    pk.pack_array(static_cast<uint32_t>(s.N.size()));
    for (int64_t n : s.N) pk.pack_int64(n);  // non-negative ones in the unsigned formats, as before
  }
  if (plain_a_b) {
    pack_str(pk, "B");
    pack_tensor(pk, out, DType::F64, Layout::Upper, Shape{d, d}, s.B.data(), "knowledge.body.B", false, &jobs);
  }
  if (s.masked) {
    pack_str(pk, "masked");
    pack_masked(pk, *s.masked);
  }
  if (noisy) {
    pack_str(pk, "noise");
    pk.pack_array(3);
    pk.pack_double(s.noise.a);
    pk.pack_double(s.noise.n);
    pk.pack_double(s.noise.b);
  }
}

void pack_models(Packer& pk, std::string& out, const ModelKnowledge& m, DType dtype, TensorJobs& jobs) {
  pk.pack_map(1);
  pack_str(pk, "models");
  pk.pack_array(static_cast<uint32_t>(m.models.size()));
  for (size_t i = 0; i < m.models.size(); ++i) {
    const auto& c = m.models[i];
    const VitSpec& s = c.model.spec;
    pk.pack_map(4);
    pack_str(pk, "owner");
    pk.pack_uint32(c.owner);
    pack_str(pk, "count");
    pk.pack_uint64(static_cast<uint64_t>(c.count));
    pack_str(pk, "spec");
    pack_vit_spec(pk, s);
    pack_str(pk, "parameters");
    pack_tensor(pk, out, dtype, Layout::Dense, Shape{c.model.parameters.size()}, c.model.parameters.data(),
                "knowledge.body.models[" + std::to_string(i) + "].parameters", false, &jobs);
  }
}

void pack_prompts(Packer& pk, const PromptKnowledge& p) {
  pk.pack_map(1);
  pack_str(pk, "shards");
  pk.pack_array(static_cast<uint32_t>(p.shards.size()));
  for (const PromptShard& shard : p.shards) {
    pk.pack_map(2);
    pack_str(pk, "owner");
    pk.pack_uint32(shard.owner);
    pack_str(pk, "classes");
    pk.pack_array(static_cast<uint32_t>(shard.classes.size()));
    for (const ClassPrompts& c : shard.classes) {
      pk.pack_map(c.captions.empty() ? 5 : 6);
      pack_str(pk, "label");
      pk.pack_uint32(static_cast<uint32_t>(c.label));
      pack_str(pk, "count");
      pk.pack_uint64(static_cast<uint64_t>(c.count));
      pack_str(pk, "name");
      pack_str(pk, c.name);
      pack_str(pk, "prompt");
      pack_str(pk, c.prompt);
      pack_str(pk, "negative_prompt");
      pack_str(pk, c.negative_prompt);
      if (!c.captions.empty()) {
        pack_str(pk, "captions");
        pk.pack_array(static_cast<uint32_t>(c.captions.size()));
        for (const std::string& caption : c.captions) pack_str(pk, caption);
      }
    }
  }
}

// Label and count of one per-class entry; the label must exceed `previous`.
std::pair<int, int64_t> read_class_header(MapReader& m, int previous, int num_classes, uint64_t& samples,
                                          const Limits& limits) {
  const uint64_t label = m.uint("label");
  if (label >= static_cast<uint64_t>(num_classes))
    fail(ProtocolErrorCode::InvalidValue, m.path("label") + ": " + std::to_string(label) + " outside [0, " +
                                              std::to_string(num_classes) + ")");
  if (static_cast<int>(label) <= previous)
    fail(ProtocolErrorCode::InvalidValue, m.path("label") + ": labels must be strictly increasing");
  const uint64_t count = m.uint("count");
  if (count < 1) fail(ProtocolErrorCode::InvalidValue, m.path("count") + ": must be at least 1");
  add_samples(samples, count, m.path("count"), limits);
  return {static_cast<int>(label), static_cast<int64_t>(count)};
}

const msgpack::object_array& read_class_list(MapReader& body, int num_classes) {
  const auto& list = as_array(body.at("classes"), body.path("classes"));
  if (list.size > static_cast<uint32_t>(num_classes))
    fail(ProtocolErrorCode::InvalidValue, body.path("classes") + ": " + std::to_string(list.size) +
                                              " entries for " + std::to_string(num_classes) + " classes");
  return list;
}

// One class's mixture: every shape proven against the data present before its values are
// allocated; the values are converted later, together, by `jobs`.
ClassMixture read_class_mixture(MapReader& m, int previous, const Knowledge& k, uint64_t& samples, const Limits& limits,
                                TensorJobs& jobs) {
  const uint64_t d = static_cast<uint64_t>(k.dim);
  ClassMixture c;
  std::tie(c.label, c.count) = read_class_header(m, previous, k.num_classes, samples, limits);
  const std::string_view type = m.str("covariance");
  if (type == "full") c.mixture.type = CovarianceType::Full;
  else if (type == "diag") c.mixture.type = CovarianceType::Diag;
  else if (type == "spherical") c.mixture.type = CovarianceType::Spherical;
  else
    fail(ProtocolErrorCode::InvalidValue, m.path("covariance") + ": unknown covariance type '" + printable(type) +
                                              "' (full, diag or spherical)");
  const TensorIn weights = read_tensor(m.at("weights"), m.path("weights"));
  const TensorIn means = read_tensor(m.at("means"), m.path("means"));
  const TensorIn covs = read_tensor(m.at("covariances"), m.path("covariances"));
  m.finish();
  if (weights.shape.size() != 1)
    fail(ProtocolErrorCode::DimensionMismatch, weights.path + ": must be one-dimensional, shape is " +
                                                   shape_string(weights.shape));
  const uint64_t K = weights.shape[0];
  if (K == 0) fail(ProtocolErrorCode::InvalidValue, weights.path + ": mixture has no components");
  check_limit(K, limits.max_components, weights.path, "max_components");
  expect_shape(weights, {K}, Layout::Dense);
  expect_shape(means, {K, d}, Layout::Dense);
  switch (c.mixture.type) {
    case CovarianceType::Full: expect_shape(covs, {K, d, d}, Layout::Upper); break;
    case CovarianceType::Diag: expect_shape(covs, {K, d}, Layout::Dense); break;
    case CovarianceType::Spherical: expect_shape(covs, {K}, Layout::Dense); break;
  }
  // Every shape is now proven against the data actually present: allocation is bounded.
  const auto Ki = static_cast<Eigen::Index>(K), di = static_cast<Eigen::Index>(d);
  c.mixture.weights.resize(Ki);
  c.mixture.means.resize(Ki, di);
  c.mixture.covariances.resize(covariance_rows(c.mixture.type, Ki, di), covariance_cols(c.mixture.type, di));
  // Moving a mixture keeps its buffers where they are, so the deferred conversions can aim at them.
  unpack_tensor(weights, c.mixture.weights.data(), &jobs);
  unpack_tensor(means, c.mixture.means.data(), &jobs);
  unpack_tensor(covs, c.mixture.covariances.data(), &jobs);
  return c;
}

void read_sketch(MapReader& m, uint64_t d, CovarianceSketch& s, TensorJobs& jobs) {
  // Bounded by the mixtures' samples, themselves at most max_samples; check_structure says so.
  s.residuals = static_cast<int64_t>(std::min<uint64_t>(m.uint("residuals"), uint64_t{1} << 62));
  const TensorIn variances = read_tensor(m.at("variances"), m.path("variances"));
  const TensorIn factor = read_tensor(m.at("factor"), m.path("factor"));
  m.finish();
  expect_shape(variances, {d}, Layout::Dense);
  if (factor.shape.size() != 2 || factor.shape[1] != d || factor.shape[0] > d)
    fail(ProtocolErrorCode::DimensionMismatch, factor.path + ": shape is " + shape_string(factor.shape) +
                                                   ", expected [rank, " + std::to_string(d) + "] with rank <= " +
                                                   std::to_string(d));
  expect_shape(factor, factor.shape, Layout::Dense);
  const auto di = static_cast<Eigen::Index>(d);
  s.variances.resize(di);
  s.factor.resize(static_cast<Eigen::Index>(factor.shape[0]), di);
  unpack_tensor(variances, s.variances.data(), &jobs);
  unpack_tensor(factor, s.factor.data(), &jobs);
}

GmmKnowledge read_gmm(const msgpack::object& o, const Knowledge& k, const Limits& limits) {
  MapReader body(o, "knowledge.body");
  const auto& list = read_class_list(body, k.num_classes);
  GmmKnowledge g;
  g.classes.reserve(list.size);
  TensorJobs jobs;
  int previous = -1;
  uint64_t samples = 0;
  for (uint32_t i = 0; i < list.size; ++i) {
    MapReader m(list.ptr[i], body.path("classes") + "[" + std::to_string(i) + "]");
    g.classes.push_back(read_class_mixture(m, previous, k, samples, limits, jobs));
    previous = g.classes.back().label;
  }
  if (const msgpack::object* sketch = body.find("within_class")) {
    MapReader m(*sketch, body.path("within_class"));
    read_sketch(m, static_cast<uint64_t>(k.dim), g.within_class.emplace(), jobs);
  }
  body.finish();
  jobs.run();
  return g;
}

void read_noise(const msgpack::object& noise, const std::string& path, StatsKnowledge& s) {
  const auto& v = as_array(noise, path);
  if (v.size != 3) fail(ProtocolErrorCode::InvalidValue, path + ": " + std::to_string(v.size) + " variances, expected 3");
  double* into[3] = {&s.noise.a, &s.noise.n, &s.noise.b};
  for (uint32_t i = 0; i < 3; ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    *into[i] = as_float64(v.ptr[i], at);
    if (*into[i] < 0) fail(ProtocolErrorCode::InvalidValue, at + ": a variance is negative");
  }
  if (!s.noise.any()) fail(ProtocolErrorCode::InvalidValue, path + ": present but all zero (exact statistics carry none)");
}

MaskedStats read_masked(const msgpack::object& o, uint64_t C, uint64_t d, const Limits& limits, const std::string& path) {
  MapReader m(o, path);
  MaskedStats masked;
  masked.group = read_contributors(m.at("group"), m.path("group"), limits);
  const std::string_view parts = m.str("parts");
  if (parts != "all" && parts != "counts")
    fail(ProtocolErrorCode::InvalidValue, m.path("parts") + ": '" + printable(parts) + "', expected all or counts");
  masked.counts_only = parts == "counts";
  masked.N = read_ring(m.at("N"), C, m.path("N"));
  if (!masked.counts_only) {
    masked.A = read_ring(m.at("A"), checked_mul(C, d, m.path("A")), m.path("A"));
    masked.B = read_ring(m.at("B"), checked_mul(d, d + 1, m.path("B")) / 2, m.path("B"));
  }
  m.finish();
  return masked;
}

StatsKnowledge read_stats(const msgpack::object& o, const Knowledge& k, const Limits& limits) {
  MapReader body(o, "knowledge.body");
  const uint64_t C = static_cast<uint64_t>(k.num_classes), d = static_cast<uint64_t>(k.dim);
  StatsKnowledge s;
  // Secure aggregation: the masked parts travel in the ring, and their plain ones are left out.
  if (const msgpack::object* masked = body.find("masked"))
    s.masked = read_masked(*masked, C, d, limits, body.path("masked"));
  const bool plain_a_b = !s.masked || s.masked->counts_only, plain_n = !s.masked;
  if (!plain_a_b && (body.find("A") || body.find("B")))
    fail(ProtocolErrorCode::InvalidValue, body.path() + ": A and B travel masked; plain ones as well would say them twice");
  if (!plain_n && body.find("N"))
    fail(ProtocolErrorCode::InvalidValue, body.path() + ": N travels masked; a plain N as well would say it twice");
  std::optional<TensorIn> A, B;
  if (plain_a_b) {
    A = read_tensor(body.at("A"), body.path("A"));
    B = read_tensor(body.at("B"), body.path("B"));
  }
  const msgpack::object_array* N = plain_n ? &as_array(body.at("N"), body.path("N")) : nullptr;
  if (const msgpack::object* noise = body.find("noise")) read_noise(*noise, body.path("noise"), s);
  body.finish();
  const auto rows = static_cast<Eigen::Index>(C), cols = static_cast<Eigen::Index>(d);
  if (plain_a_b) {
    // Additive statistics must stay exact (docs/architecture.md), so nothing narrower than float64 is accepted.
    expect_dtype(*A, DType::F64);
    expect_dtype(*B, DType::F64);
    expect_shape(*A, {C, d}, Layout::Dense);
    expect_shape(*B, {d, d}, Layout::Upper);
  }
  s.N.assign(static_cast<size_t>(C), 0);
  if (N) {
    if (N->size != C)
      fail(ProtocolErrorCode::DimensionMismatch, body.path("N") + ": " + std::to_string(N->size) +
                                                     " counts for " + std::to_string(C) + " classes");
    uint64_t samples = 0;
    for (uint32_t c = 0; c < N->size; ++c) {
      const std::string path = body.path("N") + "[" + std::to_string(c) + "]";
      const int64_t n = s.noise.any() ? as_int(N->ptr[c], path) : static_cast<int64_t>(as_uint(N->ptr[c], path));
      if (n < 0 && n < -static_cast<int64_t>(limits.max_samples))
        fail(ProtocolErrorCode::TooLarge, path + ": " + std::to_string(n) + " is beyond -max_samples");
      if (n >= 0) add_samples(samples, static_cast<uint64_t>(n), path, limits);
      s.N[c] = n;
    }
  }
  if (plain_a_b) {
    s.A.resize(rows, cols);
    s.B.resize(cols, cols);
    unpack_tensor(*A, s.A.data());
    unpack_tensor(*B, s.B.data());
  } else {
    s.A = MatrixD::Zero(rows, cols);
    s.B = MatrixD::Zero(cols, cols);
  }
  return s;
}

// The list `key` of a body with one entry per contributor (FedMITR's models, FGL's shards),
// its length checked before any entry is read.
const msgpack::object_array& read_one_per_contributor(MapReader& body, const char* key, const std::string& noun,
                                                      const Knowledge& k) {
  const auto& list = as_array(body.at(key), body.path(key));
  if (list.size != k.contributors.size())
    fail(ProtocolErrorCode::InvalidValue, body.path(key) + ": " + std::to_string(list.size) + " " + noun + "s for " +
                                              std::to_string(k.contributors.size()) + " contributors");
  return list;
}

// An entry's "owner": a node id, which is 32 bits on the wire.
NodeId read_owner(MapReader& e) {
  const uint64_t owner = e.uint("owner");
  if (owner > UINT32_MAX) fail(ProtocolErrorCode::InvalidValue, e.path("owner") + ": node id exceeds 32 bits");
  return static_cast<NodeId>(owner);
}

// The spec's numbers are read as 32-bit values and checked (VitSpec::validate) before the
// parameters' tensor is sized; its length must then be the spec's parameter count.
ModelKnowledge read_models(const msgpack::object& o, const Knowledge& k, const Limits& limits) {
  MapReader body(o, "knowledge.body");
  const auto& list = read_one_per_contributor(body, "models", "model", k);
  ModelKnowledge m;
  m.models.reserve(list.size);
  TensorJobs jobs;
  uint64_t samples = 0;
  for (uint32_t i = 0; i < list.size; ++i) {
    MapReader e(list.ptr[i], body.path("models") + "[" + std::to_string(i) + "]");
    ClientModel c;
    c.owner = read_owner(e);
    const uint64_t count = e.uint("count");
    if (count < 1) fail(ProtocolErrorCode::InvalidValue, e.path("count") + ": must be at least 1");
    add_samples(samples, count, e.path("count"), limits);
    c.count = static_cast<int64_t>(count);
    c.model.spec = read_vit_spec(e.at("spec"), e.path("spec"), k.num_classes);
    check_spec(c.model.spec, k, e.path("spec"));
    const TensorIn t = read_tensor(e.at("parameters"), e.path("parameters"));
    e.finish();
    const uint64_t P = static_cast<uint64_t>(c.model.spec.parameter_count());
    expect_shape(t, {P}, Layout::Dense);
    c.model.parameters.resize(static_cast<size_t>(P));
    unpack_tensor(t, c.model.parameters.data(), &jobs);
    m.models.push_back(std::move(c));
  }
  body.finish();
  jobs.run();
  return m;
}

// Strings are bounded by max_string_bytes while parsing, and the shards and classes by the
// contributors and classes before anything per entry is kept.
PromptKnowledge read_prompts(const msgpack::object& o, const Knowledge& k, const Limits& limits) {
  MapReader body(o, "knowledge.body");
  const auto& list = read_one_per_contributor(body, "shards", "shard", k);
  PromptKnowledge p;
  p.shards.reserve(list.size);
  uint64_t samples = 0;
  for (uint32_t i = 0; i < list.size; ++i) {
    MapReader e(list.ptr[i], body.path("shards") + "[" + std::to_string(i) + "]");
    PromptShard shard;
    shard.owner = read_owner(e);
    const auto& classes = read_class_list(e, k.num_classes);
    e.finish();
    shard.classes.reserve(classes.size);
    int previous = -1;
    for (uint32_t j = 0; j < classes.size; ++j) {
      MapReader m(classes.ptr[j], e.path("classes") + "[" + std::to_string(j) + "]");
      ClassPrompts c;
      std::tie(c.label, c.count) = read_class_header(m, previous, k.num_classes, samples, limits);
      previous = c.label;
      c.name = read_string(m.at("name"), m.path("name"));
      c.prompt = read_string(m.at("prompt"), m.path("prompt"));
      c.negative_prompt = read_string(m.at("negative_prompt"), m.path("negative_prompt"));
      if (const msgpack::object* captions = m.find("captions")) {
        const auto& a = as_array(*captions, m.path("captions"));
        if (a.size > static_cast<uint64_t>(c.count))
          fail(ProtocolErrorCode::InvalidValue, m.path("captions") + ": " + std::to_string(a.size) +
                                                    " captions for " + std::to_string(c.count) + " samples");
        c.captions.reserve(a.size);
        for (uint32_t n = 0; n < a.size; ++n)
          c.captions.push_back(read_string(a.ptr[n], m.path("captions") + "[" + std::to_string(n) + "]"));
      }
      m.finish();
      shard.classes.push_back(std::move(c));
    }
    p.shards.push_back(std::move(shard));
  }
  body.finish();
  return p;
}

}  // namespace

void validate_knowledge(const Knowledge& k, const Limits& limits, const std::string& where) {
  check_limit(static_cast<uint64_t>(std::max(k.dim, 0)), limits.max_dim, where + ".dim", "max_dim");
  check_limit(static_cast<uint64_t>(std::max(k.num_classes, 0)), limits.max_classes, where + ".classes",
              "max_classes");
  check_limit(k.contributors.size(), limits.max_contributors, where + ".contributors", "max_contributors");
  check_limit(k.backbone_fingerprint.size(), limits.max_string_bytes, where + ".backbone", "max_string_bytes");
  if (auto* g = std::get_if<GmmKnowledge>(&k.payload))
    for (const auto& c : g->classes)
      check_limit(static_cast<uint64_t>(c.mixture.components()), limits.max_components,
                  where + ".body.classes", "max_components");
  uint64_t samples = 0;
  if (const KnowledgeCodec* codec = codec_of(k)) {
    codec->bound(k, limits, where, samples);
    return check_structure(k, where, true);
  }
  const auto count = [&](int64_t n, const std::string& path) {
    add_samples(samples, static_cast<uint64_t>(std::max<int64_t>(n, 0)), path, limits);
  };
  if (auto* g = std::get_if<GmmKnowledge>(&k.payload))
    for (const auto& c : g->classes) count(c.count, where + ".body.classes.count");
  if (auto* s = std::get_if<StatsKnowledge>(&k.payload))
    for (int64_t n : s->N) count(n, where + ".body.N");
  if (auto* m = std::get_if<ModelKnowledge>(&k.payload))
    for (const auto& c : m->models) count(c.count, where + ".body.models.count");
  if (auto* p = std::get_if<PromptKnowledge>(&k.payload))
    for (const auto& shard : p->shards)
      for (const auto& c : shard.classes) {
        count(c.count, where + ".body.shards.classes.count");
        for (const std::string* text : {&c.name, &c.prompt, &c.negative_prompt})
          check_limit(text->size(), limits.max_string_bytes, where + ".body.shards.classes", "max_string_bytes");
        for (const std::string& caption : c.captions)
          check_limit(caption.size(), limits.max_string_bytes, where + ".body.shards.classes.captions",
                      "max_string_bytes");
      }
  check_structure(k, where, true);
}

namespace wire {

void pack_knowledge(Packer& pk, std::string& out, const Knowledge& k, const EncodeOptions& options,
                    TensorJobs* deferred) {
  check_structure(k, "knowledge", false);  // pack_tensor refuses NaN/Inf as it converts
  const DType floats = options.precision == Precision::Float16 ? DType::F16 : DType::F32;
  pk.pack_map(6);
  pack_str(pk, "method");
  pack_str(pk, k.method_name());
  pack_origin(pk, k.contributors, k.backbone_fingerprint, k.dim, k.num_classes);
  pack_str(pk, "body");
  // The values are converted after the structure is written, together on the pool (TensorJobs).
  TensorJobs local;
  TensorJobs& jobs = deferred ? *deferred : local;
  if (const KnowledgeCodec* codec = codec_of(k)) {
    MsgpackBodyWriter body(pk, out, floats, jobs);
    codec->write(k, body);
  } else if (auto* g = std::get_if<GmmKnowledge>(&k.payload)) pack_gmm(pk, out, *g, floats, jobs);
  else if (auto* s = std::get_if<StatsKnowledge>(&k.payload)) pack_stats(pk, out, *s, jobs);
  else if (auto* m = std::get_if<ModelKnowledge>(&k.payload)) pack_models(pk, out, *m, floats, jobs);
  else pack_prompts(pk, std::get<PromptKnowledge>(k.payload));
  if (!deferred) local.run();
}

Knowledge read_knowledge(const msgpack::object& o, const Limits& limits) {
  MapReader map(o, "knowledge");
  Knowledge k;
  const std::string method = read_string(map.at("method"), map.path("method"));
  const MethodDescriptor* sender = find_method(method);
  if (!sender) fail(ProtocolErrorCode::InvalidValue, "knowledge.method: unknown method '" + printable(method) + "'");
  k.contributors = read_contributors(map.at("contributors"), map.path("contributors"), limits);
  k.backbone_fingerprint = read_string(map.at("backbone"), map.path("backbone"));
  k.dim = read_count(map.at("dim"), map.path("dim"), limits.max_dim, "max_dim");
  k.num_classes = read_count(map.at("classes"), map.path("classes"), limits.max_classes, "max_classes");
  const msgpack::object& body = map.at("body");
  map.finish();
  if (sender->codec) {
    MsgpackBodyValue value(body, "knowledge.body");
    MsgpackBodyReader reader(limits);
    k.payload = sender->codec->read(value, k, reader);
    reader.run();
    check_structure(k, "knowledge", false);  // unpack refused NaN/Inf already
    return k;
  }
  switch (sender->knowledge) {
    case KnowledgeKind::Gmm: k.payload = read_gmm(body, k, limits); break;
    case KnowledgeKind::Stats: k.payload = read_stats(body, k, limits); break;
    case KnowledgeKind::Prototypes: throw std::logic_error("FedTC's knowledge has its codec");
    case KnowledgeKind::Models: k.payload = read_models(body, k, limits); break;
    case KnowledgeKind::Prompts: k.payload = read_prompts(body, k, limits); break;
  }
  check_structure(k, "knowledge", false);  // unpack_tensor refused NaN/Inf already
  return k;
}

}  // namespace wire
}  // namespace fednode
