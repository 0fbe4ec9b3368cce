#include "core/types.h"

#include <cmath>
#include <filesystem>

namespace fednode {

void Features::validate(const std::string& what) const {
  if (static_cast<size_t>(X.rows()) != y.size())
    throw InputError(what + ": " + std::to_string(X.rows()) + " feature rows but " +
                     std::to_string(y.size()) + " labels");
  rows().validate(what);
}

void FeatureRows::validate(const std::string& what) const {
  if (num_classes <= 0) throw InputError(what + ": number of classes must be positive");
  for (int64_t i = 0; i < n; ++i)
    if (y[i] < 0 || y[i] >= num_classes)
      throw InputError(what + ": label " + std::to_string(y[i]) + " at row " + std::to_string(i) +
                       " is outside [0, " + std::to_string(num_classes) + ")");
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j)
      if (!std::isfinite(X[i * d + j]))
        throw InputError(what + ": non-finite value at row " + std::to_string(i) + ", column " +
                         std::to_string(j));
}

Features FeatureRows::subset(const std::vector<int64_t>& rows) const {
  Features out;
  out.num_classes = num_classes;
  out.X.resize(static_cast<Eigen::Index>(rows.size()), d);
  out.y.resize(rows.size());
  const Eigen::Map<const MatrixF> all = matrix();
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r] < 0 || rows[r] >= n) throw std::out_of_range("FeatureRows::subset: row " + std::to_string(rows[r]));
    out.X.row(static_cast<Eigen::Index>(r)) = all.row(rows[r]);
    out.y[r] = y[rows[r]];
  }
  return out;
}

Features FeatureRows::copy() const {
  Features out;
  out.num_classes = num_classes;
  out.X = matrix();
  out.y.assign(y, y + n);
  return out;
}

FeatureRows FeatureRows::first(int64_t count) const {
  FeatureRows out = *this;
  if (count >= 0 && count < n) out.n = count;
  return out;
}

MatrixF Features::rows_of_class(int c) const {
  std::vector<int64_t> rows;
  for (size_t i = 0; i < y.size(); ++i)
    if (y[i] == c) rows.push_back(static_cast<int64_t>(i));
  MatrixF out(static_cast<Eigen::Index>(rows.size()), X.cols());
  for (size_t r = 0; r < rows.size(); ++r) out.row(static_cast<Eigen::Index>(r)) = X.row(rows[r]);
  return out;
}

std::vector<int64_t> Features::class_counts() const {
  std::vector<int64_t> counts(static_cast<size_t>(std::max(num_classes, 0)), 0);
  for (int32_t label : y) ++counts.at(static_cast<size_t>(label));
  return counts;
}

Features Features::subset(const std::vector<int64_t>& rows) const { return this->rows().subset(rows); }

Features Features::first(int64_t n) const {
  if (n < 0 || n >= size()) return *this;
  Features out;
  out.num_classes = num_classes;
  out.X = X.topRows(n);
  out.y.assign(y.begin(), y.begin() + n);
  return out;
}

void require_regular_file(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_regular_file(st)) return;
  if (path.empty()) throw InputError("the " + what + "'s path is empty");
  const bool vowel = !what.empty() && std::string("aeiouAEIOU").find(what[0]) != std::string::npos;
  const std::string article = what.rfind("IDX", 0) == 0 || vowel ? "an " : "a ";
  if (st.type() == fs::file_type::not_found) throw InputError(path + ": no such " + what);
  // A symbolic-link loop, a directory we may not enter, ...: said as the system says it.
  if (ec) throw InputError(path + ": cannot look at the " + what + ": " + ec.message());
  if (fs::is_directory(st)) throw InputError(path + " is a directory, not " + article + what);
  throw InputError(path + " is not a regular file, so not " + article + what);
}

std::string RunId::to_hex() const {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

}  // namespace fednode
