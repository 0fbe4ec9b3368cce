// A fresh directory of its own under the system's temporary directory, removed with everything
// in it when the test ends. mkdtemp makes the name unique, so tests of several suites (and
// several runs of one) never share files.
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace fednode::test {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "fednode_test") {
    std::string name = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (!::mkdtemp(name.data())) throw std::runtime_error("mkdtemp " + name + ": " + std::strerror(errno));
    path_ = name;
  }
  ~TempDir() {
    std::error_code ignored;  // a test that failed half-way must not also throw from here
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace fednode::test
