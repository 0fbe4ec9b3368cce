// What every fuzz target shares: the errors a decoder may throw for bad bytes, and a file that
// holds one input for the decoders that read paths.
//
// A decoder given hostile bytes must return or throw InputError (ProtocolError, SecurityError and
// RejectedMessage are InputErrors); anything else that escapes — std::bad_alloc, std::length_error,
// a crash, a sanitizer report — is a finding, so only InputError is caught here.
#pragma once

#include "core/types.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace fednode::fuzz {

template <typename F>
void expect_input_error_or_success(F&& decode) {
  try {
    decode();
  } catch (const InputError&) {
  }
}

// One file per process, rewritten for each input: the file decoders open paths, and libFuzzer
// runs inputs one after another in a process, so one path serves them all. On tmpfs when there
// is one, so that an input costs no disk write.
inline std::string write_input_file(const uint8_t* data, size_t size, const char* suffix, mode_t mode = 0600) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path = dir + "/fednode-fuzz-" + std::to_string(getpid()) + suffix;
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode);
  if (fd < 0) {
    std::perror(path.c_str());
    std::abort();
  }
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) {
      std::perror(path.c_str());
      std::abort();
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return path;
}

inline std::string_view as_view(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace fednode::fuzz
