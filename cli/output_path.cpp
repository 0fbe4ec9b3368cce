#include "cli/output_path.h"

#include "methods/types.h"

#include <filesystem>
#include <system_error>

#include <unistd.h>

namespace fednode::cli {

void check_output_path(const std::string& option, const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string who = option + " " + path;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(who + ": the directory '" + dir.string() + "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    throw InputError(who + ": the directory '" + dir.string() + "' is not writable");
  if (fs::is_directory(target, ec)) throw InputError(who + ": is a directory");
}

}  // namespace fednode::cli
