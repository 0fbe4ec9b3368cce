#include "methods/method_options.h"

#include "methods/registry.h"

#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

namespace fednode {
namespace {

// Options every method reads: the linear head's (FedPFT trains it, and every method's baselines
// do) and the release policy (methods/dp/min_count.h).
const std::vector<std::string> kSharedOptions = {"head-lr",       "head-epochs", "head-batch-size",
                                                 "head-weight-decay", "head-min-steps", "threads",
                                                 "validation-fraction", "min-class-count", "secure-aggregation"};

bool is_flag(const MethodDescriptor& m, const std::string& name) {
  return std::find(m.flags.begin(), m.flags.end(), name) != m.flags.end();
}

// Options that only one method reads: given with another method they would be ignored, which
// hides a mistake (the head options serve every method: they also train the baselines).
void refuse_other_methods_options(const Args& a, const std::string& method) {
  const MethodDescriptor& own = method_named(method);
  const auto owns = [&](const std::string& name) {
    return std::find(own.options.begin(), own.options.end(), name) != own.options.end();
  };
  for (const MethodDescriptor& owner : method_registry())
    if (owner.name != method)
      for (const std::string& name : owner.options)
        if (a.has(name) && !owns(name))  // --dp and its settings belong to FedPFT and FedCGS both
          throw UsageError("--" + name + " is a " + owner.name + " option; the method is " + method);
}

void parse_head_options(const Args& a, LinearTrainOptions& h) {
  h.lr = learning_rate_option(a, "head-lr", h.lr);
  h.choice.fraction = a.real("validation-fraction", h.choice.fraction, 0.01, 0.9);
  h.epochs = static_cast<int>(a.integer("head-epochs", h.epochs, 1, 100000));
  h.batch_size = static_cast<int>(a.integer("head-batch-size", h.batch_size, 1, 1 << 24));
  h.weight_decay = a.real("head-weight-decay", h.weight_decay, 0.0, 10.0);
  h.min_steps = static_cast<int>(a.integer("head-min-steps", h.min_steps, 0, 1 << 30));
  if (a.flag("head-raw-inputs")) h.standardize = false;
  h.threads = static_cast<int>(a.integer("threads", h.threads, 0, 1024));
}

std::string head_options_help() {
  const LinearTrainOptions h;
  std::ostringstream out;
  out << "linear head (FedPFT and the baselines):\n"
      << "  --head-lr auto|LR (" << lr_text(h.lr) << ") --head-epochs (" << h.epochs << ") --head-batch-size (" << h.batch_size
      << ") --head-weight-decay (" << h.weight_decay << ")\n"
      << "  --head-min-steps (" << h.min_steps << ": small training sets still get this many Adam steps)\n"
      << "  --validation-fraction F (" << h.choice.fraction
      << ")     with lr auto (every head's default): each class's share held\n"
         "                                    out of the head's training set to choose its learning\n"
         "                                    rate (";
  for (size_t i = 0; i < h.choice.lrs.size(); ++i) out << (i ? ", " : "") << h.choice.lrs[i];
  out << " for the linear head) and epochs;\n"
         "                                    the test set is never used (docs/methods/heads.md)\n"
      << "  --head-raw-inputs                 train on raw features (default: standardised, folded back)\n"
      << "  --threads T                       LibTorch threads for the heads (" << h.threads
      << "; 0: LibTorch's setting,\n"
         "                                    OMP_NUM_THREADS or one per core)\n";
  return out.str();
}

}  // namespace

std::optional<double> learning_rate_option(const Args& a, const std::string& name,
                                           const std::optional<double>& fallback) {
  if (!a.has(name)) return fallback;
  if (a.str(name, "") == "auto") return std::nullopt;
  try {
    return a.real(name, 0.0, 1e-12, 10.0);
  } catch (const UsageError& e) {
    throw UsageError(std::string(e.what()) + ", or auto (chosen on a validation split of the training set)");
  }
}

void write_learning_rate(JsonWriter& w, const std::optional<double>& lr, const ValidationChoice& choice) {
  if (lr) {
    w.key("lr").value(*lr);
    return;
  }
  w.key("lr").value("auto");
  w.key("lr_candidates").array(choice.lrs);
  w.key("validation_fraction").value(choice.fraction);
}

const std::set<std::string>& method_option_names() {
  static const std::set<std::string> names = [] {
    std::set<std::string> n = {"method"};
    n.insert(kSharedOptions.begin(), kSharedOptions.end());
    for (const MethodDescriptor& m : method_registry())
      for (const std::string& o : m.options)
        if (!is_flag(m, o)) n.insert(o);
    return n;
  }();
  return names;
}

const std::set<std::string>& method_flag_names() {
  static const std::set<std::string> names = [] {
    std::set<std::string> n = {"head-raw-inputs"};
    for (const MethodDescriptor& m : method_registry()) n.insert(m.flags.begin(), m.flags.end());
    return n;
  }();
  return names;
}

MethodOptions parse_method_options(const Args& a) {
  MethodOptions m;
  m.method = a.str("method", m.method);
  const MethodDescriptor* method = find_method(m.method);
  if (!method) throw UsageError("--method must be " + method_names() + ", got '" + m.method + "'");
  refuse_other_methods_options(a, m.method);
  parse_head_options(a, m.fedpft.head);
  m.min_class_count = static_cast<int>(a.integer("min-class-count", m.min_class_count, 0, 1 << 30));
  const std::string secure = a.str("secure-aggregation", "off");
  if (secure == "all") m.secure_aggregation = SecureAggregation::All;
  else if (secure == "counts") m.secure_aggregation = SecureAggregation::Counts;
  else if (secure != "off") throw UsageError("--secure-aggregation must be off, all or counts, got '" + secure + "'");
  if (m.secure_aggregation != SecureAggregation::Off && method->knowledge != KnowledgeKind::Stats)
    throw UsageError("--secure-aggregation needs knowledge that adds up (fedcgs's statistics); " + m.method +
                     "'s does not: its receivers need each node's part");
  method->parse_options(a, m);
  return m;
}

std::string method_options_help() {
  const MethodOptions defaults;
  std::ostringstream h;
  h << "method:\n"
    << "  --method ";
  const auto& methods = method_registry();
  for (size_t i = 0; i < methods.size(); ++i) h << (i ? "|" : "") << methods[i].name;
  h << "      (default " << defaults.method << ")\n";
  for (const MethodDescriptor& m : methods) h << m.help();
  h << "release policy (every method):\n"
    << "  --min-class-count M               (" << defaults.min_class_count
    << ": off) a class a node holds fewer than M samples of\n"
       "                                    is not released; the node's ledger says so\n"
    << "  --secure-aggregation off|all|counts  (off) FedCGS on any topology of 3+ nodes: statistics\n"
       "                                    travel masked, only their total can be read (all parts\n"
       "                                    masked, or the class counts alone; docs/privacy.md)\n";
  h << head_options_help();
  return h.str();
}

}  // namespace fednode
