// The one place that knows every method; kept apart from method.cpp so that code using one
// method does not link all of them.
#include "methods/registry.h"

#include "methods/fedcgs/fedcgs.h"
#include "methods/fedmitr/fedmitr.h"
#include "methods/fedpft/fedpft.h"
#include "methods/fedtc/fedtc.h"
#include "methods/fgl/fgl.h"
#include "methods/heads/layer_codec.h"

namespace fednode {

const std::vector<MethodDescriptor>& method_registry() {
  static const std::vector<MethodDescriptor> methods = {fedpft_descriptor(), fedcgs_descriptor(), fedtc_descriptor(),
                                                               fedmitr_descriptor(), fgl_descriptor()};
  return methods;
}

const MethodDescriptor* find_method(std::string_view name) {
  for (const auto& m : method_registry())
    if (m.name == name) return &m;
  return nullptr;
}

const MethodDescriptor& method_named(std::string_view name) {
  if (const MethodDescriptor* m = find_method(name)) return *m;
  throw InputError("unknown method '" + std::string(name) + "' (expected " + method_names() + ")");
}

const MethodDescriptor& method_sending(KnowledgeKind kind) {
  for (const auto& m : method_registry())
    if (m.knowledge == kind) return m;
  throw std::logic_error("no method sends knowledge of kind " + std::to_string(static_cast<int>(kind)));
}

std::string method_names() {
  const auto& methods = method_registry();
  std::string names;
  for (size_t i = 0; i < methods.size(); ++i)
    names += (i == 0 ? "" : i + 1 == methods.size() ? " or " : ", ") + methods[i].name;
  return names;
}

namespace {

// Every head codec: methods/heads' first, then each method's own, in the registry's order.
const std::vector<const HeadCodec*>& head_codecs() {
  static const LayerCodec layers;
  static const std::vector<const HeadCodec*> codecs = [] {
    std::vector<const HeadCodec*> all{&layers};
    for (const auto& m : method_registry())
      if (m.head_codec) all.push_back(m.head_codec.get());
    return all;
  }();
  return codecs;
}

}  // namespace

const HeadCodec* head_codec_for(std::string_view kind) {
  for (const HeadCodec* c : head_codecs())
    for (const std::string& k : c->kinds())
      if (k == kind) return c;
  return nullptr;
}

std::string head_kind_names() {
  std::vector<std::string> kinds;
  for (const HeadCodec* c : head_codecs())
    for (const std::string& k : c->kinds()) kinds.push_back(k);
  std::string names;
  for (size_t i = 0; i < kinds.size(); ++i)
    names += (i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + kinds[i];
  return names;
}

std::unique_ptr<Method> make_method(const MethodOptions& options) { return method_named(options.method).make(options); }

}  // namespace fednode
