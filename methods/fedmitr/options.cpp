#include "methods/fedmitr/options.h"

#include "core/json_writer.h"
#include "methods/method_options.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace fednode {
namespace {

std::vector<int> parse_int_list(const std::string& text, const std::string& option) {
  std::vector<int> out;
  if (text.empty() || text == "none") return out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const int v = std::stoi(item, &used);
      if (used != item.size() || v < 1) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw UsageError("--" + option + ": '" + item + "' is not a positive integer (a comma-separated list, or none)");
    }
  }
  return out;
}

std::string candidate_list(const std::vector<ReceiverHead>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += std::string(i ? "," : "") + to_string(v[i]);
  return s;
}

std::string int_list(const std::vector<int>& v) {
  if (v.empty()) return "none";
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

void parse_fedmitr_options(const Args& a, MethodOptions& m) {
  auto& o = own_options<FedMitrOptions>(m);
  auto whole = [&a](const char* name, int fallback, int lo, int hi) {
    return static_cast<int>(a.integer(name, fallback, lo, hi));
  };
  o.vit.channels = whole("vit-channels", o.vit.channels, 1, 16);
  o.vit.patch = whole("vit-patch", o.vit.patch, 1, 4096);
  o.vit.dim = whole("vit-dim", o.vit.dim, 1, 1 << 14);
  o.vit.depth = whole("vit-depth", o.vit.depth, 1, 256);
  o.vit.heads = whole("vit-heads", o.vit.heads, 1, 1 << 14);
  o.vit.mlp_dim = whole("vit-mlp-dim", o.vit.mlp_dim, 1, 1 << 16);
  o.vit_script = a.str("vit-script", o.vit_script);
  if (o.vit.dim % o.vit.heads != 0)
    throw UsageError("--vit-dim " + std::to_string(o.vit.dim) + " is not a multiple of --vit-heads " +
                     std::to_string(o.vit.heads));
  o.client.epochs = whole("client-epochs", o.client.epochs, 0, 100000);
  o.client.min_steps = whole("client-min-steps", o.client.min_steps, 0, 1 << 30);
  o.client.lr = a.real("client-lr", o.client.lr, 1e-8, 10.0);
  o.client.batch_size = whole("client-batch-size", o.client.batch_size, 1, 1 << 20);
  const std::string precision = a.str("model-precision", o.half_precision ? "float16" : "float32");
  if (precision != "float16" && precision != "float32")
    throw UsageError("--model-precision: '" + precision + "' (expected float16 or float32)");
  o.half_precision = precision == "float16";
  auto& r = o.receiver;
  r.stages = whole("distill-stages", r.stages, 0, 100000);
  const std::string rule = a.str("ensemble", to_string(r.ensemble));
  if (rule == "mean-logits")
    r.ensemble = EnsembleRule::MeanLogits;
  else if (rule == "weighted-probabilities")
    r.ensemble = EnsembleRule::WeightedProbabilities;
  else
    throw UsageError("--ensemble: '" + rule + "' (expected weighted-probabilities or mean-logits)");
  const std::string head = a.str("receiver-head", to_string(o.receiver_head));
  if (head == "ensemble")
    o.receiver_head = ReceiverHead::Ensemble;
  else if (head == "student")
    o.receiver_head = ReceiverHead::Student;
  else if (head == "fedavg")
    o.receiver_head = ReceiverHead::Fedavg;
  else if (head == "best")
    o.receiver_head = ReceiverHead::Best;
  else
    throw UsageError("--receiver-head: '" + head + "' (expected ensemble, student, fedavg or best)");
  o.validation_fraction = a.real("head-validation", o.validation_fraction, 0.01, 0.5);
  if (a.has("head-validation") && o.receiver_head != ReceiverHead::Best)
    throw UsageError("--head-validation applies to --receiver-head best only (the others hold nothing out)");
  if (a.has("head-candidates")) {
    if (o.receiver_head != ReceiverHead::Best)
      throw UsageError("--head-candidates applies to --receiver-head best only");
    o.head_candidates.clear();
    std::stringstream in(a.str("head-candidates", ""));
    std::string item;
    while (std::getline(in, item, ',')) {
      ReceiverHead h;
      if (item == "ensemble") h = ReceiverHead::Ensemble;
      else if (item == "fedavg") h = ReceiverHead::Fedavg;
      else if (item == "student") h = ReceiverHead::Student;
      else throw UsageError("--head-candidates: '" + item + "' (a comma-separated list of ensemble, fedavg, student)");
      if (std::find(o.head_candidates.begin(), o.head_candidates.end(), h) != o.head_candidates.end())
        throw UsageError("--head-candidates: '" + item + "' twice");
      o.head_candidates.push_back(h);
    }
    if (o.head_candidates.empty()) throw UsageError("--head-candidates: empty (name at least one of ensemble, fedavg, student)");
  }
  r.images_per_stage = whole("images-per-stage", r.images_per_stage, 1, 1 << 20);
  r.inversion.iterations = whole("inversion-iterations", r.inversion.iterations, 0, 100000);
  r.inversion.lr = a.real("inversion-lr", r.inversion.lr, 1e-8, 100.0);
  r.inversion.tv_weight = a.real("tv-weight", r.inversion.tv_weight, 0.0, 1e6);
  r.inversion.l2_weight = a.real("l2-weight", r.inversion.l2_weight, 0.0, 1e6);
  r.inversion.js_weight = a.real("js-weight", r.inversion.js_weight, 0.0, 1e6);
  r.inversion.mask_ratio = a.real("mask-ratio", r.inversion.mask_ratio, 0.0, 0.99);
  if (a.has("mask-at")) {
    r.inversion.mask_at = parse_int_list(a.str("mask-at", ""), "mask-at");
  } else if (a.has("inversion-iterations")) {  // the default schedule, scaled: a quarter, half, three quarters in
    const int n = r.inversion.iterations;
    r.inversion.mask_at.clear();
    for (int at : {n / 4, n / 2, 3 * n / 4})
      if (at >= 1 && (r.inversion.mask_at.empty() || at > r.inversion.mask_at.back())) r.inversion.mask_at.push_back(at);
  }
  for (int at : r.inversion.mask_at)
    if (at >= r.inversion.iterations)
      throw UsageError("--mask-at " + std::to_string(at) + " is not before the last of --inversion-iterations " +
                       std::to_string(r.inversion.iterations));
  r.distill.epochs = whole("distill-epochs", r.distill.epochs, 0, 100000);
  r.distill.lr = a.real("distill-lr", r.distill.lr, 1e-8, 10.0);
  r.distill.batch_size = whole("distill-batch-size", r.distill.batch_size, 1, 1 << 20);
  r.distill.temperature = a.real("distill-temperature", r.distill.temperature, 1e-3, 1e3);
  r.distill.token_weight = a.real("token-weight", r.distill.token_weight, 0.0, 1e6);
  r.distill.high_weight = a.real("high-token-weight", r.distill.high_weight, 0.0, 1e6);
  r.distill.low_weight = a.real("low-token-weight", r.distill.low_weight, 0.0, 1e6);
  r.views = parse_view_options(a.str("distill-views", to_string(r.views)), "distill-views");
}

std::string fedmitr_options_help() {
  const FedMitrOptions o;
  const auto& r = o.receiver;
  std::ostringstream h;
  h << "FedMITR (inputs are images: --dataset fashion-mnist without --backbone, or .npy pixels):\n"
    << "  the ViT: --vit-channels (" << o.vit.channels << ") --vit-patch (" << o.vit.patch << ") --vit-dim (" << o.vit.dim
    << ") --vit-depth (" << o.vit.depth << ") --vit-heads (" << o.vit.heads << ") --vit-mlp-dim (" << o.vit.mlp_dim << ")\n"
    << "    or --vit-script FILE: your own TorchScript ViT (scripts/export_vit.py; its file's weights are the shared start)\n"
    << "  clients: --client-epochs (" << o.client.epochs << ") --client-min-steps (" << o.client.min_steps
    << ": fewer images, more epochs) --client-lr (" << o.client.lr << ") --client-batch-size ("
    << o.client.batch_size << ") --model-precision float16|float32 (" << (o.half_precision ? "float16" : "float32") << ")\n"
    << "  receiver: --receiver-head ensemble|best|fedavg|student (" << to_string(o.receiver_head)
    << "; ensemble: the received models themselves; fedavg: their one-shot\n"
    << "    average; student: distilled into one ViT, the paper's; best: of --head-candidates (" << candidate_list(o.head_candidates)
    << "; student too costs its\n"
    << "    distillation) on --head-validation (" << o.validation_fraction
    << ") of each class of the node's images, held out of its client's training)\n"
    << "    --ensemble weighted-probabilities|mean-logits (" << to_string(r.ensemble)
    << ": the teacher, and the ensemble head; mean-logits is the paper's)\n"
    << "    --distill-stages (" << r.stages << ") --images-per-stage (" << r.images_per_stage
    << ") --inversion-iterations (" << r.inversion.iterations << ") --inversion-lr (" << r.inversion.lr << ")\n"
    << "    --tv-weight (" << r.inversion.tv_weight << ") --l2-weight (" << r.inversion.l2_weight << ") --js-weight ("
    << r.inversion.js_weight << ") --mask-ratio (" << r.inversion.mask_ratio << ") --mask-at LIST|none ("
    << int_list(r.inversion.mask_at) << ", scaled to --inversion-iterations)\n"
    << "    --distill-epochs (" << r.distill.epochs << ") --distill-lr (" << r.distill.lr << ") --distill-batch-size ("
    << r.distill.batch_size << ") --distill-temperature (" << r.distill.temperature << ")\n"
    << "    --token-weight (" << r.distill.token_weight << ") --high-token-weight (" << r.distill.high_weight
    << ") --low-token-weight (" << r.distill.low_weight << ")\n"
    << "    --distill-views none|shift|flip|shift,flip (" << to_string(r.views)
    << "): each epoch, a random view of every synthetic image (moved up to 2 pixels, mirrored),\n"
    << "    labelled by the ensemble on that view\n";
  return h.str();
}

void write_fedmitr_options(JsonWriter& w, const MethodOptions& m) {
  const auto& o = own_options<FedMitrOptions>(m);
  const auto& r = o.receiver;
  w.key("fedmitr").begin_object();
  if (!o.vit_script.empty()) w.key("vit_script").value(o.vit_script);
  w.key("vit").begin_object();
  w.key("channels").value(o.vit.channels);
  w.key("patch").value(o.vit.patch);
  w.key("dim").value(o.vit.dim);
  w.key("depth").value(o.vit.depth);
  w.key("heads").value(o.vit.heads);
  w.key("mlp_dim").value(o.vit.mlp_dim);
  w.end_object();
  w.key("client").begin_object();
  w.key("epochs").value(o.client.epochs);
  w.key("min_steps").value(o.client.min_steps);
  w.key("lr").value(o.client.lr);
  w.key("batch_size").value(o.client.batch_size);
  w.key("momentum").value(o.client.momentum);
  w.key("weight_decay").value(o.client.weight_decay);
  w.end_object();
  w.key("model_precision").value(o.half_precision ? "float16" : "float32");
  w.key("receiver").begin_object();
  w.key("head").value(to_string(o.receiver_head));
  if (o.receiver_head == ReceiverHead::Best) {
    w.key("head_candidates").value(candidate_list(o.head_candidates));
    w.key("validation_fraction").value(o.validation_fraction);
  }
  w.key("stages").value(r.stages);
  w.key("ensemble").value(to_string(r.ensemble));
  w.key("images_per_stage").value(r.images_per_stage);
  w.key("inversion").begin_object();
  w.key("iterations").value(r.inversion.iterations);
  w.key("lr").value(r.inversion.lr);
  w.key("tv_weight").value(r.inversion.tv_weight);
  w.key("l2_weight").value(r.inversion.l2_weight);
  w.key("js_weight").value(r.inversion.js_weight);
  w.key("mask_ratio").value(r.inversion.mask_ratio);
  w.key("mask_at").array(r.inversion.mask_at);
  w.end_object();
  w.key("distillation").begin_object();
  w.key("epochs").value(r.distill.epochs);
  w.key("lr").value(r.distill.lr);
  w.key("batch_size").value(r.distill.batch_size);
  w.key("temperature").value(r.distill.temperature);
  w.key("token_weight").value(r.distill.token_weight);
  w.key("high_token_weight").value(r.distill.high_weight);
  w.key("low_token_weight").value(r.distill.low_weight);
  w.key("views").value(to_string(r.views));
  w.end_object();
  w.end_object();
  w.end_object();
}

}  // namespace fednode
