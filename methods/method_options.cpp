#include "methods/method_options.h"

#include "methods/fedpft/fedpft_core.h"
#include "methods/registry.h"

#include <sstream>
#include <utility>
#include <vector>

namespace fednode {

const std::set<std::string>& method_option_names() {
  static const std::set<std::string> names = {
      "method",       "components",   "covariance",        "reg-covar",     "tol",
      "max-iter",     "n-init",       "gmm-init",          "transfer-precision",
      "dp-epsilon",   "dp-delta",     "synthetic-multiplier", "sample-correlation", "correlation-rank", "head-lr",           "head-epochs",   "head-batch-size",
      "head-weight-decay", "head-min-steps", "threads", "lda-covariance",    "shrinkage",     "keep-ratio",
      "prototype-batch", "adapter-lr", "adapter-momentum", "adapter-epochs", "adapter-batch-size",
      "adapter-weight-decay", "adapter-hidden1", "adapter-hidden2", "adapter-min-steps"};
  return names;
}

const std::set<std::string>& method_flag_names() {
  static const std::set<std::string> names = {"dp", "head-raw-inputs", "adapter-raw-inputs"};
  return names;
}

namespace {

// Options that only one method reads: given with another method they would be ignored, which
// hides a mistake (the head options serve every method: they also train the baselines).
void refuse_other_methods_options(const Args& a, const std::string& method) {
  for (const MethodDescriptor& owner : method_registry())
    if (owner.name != method)
      for (const std::string& name : owner.options)
        if (a.has(name)) throw UsageError("--" + name + " is a " + owner.name + " option; the method is " + method);
  // The method that owns them is running (else they were refused above).
  if (!a.flag("dp"))
    for (const char* name : {"dp-epsilon", "dp-delta"})
      if (a.has(name)) throw UsageError("--" + std::string(name) + " sets DP-FedPFT's privacy; it needs --dp");
}

}  // namespace

MethodOptions parse_method_options(const Args& a) {
  MethodOptions m;
  m.method = a.str("method", m.method);
  if (!find_method(m.method)) throw UsageError("--method must be " + method_names() + ", got '" + m.method + "'");
  refuse_other_methods_options(a, m.method);

  auto& p = m.fedpft;
  p.gmm.components = static_cast<int>(a.integer("components", p.gmm.components, 1, 1000));
  p.gmm.covariance = parse_covariance_type(a.str("covariance", to_string(p.gmm.covariance)));
  p.gmm.reg_covar = a.real("reg-covar", p.gmm.reg_covar, 0.0, 1e6);
  p.gmm.tol = a.real("tol", p.gmm.tol, 0.0, 1e6);
  p.gmm.max_iter = static_cast<int>(a.integer("max-iter", p.gmm.max_iter, 1, 100000));
  p.gmm.n_init = static_cast<int>(a.integer("n-init", p.gmm.n_init, 1, 1000));
  const std::string init = a.str("gmm-init", "kmeans");
  if (init == "kmeans") p.gmm.init = GmmOptions::Init::KMeans;
  else if (init == "kmeans++") p.gmm.init = GmmOptions::Init::KMeansPlusPlus;
  else throw UsageError("--gmm-init must be kmeans or kmeans++, got '" + init + "'");
  const std::string precision = a.str("transfer-precision", "float16");
  if (precision == "float16") p.half_precision = true;
  else if (precision == "float32") p.half_precision = false;
  else throw UsageError("--transfer-precision must be float16 or float32, got '" + precision + "'");
  p.dp = a.flag("dp");
  p.dp_epsilon = a.real("dp-epsilon", p.dp_epsilon, 1e-9, 1e9);
  p.dp_delta = a.real("dp-delta", p.dp_delta, 1e-300, 1.0 - 1e-12);
  p.synthetic_multiplier = static_cast<int>(
      a.integer("synthetic-multiplier", p.synthetic_multiplier, 1, kMaxSyntheticMultiplier));
  const std::string correlation = a.str("sample-correlation", to_string(p.sample_correlation));
  if (correlation == "none") p.sample_correlation = FedPftOptions::SampleCorrelation::None;
  else if (correlation == "local") p.sample_correlation = FedPftOptions::SampleCorrelation::Local;
  else if (correlation == "shared") p.sample_correlation = FedPftOptions::SampleCorrelation::Shared;
  else throw UsageError("--sample-correlation must be none, local or shared, got '" + correlation + "'");
  if (a.has("sample-correlation") && p.sample_correlation != FedPftOptions::SampleCorrelation::None &&
      (p.dp || p.gmm.covariance == CovarianceType::Full))
    throw UsageError("--sample-correlation " + correlation + " applies to diagonal and spherical mixtures; " +
                     std::string(p.dp ? "DP-FedPFT's full Gaussians" : "full covariances") + " carry their own");
  p.correlation_rank = static_cast<int>(a.integer("correlation-rank", p.correlation_rank, 1, kMaxCorrelationRank));
  if (a.has("correlation-rank") && p.sample_correlation != FedPftOptions::SampleCorrelation::Shared)
    throw UsageError("--correlation-rank sets the shared covariance sketch; it needs --sample-correlation shared");

  auto& h = p.head;
  h.lr = a.real("head-lr", h.lr, 1e-12, 10.0);
  h.epochs = static_cast<int>(a.integer("head-epochs", h.epochs, 1, 100000));
  h.batch_size = static_cast<int>(a.integer("head-batch-size", h.batch_size, 1, 1 << 24));
  h.weight_decay = a.real("head-weight-decay", h.weight_decay, 0.0, 10.0);
  h.min_steps = static_cast<int>(a.integer("head-min-steps", h.min_steps, 0, 1 << 30));
  if (a.flag("head-raw-inputs")) h.standardize = false;
  h.threads = static_cast<int>(a.integer("threads", h.threads, 0, 1024));

  auto& c = m.fedcgs;
  const std::string cov = a.str("lda-covariance", c.covariance == LdaCovariance::Total ? "total" : "within");
  if (cov == "total") c.covariance = LdaCovariance::Total;
  else if (cov == "within") c.covariance = LdaCovariance::Within;
  else throw UsageError("--lda-covariance must be total or within, got '" + cov + "'");
  c.shrinkage = a.real("shrinkage", c.shrinkage, 0.0, 1.0);

  auto& t = m.fedtc;
  t.keep_ratio = a.real("keep-ratio", t.keep_ratio, 1e-6, 1.0);
  t.batch_size = static_cast<int>(a.integer("prototype-batch", t.batch_size, 1, 1 << 20));
  t.head.lr = a.real("adapter-lr", t.head.lr, 1e-12, 10.0);
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
  t.head.threads = h.threads;
  return m;
}

std::string method_options_help() {
  // Defaults from the option structs themselves, so that the help cannot drift from them.
  const FedPftOptions p;
  const FedCgsOptions c;
  const FedTcOptions t;
  const auto num = [](double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  std::ostringstream h;
  h << "method:\n"
       "  --method fedpft|fedcgs|fedtc      (default fedpft)\n"
       "FedPFT:\n"
       "  --components K                    mixture components per class ("
    << p.gmm.components << ")\n"
    << "  --covariance full|diag|spherical  (" << to_string(p.gmm.covariance) << ")\n"
    << "  --reg-covar R (" << num(p.gmm.reg_covar) << ") --tol T (" << num(p.gmm.tol) << ") --max-iter M ("
    << p.gmm.max_iter << ") --n-init I (" << p.gmm.n_init << ")\n"
    << "  --gmm-init kmeans|kmeans++        (" << (p.gmm.init == GmmOptions::Init::KMeans ? "kmeans" : "kmeans++")
    << ")\n"
    << "  --transfer-precision float16|float32   (" << (p.half_precision ? "float16" : "float32")
    << ", as the paper)\n"
    << "  --synthetic-multiplier M          synthetic draws per shared sample for the head ("
    << p.synthetic_multiplier << ")\n"
    << "  --sample-correlation none|local|shared\n"
    << "                                    draw diag/spherical samples with no within-class correlation\n"
    << "                                    (the paper), this node's own, or the one every node's\n"
    << "                                    covariance sketch adds up to (sent beside the mixtures) ("
    << to_string(p.sample_correlation) << ")\n"
    << "  --correlation-rank R              directions a shared sketch keeps (" << p.correlation_rank << ")\n"
    << "  --dp --dp-epsilon E (" << num(p.dp_epsilon) << ") --dp-delta D (" << num(p.dp_delta) << ")\n"
    << "                                    DP-FedPFT (Theorem 4.1: K=1, full covariance)\n"
    << "linear head (FedPFT and the baselines):\n"
    << "  --head-lr (" << num(p.head.lr) << ") --head-epochs (" << p.head.epochs << ") --head-batch-size ("
    << p.head.batch_size << ") --head-weight-decay (" << num(p.head.weight_decay) << ")\n"
    << "  --head-min-steps (" << p.head.min_steps << ": small training sets still get this many Adam steps)\n"
    << "  --head-raw-inputs                 train on raw features (default: standardised, folded back)\n"
    << "  --threads T                       LibTorch threads for the heads (" << p.head.threads
    << "; 0: LibTorch's setting,\n"
       "                                    OMP_NUM_THREADS or one per core)\n"
       "FedCGS:\n"
       "  --lda-covariance total|within     ("
    << (c.covariance == LdaCovariance::Within ? "within" : "total") << ")\n"
    << "  --shrinkage S in [0, 1]           (" << num(c.shrinkage) << ")\n"
    << "FedTC:\n"
    << "  --keep-ratio A (" << num(t.keep_ratio) << ") --prototype-batch B (" << t.batch_size << ")\n"
    << "  --adapter-lr (" << num(t.head.lr) << ") --adapter-momentum (" << num(t.head.momentum)
    << ") --adapter-epochs (" << t.head.epochs << ") --adapter-batch-size (" << t.head.batch_size << ")\n"
    << "  --adapter-weight-decay (" << num(t.head.weight_decay) << ") --adapter-hidden1 (" << t.head.hidden1
    << ") --adapter-hidden2 (" << t.head.hidden2 << ") --adapter-min-steps (" << t.head.min_steps << ")\n"
    << "  --adapter-raw-inputs              train on raw features (default: divided by their RMS value,\n"
       "                                    folded into the first layer)\n";
  return h.str();
}

}  // namespace fednode
