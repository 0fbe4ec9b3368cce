#include "cli/output_path.h"

#include "core/options.h"
#include "core/types.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include <unistd.h>

namespace fednode::cli {

namespace fs = std::filesystem;

std::string output_path_option(const Args& a, const std::string& name) {
  if (!a.has(name)) return "";
  const std::string path = a.str(name, "");
  if (path.empty()) throw UsageError("--" + name + " needs a file name, got an empty path");
  check_output_path("--" + name, path);
  return path;
}

bool is_stream_output(const std::string& path) {
  std::error_code ec;
  const fs::file_status s = fs::status(path, ec);
  return !ec && fs::exists(s) && !fs::is_regular_file(s) && !fs::is_directory(s);
}

void check_output_path(const std::string& option, const std::string& path) {
  const fs::path target(path);
  const std::string who = option + " " + path;
  std::error_code ec;
  if (fs::is_directory(target, ec)) throw InputError(who + ": is a directory");
  if (is_stream_output(path)) {
    if (::access(path.c_str(), W_OK) != 0) throw InputError(who + ": cannot be written");
    return;
  }
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  if (!fs::is_directory(dir, ec)) throw InputError(who + ": the directory '" + dir.string() + "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    throw InputError(who + ": the directory '" + dir.string() + "' is not writable");
}

void write_output_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw InputError(path + ": cannot write");
}

}  // namespace fednode::cli
