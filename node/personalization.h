// Personalisation (Method::personalizes; personalised FedCGS, docs/methods/fedcgs.md): a capability
// the node machine composes. It decorates the head a node sends its leaves with the class means of
// what that head was trained on, and once the plan is done trains the node's personal head from
// its head on its own data, aligned to those means. Wire-free, as the machine is.
#pragma once

#include "core/log.h"
#include "methods/method.h"

#include <functional>
#include <memory>
#include <string>

namespace fednode {

class Personalization {
 public:
  // Null when `method` does not personalise. `method` and `local` outlive the capability.
  static std::shared_ptr<Personalization> for_method(const Method& method, const Features* local, Say say);

  // The class means of `inputs` with the local data, those a head fitted on them aligns to. Where
  // `inputs` cannot be read (masked pieces of a first pass that never completed) the node's head
  // stands on its own data, and so do the means.
  std::shared_ptr<const ClassMeans> means_of(const KnowledgeList& inputs, const NodeContext& ctx) const;
  // The personal head from `head`, aligned to `means`; null without local data. Throws InputError
  // where none can be trained: `means` null (`head_from`'s head came without them), or a local
  // class no one else holds a mean of.
  std::shared_ptr<const Head> personal_head(const Head& head, const ClassMeans* means, const std::string& head_from,
                                            const NodeContext& ctx) const;

 private:
  Personalization(const Method& method, const Features* local, Say say)
      : method_(method), local_(local), say_(std::move(say)) {}

  const Method& method_;
  const Features* local_;
  Say say_;
};

}  // namespace fednode
