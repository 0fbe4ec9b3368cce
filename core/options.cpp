#include "core/options.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace fednode {

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& valued,
           const std::set<std::string>& flags, const std::set<std::string>& repeated) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + a + "'");
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const bool many = repeated.count(name) > 0;
    if (!many && values_.count(name)) throw UsageError("option --" + name + " given twice");
    if (flags.count(name)) {
      if (inline_value) throw UsageError("option --" + name + " takes no value");
      values_[name] = "";
    } else if (valued.count(name) || many) {
      if (!inline_value) {
        if (i + 1 >= argv.size()) throw UsageError("option --" + name + " needs a value");
        value = argv[++i];
      }
      if (many) repeated_[name].push_back(value);
      else values_[name] = value;
    } else {
      throw UsageError("unknown option --" + name);
    }
  }
}

bool Args::has(const std::string& name) const { return values_.count(name) > 0 || repeated_.count(name) > 0; }

std::vector<std::string> Args::all(const std::string& name) const {
  const auto it = repeated_.find(name);
  return it == repeated_.end() ? std::vector<std::string>{} : it->second;
}

std::string Args::str(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::optional<std::string> Args::maybe(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::required(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw UsageError("missing required option --" + name);
  return it->second;
}

long long Args::integer(const std::string& name, long long fallback, long long lo, long long hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno == ERANGE)
    throw UsageError("--" + name + " expects an integer, got '" + it->second + "'");
  if (v < lo || v > hi)
    throw UsageError("--" + name + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got " + it->second);
  return v;
}

namespace {

// The shortest form that reads back as the same double, so that a bound of 1e-6 reads "1e-06",
// not "0.000001", and one just below 1 does not print as 1 (which the check then refuses).
std::string format_bound(double v) {
  char text[32];
  const auto r = std::to_chars(text, text + sizeof text, v);
  return std::string(text, r.ptr);
}

}  // namespace

double Args::real(const std::string& name, double fallback, double lo, double hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw UsageError("--" + name + " expects a number, got '" + it->second + "'");
  if (v < lo || v > hi)
    throw UsageError("--" + name + " must be in [" + format_bound(lo) + ", " + format_bound(hi) +
                     "], got " + it->second);
  return v;
}

}  // namespace fednode
