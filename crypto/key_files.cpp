#include "crypto/key_files.h"

#include "crypto/errors.h"
#include "crypto/secret_access.h"

#include <sodium.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fednode {
namespace {

constexpr std::string_view kSecretPrefix = "fednode-secret-key:";
// Key files are one short line; a bigger file is not a key file and is not read into memory.
constexpr off_t kMaxKeyFileBytes = 256;

std::string join(const std::string& dir, const char* name) { return (std::filesystem::path(dir) / name).string(); }

std::string errno_text() { return std::strerror(errno); }

// A string that wipes itself: holds secret key text while it is written or parsed.
struct WipedString {
  std::string s;
  ~WipedString() {
    if (!s.empty()) sodium_memzero(s.data(), s.size());
  }
};

void write_new_file(const std::string& path, std::string_view content, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) throw InputError(path + " already exists; refusing to overwrite a key");
    throw InputError("cannot create " + path + ": " + errno_text());
  }
  bool ok = ::fchmod(fd, mode) == 0;  // the umask may have removed bits; never added any
  size_t done = 0;
  while (ok && done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  const std::string error = ok ? "" : errno_text();
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    throw InputError("cannot write " + path + ": " + error);
  }
}

// Reads a small key file; for secret keys also insists that only the owner can access it.
void read_key_file(const std::string& path, bool secret, std::string& out) {
  // O_NONBLOCK: a FIFO in place of the file must not block the open; fstat then refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw InputError("cannot open key file " + path + ": " + errno_text());
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path + ": not a regular file");
  }
  if (secret && (st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw InputError(path + ": secret key is accessible to other users (mode " + mode +
                     "); refusing to use it. Run: chmod 600 " + path);
  }
  if (st.st_size > kMaxKeyFileBytes) {
    ::close(fd);
    throw InputError(path + ": " + std::to_string(st.st_size) + " bytes is too large for a key file");
  }
  out.assign(static_cast<size_t>(kMaxKeyFileBytes) + 1, '\0');
  size_t got = 0;
  for (;;) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string error = errno_text();
      ::close(fd);
      throw InputError("cannot read " + path + ": " + error);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (got == out.size()) break;
  }
  ::close(fd);
  out.resize(got);
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  return s;
}

}  // namespace

void write_identity(const std::string& dir, const Identity& identity) {
  ensure_sodium();
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) throw InputError("cannot create key directory " + dir + ": " + ec.message());
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  } else if (!std::filesystem::is_directory(dir, ec)) {
    throw InputError(dir + " exists and is not a directory");
  }
  const std::string secret_path = join(dir, kSecretKeyFile), public_path = join(dir, kPublicKeyFile);
  // Check both before writing either, so a refusal leaves no half-written identity.
  for (const std::string& p : {secret_path, public_path})
    if (std::filesystem::exists(std::filesystem::symlink_status(p, ec)))
      throw InputError(p + " already exists; refusing to overwrite a key");

  WipedString text;
  text.s.assign(kSecretPrefix);
  text.s.resize(kSecretPrefix.size() + 2 * kKeyBytes + 1);
  const auto& secret = SecretKeyAccess::secret(identity);
  sodium_bin2hex(text.s.data() + kSecretPrefix.size(), 2 * kKeyBytes + 1, secret.data(), secret.size());
  text.s.back() = '\n';
  write_new_file(secret_path, text.s, 0600);
  try {
    write_new_file(public_path, identity.public_key().to_hex() + "\n", 0644);
  } catch (...) {
    ::unlink(secret_path.c_str());
    throw;
  }
}

PublicKey write_new_identity(const std::string& dir) {
  const Identity id = Identity::generate();
  write_identity(dir, id);
  return id.public_key();
}

Identity load_secret_key_file(const std::string& path) {
  ensure_sodium();
  WipedString text;
  read_key_file(path, true, text.s);
  std::string_view body = trimmed(text.s);
  if (body.substr(0, kSecretPrefix.size()) != kSecretPrefix)
    throw InputError(path + ": not a fednode secret key file (expected a line starting with '" +
                     std::string(kSecretPrefix) + "')");
  body.remove_prefix(kSecretPrefix.size());
  if (body.size() != 2 * kKeyBytes)
    throw InputError(path + ": secret key has the wrong size: expected 64 hex digits (32 bytes), found " +
                     std::to_string(body.size()) + " characters");
  std::array<uint8_t, kKeyBytes> secret;
  size_t len = 0;
  const char* end = nullptr;
  const int rc = sodium_hex2bin(secret.data(), secret.size(), body.data(), body.size(), nullptr, &len, &end);
  if (rc != 0 || len != kKeyBytes || end != body.data() + body.size()) {
    sodium_memzero(secret.data(), secret.size());
    throw InputError(path + ": secret key is not valid hex");
  }
  try {
    Identity id = Identity::from_secret(secret.data(), secret.size(), path);
    sodium_memzero(secret.data(), secret.size());
    return id;
  } catch (...) {
    sodium_memzero(secret.data(), secret.size());
    throw;
  }
}

PublicKey load_public_key_file(const std::string& path) {
  std::string text;
  read_key_file(path, false, text);
  return PublicKey::parse(text, path);
}

Identity load_identity(const std::string& dir) {
  Identity id = load_secret_key_file(join(dir, kSecretKeyFile));
  const std::string public_path = join(dir, kPublicKeyFile);
  std::error_code ec;
  if (std::filesystem::exists(public_path, ec) && load_public_key_file(public_path) != id.public_key())
    throw InputError(public_path + " does not belong to " + join(dir, kSecretKeyFile) +
                     " (the public key derived from the secret key differs)");
  return id;
}

}  // namespace fednode
