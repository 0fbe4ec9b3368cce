#include "node/durable_file.h"

#include "core/types.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fednode {
namespace {

std::string os_error() { return std::strerror(errno); }

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // some file systems do not allow it; the rename is still atomic
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_durably(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw InputError("cannot write '" + tmp + "': " + os_error());
  bool ok = write_all(fd, bytes.data(), bytes.size()) && ::fsync(fd) == 0;
  const std::string why = ok ? "" : os_error();
  ok = (::close(fd) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = why.empty() ? os_error() : why;
    std::remove(tmp.c_str());
    throw InputError("cannot write '" + path + "': " + reason);
  }
  const auto parent = std::filesystem::path(path).parent_path();
  sync_directory(parent.empty() ? "." : parent.string());
}

void replace_file_at_once(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << bytes;
    if (!f.flush()) throw InputError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw InputError("cannot replace " + path);
}

std::string read_file_bounded(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError("cannot read '" + path + "': " + ec.message());
  if (size > max_bytes)
    throw InputError("'" + path + "' has " + std::to_string(size) + " bytes, more than the " +
                     std::to_string(max_bytes) + " allowed");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size, '\0');
  if (!in || !in.read(bytes.data(), static_cast<std::streamsize>(size)))
    throw InputError("cannot read '" + path + "'");
  return bytes;
}

}  // namespace fednode
