// FedMITR's knowledge (methods/knowledge.h, KnowledgeBody): one trained model per contributor, and
// the samples it was trained on (one-shot FedAvg weighs by them). Merging is the union of models:
// an ensemble, never an average, so that no contributor is counted twice and the receiver still
// sees every client's model.
#pragma once

#include "methods/fedmitr/vit.h"
#include "methods/knowledge.h"

#include <memory>
#include <vector>

namespace fednode {

struct ClientModel {
  NodeId owner = 0;
  int64_t count = 0;
  VitModel model;  // spec.classes is the knowledge's class count, spec.pixels() its dimension
};

struct ModelKnowledge final : KnowledgeBody {
  std::vector<ClientModel> models;  // sorted by owner; the owners are the knowledge's contributors

  ModelKnowledge() = default;
  explicit ModelKnowledge(std::vector<ClientModel> m) : models(std::move(m)) {}
  const char* method() const override { return "fedmitr"; }
  // The parameters, and each model's owner, count and spec.
  int64_t payload_bytes(bool half_precision) const override {
    int64_t bytes = 0;
    for (const auto& c : models)
      bytes += static_cast<int64_t>(c.model.parameters.size()) * (half_precision ? 2 : 4) + 16 + 7 * 4;
    return bytes;
  }
  std::unique_ptr<KnowledgeBody> clone() const override { return std::make_unique<ModelKnowledge>(*this); }
};

}  // namespace fednode
