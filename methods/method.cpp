#include "methods/method.h"

#include <stdexcept>

namespace fednode {

const SecretKey32& NodeContext::secret_noise_key(const std::string& method) const {
  if (!noise_key)
    throw InputError(method + " with DP on node " + std::to_string(node) +
                     ": no secret key for its noise (NodeContext::noise_key); noise drawn from the shared seed "
                     "could be redrawn and subtracted by every recipient");
  return *noise_key;
}

std::vector<PrivacyRelease> Method::privacy(const Features&, const NodeContext&) const {
  PrivacyRelease r;
  r.what = name() + " knowledge";
  r.mechanism = "none";
  r.epsilon = kNotPrivate;
  r.note = "an exact summary of the node's data";
  return {r};
}

ClassMeans Method::class_means(const KnowledgeList&, const Features*, const NodeContext&) const {
  throw std::logic_error(name() + " does not personalise: no class means");
}

std::unique_ptr<Head> Method::personal_head(const Features&, const ClassMeans&, const Head&, const NodeContext&) const {
  throw std::logic_error(name() + " does not personalise: no personal head");
}

const char* to_string(SecureAggregation s) {
  switch (s) {
    case SecureAggregation::Off: return "off";
    case SecureAggregation::All: return "all";
    case SecureAggregation::Counts: return "counts";
  }
  return "?";
}

const char* to_string(ComponentDraws d) {
  switch (d) {
    case ComponentDraws::Systematic: return "systematic";
    case ComponentDraws::Multinomial: return "multinomial";
  }
  return "?";
}

const char* to_string(FedPftOptions::SampleCorrelation c) {
  switch (c) {
    case FedPftOptions::SampleCorrelation::None: return "none";
    case FedPftOptions::SampleCorrelation::Local: return "local";
    case FedPftOptions::SampleCorrelation::Shared: return "shared";
  }
  return "?";
}

const char* to_string(FedPftOptions::HeadFit f) {
  switch (f) {
    case FedPftOptions::HeadFit::Auto: return "auto";
    case FedPftOptions::HeadFit::Sgd: return "sgd";
    case FedPftOptions::HeadFit::Lda: return "lda";
  }
  return "?";
}

FedPftOptions::HeadFit head_fit_used(const FedPftOptions& o) {
  if (o.head_fit != FedPftOptions::HeadFit::Auto) return o.head_fit;
  const bool lda_reads_these = !o.dp && o.gmm.covariance != CovarianceType::Full;
  const bool draws_asked_for =
      o.sample_correlation != FedPftOptions::SampleCorrelation::None || o.synthetic_multiplier != 1;
  return lda_reads_these && !draws_asked_for ? FedPftOptions::HeadFit::Lda : FedPftOptions::HeadFit::Sgd;
}

Selection select_for_combination(const KnowledgeList& received, const Features* local,
                                 const NodeContext& ctx, const std::string& method) {
  for (size_t i = 0; i < received.size(); ++i)
    check_compatible(received[i], method, ctx.dim, ctx.num_classes, ctx.backbone_fingerprint,
                     "received knowledge #" + std::to_string(i));
  std::vector<const Contributors*> sets;
  for (const auto& k : received) sets.push_back(&k.contributors);
  if (received.folded()) sets.push_back(&received.folded()->contributors());  // index received.size()
  const CombinePlan plan = plan_combination(sets);
  Selection s;
  for (size_t idx : plan.chosen) {
    if (idx == received.size()) s.use_folded = true;
    else s.pieces.push_back(&received[idx]);
    s.contributors.insert(sets[idx]->begin(), sets[idx]->end());
  }
  s.use_local = local != nullptr && local->size() > 0 && s.contributors.count(ctx.node) == 0;
  if (s.use_local) s.contributors.insert(ctx.node);
  return s;
}

}  // namespace fednode
