// FedTC (training-free clients): clients send per-class batch-level prototypes of their
// filtered features; a receiver pools the prototypes of every contributor and trains the
// adapter head on them. The paper's server is any node here: merging is the union of
// prototype sets, which never counts a contributor twice because only pieces chosen by
// select_for_combination are pooled.
#include "methods/fedtc/fedtc.h"

#include "methods/fedtc/prototype_codec.h"

#include "methods/fedtc/prototypes.h"
#include "core/rng.h"
#include "core/json_writer.h"
#include "methods/method_options.h"
#include "methods/registry.h"

#include <sstream>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

namespace fednode {
namespace {

constexpr const char* kMethod = "fedtc";

// Payload checks beyond check_compatible: a piece that passes them can be pooled and trained on.
void check_prototypes(const Knowledge& k, const std::string& where) {
  const auto* p = std::get_if<PrototypeKnowledge>(&k.payload);
  if (!p) throw InputError(where + ": not prototype knowledge");
  int previous = -1;
  for (const auto& c : p->classes) {
    const std::string cls = where + ", class " + std::to_string(c.label);
    if (c.label < 0 || c.label >= k.num_classes)
      throw InputError(where + ": class label " + std::to_string(c.label) + " outside [0, " +
                       std::to_string(k.num_classes) + ")");
    if (c.label <= previous) throw InputError(cls + ": classes not sorted or listed twice");
    previous = c.label;
    if (c.prototypes.rows() == 0) throw InputError(cls + ": no prototypes");
    if (c.prototypes.cols() != k.dim)
      throw InputError(cls + ": prototypes have " + std::to_string(c.prototypes.cols()) +
                       " columns, knowledge dimension is " + std::to_string(k.dim));
    if (c.count < c.prototypes.rows())
      throw InputError(cls + ": " + std::to_string(c.prototypes.rows()) + " prototypes claim only " +
                       std::to_string(c.count) + " samples");
    if (!all_finite(c.prototypes)) throw InputError(cls + ": prototypes hold NaN or Inf");
  }
}

class FedTc final : public Method {
 public:
  explicit FedTc(const FedTcOptions& options) : options_(options) {
    if (!(options_.keep_ratio > 0.0 && options_.keep_ratio <= 1.0))
      throw InputError("fedtc: keep ratio (alpha) must be in (0, 1], got " +
                       std::to_string(options_.keep_ratio));
    if (options_.batch_size < 1)
      throw InputError("fedtc: prototype batch size (B) must be at least 1, got " +
                       std::to_string(options_.batch_size));
  }

  std::string name() const override { return kMethod; }

  Knowledge summarize(const Features& local, const NodeContext& ctx) const override {
    const std::string where = "fedtc: node " + std::to_string(ctx.node) + " local features";
    if (local.size() == 0) throw InputError(where + ": no samples to summarise");
    if (local.dim() != ctx.dim)
      throw InputError(where + ": dimension " + std::to_string(local.dim()) + ", node expects " +
                       std::to_string(ctx.dim));
    if (local.num_classes != ctx.num_classes)
      throw InputError(where + ": " + std::to_string(local.num_classes) + " classes, node expects " +
                       std::to_string(ctx.num_classes));
    local.validate(where);

    PrototypeKnowledge payload;
    for (int c = 0; c < local.num_classes; ++c) {
      const MatrixF Z = local.rows_of_class(c);
      if (Z.rows() == 0) continue;
      const std::vector<int64_t> kept = filter_outliers(Z, options_.keep_ratio);
      MatrixF Zk(static_cast<Eigen::Index>(kept.size()), Z.cols());
      for (size_t i = 0; i < kept.size(); ++i) Zk.row(static_cast<Eigen::Index>(i)) = Z.row(kept[i]);
      Rng rng = Rng::stream(ctx.seed, Purpose::Prototypes, ctx.node, static_cast<uint64_t>(c));
      ClassPrototypes cp;
      cp.label = c;
      cp.count = static_cast<int64_t>(kept.size());
      cp.prototypes = batch_prototypes(Zk, options_.batch_size, rng);
      payload.classes.push_back(std::move(cp));
    }
    Knowledge k;
    k.contributors = {ctx.node};
    k.backbone_fingerprint = ctx.backbone_fingerprint;
    k.dim = ctx.dim;
    k.num_classes = ctx.num_classes;
    k.payload = std::move(payload);
    return k;
  }

  Knowledge merge(const KnowledgeList& received, const Features* local,
                  const NodeContext& ctx) const override {
    const Selection sel = select_for_combination(received, local, ctx, kMethod);
    std::vector<const Knowledge*> parts = sel.pieces;
    for (size_t i = 0; i < parts.size(); ++i)
      check_prototypes(*parts[i], "fedtc: received knowledge from nodes " + to_string(parts[i]->contributors));
    Knowledge own;
    if (sel.use_local) {
      own = summarize(*local, ctx);
      parts.push_back(&own);
    }

    // Pieces come in select_for_combination's deterministic order, so the pooled matrix (and
    // the head trained on it) does not depend on the order in which messages arrived.
    std::map<int, std::vector<const ClassPrototypes*>> by_class;
    for (const Knowledge* k : parts)
      for (const auto& c : std::get<PrototypeKnowledge>(k->payload).classes) by_class[c.label].push_back(&c);
    PrototypeKnowledge pooled;
    for (const auto& [label, pieces] : by_class) {
      ClassPrototypes cp;
      cp.label = label;
      Eigen::Index rows = 0;
      for (const ClassPrototypes* p : pieces) {
        rows += p->prototypes.rows();
        cp.count += p->count;
      }
      cp.prototypes.resize(rows, ctx.dim);
      Eigen::Index at = 0;
      for (const ClassPrototypes* p : pieces) {
        cp.prototypes.middleRows(at, p->prototypes.rows()) = p->prototypes;
        at += p->prototypes.rows();
      }
      pooled.classes.push_back(std::move(cp));
    }
    Knowledge k;
    k.contributors = sel.contributors;
    k.backbone_fingerprint = ctx.backbone_fingerprint;
    k.dim = ctx.dim;
    k.num_classes = ctx.num_classes;
    k.payload = std::move(pooled);
    return k;
  }

  void validate(const Knowledge& piece, const NodeContext& ctx, const std::string& where) const override {
    check_compatible(piece, kMethod, ctx.dim, ctx.num_classes, ctx.backbone_fingerprint, where);
    check_prototypes(piece, where);
  }

  std::unique_ptr<Head> fit_head(const KnowledgeList& received, const Features* local,
                                 const NodeContext& ctx) const override {
    const Knowledge k = merge(received, local, ctx);
    const auto& classes = std::get<PrototypeKnowledge>(k.payload).classes;
    Features train;
    train.num_classes = ctx.num_classes;
    Eigen::Index rows = 0;
    for (const auto& c : classes) rows += c.prototypes.rows();
    if (rows == 0)
      throw InputError("fedtc: node " + std::to_string(ctx.node) +
                       " has no prototypes to train its head on (no local data, nothing received)");
    train.X.resize(rows, ctx.dim);
    train.y.reserve(static_cast<size_t>(rows));
    Eigen::Index at = 0;
    for (const auto& c : classes) {
      train.X.middleRows(at, c.prototypes.rows()) = c.prototypes;
      train.y.insert(train.y.end(), static_cast<size_t>(c.prototypes.rows()), c.label);
      at += c.prototypes.rows();
    }

    AdapterTrainOptions opt = options_.head;
    opt.seed = derive_seed(ctx.seed, {static_cast<uint64_t>(Purpose::HeadInit), ctx.node});
    // A tenth of the fixed recipe's epochs between progress lines; with the learning rate chosen
    // on a validation split, the candidates' epochs are reported as they train.
    const int64_t every = std::max<int64_t>(1, training_epochs(train.size(), opt.batch_size, opt.epochs, opt.min_steps) / 10);
    const EpochCallback on_epoch = [&ctx, every](int epoch, double loss) {
      if (ctx.progress && (epoch + 1) % every == 0)
        ctx.progress("fedtc head: epoch " + std::to_string(epoch + 1) + ", loss " + std::to_string(loss));
      ctx.interruption_point();
    };
    HeadChoice chosen;
    auto head = train_adapter_head(train, opt, on_epoch, &chosen);
    if (ctx.progress && !opt.lr) ctx.progress("fedtc head: " + chosen.summary());
    return head;
  }

 private:
  FedTcOptions options_;
};

void parse_fedtc_options(const Args& a, MethodOptions& m) {
  auto& t = m.fedtc;
  t.keep_ratio = a.real("keep-ratio", t.keep_ratio, 1e-6, 1.0);
  t.batch_size = static_cast<int>(a.integer("prototype-batch", t.batch_size, 1, 1 << 20));
  t.head.lr = learning_rate_option(a, "adapter-lr", t.head.lr);
  t.head.momentum = a.real("adapter-momentum", t.head.momentum, 0.0, 1.0);
  t.head.epochs = static_cast<int>(a.integer("adapter-epochs", t.head.epochs, 1, 100000));
  t.head.batch_size = static_cast<int>(a.integer("adapter-batch-size", t.head.batch_size, 1, 1 << 24));
  t.head.weight_decay = a.real("adapter-weight-decay", t.head.weight_decay, 0.0, 10.0);
  // Widths up to 8192: the second layer's hidden1 x hidden2 weights and their momentum then
  // stay within about 1 GiB (the paper's adapter is 1024 x 512).
  t.head.hidden1 = static_cast<int>(a.integer("adapter-hidden1", t.head.hidden1, 1, 8192));
  t.head.hidden2 = static_cast<int>(a.integer("adapter-hidden2", t.head.hidden2, 1, 8192));
  t.head.min_steps = static_cast<int>(a.integer("adapter-min-steps", t.head.min_steps, 0, 1 << 30));
  if (a.flag("adapter-raw-inputs")) t.head.scale_inputs = false;
  t.head.threads = m.fedpft.head.threads;  // --threads, read with the linear head's options
  t.head.choice.fraction = m.fedpft.head.choice.fraction;  // --validation-fraction, likewise
}

std::string fedtc_options_help() {
  const FedTcOptions t;
  std::ostringstream h;
  h << "FedTC:\n"
    << "  --keep-ratio A (" << t.keep_ratio << ") --prototype-batch B (" << t.batch_size << ")\n"
    << "  --adapter-lr auto|LR (" << lr_text(t.head.lr) << ": from";
  for (double lr : t.head.choice.lrs) h << " " << lr;
  h << ") --adapter-momentum (" << t.head.momentum
    << ") --adapter-epochs (" << t.head.epochs << ") --adapter-batch-size (" << t.head.batch_size << ")\n"
    << "  --adapter-weight-decay (" << t.head.weight_decay << ") --adapter-hidden1 (" << t.head.hidden1
    << ") --adapter-hidden2 (" << t.head.hidden2 << ") --adapter-min-steps (" << t.head.min_steps << ")\n"
    << "  --adapter-raw-inputs              train on raw features (default: divided by their RMS value,\n"
       "                                    folded into the first layer)\n";
  return h.str();
}

}  // namespace

std::unique_ptr<Method> make_fedtc(const FedTcOptions& options) { return std::make_unique<FedTc>(options); }

MethodDescriptor fedtc_descriptor() {
  MethodDescriptor d;
  d.name = kMethod;
  d.knowledge = KnowledgeKind::Prototypes;
  d.codec = std::make_shared<PrototypeCodec>();
  d.options = {"keep-ratio", "prototype-batch", "adapter-lr", "adapter-momentum", "adapter-epochs",
               "adapter-batch-size", "adapter-weight-decay", "adapter-hidden1", "adapter-hidden2",
               "adapter-min-steps", "adapter-raw-inputs"};
  d.flags = {"adapter-raw-inputs"};
  d.parse_options = parse_fedtc_options;
  d.help = fedtc_options_help;
  d.make = [](const MethodOptions& o) { return make_fedtc(o.fedtc); };
  d.half_precision = [](const MethodOptions&) { return false; };
  d.head_seed = [](const MethodOptions& o) { return o.fedtc.head.seed; };
  d.write_options = [](JsonWriter& w, const MethodOptions& o) {
    const auto& t = o.fedtc;
    w.key("fedtc").begin_object();
    w.key("keep_ratio").value(t.keep_ratio);
    w.key("prototype_batch").value(t.batch_size);
    w.key("adapter").begin_object();
    w.key("hidden").array(std::vector<int>{t.head.hidden1, t.head.hidden2});
    write_learning_rate(w, t.head.lr, t.head.choice);
    w.key("momentum").value(t.head.momentum);
    w.key("epochs").value(t.head.epochs);
    w.key("batch_size").value(t.head.batch_size);
    w.key("weight_decay").value(t.head.weight_decay);
    w.key("min_steps").value(t.head.min_steps);
    w.key("scale_inputs").value(t.head.scale_inputs);
    w.end_object();
    w.end_object();
  };
  return d;
}

}  // namespace fednode
