#include "core/torch_library.h"

#include "core/openmp_threads.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace fednode {
namespace {

constexpr const char* kLibraryName = "libfednode_torch.so";

struct Loaded {
  void* handle = nullptr;
  std::string path;
};

std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("FEDNODE_TORCH_LIBRARY"); env && *env) {
    // An explicit choice is the only one: falling back would hide a mistake in it.
    out.push_back(env);
    return out;
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / kLibraryName).string());
    out.push_back((exe.parent_path().parent_path() / FEDNODE_TORCH_INSTALL_LIBDIR / "fednode" / kLibraryName)
                      .lexically_normal()
                      .string());
  }
  // Next to the shared object this code is in, when that is not the executable: the Python
  // module, installed with a copy of the library beside it (docs/python.md).
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&candidates), &self) && self.dli_fname) {
    const fs::path object = fs::absolute(self.dli_fname, ec);
    if (!ec && object != exe) out.push_back((object.parent_path() / kLibraryName).string());
  }
  out.push_back(FEDNODE_TORCH_BUILD_PATH);
  out.push_back(FEDNODE_TORCH_INSTALL_PATH);
  return out;
}

// dlopen runs LibTorch's static initialisers (operator registration): once per process, and never
// undone, since LibTorch does not support being unloaded.
Loaded load() {
  std::string tried;
  std::vector<std::string> seen;
  for (const std::string& path : candidates()) {
    bool repeat = false;
    for (const auto& s : seen) repeat = repeat || s == path;
    if (repeat) continue;
    seen.push_back(path);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      tried += "\n  " + path + ": no such file";
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      tried += "\n  " + path + ": " + (why ? why : "cannot be loaded");
      continue;
    }
    auto abi = reinterpret_cast<const char* (*)()>(dlsym(handle, "fednode_torch_abi"));
    if (!abi) {
      tried += "\n  " + path + ": not a fednode LibTorch library (no fednode_torch_abi)";
      continue;
    }
    if (std::string(abi()) != FEDNODE_TORCH_ABI) {
      tried += "\n  " + path + ": from another build (" + abi() + "; this one is " + FEDNODE_TORCH_ABI + ")";
      continue;
    }
    return {handle, path};
  }
  throw std::runtime_error(std::string("this needs LibTorch, which fednode loads from ") + kLibraryName +
                           ", and no usable copy was found (set FEDNODE_TORCH_LIBRARY to its path):" + tried);
}

std::mutex& mutex() {
  static std::mutex m;
  return m;
}

Loaded& loaded() {
  static Loaded l;
  return l;
}

void* library() {
  const std::lock_guard<std::mutex> lock(mutex());
  // A failed load is tried again next time: the error is the caller's, not the process's.
  if (!loaded().handle) {
    loaded() = load();
    // Before any entry point runs, whichever it is: an entry that did not ask for the thread count
    // first (FedMITR's ViT, FGL's generator and CNN did not) left LibTorch on its own default, one
    // thread on this project's 2-core machines.
    if (void* set = dlsym(loaded().handle, "fednode_torch_set_num_threads"))
      adopt_openmp_thread_default(reinterpret_cast<void (*)(int)>(set));
  }
  return loaded().handle;
}

}  // namespace

void* torch_library_symbol(const char* symbol) {
  void* handle = library();
  void* address = dlsym(handle, symbol);
  if (!address)
    throw std::runtime_error(torch_library_path() + " has no entry point " + symbol + " (from another build?)");
  return address;
}

bool torch_library_loaded() {
  const std::lock_guard<std::mutex> lock(mutex());
  return loaded().handle != nullptr;
}

std::string torch_library_path() {
  const std::lock_guard<std::mutex> lock(mutex());
  return loaded().path;
}

int torch_threads() {
  auto& set = torch_function<decltype(fednode_torch_set_num_threads)>("fednode_torch_set_num_threads");
  adopt_openmp_thread_default(set);
  return torch_function<decltype(fednode_torch_get_num_threads)>("fednode_torch_get_num_threads")();
}

void set_torch_threads(int threads) {
  auto& set = torch_function<decltype(fednode_torch_set_num_threads)>("fednode_torch_set_num_threads");
  adopt_openmp_thread_default(set);
  set(threads);
}

}  // namespace fednode
