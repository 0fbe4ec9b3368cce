// A minimal streaming JSON writer for reports: enough for objects, arrays, numbers, strings.
// Non-finite numbers are written as null (JSON has no NaN), so a report always parses.
#pragma once

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace fednode {

// `s` as a JSON string literal, quotes included (control characters escaped).
inline std::string json_quoted(const std::string& s) {
  std::ostringstream out;
  out << '"';
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\t': out << "\\t"; break;
      case '\r': out << "\\r"; break;
      default:
        if (ch < 0x20) {
          out << "\\u" << std::hex << std::setw(4) << std::setfill('0') << int(ch) << std::dec;
        } else {
          out << ch;
        }
    }
  }
  out << '"';
  return out.str();
}

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}

  JsonWriter& begin_object() { open('{'); return *this; }
  JsonWriter& end_object() { close('}'); return *this; }
  JsonWriter& begin_array() { open('['); return *this; }
  JsonWriter& end_array() { close(']'); return *this; }

  JsonWriter& key(const std::string& k) {
    comma();
    indent();
    write_string(k);
    out_ << ": ";
    after_key_ = true;
    return *this;
  }
  JsonWriter& value(const std::string& s) { prefix(); write_string(s); return *this; }
  JsonWriter& value(const char* s) { return value(std::string(s)); }
  JsonWriter& value(bool b) { prefix(); out_ << (b ? "true" : "false"); return *this; }
  JsonWriter& value(double v) {
    prefix();
    if (!std::isfinite(v)) {
      out_ << "null";
    } else {
      std::ostringstream s;
      s << std::setprecision(10) << v;
      out_ << s.str();
    }
    return *this;
  }
  JsonWriter& value(int64_t v) { prefix(); out_ << v; return *this; }
  JsonWriter& value(uint64_t v) { prefix(); out_ << v; return *this; }
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(unsigned v) { return value(static_cast<uint64_t>(v)); }
  JsonWriter& null() { prefix(); out_ << "null"; return *this; }

  template <typename T>
  JsonWriter& array(const std::vector<T>& values) { return array_of(values); }
  template <typename Container>
  JsonWriter& array_of(const Container& values) {
    begin_array();
    compact_ = true;
    for (const auto& v : values) value(v);
    compact_ = false;
    close_compact(']');
    return *this;
  }

 private:
  void open(char c) {
    prefix();
    out_ << c;
    first_.push_back(true);
  }
  void close(char c) {
    const bool empty = first_.back();
    first_.pop_back();
    if (!empty) {
      out_ << '\n';
      indent();
    }
    out_ << c;
    if (first_.empty()) out_ << '\n';
  }
  void close_compact(char c) {
    first_.pop_back();
    out_ << c;
  }
  void prefix() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    comma();
    if (!compact_) indent();
  }
  void comma() {
    if (first_.empty()) return;
    if (!first_.back()) out_ << (compact_ ? ", " : ",");
    if (!compact_) out_ << (first_.size() ? "\n" : "");
    first_.back() = false;
  }
  void indent() {
    if (compact_) return;
    for (size_t i = 0; i < first_.size(); ++i) out_ << "  ";
  }
  void write_string(const std::string& s) { out_ << json_quoted(s); }

  std::ostream& out_;
  std::vector<bool> first_;
  bool after_key_ = false;
  bool compact_ = false;
};

}  // namespace fednode
