#include "methods/fedcgs/masked_stats.h"

#include <algorithm>
#include <iterator>
#include <cmath>

namespace fednode {
namespace {

Ring128 encode(double v, const std::string& where, const char* part) {
  Ring128 r;
  if (!to_fixed_ring(v, r))
    throw InputError(where + ": a value of " + part + " (" + std::to_string(v) +
                     ") is beyond what secure aggregation's ring holds (2^55)");
  return r;
}

}  // namespace

StatsKnowledge encode_for_masking(const StatsKnowledge& plain, const Contributors& group, bool counts_only,
                                  const std::string& where) {
  if (plain.masked) throw std::logic_error("encode_for_masking: already masked");
  StatsKnowledge s = plain;
  MaskedStats m;
  m.group = group;
  m.counts_only = counts_only;
  m.N.reserve(plain.N.size());
  for (int64_t n : plain.N) m.N.push_back(encode(static_cast<double>(n), where, "N"));
  std::fill(s.N.begin(), s.N.end(), 0);
  if (!counts_only) {
    m.A.reserve(static_cast<size_t>(plain.A.size()));
    for (Eigen::Index i = 0; i < plain.A.rows(); ++i)
      for (Eigen::Index j = 0; j < plain.A.cols(); ++j) m.A.push_back(encode(plain.A(i, j), where, "A"));
    const Eigen::Index d = plain.B.rows();
    m.B.reserve(static_cast<size_t>(d * (d + 1) / 2));
    for (Eigen::Index i = 0; i < d; ++i)
      for (Eigen::Index j = i; j < d; ++j) m.B.push_back(encode(plain.B(i, j), where, "B"));
    s.A.setZero();
    s.B.setZero();
  }
  s.masked = std::move(m);
  return s;
}

void add_masks(MaskedStats& m, const AddMasks& add) {
  add(0, m.A.data(), m.A.size());
  add(1, m.N.data(), m.N.size());
  add(2, m.B.data(), m.B.size());
}

void add_masked(MaskedStats& into, const MaskedStats& piece, const std::string& where) {
  if (into.group != piece.group || into.counts_only != piece.counts_only || into.A.size() != piece.A.size() ||
      into.N.size() != piece.N.size() || into.B.size() != piece.B.size())
    throw InputError(where + ": masked statistics of group " + to_string(piece.group) +
                     " cannot be summed with those of group " + to_string(into.group) + " (or of another shape)");
  for (size_t i = 0; i < into.A.size(); ++i) into.A[i] += piece.A[i];
  for (size_t i = 0; i < into.N.size(); ++i) into.N[i] += piece.N[i];
  for (size_t i = 0; i < into.B.size(); ++i) into.B[i] += piece.B[i];
}

void recover(MaskedStats& sum, const Contributors& contributors, const Unmasking& unmasking) {
  if (sum.group != unmasking.group) return;
  Contributors members;
  std::set_intersection(contributors.begin(), contributors.end(), sum.group.begin(), sum.group.end(),
                        std::inserter(members, members.end()));
  if (members != unmasking.survivors) return;
  add_masks(sum, unmasking.remove);
  sum.group = unmasking.survivors;
}

bool unmaskable(const MaskedStats& m, const Contributors& contributors) {
  return std::includes(contributors.begin(), contributors.end(), m.group.begin(), m.group.end());
}

StatsKnowledge unmask(const StatsKnowledge& sum, const Contributors& contributors, const std::string& where) {
  if (!sum.masked) return sum;
  const MaskedStats& m = *sum.masked;
  if (!unmaskable(m, contributors)) {
    Contributors missing;
    std::set_difference(m.group.begin(), m.group.end(), contributors.begin(), contributors.end(),
                        std::inserter(missing, missing.end()));
    throw InputError(where + ": masked statistics cannot be read without the pieces of " + to_string(missing) +
                     " (secure aggregation: the masks of group " + to_string(m.group) + " cancel only in their sum)");
  }
  StatsKnowledge s = sum;
  s.masked.reset();
  for (size_t c = 0; c < m.N.size(); ++c) {
    const double n = from_fixed_ring(m.N[c]);
    if (!(std::abs(n) < 0x1p53) || n != std::nearbyint(n))
      throw InputError(where + ": the unmasked count of class " + std::to_string(c) + " is not a count (" +
                       std::to_string(n) + "): a member masked with other keys or sent other values");
    s.N[c] += static_cast<int64_t>(n);
  }
  if (!m.counts_only) {
    size_t k = 0;
    for (Eigen::Index i = 0; i < s.A.rows(); ++i)
      for (Eigen::Index j = 0; j < s.A.cols(); ++j) s.A(i, j) += from_fixed_ring(m.A[k++]);
    k = 0;
    const Eigen::Index d = s.B.rows();
    for (Eigen::Index i = 0; i < d; ++i)
      for (Eigen::Index j = i; j < d; ++j) {
        s.B(i, j) += from_fixed_ring(m.B[k++]);
        s.B(j, i) = s.B(i, j);
      }
  }
  return s;
}

}  // namespace fednode
