#include "methods/wire_body.h"

namespace fednode {

void wire_fail(ProtocolErrorCode code, const std::string& message) { throw ProtocolError(code, message); }

std::string shape_text(const WireShape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void expect_dims(Eigen::Index rows_is, Eigen::Index cols_is, Eigen::Index rows, Eigen::Index cols,
                 const std::string& where) {
  if (rows_is != rows || cols_is != cols)
    wire_fail(ProtocolErrorCode::DimensionMismatch, where + ": is " + std::to_string(rows_is) + "x" +
                                                        std::to_string(cols_is) + ", expected " + std::to_string(rows) +
                                                        "x" + std::to_string(cols));
}

void add_samples(uint64_t& total, uint64_t count, const std::string& path, const Limits& limits) {
  check_limit(count, limits.max_samples, path, "max_samples");
  total += count;  // both at most max_samples <= 2^40: no overflow
  check_limit(total, limits.max_samples, path + " (all classes together)", "max_samples");
}

void check_class_entry(int label, int64_t count, int previous, int num_classes, const std::string& where) {
  if (label < 0 || label >= num_classes)
    wire_fail(ProtocolErrorCode::InvalidValue,
              where + ": label " + std::to_string(label) + " outside [0, " + std::to_string(num_classes) + ")");
  if (label <= previous)
    wire_fail(ProtocolErrorCode::InvalidValue, where + ": labels must be strictly increasing (" +
                                                   std::to_string(label) + " after " + std::to_string(previous) + ")");
  if (count < 1) wire_fail(ProtocolErrorCode::InvalidValue, where + ": count must be at least 1");
}

std::pair<int, int64_t> read_class_header(BodyValue& entry, int previous, int num_classes, uint64_t& samples,
                                          const Limits& limits) {
  const uint64_t label = entry.at("label")->uint();
  if (label >= static_cast<uint64_t>(num_classes))
    wire_fail(ProtocolErrorCode::InvalidValue, entry.path("label") + ": " + std::to_string(label) + " outside [0, " +
                                                   std::to_string(num_classes) + ")");
  if (static_cast<int>(label) <= previous)
    wire_fail(ProtocolErrorCode::InvalidValue, entry.path("label") + ": labels must be strictly increasing");
  const uint64_t count = entry.at("count")->uint();
  if (count < 1) wire_fail(ProtocolErrorCode::InvalidValue, entry.path("count") + ": must be at least 1");
  add_samples(samples, count, entry.path("count"), limits);
  return {static_cast<int>(label), static_cast<int64_t>(count)};
}

std::unique_ptr<BodyValue> read_class_list(BodyValue& body, const char* key, int num_classes) {
  auto list = body.at(key);
  const uint32_t n = list->items();
  if (n > static_cast<uint32_t>(num_classes))
    wire_fail(ProtocolErrorCode::InvalidValue, list->path() + ": " + std::to_string(n) + " entries for " +
                                                   std::to_string(num_classes) + " classes");
  return list;
}

}  // namespace fednode
