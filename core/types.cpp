#include "core/types.h"

#include <cmath>
#include <filesystem>

namespace fednode {

void Features::validate(const std::string& what) const {
  if (static_cast<size_t>(X.rows()) != y.size())
    throw InputError(what + ": " + std::to_string(X.rows()) + " feature rows but " +
                     std::to_string(y.size()) + " labels");
  if (num_classes <= 0) throw InputError(what + ": number of classes must be positive");
  for (size_t i = 0; i < y.size(); ++i)
    if (y[i] < 0 || y[i] >= num_classes)
      throw InputError(what + ": label " + std::to_string(y[i]) + " at row " + std::to_string(i) +
                       " is outside [0, " + std::to_string(num_classes) + ")");
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    for (Eigen::Index j = 0; j < X.cols(); ++j)
      if (!std::isfinite(X(i, j)))
        throw InputError(what + ": non-finite value at row " + std::to_string(i) + ", column " +
                         std::to_string(j));
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

Features Features::subset(const std::vector<int64_t>& rows) const {
  Features out;
  out.num_classes = num_classes;
  out.X.resize(static_cast<Eigen::Index>(rows.size()), X.cols());
  out.y.resize(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    out.X.row(static_cast<Eigen::Index>(r)) = X.row(rows[r]);
    out.y[r] = y.at(static_cast<size_t>(rows[r]));
  }
  return out;
}

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
