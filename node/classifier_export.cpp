#include "node/classifier_export.h"

#include "core/json_writer.h"
#include "features/classifier_export.h"
#include "node/durable_file.h"

#include <sstream>

namespace fednode {

std::string export_sidecar_json(const Classifier& classifier, bool head_only) {
  const HeadCard& card = classifier.card();
  const FeatureRecipe& r = card.recipe;
  std::ostringstream s;
  JsonWriter w(s);
  w.begin_object();
  w.key("format").value("fednode classifier 1");
  w.key("input").value(head_only ? "features" : "images");
  if (head_only) {
    w.key("feature_dim").value(r.data_dim() > 0 ? r.data_dim() : (r.expansion.enabled() ? int64_t{0} : int64_t{classifier.head().dim()}));
  } else {
    const Preprocessing& p = r.preprocessing;
    w.key("input_size").value(p.input_size);
    w.key("channels").value(p.channels);
    w.key("images").value("[N, C, H, W] or [C, H, W]: uint8 pixel values (torchvision.io.read_image), or float in [0, 1]");
    w.key("resize").value(p.resize == ResizeMode::Bilinear ? "bilinear" : "nearest");
    w.key("fit").value(p.fit == FitMode::Stretch ? "stretch" : "center_crop");
    w.key("value_range").value(p.value_range == ValueRange::Unit ? "0-1" : "0-255");
    w.key("channel_order").value(p.channel_order == ChannelOrder::Rgb ? "rgb" : "bgr");
    w.key("mean").begin_array();
    for (float m : p.mean) w.value(static_cast<double>(m));
    w.end_array();
    w.key("std").begin_array();
    for (float v : p.std) w.value(static_cast<double>(v));
    w.end_array();
  }
  w.key("output").value("logits [N, classes]; softmax gives the probabilities fednode predict reports");
  w.key("kind").value(classifier.head().kind());
  w.key("personal").value(card.personal);
  w.key("classes").value(classifier.head().num_classes());
  w.key("class_names").begin_array();
  for (int c = 0; c < classifier.head().num_classes(); ++c) w.value(card.class_name(c));
  w.end_array();
  w.key("features").value(to_string(r.source));
  w.key("fingerprint").value(classifier.version() >= 2 ? r.fingerprint() : std::string("unknown"));
  w.key("backbone_fingerprint").value(r.backbone_fingerprint);
  w.key("expansion_dim").value(r.expansion.dim);
  w.key("expansion_seed").value(r.expansion.seed);
  w.key("method").value(card.method);
  w.key("run").value(card.run);
  w.key("node").value(card.node);
  w.key("contributors").begin_array();
  for (NodeId id : card.contributors) w.value(static_cast<int64_t>(id));
  w.end_array();
  w.end_object();
  s << "\n";
  return s.str();
}

void export_classifier(const Classifier& classifier, const std::string& out, bool head_only) {
  const FeatureRecipe& r = classifier.card().recipe;
  if (!head_only && !classifier.reads_images())
    throw InputError("the head reads features from .npy files, and its file records no backbone: export it with "
                     "--head-only, or name the backbone (--backbone)");
  ExportPlan plan;
  plan.images = !head_only;
  plan.out = out;
  plan.head = classifier.head().script();
  if (r.expansion.enabled()) {
    const int64_t d = r.data_dim();
    if (d <= 0) throw InputError("the head's expansion projects features of a width its file does not record; cannot export it");
    plan.projection = expansion_projection(static_cast<int>(d), r.expansion);
  }
  if (!head_only) {
    plan.preprocessing = r.preprocessing;
    if (r.source == FeatureRecipe::Source::Backbone) {
      // The file the node read, unchanged: its fingerprint must still be the head's.
      if (backbone_fingerprint(r.backbone, r.preprocessing) != r.backbone_fingerprint)
        throw InputError(r.backbone + ": changed since the head was trained on its features (its fingerprint is no longer " +
                         r.backbone_fingerprint.substr(0, 12) + "); name the right file with --backbone");
      plan.backbone = r.backbone;
    }
  }
  export_torchscript(plan);
  write_file_durably(out + ".json", export_sidecar_json(classifier, head_only));
}

}  // namespace fednode
