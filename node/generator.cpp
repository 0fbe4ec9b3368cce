#include "node/generator.h"

#include "core/digest.h"
#include "features/command_generator.h"
#include "methods/fgl/torch_generator.h"

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace fednode {
namespace {

std::string read_whole(const std::string& path, const std::string& role) {
  require_regular_file(path, role);
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in.good() && !in.eof()) throw InputError(path + ": cannot read the " + role);
  return bytes.str();
}

}  // namespace

std::string generator_sidecar_path(const std::string& model_path) { return model_path + ".generator"; }

std::shared_ptr<const Generator> open_generator(const FglOptions& options) {
  if (!options.generator_command.empty()) return make_command_generator(options.generator_command);
  if (options.generator.empty()) return nullptr;
  std::string module = read_whole(options.generator, "generator");
  const std::string digest = sha256_hex(module);
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const Generator>> opened;  // by the file's digest
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = opened.find(digest); it != opened.end()) return it->second;
  const std::string sidecar = generator_sidecar_path(options.generator);
  GeneratorInfo info = GeneratorInfo::parse(read_whole(sidecar, "generator's sidecar"), sidecar);
  return opened[digest] = make_torch_generator(std::move(module), std::move(info), digest);
}

}  // namespace fednode
