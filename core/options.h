// A small option parser: "--name value" and "--flag", every option declared up front so that a
// misspelt option is an error naming it rather than silently ignored. The command line and a
// topology file's [federation.data] / [federation.options] tables (as the arguments they stand
// for) go through it alike.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace fednode {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // `valued`: options that take a value; `flags`: options that do not; `repeated`: options that
  // take a value and may be given any number of times (read them with all()).
  Args(const std::vector<std::string>& argv, const std::set<std::string>& valued,
       const std::set<std::string>& flags, const std::set<std::string>& repeated = {});

  bool help() const { return help_; }
  bool has(const std::string& name) const;
  bool flag(const std::string& name) const { return has(name); }
  std::string str(const std::string& name, const std::string& fallback) const;
  std::string required(const std::string& name) const;
  std::optional<std::string> maybe(const std::string& name) const;
  long long integer(const std::string& name, long long fallback, long long lo, long long hi) const;
  double real(const std::string& name, double fallback, double lo, double hi) const;
  // Every value of a repeated option, in command-line order (empty when not given).
  std::vector<std::string> all(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> repeated_;
  bool help_ = false;
};

}  // namespace fednode
