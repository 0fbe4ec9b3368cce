#include "methods/knowledge.h"

#include "methods/registry.h"

#include <algorithm>
#include <stdexcept>
#include <cmath>

namespace fednode {

const char* to_string(CovarianceType t) {
  switch (t) {
    case CovarianceType::Full: return "full";
    case CovarianceType::Diag: return "diag";
    case CovarianceType::Spherical: return "spherical";
  }
  return "?";
}

CovarianceType parse_covariance_type(const std::string& s) {
  if (s == "full") return CovarianceType::Full;
  if (s == "diag") return CovarianceType::Diag;
  if (s == "spherical") return CovarianceType::Spherical;
  throw InputError("unknown covariance type '" + s + "' (expected full, diag or spherical)");
}

int64_t GaussianMixture::parameter_count() const {
  const int64_t K = components(), d = dim();
  switch (type) {
    case CovarianceType::Full: return K * (1 + d + d * (d + 1) / 2);  // one triangle travels
    case CovarianceType::Diag: return K * (1 + 2 * d);
    case CovarianceType::Spherical: return K * (2 + d);
  }
  return 0;
}

void GaussianMixture::validate(const std::string& what) const {
  const Eigen::Index K = weights.size(), d = means.cols();
  if (K <= 0) throw InputError(what + ": mixture has no components");
  if (means.rows() != K) throw InputError(what + ": means have " + std::to_string(means.rows()) +
                                          " rows for " + std::to_string(K) + " components");
  Eigen::Index rows = 0, cols = 0;
  switch (type) {
    case CovarianceType::Full: rows = K * d; cols = d; break;
    case CovarianceType::Diag: rows = K; cols = d; break;
    case CovarianceType::Spherical: rows = K; cols = 1; break;
  }
  if (covariances.rows() != rows || covariances.cols() != cols)
    throw InputError(what + ": " + to_string(type) + " covariances are " +
                     std::to_string(covariances.rows()) + "x" + std::to_string(covariances.cols()) +
                     ", expected " + std::to_string(rows) + "x" + std::to_string(cols));
  if (!all_finite(weights) || !all_finite(means) || !all_finite(covariances))
    throw InputError(what + ": mixture holds NaN or Inf");
  if ((weights.array() < 0).any() || std::abs(weights.sum() - 1.0) > 1e-2)
    throw InputError(what + ": mixture weights must be non-negative and sum to 1");
  if (type != CovarianceType::Full && (covariances.array() <= 0).any())
    throw InputError(what + ": variances must be positive");
  if (type == CovarianceType::Full)
    for (Eigen::Index k = 0; k < K; ++k)
      if ((covariances.block(k * d, 0, d, d).diagonal().array() <= 0).any())
        throw InputError(what + ": covariance of component " + std::to_string(k) +
                         " has a non-positive diagonal");
}

const char* Knowledge::method_name() const {
  if (const auto* own = std::get_if<MethodKnowledge>(&payload)) return own->get() ? own->get()->method() : "";
  return method_sending(static_cast<KnowledgeKind>(payload.index())).name.c_str();
}

int64_t Knowledge::payload_bytes(bool half_precision) const {
  const int64_t scalar = half_precision ? 2 : 4;
  if (auto* g = std::get_if<GmmKnowledge>(&payload)) {
    int64_t bytes = 0;
    for (const auto& c : g->classes) bytes += c.mixture.parameter_count() * scalar + 8;  // + count
    if (g->within_class) bytes += (g->within_class->variances.size() + g->within_class->factor.size()) * scalar + 8;
    return bytes;
  }
  if (auto* s = std::get_if<StatsKnowledge>(&payload)) {
    const int64_t d = s->B.rows();
    if (const auto& m = s->masked)  // masked parts travel as 16-byte ring elements instead
      return static_cast<int64_t>(m->A.size() + m->N.size() + m->B.size()) * 16 +
             (m->counts_only ? (s->A.size() + d * (d + 1) / 2) * 8 : 0);
    return (s->A.size() + d * (d + 1) / 2) * 8 + static_cast<int64_t>(s->N.size()) * 8;
  }
  if (auto* p = std::get_if<PrototypeKnowledge>(&payload)) {
    int64_t bytes = 0;
    for (const auto& c : p->classes) bytes += c.prototypes.size() * scalar + 8;
    return bytes;
  }
  if (const auto* own = std::get_if<MethodKnowledge>(&payload))
    return own->get() ? own->get()->payload_bytes(half_precision) : 0;
  return 0;
}

std::string to_string(const Contributors& c) {
  std::string s = "{";
  for (NodeId id : c) s += (s.size() > 1 ? "," : "") + std::to_string(id);
  return s + "}";
}

bool disjoint(const Contributors& a, const Contributors& b) {
  auto i = a.begin(), j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i == *j) return false;
    if (*i < *j) ++i; else ++j;
  }
  return true;
}

bool is_subset(const Contributors& a, const Contributors& b) {
  return std::includes(b.begin(), b.end(), a.begin(), a.end());
}

Contributors united(const Contributors& a, const Contributors& b) {
  Contributors out = a;
  out.insert(b.begin(), b.end());
  return out;
}

void KnowledgeSum::add(const Knowledge& piece, const std::string& where) {
  if (!disjoint(piece.contributors, contributors_))
    throw std::logic_error("folding " + to_string(piece.contributors) + " into a sum of " + to_string(contributors_) +
                           ": contributors overlap");
  add_payload(piece, where);
  contributors_.insert(piece.contributors.begin(), piece.contributors.end());
}

CombinePlan plan_combination(const std::vector<const Contributors*>& pieces) {
  std::vector<size_t> order(pieces.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Largest first; equal sizes by lexicographic contributor ids, then input order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (pieces[a]->size() != pieces[b]->size()) return pieces[a]->size() > pieces[b]->size();
    return *pieces[a] < *pieces[b];
  });
  CombinePlan plan;
  Contributors covered;
  std::vector<const Contributors*> kept;
  for (size_t idx : order) {
    const Contributors& c = *pieces[idx];
    if (c.empty()) continue;  // says nothing about anybody
    // A subset of something already kept adds nothing: duplicates and re-deliveries vanish here.
    bool redundant = false;
    for (const Contributors* k : kept)
      if (is_subset(c, *k)) { redundant = true; break; }
    if (redundant) continue;
    kept.push_back(&c);
    if (disjoint(c, covered)) {
      plan.chosen.push_back(idx);
      covered.insert(c.begin(), c.end());
    } else {
      plan.left_out.push_back(idx);
    }
  }
  return plan;
}

void check_compatible(const Knowledge& k, const std::string& method, int dim, int num_classes,
                      const std::string& backbone_fingerprint, const std::string& where) {
  if (method != k.method_name())
    throw InputError(where + ": knowledge is " + k.method_name() + ", this node runs " + method);
  if (k.dim != dim)
    throw InputError(where + ": feature dimension " + std::to_string(k.dim) + ", expected " +
                     std::to_string(dim));
  if (k.num_classes != num_classes)
    throw InputError(where + ": " + std::to_string(k.num_classes) + " classes, expected " +
                     std::to_string(num_classes));
  if (k.backbone_fingerprint != backbone_fingerprint)
    throw InputError(where + ": computed with backbone '" + k.backbone_fingerprint +
                     "', this node uses '" + backbone_fingerprint + "'");
  if (k.contributors.empty()) throw InputError(where + ": knowledge names no contributors");
}

}  // namespace fednode
