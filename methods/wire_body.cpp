#include "methods/wire_body.h"

namespace fednode {

void wire_fail(ProtocolErrorCode code, const std::string& message) { throw ProtocolError(code, message); }

std::string printable_text(std::string_view s) {
  std::string out(s.substr(0, 64));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  if (s.size() > 64) out += "...";
  return out;
}

void write_contributors(BodyWriter& w, const Contributors& c) {
  w.array(static_cast<uint32_t>(c.size()));
  for (NodeId id : c) w.uint(id);  // std::set iterates in increasing order
}

Contributors read_contributors(BodyValue& v, const Limits& limits) {
  const uint32_t n = v.items();
  check_limit(n, limits.max_contributors, v.path(), "max_contributors");
  if (n == 0) wire_fail(ProtocolErrorCode::InvalidValue, v.path() + ": names no contributors");
  Contributors out;
  uint64_t previous = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const auto item = v.item(i);
    const uint64_t id = item->uint();
    if (id > UINT32_MAX) wire_fail(ProtocolErrorCode::InvalidValue, item->path() + ": node id exceeds 32 bits");
    if (i > 0 && id <= previous)
      wire_fail(ProtocolErrorCode::InvalidValue, v.path() + ": ids must be strictly increasing (" + std::to_string(id) +
                                                     " after " + std::to_string(previous) + ")");
    previous = id;
    out.insert(out.end(), static_cast<NodeId>(id));
  }
  return out;
}

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

std::unique_ptr<BodyValue> read_one_per_contributor(BodyValue& body, const char* key, const std::string& noun,
                                                    const Knowledge& k) {
  auto list = body.at(key);
  const uint32_t n = list->items();
  if (n != k.contributors.size())
    wire_fail(ProtocolErrorCode::InvalidValue, list->path() + ": " + std::to_string(n) + " " + noun + "s for " +
                                                   std::to_string(k.contributors.size()) + " contributors");
  return list;
}

NodeId read_owner(BodyValue& entry) {
  const uint64_t owner = entry.at("owner")->uint();
  if (owner > UINT32_MAX) wire_fail(ProtocolErrorCode::InvalidValue, entry.path("owner") + ": node id exceeds 32 bits");
  return static_cast<NodeId>(owner);
}

}  // namespace fednode
