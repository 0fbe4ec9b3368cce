// The FedPFT Method: fedpft_core plus a LibTorch-trained linear head on synthetic + real features.
#include "methods/fedpft/fedpft.h"

#include "methods/fedpft/fedpft_core.h"
#include "core/rng.h"
#include "core/json_writer.h"
#include "methods/registry.h"

namespace fednode {

namespace {

class FedPft final : public Method {
 public:
  explicit FedPft(const FedPftOptions& options) : options_(options) {
    validate_fedpft_options(options_, "fedpft options");
  }

  std::string name() const override { return "fedpft"; }

  Knowledge summarize(const Features& local, const NodeContext& ctx) const override {
    return fedpft_summarize(local, options_, ctx);
  }

  Knowledge merge(const std::vector<Knowledge>& received, const Features* local,
                  const NodeContext& ctx) const override {
    return fedpft_merge(received, local, options_, ctx);
  }

  std::unique_ptr<Head> fit_head(const std::vector<Knowledge>& received, const Features* local,
                                 const NodeContext& ctx) const override {
    const Features train = fedpft_training_set(received, local, options_, ctx);
    LinearTrainOptions head = options_.head;
    // Each node's head gets its own stream, still determined by the run seed.
    head.seed = derive_seed(ctx.seed, {static_cast<uint64_t>(Purpose::HeadInit), ctx.node, options_.head.seed});
    const EpochCallback on_epoch = [&ctx](int epoch, double loss) {
      if (ctx.progress)
        ctx.progress("fedpft head: epoch " + std::to_string(epoch) + ", loss " + std::to_string(loss));
      ctx.interruption_point();
    };
    return train_linear_head(train, head, on_epoch);
  }

  void validate(const Knowledge& piece, const NodeContext& ctx, const std::string& where) const override {
    validate_gmm_knowledge(piece, ctx, where);
    check_piece_fits(piece, options_, ctx, where);
  }

 private:
  FedPftOptions options_;
};

}  // namespace

std::unique_ptr<Method> make_fedpft(const FedPftOptions& options) {
  return std::make_unique<FedPft>(options);
}

MethodDescriptor fedpft_descriptor() {
  MethodDescriptor d;
  d.name = "fedpft";
  d.knowledge = KnowledgeKind::Gmm;
  d.options = {"components", "covariance", "reg-covar", "tol", "max-iter", "n-init", "gmm-init",
               "transfer-precision", "dp", "dp-epsilon", "dp-delta", "synthetic-multiplier",
               "sample-correlation", "correlation-rank"};
  d.make = [](const MethodOptions& o) { return make_fedpft(o.fedpft); };
  d.half_precision = [](const MethodOptions& o) { return o.fedpft.half_precision; };
  d.trains_linear_head = true;
  d.head_seed = [](const MethodOptions& o) { return o.fedpft.head.seed; };
  d.write_options = [](JsonWriter& w, const MethodOptions& o) {
    const auto& p = o.fedpft;
    w.key("fedpft").begin_object();
    // What the run used: DP-FedPFT is one full Gaussian per class whatever the GMM options say.
    w.key("components").value(p.dp ? 1 : p.gmm.components);
    w.key("covariance").value(p.dp ? to_string(CovarianceType::Full) : to_string(p.gmm.covariance));
    w.key("reg_covar").value(p.gmm.reg_covar);
    w.key("tol").value(p.gmm.tol);
    w.key("max_iter").value(p.gmm.max_iter);
    w.key("n_init").value(p.gmm.n_init);
    w.key("init").value(p.gmm.init == GmmOptions::Init::KMeans ? "kmeans" : "kmeans++");
    w.key("transfer_precision").value(p.half_precision ? "float16" : "float32");
    w.key("synthetic_multiplier").value(p.synthetic_multiplier);
    w.key("sample_correlation").value(to_string(p.sample_correlation));
    if (p.sample_correlation == FedPftOptions::SampleCorrelation::Shared)
      w.key("correlation_rank").value(p.correlation_rank);
    w.key("dp").value(p.dp);
    if (p.dp) {
      w.key("dp_epsilon").value(p.dp_epsilon);
      w.key("dp_delta").value(p.dp_delta);
    }
    w.end_object();
  };
  return d;
}

}  // namespace fednode
