// FGL (paper 003, federated generative learning): a client sends, per class it holds, the
// label's name, a prompt and a count (methods/fgl/requests.h); knowledge is the union of the
// contributors' prompts, one shard per owner, so that overlapping pieces never count anyone twice.
// A receiver asks its generator (methods/fgl/generator.h) for a synthetic training set that follows the
// classes' counts and trains its head on it: the receiver never sees a sample of anyone's data.
#include "methods/fgl/fgl.h"

#include "methods/fgl/cnn_codec.h"
#include "methods/fgl/generator.h"
#include "methods/fgl/prompt_codec.h"

#include "core/elapsed.h"
#include "core/json_writer.h"
#include "core/rng.h"
#include "methods/fgl/requests.h"
#include "methods/method_options.h"
#include "methods/registry.h"
#include "methods/fgl/prompt_knowledge.h"

#include <chrono>
#include <cmath>
#include <map>
#include <sstream>

namespace fednode {
namespace {

constexpr const char* kMethod = "fgl";

// The shards a node holds: every one received and its own, one per owner, by owner.
std::vector<const PromptShard*> union_of_shards(const KnowledgeList& received, const PromptShard* own) {
  std::map<NodeId, const PromptShard*> by_owner;
  for (const Knowledge& k : received)
    for (const PromptShard& s : body_of<PromptKnowledge>(k.payload).shards) by_owner.emplace(s.owner, &s);
  if (own) by_owner.emplace(own->owner, own);
  std::vector<const PromptShard*> out;
  for (const auto& [owner, s] : by_owner) out.push_back(s);
  return out;
}

}  // namespace

std::unique_ptr<Head> fgl_receiver(const FglOptions& options, const LinearTrainOptions& linear, const Features& train,
                                   int channels, int size, uint64_t seed,
                                   const std::function<void(int, double)>& after_epoch,
                                   const std::function<void(const std::string&)>& progress) {
  if (options.receiver == FglOptions::Receiver::Linear) {
    LinearTrainOptions head = linear;
    head.seed = seed;
    HeadChoice chosen;
    auto trained = train_linear_head(train, head, after_epoch, &chosen);
    if (!head.lr && progress) progress("fgl head: " + chosen.summary());
    return trained;
  }
  CnnSpec spec = options.cnn;
  spec.image_size = size;
  spec.channels = channels;
  spec.classes = train.num_classes;
  CnnTrainOptions o = options.cnn_train;
  o.seed = seed;
  o.after_epoch = after_epoch;
  return std::make_unique<CnnHead>(train_cnn(cnn_init(spec, seed), train.X, train.y, o));
}

namespace {

class Fgl final : public Method {
 public:
  Fgl(const FglOptions& options, const LinearTrainOptions& head) : options_(options), head_(head) {}

  std::string name() const override { return kMethod; }

  Knowledge summarize(const Features& local, const NodeContext& ctx) const override {
    const std::string where = "fgl: node " + std::to_string(ctx.node) + " local data";
    if (local.size() == 0) throw InputError(where + ": no samples to describe");
    local.validate(where);
    Knowledge k = empty_knowledge(ctx);
    k.contributors = {ctx.node};
    k.payload = PromptKnowledge{{own_shard(local, ctx)}};
    return k;
  }

  Knowledge merge(const KnowledgeList& received, const Features* local, const NodeContext& ctx) const override {
    check_received(received, ctx);
    std::optional<PromptShard> own;
    if (local && local->size() > 0 && !holds(received, ctx.node)) own = own_shard(*local, ctx);
    Knowledge k = empty_knowledge(ctx);
    PromptKnowledge prompts;
    for (const PromptShard* s : union_of_shards(received, own ? &*own : nullptr)) {
      prompts.shards.push_back(*s);
      k.contributors.insert(s->owner);
    }
    k.payload = std::move(prompts);
    return k;
  }

  void validate(const Knowledge& piece, const NodeContext& ctx, const std::string& where) const override {
    check_compatible(piece, kMethod, ctx.dim, ctx.num_classes, ctx.backbone_fingerprint, where);
    const auto* p = body_if<PromptKnowledge>(&piece.payload);
    if (!p) throw InputError(where + ": not prompt knowledge");
    Contributors owners;
    for (const PromptShard& s : p->shards) {
      const std::string at = where + ", prompts of node " + std::to_string(s.owner);
      if (!owners.insert(s.owner).second) throw InputError(at + ": a second shard of the same node");
      int previous = -1;
      for (const ClassPrompts& c : s.classes) {
        if (c.label <= previous || c.label >= ctx.num_classes)
          throw InputError(at + ": class " + std::to_string(c.label) + " out of order or outside [0, " +
                           std::to_string(ctx.num_classes) + ")");
        previous = c.label;
        if (c.count < 1) throw InputError(at + ", class " + std::to_string(c.label) + ": no samples");
        if (c.name.empty() || c.prompt.empty())
          throw InputError(at + ", class " + std::to_string(c.label) + ": no name or no prompt");
        if (static_cast<int64_t>(c.captions.size()) > c.count)
          throw InputError(at + ", class " + std::to_string(c.label) + ": more captions than samples");
      }
    }
    if (owners != piece.contributors)
      throw InputError(where + ": the shards' owners " + to_string(owners) + " are not its contributors " +
                       to_string(piece.contributors));
  }

  std::unique_ptr<Head> fit_head(const KnowledgeList& received, const Features* local, const NodeContext& ctx) const override {
    check_received(received, ctx);
    std::optional<PromptShard> own;
    if (local && local->size() > 0 && !holds(received, ctx.node)) own = own_shard(*local, ctx);
    const std::vector<const PromptShard*> shards = union_of_shards(received, own ? &*own : nullptr);
    const std::string who = "fgl: node " + std::to_string(ctx.node);
    if (shards.empty()) throw InputError(who + " has no prompts to synthesise from (no local data, nothing received)");
    const auto* generator = dynamic_cast<const Generator*>(ctx.resource.get());
    if (!generator) throw InputError(who + " has no generator (--generator FILE or --generator-command CMD)");
    const std::vector<GenerationRequest> requests = synthesis_requests(shards, options_);
    const auto say = [&ctx](const std::string& line) {
      if (ctx.progress) ctx.progress(line);
    };
    const auto t0 = std::chrono::steady_clock::now();
    ImageBatch images = generator->generate(requests, fgl_synthesis_seed(ctx.seed, ctx.node), ctx.stop);
    say(who + ": " + generator->describe() + " drew " + std::to_string(images.pixels.rows()) + " images for " +
        std::to_string(requests.size()) + " requests in " + std::to_string(seconds_since(t0)) + " s");
    Features train;
    if (options_.receiver == FglOptions::Receiver::Linear && ctx.image_encoder) {
      const auto t1 = std::chrono::steady_clock::now();
      train.X = ctx.image_encoder->encode(images, ctx.stop);
      say(who + ": read the images through " + ctx.image_encoder->describe() + " in " +
          std::to_string(seconds_since(t1)) + " s");
    } else {
      train.X = std::move(images.pixels);
    }
    if (train.X.cols() != ctx.dim) throw InputError(who + ": " + mismatch(images, train.X.cols(), ctx));
    train.y = std::move(images.labels);
    train.num_classes = ctx.num_classes;
    train.validate(who + ": synthetic images");
    return train_receiver(train, images.channels, images.size, ctx);
  }

 private:
  Knowledge empty_knowledge(const NodeContext& ctx) const {
    Knowledge k;
    k.backbone_fingerprint = ctx.backbone_fingerprint;
    k.dim = ctx.dim;
    k.num_classes = ctx.num_classes;
    return k;
  }

  // Why the synthetic set's features do not fit this federation's, and what would.
  std::string mismatch(const ImageBatch& images, Eigen::Index got, const NodeContext& ctx) const {
    const std::string drawn = "the generator draws images of " + std::to_string(images.channels) + " x " +
                              std::to_string(images.size) + " x " + std::to_string(images.size) + " pixels";
    const std::string have = "this federation's features have " + std::to_string(ctx.dim) + " dimensions";
    if (options_.receiver == FglOptions::Receiver::Cnn)
      return drawn + " and the CNN trains on them; " + have +
             " (the CNN needs pixels of that size: --dataset without --backbone, or .npy pixels; "
             "--receiver linear reads the images through the node's backbone instead)";
    if (!ctx.image_encoder)
      return drawn + "; " + have + ", computed from images fednode never saw (.npy), so it cannot read the "
             "synthetic images the same way (give the data as --dataset, or .npy pixels of the generator's size)";
    return drawn + ", which " + ctx.image_encoder->describe() + " turns into " + std::to_string(got) +
           " dimensions; " + have;
  }

  // The receiver's network on the synthetic set (FglOptions::Receiver), seeded per node.
  std::unique_ptr<Head> train_receiver(const Features& train, int channels, int size, const NodeContext& ctx) const {
    const uint64_t seed = derive_seed(ctx.seed, {static_cast<uint64_t>(Purpose::HeadInit), ctx.node, head_.seed});
    const auto on_epoch = [&ctx](int epoch, double loss) {
      if (ctx.progress) ctx.progress("fgl head: epoch " + std::to_string(epoch) + ", loss " + std::to_string(loss));
      ctx.interruption_point();
    };
    return fgl_receiver(options_, head_, train, channels, size, seed, on_epoch, ctx.progress);
  }

  PromptShard own_shard(const Features& local, const NodeContext& ctx) const {
    return own_prompts(local, ctx.node, options_.class_names.empty() ? ctx.class_names : options_.class_names, options_);
  }

  void check_received(const KnowledgeList& received, const NodeContext& ctx) const {
    for (size_t i = 0; i < received.size(); ++i) validate(received[i], ctx, "fgl: received knowledge #" + std::to_string(i));
  }

  static bool holds(const KnowledgeList& received, NodeId node) {
    for (const Knowledge& k : received)
      if (k.contributors.count(node)) return true;
    return false;
  }

  FglOptions options_;
  LinearTrainOptions head_;
};

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) throw UsageError("--class-names: an empty name in '" + text + "' (comma-separated, in label order)");
    out.push_back(item);
  }
  return out;
}

void parse_fgl_options(const Args& a, MethodOptions& m) {
  FglOptions& o = own_options<FglOptions>(m);
  o.generator = a.str("generator", o.generator);
  o.generator_command = a.str("generator-command", o.generator_command);
  if (o.generator.empty() == o.generator_command.empty())
    throw UsageError("fgl needs one generator: --generator FILE (a TorchScript generator with its sidecar, e.g. one "
                     "`fednode train-generator` wrote) or --generator-command CMD");
  o.prompt = a.str("prompt", o.prompt);
  if (o.prompt.find("{name}") == std::string::npos)
    throw UsageError("--prompt '" + o.prompt + "' does not name the class: put {name} where the label's name goes");
  o.negative_prompt = a.str("negative-prompt", o.negative_prompt);
  if (a.has("class-names")) o.class_names = split_names(a.str("class-names", ""));
  o.images_per_sample = a.real("images-per-sample", o.images_per_sample, 1e-6, 1e4);
  o.max_images_per_class = static_cast<int>(a.integer("max-images-per-class", o.max_images_per_class, 0, 1 << 24));
  const std::string receiver = a.str("receiver", to_string(o.receiver));
  if (receiver == "cnn") o.receiver = FglOptions::Receiver::Cnn;
  else if (receiver == "linear") o.receiver = FglOptions::Receiver::Linear;
  else throw UsageError("--receiver must be cnn or linear, got '" + receiver + "'");
  o.cnn.width = static_cast<int>(a.integer("cnn-width", o.cnn.width, 1, 4096));
  o.cnn.hidden = static_cast<int>(a.integer("cnn-hidden", o.cnn.hidden, 1, 65536));
  o.cnn_train.epochs = static_cast<int>(a.integer("cnn-epochs", o.cnn_train.epochs, 0, 100000));
  o.cnn_train.min_steps = static_cast<int>(a.integer("cnn-min-steps", o.cnn_train.min_steps, 0, 1 << 30));
  o.cnn_train.lr = a.real("cnn-lr", o.cnn_train.lr, 1e-8, 10.0);
  o.cnn_train.batch_size = static_cast<int>(a.integer("cnn-batch-size", o.cnn_train.batch_size, 1, 1 << 20));
  if (o.receiver == FglOptions::Receiver::Linear)
    for (const char* name : {"cnn-width", "cnn-hidden", "cnn-epochs", "cnn-min-steps", "cnn-lr", "cnn-batch-size"})
      if (a.has(name)) throw UsageError(std::string("--") + name + " sets the CNN, but --receiver is linear");
}

std::string fgl_options_help() {
  const FglOptions o;
  std::ostringstream h;
  h << "FGL (receivers train on synthetic images; the CNN on their pixels: --dataset fashion-mnist without\n"
    << "  --backbone, or .npy pixels; the linear head on the node's features of them, through --backbone):\n"
    << "  --generator FILE | --generator-command CMD   the generative model (docs/methods/fgl.md)\n"
    << "  --prompt (\"" << o.prompt << "\") --negative-prompt (\"" << o.negative_prompt << "\")\n"
    << "  --class-names A,B,...   label i's name, where the data does not name its classes\n"
    << "  --images-per-sample (" << o.images_per_sample << ") --max-images-per-class (" << o.max_images_per_class
    << ": 0 is no cap)\n"
    << "  --receiver cnn|linear (" << to_string(o.receiver)
    << ": a CNN from scratch on the pixels, or the node's linear head on its features)\n"
    << "    the CNN: --cnn-width (" << o.cnn.width << ") --cnn-hidden (" << o.cnn.hidden << ") --cnn-epochs ("
    << o.cnn_train.epochs << ") --cnn-min-steps (" << o.cnn_train.min_steps << ") --cnn-lr (" << o.cnn_train.lr
    << ") --cnn-batch-size (" << o.cnn_train.batch_size << ")\n";
  return h.str();
}

void write_fgl_options(JsonWriter& w, const MethodOptions& m) {
  const FglOptions& o = own_options<FglOptions>(m);
  w.key("fgl").begin_object();
  if (!o.generator.empty()) w.key("generator").value(o.generator);
  if (!o.generator_command.empty()) w.key("generator_command").value(o.generator_command);
  w.key("prompt").value(o.prompt);
  w.key("negative_prompt").value(o.negative_prompt);
  if (!o.class_names.empty()) w.key("class_names").array(o.class_names);
  w.key("images_per_sample").value(o.images_per_sample);
  w.key("max_images_per_class").value(o.max_images_per_class);
  w.key("receiver").value(to_string(o.receiver));
  if (o.receiver == FglOptions::Receiver::Cnn) {
    w.key("cnn").begin_object();
    w.key("width").value(o.cnn.width);
    w.key("hidden").value(o.cnn.hidden);
    w.key("epochs").value(o.cnn_train.epochs);
    w.key("min_steps").value(o.cnn_train.min_steps);
    w.key("lr").value(o.cnn_train.lr);
    w.key("momentum").value(o.cnn_train.momentum);
    w.key("weight_decay").value(o.cnn_train.weight_decay);
    w.key("batch_size").value(o.cnn_train.batch_size);
    w.end_object();
  }
  w.end_object();
}

// The paper's comparison beside FGL: one-shot FedAvg of the receiver's network trained on each
// node's own data from one shared start, weighted by samples (the linear heads are affine in the
// same pixels, so their average is a head too), and, for the CNN, each node's own CNN as its
// local-only reference and, trained on all the real data, as the ceiling ("centralized"; the
// centralised linear head is the common baseline of every simulation).
MethodBaselines fgl_baselines(const Features& all, const std::vector<Features>& local, const Features& test,
                              const MethodOptions& m, uint64_t seed,
                              const std::function<void(const std::string&)>& progress) {
  const FglOptions& o = own_options<FglOptions>(m);
  MethodBaselines out;
  const auto t0 = std::chrono::steady_clock::now();
  const int channels = o.cnn.channels;
  const int size = static_cast<int>(std::lround(std::sqrt(static_cast<double>(all.dim()) / channels)));
  const bool cnn = o.receiver == FglOptions::Receiver::Cnn;
  if (cnn && channels * size * size != all.dim())
    throw InputError("fgl: the CNN trains on pixels, and features of dimension " + std::to_string(all.dim()) +
                     " are not square images of " + std::to_string(channels) +
                     " channel(s) (--dataset without --backbone; or --receiver linear)");
  // One start for every node, as FedAvg needs: the linear head starts from zero, the CNN from this.
  const uint64_t shared = derive_seed(seed, {static_cast<uint64_t>(Purpose::HeadInit), 0xFEDA});
  std::vector<float> sum;
  int64_t samples = 0;
  std::unique_ptr<Head> last;
  if (cnn) out.local_only.assign(local.size(), -1.0);
  for (size_t i = 0; i < local.size(); ++i) {
    if (local[i].size() == 0) continue;
    if (progress) progress("baselines: node " + std::to_string(i) + "'s " + to_string(o.receiver) + " for FedAvg");
    Features f = local[i];
    f.num_classes = all.num_classes;
    last = fgl_receiver(o, m.fedpft.head, f, channels, size, shared, {}, {});
    std::vector<float> flat;
    if (const auto* c = dynamic_cast<const CnnHead*>(last.get())) {
      flat = c->model().parameters;
      out.local_only[i] = last->accuracy(test);
    } else {
      const auto& h = dynamic_cast<const LinearHead&>(*last);
      flat.assign(h.weights().data(), h.weights().data() + h.weights().size());
      flat.insert(flat.end(), h.bias().data(), h.bias().data() + h.bias().size());
    }
    if (sum.empty()) sum.assign(flat.size(), 0.0f);
    for (size_t k = 0; k < flat.size(); ++k) sum[k] += static_cast<float>(f.size()) * flat[k];
    samples += f.size();
  }
  if (samples == 0) return out;
  for (float& v : sum) v /= static_cast<float>(samples);
  std::unique_ptr<Head> fedavg;
  if (const auto* c = dynamic_cast<const CnnHead*>(last.get())) {
    CnnModel avg = c->model();
    avg.parameters = sum;
    fedavg = std::make_unique<CnnHead>(std::move(avg));
  } else {
    const Eigen::Index C = all.num_classes, d = all.dim();
    fedavg = std::make_unique<LinearHead>("linear", Eigen::Map<const MatrixF>(sum.data(), C, d),
                                          Eigen::Map<const VectorF>(sum.data() + C * d, C));
  }
  out.run.push_back({"fedavg", fedavg->accuracy(test), seconds_since(t0)});
  if (progress) progress("baselines: fedavg " + std::to_string(out.run.back().accuracy));
  if (cnn) {  // the ceiling of the paper's network: trained on every node's real images
    const auto t1 = std::chrono::steady_clock::now();
    if (progress) progress("baselines: the CNN on all the data");
    const auto central = fgl_receiver(o, m.fedpft.head, all, channels, size, shared, {}, {});
    out.run.push_back({"centralized", central->accuracy(test), seconds_since(t1)});
  }
  return out;
}

}  // namespace

const char* to_string(FglOptions::Receiver r) { return r == FglOptions::Receiver::Cnn ? "cnn" : "linear"; }

uint64_t fgl_synthesis_seed(uint64_t run_seed, NodeId node) {
  return derive_seed(run_seed, {static_cast<uint64_t>(Purpose::Synthesis), node});
}

std::unique_ptr<Method> make_fgl(const MethodOptions& options) {
  return std::make_unique<Fgl>(own_options<FglOptions>(options), options.fedpft.head);
}

MethodDescriptor fgl_descriptor() {
  MethodDescriptor d;
  d.name = kMethod;
  d.knowledge = KnowledgeKind::Own;
  d.codec = std::make_shared<PromptCodec>();
  d.head_codec = std::make_shared<CnnHeadCodec>();
  d.options = {"generator", "generator-command", "prompt", "negative-prompt", "class-names", "images-per-sample",
               "max-images-per-class", "receiver", "cnn-width", "cnn-hidden", "cnn-epochs", "cnn-min-steps", "cnn-lr",
               "cnn-batch-size"};
  d.path_options = {"generator"};
  d.parse_options = parse_fgl_options;
  d.help = fgl_options_help;
  d.make = make_fgl;
  d.open_resource = [](const MethodOptions& o, std::shared_ptr<const Host> host) -> std::shared_ptr<const MethodResource> {
    return open_generator(own_options<FglOptions>(o), std::move(host));
  };
  d.half_precision = [](const MethodOptions&) { return false; };
  d.trains_linear_head = true;
  d.head_seed = [](const MethodOptions& o) { return o.fedpft.head.seed; };
  d.write_options = write_fgl_options;
  d.baselines = fgl_baselines;
  return d;
}

}  // namespace fednode
