// FedMITR's knowledge on the wire (docs/protocol.md 5.2, "fedmitr"): one trained model per
// contributor, with its owner, the samples it was trained on, its ViT's spec (6.4) and its
// parameters as one tensor of knowledge floats, whose length the spec decides.
#pragma once

#include "methods/fedmitr/vit.h"
#include "methods/wire_body.h"
#include "methods/fedmitr/model_knowledge.h"

namespace fednode {

class ModelCodec final : public KnowledgeCodec {
 public:
  void write(const Knowledge& k, BodyWriter& w) const override;
  KnowledgePayload read(BodyValue& body, const Knowledge& k, BodyReader& r) const override;
  void check(const Knowledge& k, const std::string& where, bool check_values) const override;
  void bound(const Knowledge& k, const Limits& limits, const std::string& where, uint64_t& samples) const override;
  size_t entries(const Knowledge& k) const override;
};

// FedMITR's heads (docs/protocol.md 5.3): the distilled ViT ("vit": its spec and parameters) and
// the received models' ensemble ("vit-ensemble": its rule and the models with their image counts).
class VitHeadCodec final : public HeadCodec {
 public:
  std::vector<std::string> kinds() const override { return {"vit", "vit-ensemble"}; }
  uint32_t entries(const Head&) const override { return 2; }
  void write(const Head& head, BodyWriter& w) const override;
  std::shared_ptr<const Head> read(const std::string& kind, BodyValue& map, uint64_t dim, uint64_t classes, BodyReader& r,
                                   const std::function<void()>& rest) const override;
  std::unique_ptr<Head> load(const std::string& kind, std::istream& in, const std::string& where) const override;
};

// A ViT's architecture (docs/protocol.md 6.4), in FedMITR's models and heads: image_size, channels,
// patch, dim, depth, heads and mlp_dim, and for a user's TorchScript ViT its file's digest and
// parameter count; its classes are the message's. Read values are bounded, and the spec checked by
// VitSpec::validate (InvalidValue) before anything it would size is allocated.
void write_vit_spec(BodyWriter& w, const VitSpec& spec);
VitSpec read_vit_spec(BodyValue& v, int classes);

}  // namespace fednode
