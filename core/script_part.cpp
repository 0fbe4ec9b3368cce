#include "core/script_part.h"

namespace fednode {

std::vector<ScriptTensor> split_flat(const std::string& prefix, const std::vector<float>& flat,
                                     const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<ScriptTensor> out;
  size_t at = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    size_t n = 1;
    for (int64_t d : shapes[i]) n *= static_cast<size_t>(d);
    if (at + n > flat.size()) throw std::invalid_argument("split_flat: the shapes need more values than the vector holds");
    out.push_back({prefix + std::to_string(i), shapes[i], std::vector<float>(flat.begin() + static_cast<std::ptrdiff_t>(at),
                                                                              flat.begin() + static_cast<std::ptrdiff_t>(at + n))});
    at += n;
  }
  if (at != flat.size()) throw std::invalid_argument("split_flat: the shapes leave values of the vector unused");
  return out;
}

}  // namespace fednode
