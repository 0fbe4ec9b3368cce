// FedMITR (paper 004): every client trains the federation's ViT on its own images and sends the
// model; knowledge is the set of models received, merged by union (an ensemble: a model is one
// contributor's, so the union never counts anyone twice, even where the pieces that carried the
// models overlap). A node's head is the ensemble distilled into one ViT by sparse model inversion
// and token relabelling (methods/fedmitr/receiver.h).
#include "methods/fedmitr/fedmitr.h"

#include "methods/fedmitr/model_codec.h"

#include "core/elapsed.h"
#include "core/float16.h"
#include "core/rng.h"
#include "methods/fedmitr/baselines.h"
#include "methods/fedmitr/options.h"
#include "methods/fedmitr/ensemble_head.h"
#include "methods/fedmitr/vit_head.h"
#include "methods/heads/train_common.h"
#include "methods/method_options.h"
#include "methods/registry.h"
#include "methods/fedmitr/model_knowledge.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>

namespace fednode {
namespace {

constexpr const char* kMethod = "fedmitr";

// An architecture in an error message.
std::string describe(const VitSpec& s) {
  if (s.scripted()) return "the TorchScript ViT " + s.script.substr(0, 16) + "...";
  return "patch " + std::to_string(s.patch) + ", dim " + std::to_string(s.dim) + ", depth " + std::to_string(s.depth);
}

// The ensemble a node holds: every model it received and its own, one per owner, by owner.
std::vector<const ClientModel*> union_of_models(const KnowledgeList& received, const ClientModel* own) {
  std::map<NodeId, const ClientModel*> by_owner;
  for (const Knowledge& k : received)
    for (const ClientModel& m : body_of<ModelKnowledge>(k.payload).models) by_owner.emplace(m.owner, &m);
  if (own) by_owner.emplace(own->owner, own);
  std::vector<const ClientModel*> out;
  for (const auto& [owner, m] : by_owner) out.push_back(m);
  return out;
}


// A cheap identity of a node's data, for the memo of train_client_model.
uint64_t data_digest(const Features& f) {
  uint64_t h = 0xCBF29CE484222325ULL ^ static_cast<uint64_t>(f.size());
  const auto mix = [&h](const void* p, size_t bytes) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 0x100000001B3ULL;
  };
  mix(f.X.data(), static_cast<size_t>(f.X.size()) * sizeof(float));
  mix(f.y.data(), f.y.size() * sizeof(int));
  return h;
}

class FedMitr final : public Method {
 public:
  explicit FedMitr(const FedMitrOptions& options) : options_(options) {}

  std::string name() const override { return kMethod; }

  Knowledge summarize(const Features& local, const NodeContext& ctx) const override {
    const std::string where = "fedmitr: node " + std::to_string(ctx.node) + " local images";
    if (local.size() == 0) throw InputError(where + ": no images to train on");
    if (local.dim() != ctx.dim)
      throw InputError(where + ": dimension " + std::to_string(local.dim()) + ", node expects " + std::to_string(ctx.dim));
    local.validate(where);
    Knowledge k;
    k.contributors = {ctx.node};
    k.backbone_fingerprint = ctx.backbone_fingerprint;
    k.dim = ctx.dim;
    k.num_classes = ctx.num_classes;
    k.payload = ModelKnowledge{{own_model(local, ctx)}};
    return k;
  }

  Knowledge merge(const KnowledgeList& received, const Features* local, const NodeContext& ctx) const override {
    check_received(received, ctx);
    std::optional<ClientModel> own;
    if (local && local->size() > 0 && !holds(received, ctx.node)) own = own_model(*local, ctx);
    Knowledge k;
    k.backbone_fingerprint = ctx.backbone_fingerprint;
    k.dim = ctx.dim;
    k.num_classes = ctx.num_classes;
    ModelKnowledge models;
    for (const ClientModel* m : union_of_models(received, own ? &*own : nullptr)) {
      models.models.push_back(*m);
      k.contributors.insert(m->owner);
    }
    k.payload = std::move(models);
    return k;
  }

  void validate(const Knowledge& piece, const NodeContext& ctx, const std::string& where) const override {
    check_compatible(piece, kMethod, ctx.dim, ctx.num_classes, ctx.backbone_fingerprint, where);
    const auto* m = body_if<ModelKnowledge>(&piece.payload);
    if (!m) throw InputError(where + ": not model knowledge");
    const VitSpec spec = fedmitr_spec(options_, ctx.dim, ctx.num_classes);
    Contributors owners;
    for (const ClientModel& c : m->models) {
      const std::string at = where + ", model of node " + std::to_string(c.owner);
      if (!(c.model.spec == spec))
        throw InputError(at + ": its ViT is not this federation's (" + describe(c.model.spec) + "; this node's: " +
                         describe(spec) + ")");
      if (static_cast<int64_t>(c.model.parameters.size()) != spec.parameter_count())
        throw InputError(at + ": " + std::to_string(c.model.parameters.size()) + " parameters, the spec has " +
                         std::to_string(spec.parameter_count()));
      for (float v : c.model.parameters)
        if (!std::isfinite(v)) throw InputError(at + ": parameters hold NaN or Inf");
      if (c.count < 1) throw InputError(at + ": trained on no sample");
      if (!owners.insert(c.owner).second) throw InputError(at + ": a second model of the same node");
    }
    if (owners != piece.contributors)
      throw InputError(where + ": the models' owners " + to_string(owners) + " are not its contributors " +
                       to_string(piece.contributors));
  }

  std::unique_ptr<Head> fit_head(const KnowledgeList& received, const Features* local, const NodeContext& ctx) const override {
    check_received(received, ctx);
    std::optional<ClientModel> own;
    if (local && local->size() > 0 && !holds(received, ctx.node)) own = own_model(*local, ctx);
    const std::vector<const ClientModel*> models = union_of_models(received, own ? &*own : nullptr);
    if (models.empty())
      throw InputError("fedmitr: node " + std::to_string(ctx.node) + " has no model to build its head from (no local images, "
                       "nothing received)");
    if (models.size() == 1) return std::make_unique<VitHead>(models[0]->model);  // nothing to distil or to mix
    std::vector<VitModel> ensemble;
    std::vector<double> weights;
    for (const ClientModel* m : models) {
      ensemble.push_back(m->model);
      weights.push_back(static_cast<double>(m->count));
    }
    const auto say = [&ctx](const std::string& line) {
      if (ctx.progress) ctx.progress(line);
    };
    auto teacher = std::make_unique<EnsembleHead>(ensemble, EnsembleMix{options_.receiver.ensemble, weights});
    if (options_.receiver_head == ReceiverHead::Ensemble) {
      say("fedmitr: the head is the ensemble of " + std::to_string(ensemble.size()) + " models");
      return teacher;
    }
    Features validation;
    if (options_.receiver_head == ReceiverHead::Best && local) {
      Features all = *local;
      all.num_classes = ctx.num_classes;
      client_training_images(options_, all, ctx.seed, ctx.node, &validation);
    }
    if (options_.receiver_head == ReceiverHead::Best && validation.size() == 0) {
      say("fedmitr: no images of its own to choose the head on: the head is the ensemble");
      return teacher;  // the stronger of the two in more of the measured runs
    }
    const VitModel fedavg = average_models(ensemble, weights);
    if (options_.receiver_head == ReceiverHead::Fedavg) {
      say("fedmitr: the head is the one-shot FedAvg of " + std::to_string(ensemble.size()) + " models");
      return std::make_unique<VitHead>(fedavg);
    }
    const auto wanted = [this](ReceiverHead h) {
      return options_.receiver_head == h ||
             std::find(options_.head_candidates.begin(), options_.head_candidates.end(), h) != options_.head_candidates.end();
    };
    std::unique_ptr<Head> student;
    if (wanted(ReceiverHead::Student)) {
      say("fedmitr: distilling an ensemble of " + std::to_string(ensemble.size()) + " models");
      student = std::make_unique<VitHead>(distil_ensemble(ensemble, weights, fedavg, options_.receiver,
                                                          ReceiverVariant::FedMitr, fedmitr_receiver_seed(ctx.seed, ctx.node),
                                                          say, ctx.stop, nullptr, ctx.progress ? ctx.watch : nullptr));
    }
    if (options_.receiver_head == ReceiverHead::Student) return student;
    return best_of(wanted(ReceiverHead::Ensemble) ? std::move(teacher) : nullptr, std::move(student),
                   wanted(ReceiverHead::Fedavg) ? std::make_unique<VitHead>(fedavg) : nullptr, validation, say);
  }

 private:
  // The candidate of highest accuracy on `validation`; a tie goes to the one named first (the
  // ensemble, then the student): a small split's tie is no evidence that the cheaper one is as good.
  // Absent candidates (null) are not weighed.
  static std::unique_ptr<Head> best_of(std::unique_ptr<Head> ensemble, std::unique_ptr<Head> student,
                                       std::unique_ptr<Head> fedavg, const Features& validation,
                                       const std::function<void(const std::string&)>& say) {
    std::unique_ptr<Head> candidates[] = {std::move(ensemble), std::move(student), std::move(fedavg)};
    const char* names[] = {"ensemble", "student", "fedavg"};
    size_t best = 0;
    double best_score = -1;
    std::string scores;
    for (size_t i = 0; i < 3; ++i) {
      if (!candidates[i]) continue;
      const double score = candidates[i]->accuracy(validation);
      char one[64];
      std::snprintf(one, sizeof one, "%s%s %.4f", scores.empty() ? "" : ", ", names[i], score);
      scores += one;
      if (score > best_score) {
        best = i;
        best_score = score;
      }
    }
    say(std::string("fedmitr: the head is the ") + names[best] + " (validation, " + std::to_string(validation.size()) +
        " of its own images: " + scores + ")");
    return std::move(candidates[best]);
  }

  void check_received(const KnowledgeList& received, const NodeContext& ctx) const {
    for (size_t i = 0; i < received.size(); ++i)
      validate(received[i], ctx, "fedmitr: received knowledge #" + std::to_string(i));
  }

  static bool holds(const KnowledgeList& received, NodeId node) {
    for (const Knowledge& k : received)
      if (k.contributors.count(node)) return true;
    return false;
  }

  ClientModel own_model(const Features& local, const NodeContext& ctx) const {
    ClientModel m;
    m.owner = ctx.node;
    Features all = local;
    all.num_classes = ctx.num_classes;
    Features f = client_training_images(options_, all, ctx.seed, ctx.node);
    m.count = f.size();
    const auto t0 = std::chrono::steady_clock::now();
    bool trained = false;
    m.model = train_client_model(options_, f, ctx.seed, ctx.node, &trained);
    if (trained && ctx.progress)
      ctx.progress("fedmitr: node " + std::to_string(ctx.node) + "'s ViT trained on " + std::to_string(f.size()) +
                   " images in " + std::to_string(seconds_since(t0)) + " s");
    return m;
  }

  FedMitrOptions options_;
};

}  // namespace

VitSpec fedmitr_spec(const FedMitrOptions& options, int dim, int num_classes) {
  if (!options.vit_script.empty()) {
    const VitSpec s = load_vit_script(options.vit_script);
    if (s.pixels() != dim)
      throw InputError("fedmitr: the ViT script " + options.vit_script + " takes " + std::to_string(s.channels) + " x " +
                       std::to_string(s.image_size) + " x " + std::to_string(s.image_size) + " images, the inputs have " +
                       std::to_string(dim) + " values");
    if (s.classes != num_classes)
      throw InputError("fedmitr: the ViT script " + options.vit_script + " has " + std::to_string(s.classes) +
                       " classes, the federation " + std::to_string(num_classes));
    return s;
  }
  VitSpec s = options.vit;
  s.classes = num_classes;
  const int per_channel = s.channels > 0 ? dim / s.channels : 0;
  const int side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(per_channel))));
  if (s.channels < 1 || per_channel * s.channels != dim || side * side != per_channel)
    throw InputError("fedmitr: inputs of dimension " + std::to_string(dim) + " are not square images of " +
                     std::to_string(s.channels) + " channel(s) (--vit-channels); FedMITR works on pixels, not a "
                     "backbone's features");
  s.image_size = side;
  s.validate("fedmitr: the ViT for " + std::to_string(side) + "x" + std::to_string(side) + " images");
  return s;
}

const char* to_string(ReceiverHead h) {
  switch (h) {
    case ReceiverHead::Ensemble: return "ensemble";
    case ReceiverHead::Student: return "student";
    case ReceiverHead::Fedavg: return "fedavg";
    case ReceiverHead::Best: return "best";
  }
  return "?";
}

Features client_training_images(const FedMitrOptions& options, const Features& local, uint64_t run_seed, NodeId node,
                                 Features* validation) {
  if (validation) *validation = Features{};
  if (options.receiver_head != ReceiverHead::Best || local.size() < 2) return local;
  ValidationSplit split = split_for_validation(
      local, options.validation_fraction, derive_seed(run_seed, {static_cast<uint64_t>(Purpose::HeadValidation), node, 0xF3D}));
  if (validation) *validation = std::move(split.validation);
  return std::move(split.fit);
}

VitModel train_client_model(const FedMitrOptions& options, const Features& local, uint64_t run_seed, NodeId node,
                           bool* trained) {
  const VitSpec spec = fedmitr_spec(options, local.dim(), local.num_classes);
  VitTrainOptions train = options.client;
  train.seed = derive_seed(run_seed, {static_cast<uint64_t>(Purpose::HeadShuffle), node, 0xF3D});
  // Training is a pure function of these, and takes most of a node's time: a chain's node needs
  // its model for what it sends and for its head, and the simulator's baselines need every node's
  // again. Remembered for the process, a few models (half a megabyte each) at most.
  std::string key;
  const auto add = [&key](const auto& v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  for (uint64_t v : {run_seed, uint64_t{node}, data_digest(local)}) add(v);
  for (int v : {spec.image_size, spec.channels, spec.patch, spec.dim, spec.depth, spec.heads, spec.mlp_dim, spec.classes,
                train.epochs, train.min_steps, train.batch_size, options.half_precision ? 1 : 0})
    add(v);
  for (double v : {train.lr, train.momentum, train.weight_decay}) add(v);
  key += spec.script;
  add(spec.script_parameters);
  static std::mutex mutex;
  static std::map<std::string, VitModel> memo;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = memo.find(key); it != memo.end()) {
      if (trained) *trained = false;
      return it->second;
    }
  }
  VitModel m = vit_train(vit_init(spec, run_seed), local.X, local.y, train);
  if (options.half_precision)
    for (float& v : m.parameters) v = round_to_half(v);  // what a receiver of float16 sees
  std::lock_guard<std::mutex> lock(mutex);
  if (memo.size() >= 64) memo.clear();
  memo.emplace(key, m);
  if (trained) *trained = true;
  return m;
}

uint64_t fedmitr_receiver_seed(uint64_t run_seed, NodeId node) {
  return derive_seed(run_seed, {static_cast<uint64_t>(Purpose::ModelInversion), node});
}

std::unique_ptr<Method> make_fedmitr(const FedMitrOptions& options) { return std::make_unique<FedMitr>(options); }

MethodDescriptor fedmitr_descriptor() {
  MethodDescriptor d;
  d.name = kMethod;
  d.knowledge = KnowledgeKind::Own;
  d.codec = std::make_shared<ModelCodec>();
  d.head_codec = std::make_shared<VitHeadCodec>();
  d.options = {"vit-script", "vit-channels", "vit-patch", "vit-dim", "vit-depth", "vit-heads", "vit-mlp-dim", "client-epochs",
               "client-min-steps",
               "client-lr", "client-batch-size", "model-precision", "ensemble", "distill-stages", "images-per-stage",
               "inversion-iterations", "inversion-lr", "tv-weight", "l2-weight", "js-weight", "mask-ratio", "mask-at",
               "distill-epochs", "distill-lr", "distill-batch-size", "distill-temperature", "token-weight",
               "high-token-weight", "low-token-weight", "distill-views", "receiver-head", "head-validation", "head-candidates"};
  d.path_options = {"vit-script"};
  d.parse_options = parse_fedmitr_options;
  d.help = fedmitr_options_help;
  d.make = [](const MethodOptions& o) { return make_fedmitr(own_options<FedMitrOptions>(o)); };
  d.half_precision = [](const MethodOptions& o) { return own_options<FedMitrOptions>(o).half_precision; };
  d.head_seed = [](const MethodOptions&) { return uint64_t{0}; };
  d.write_options = write_fedmitr_options;
  d.baselines = fedmitr_baselines;
  return d;
}

}  // namespace fednode
