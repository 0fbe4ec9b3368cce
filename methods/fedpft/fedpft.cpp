// The FedPFT Method: fedpft_core plus a LibTorch-trained linear head on synthetic + real features.
#include "methods/fedpft/fedpft.h"

#include "methods/fedpft/fedpft_core.h"
#include "core/rng.h"

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

}  // namespace fednode
