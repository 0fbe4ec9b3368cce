#include "methods/fgl/generator.h"

#include "core/digest.h"
#include "methods/fgl/command_generator.h"
#include "methods/fgl/torch_generator.h"

#include <map>
#include <mutex>

namespace fednode {

std::string generator_sidecar_path(const std::string& model_path) { return model_path + ".generator"; }

std::shared_ptr<const Generator> open_generator(const FglOptions& options, std::shared_ptr<const Host> host) {
  if (!options.generator_command.empty()) return make_command_generator(options.generator_command, std::move(host));
  if (options.generator.empty()) return nullptr;
  std::string module = host->read_file(options.generator, "generator");
  const std::string digest = sha256_hex(module);
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const Generator>> opened;  // by the file's digest
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = opened.find(digest); it != opened.end()) return it->second;
  const std::string sidecar = generator_sidecar_path(options.generator);
  GeneratorInfo info = GeneratorInfo::parse(host->read_file(sidecar, "generator's sidecar"), sidecar);
  return opened[digest] = make_torch_generator(std::move(module), std::move(info), digest);
}

}  // namespace fednode
