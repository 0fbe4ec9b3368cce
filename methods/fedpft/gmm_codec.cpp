#include "methods/fedpft/gmm_codec.h"

#include "core/float16.h"
#include "core/parallel.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace fednode {
namespace {

// Below this many bytes of parameters, checking them on one thread is quicker than waking the pool.
constexpr uint64_t kParallelCheckBytes = uint64_t{1} << 20;

uint64_t unsigned_of(Eigen::Index v) { return static_cast<uint64_t>(v); }

std::string dims(Eigen::Index r, Eigen::Index c) { return std::to_string(r) + "x" + std::to_string(c); }

Eigen::Index covariance_rows(CovarianceType t, Eigen::Index K, Eigen::Index d) {
  return t == CovarianceType::Full ? K * d : K;
}
Eigen::Index covariance_cols(CovarianceType t, Eigen::Index d) {
  return t == CovarianceType::Spherical ? 1 : d;
}

// The rules of GaussianMixture::validate, each with its own code. The values' own rules (finite;
// diagonal and spherical variances positive) are checked here only on request: tensor encoding
// and decoding apply them in the same pass as converting, and a second pass over megabytes of
// parameters on both ends of a hop is what this avoids (docs/performance.md, goal 5).
void check_mixture(const GaussianMixture& g, int dim, const std::string& where, bool check_values) {
  const Eigen::Index K = g.weights.size(), d = dim;
  if (K < 1) wire_fail(ProtocolErrorCode::InvalidValue, where + ": mixture has no components");
  expect_dims(g.means, K, d, where + ".means");
  expect_dims(g.covariances, covariance_rows(g.type, K, d), covariance_cols(g.type, d), where + ".covariances");
  if (check_values) {
    expect_finite(g.weights, where + ".weights");
    expect_finite(g.means, where + ".means");
    expect_finite(g.covariances, where + ".covariances");
  }
  if ((g.weights.array() < 0).any() || std::abs(g.weights.sum() - 1.0) > 1e-2)
    wire_fail(ProtocolErrorCode::InvalidValue, where + ".weights: must be non-negative and sum to 1 (sum is " +
                                              std::to_string(g.weights.sum()) + ")");
  if (g.type == CovarianceType::Full) {
    // Only the diagonal of a full covariance must be positive: d values a component, checked here.
    for (Eigen::Index k = 0; k < K; ++k)
      if ((g.covariances.block(k * d, 0, d, d).diagonal().array() <= 0).any())
        wire_fail(ProtocolErrorCode::InvalidValue, where + ".covariances: component " + std::to_string(k) +
                                                  " has a non-positive variance");
  } else if (check_values && !(g.covariances.minCoeff<Eigen::PropagateNumbers>() > 0)) {
    // A vectorised minimum, not (x <= 0).any(), which Eigen evaluates one value at a time.
    wire_fail(ProtocolErrorCode::InvalidValue, where + ".covariances: variances must be positive");
  }
}

// FedPFT: classes as every per-class list, each mixture by GaussianMixture::validate's rules, and
// the covariance sketch within the mixtures' samples.
void check_gmm(const GmmKnowledge& g, const Knowledge& k, const std::string& where, bool check_values) {
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
    check_mixture(g.classes[i].mixture, k.dim, where + ".body.classes[" + std::to_string(i) + "]", check_values);
  });
  const auto& s = g.within_class;
  if (!s) return;
  const std::string at = where + ".body.within_class";
  int64_t samples = 0;
  for (const auto& c : g.classes) samples += c.count;
  if (s->residuals < 0 || s->residuals > samples)
    wire_fail(ProtocolErrorCode::InvalidValue, at + ".residuals: " + std::to_string(s->residuals) + " outside [0, " +
                                              std::to_string(samples) + "], the samples of the mixtures");
  expect_dims(s->variances, k.dim, 1, at + ".variances");
  if (s->factor.cols() != k.dim || s->factor.rows() > k.dim)
    wire_fail(ProtocolErrorCode::DimensionMismatch, at + ".factor: is " + dims(s->factor.rows(), s->factor.cols()) +
                                                   ", expected at most " + std::to_string(k.dim) + " rows of " +
                                                   std::to_string(k.dim));
  if (check_values) {
    expect_finite(s->variances, at + ".variances");
    expect_finite(s->factor, at + ".factor");
  }
  if ((s->variances.array() < 0).any()) wire_fail(ProtocolErrorCode::InvalidValue, at + ".variances: a variance is negative");
  if (s->residuals == 0 && (s->factor.rows() > 0 || (s->variances.array() != 0).any()))
    wire_fail(ProtocolErrorCode::InvalidValue, at + ": summarises no residuals but is not empty");
}


// A variance that rounds to zero in float16 would make the receiver reject the whole message.
// Diagonal and spherical variances are checked while they are converted (pack_tensor's
// `positive`); for full covariances only the diagonal must stay positive.
void check_half_diagonals(const GaussianMixture& g, const std::string& where) {
  if (g.type != CovarianceType::Full) return;
  const Eigen::Index d = g.dim();
  for (Eigen::Index k = 0; k < g.components(); ++k)
    for (Eigen::Index j = 0; j < d; ++j) {
      const double v = g.covariances(k * d + j, j);
      if (!(round_to_half(static_cast<float>(v)) > 0.0f))
        wire_fail(ProtocolErrorCode::InvalidValue, where + ".covariances: variance " + std::to_string(v) +
                                                  " underflows float16 to 0; transfer in float32");
    }
}

void write_sketch(BodyWriter& w, const CovarianceSketch& s) {
  const WireFloat dtype = w.floats();
  const std::string at = "knowledge.body.within_class";
  w.map(3);
  w.text("residuals");
  w.uint(static_cast<uint64_t>(s.residuals));
  w.text("variances");
  w.tensor(dtype, WireLayout::Dense, WireShape{unsigned_of(s.variances.size())}, s.variances.data(), at + ".variances");
  w.text("factor");
  w.tensor(dtype, WireLayout::Dense, WireShape{unsigned_of(s.factor.rows()), unsigned_of(s.factor.cols())}, s.factor.data(),
              at + ".factor");
}

void write_gmm(BodyWriter& w, const GmmKnowledge& g) {
  const WireFloat dtype = w.floats();
  w.map(g.within_class ? 2 : 1);
  w.text("classes");
  w.array(static_cast<uint32_t>(g.classes.size()));
  for (size_t i = 0; i < g.classes.size(); ++i) {
    const auto& c = g.classes[i];
    const GaussianMixture& m = c.mixture;
    const std::string at = "knowledge.body.classes[" + std::to_string(i) + "]";
    if (dtype == WireFloat::F16) check_half_diagonals(m, at);
    const uint64_t K = unsigned_of(m.components()), d = unsigned_of(m.dim());
    w.map(6);
    w.text("label");
    w.uint(static_cast<uint32_t>(c.label));
    w.text("count");
    w.uint(static_cast<uint64_t>(c.count));
    w.text("covariance");
    w.text(to_string(m.type));
    w.text("weights");
    w.tensor(dtype, WireLayout::Dense, WireShape{K}, m.weights.data(), at + ".weights");
    w.text("means");
    w.tensor(dtype, WireLayout::Dense, WireShape{K, d}, m.means.data(), at + ".means");
    w.text("covariances");
    const std::string covariances = at + ".covariances";
    switch (m.type) {
      case CovarianceType::Full:
        w.tensor(dtype, WireLayout::Upper, WireShape{K, d, d}, m.covariances.data(), covariances);
        break;
      case CovarianceType::Diag:
        w.tensor(dtype, WireLayout::Dense, WireShape{K, d}, m.covariances.data(), covariances, true);
        break;
      case CovarianceType::Spherical:
        w.tensor(dtype, WireLayout::Dense, WireShape{K}, m.covariances.data(), covariances, true);
        break;
    }
  }
  if (g.within_class) {
    w.text("within_class");
    write_sketch(w, *g.within_class);
  }
}


// One class's mixture: every shape proven against the data present before its values are
// allocated; the values are converted later, together, by the reader.
ClassMixture read_class_mixture(BodyValue& m, int previous, const Knowledge& k, uint64_t& samples, BodyReader& r) {
  const Limits& limits = r.limits();
  const uint64_t d = static_cast<uint64_t>(k.dim);
  ClassMixture c;
  std::tie(c.label, c.count) = read_class_header(m, previous, k.num_classes, samples, limits);
  const std::string type = m.at("covariance")->text();
  if (type == "full") c.mixture.type = CovarianceType::Full;
  else if (type == "diag") c.mixture.type = CovarianceType::Diag;
  else if (type == "spherical") c.mixture.type = CovarianceType::Spherical;
  else
    wire_fail(ProtocolErrorCode::InvalidValue, m.path("covariance") + ": unknown covariance type '" + printable_text(type) +
                                              "' (full, diag or spherical)");
  const BodyTensor weights = m.at("weights")->tensor();
  const BodyTensor means = m.at("means")->tensor();
  const BodyTensor covs = m.at("covariances")->tensor();
  m.finish();
  if (weights.shape.size() != 1)
    wire_fail(ProtocolErrorCode::DimensionMismatch, weights.path + ": must be one-dimensional, shape is " +
                                                   shape_text(weights.shape));
  const uint64_t K = weights.shape[0];
  if (K == 0) wire_fail(ProtocolErrorCode::InvalidValue, weights.path + ": mixture has no components");
  check_limit(K, limits.max_components, weights.path, "max_components");
  r.expect_shape(weights, {K}, WireLayout::Dense);
  r.expect_shape(means, {K, d}, WireLayout::Dense);
  switch (c.mixture.type) {
    case CovarianceType::Full: r.expect_shape(covs, {K, d, d}, WireLayout::Upper); break;
    case CovarianceType::Diag: r.expect_shape(covs, {K, d}, WireLayout::Dense); break;
    case CovarianceType::Spherical: r.expect_shape(covs, {K}, WireLayout::Dense); break;
  }
  // Every shape is now proven against the data actually present: allocation is bounded.
  const auto Ki = static_cast<Eigen::Index>(K), di = static_cast<Eigen::Index>(d);
  c.mixture.weights.resize(Ki);
  c.mixture.means.resize(Ki, di);
  c.mixture.covariances.resize(covariance_rows(c.mixture.type, Ki, di), covariance_cols(c.mixture.type, di));
  // Moving a mixture keeps its buffers where they are, so the deferred conversions can aim at them.
  r.unpack(weights, c.mixture.weights.data());
  r.unpack(means, c.mixture.means.data());
  // Diagonal and spherical variances are checked positive as they are converted; a full
  // covariance's diagonal by check_mixture.
  r.unpack(covs, c.mixture.covariances.data(), c.mixture.type != CovarianceType::Full);
  return c;
}

void read_sketch(BodyValue& m, uint64_t d, CovarianceSketch& s, BodyReader& r) {
  // Bounded by the mixtures' samples, themselves at most max_samples; check_structure says so.
  s.residuals = static_cast<int64_t>(std::min<uint64_t>(m.at("residuals")->uint(), uint64_t{1} << 62));
  const BodyTensor variances = m.at("variances")->tensor();
  const BodyTensor factor = m.at("factor")->tensor();
  m.finish();
  r.expect_shape(variances, {d}, WireLayout::Dense);
  if (factor.shape.size() != 2 || factor.shape[1] != d || factor.shape[0] > d)
    wire_fail(ProtocolErrorCode::DimensionMismatch, factor.path + ": shape is " + shape_text(factor.shape) +
                                                   ", expected [rank, " + std::to_string(d) + "] with rank <= " +
                                                   std::to_string(d));
  r.expect_shape(factor, factor.shape, WireLayout::Dense);
  const auto di = static_cast<Eigen::Index>(d);
  s.variances.resize(di);
  s.factor.resize(static_cast<Eigen::Index>(factor.shape[0]), di);
  r.unpack(variances, s.variances.data());
  r.unpack(factor, s.factor.data());
}


}  // namespace

void GmmCodec::write(const Knowledge& k, BodyWriter& w) const { write_gmm(w, std::get<GmmKnowledge>(k.payload)); }

KnowledgePayload GmmCodec::read(BodyValue& body, const Knowledge& k, BodyReader& r) const {
  const auto list = read_class_list(body, "classes", k.num_classes);
  const uint32_t n = list->items();
  GmmKnowledge g;
  g.classes.reserve(n);
  int previous = -1;
  uint64_t samples = 0;
  for (uint32_t i = 0; i < n; ++i) {
    g.classes.push_back(read_class_mixture(*list->item(i), previous, k, samples, r));
    previous = g.classes.back().label;
  }
  if (const auto sketch = body.find("within_class"))
    read_sketch(*sketch, static_cast<uint64_t>(k.dim), g.within_class.emplace(), r);
  body.finish();
  return g;
}

void GmmCodec::check(const Knowledge& k, const std::string& where, bool check_values) const {
  check_gmm(std::get<GmmKnowledge>(k.payload), k, where, check_values);
}

void GmmCodec::bound(const Knowledge& k, const Limits& limits, const std::string& where, uint64_t& samples) const {
  const auto& classes = std::get<GmmKnowledge>(k.payload).classes;
  for (const auto& c : classes)
    check_limit(static_cast<uint64_t>(c.mixture.components()), limits.max_components, where + ".body.classes",
                "max_components");
  add_entry_samples(samples, classes, where + ".body.classes.count", limits);
}

size_t GmmCodec::entries(const Knowledge& k) const { return std::get<GmmKnowledge>(k.payload).classes.size(); }

}  // namespace fednode
