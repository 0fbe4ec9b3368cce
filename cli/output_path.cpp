#include "cli/output_path.h"

#include "core/types.h"

#include <filesystem>
#include <system_error>

#include <unistd.h>

namespace fednode::cli {

namespace fs = std::filesystem;

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

}  // namespace fednode::cli
