#include "node/personalization.h"

namespace fednode {

std::shared_ptr<Personalization> Personalization::for_method(const Method& method, const Features* local, Say say) {
  if (!method.personalizes()) return nullptr;
  return std::shared_ptr<Personalization>(new Personalization(method, local, std::move(say)));
}

std::shared_ptr<const ClassMeans> Personalization::means_of(const KnowledgeList& inputs, const NodeContext& ctx) const {
  try {
    return std::make_shared<const ClassMeans>(method_.class_means(inputs, local_, ctx));
  } catch (const InputError& e) {
    say_.warn(std::string("class means of the knowledge held: ") + e.what() + "; using the local data's");
    return std::make_shared<const ClassMeans>(method_.class_means({}, local_, ctx));
  }
}

std::shared_ptr<const Head> Personalization::personal_head(const Head& head, const ClassMeans* means,
                                                           const std::string& head_from, const NodeContext& ctx) const {
  if (!local_ || local_->size() == 0) return nullptr;
  if (!means)
    throw InputError("no class means came with the head of " + head_from +
                     ": a personal head needs them (does the hub run with --personalize?)");
  say_("training the personal head on " + std::to_string(local_->size()) + " local samples");
  return method_.personal_head(*local_, *means, head, ctx);
}

}  // namespace fednode
