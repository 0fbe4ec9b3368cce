#include "methods/fedmitr/receiver.h"

#include "core/elapsed.h"
#include "core/rng.h"
#include "core/types.h"
#include "methods/fedmitr/vit_head.h"

#include <chrono>
#include <cstdio>

namespace fednode {

const char* to_string(ReceiverVariant v) {
  switch (v) {
    case ReceiverVariant::FedMitr: return "fedmitr";
    case ReceiverVariant::DenseKd: return "dense-kd";
    case ReceiverVariant::SparsePseudoLabel: return "sparse-pseudo-label";
  }
  return "?";
}

VitModel average_models(const std::vector<VitModel>& models, const std::vector<double>& weights) {
  if (models.empty()) throw InputError("FedAvg: no model to average");
  if (weights.size() != models.size())
    throw InputError("FedAvg: " + std::to_string(weights.size()) + " weights for " + std::to_string(models.size()) + " models");
  double total = 0;
  for (double w : weights) {
    if (!(w >= 0) || !std::isfinite(w)) throw InputError("FedAvg: a weight is negative, NaN or Inf");
    total += w;
  }
  if (!(total > 0)) throw InputError("FedAvg: the weights sum to zero");
  // Accumulated in double: ten models of float32 parameters lose nothing that way.
  std::vector<double> sum(models[0].parameters.size(), 0.0);
  for (size_t m = 0; m < models.size(); ++m) {
    if (!(models[m].spec == models[0].spec) || models[m].parameters.size() != sum.size())
      throw InputError("FedAvg: the models have different specs");
    const double w = weights[m] / total;
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += w * models[m].parameters[i];
  }
  VitModel out;
  out.spec = models[0].spec;
  out.parameters.assign(sum.begin(), sum.end());
  return out;
}

namespace {

// One stage's distillation on the pool: on its images, or each epoch on a random view of every
// image, labelled by the ensemble on that view, its high tokens as many as the image kept.
VitModel distil_pool(const VitModel& student, const MatrixF& pool, const DistillTargets& targets, DistillOptions distill,
                     const std::vector<VitModel>& ensemble, const EnsembleMix& mix, const ViewOptions& views,
                     uint64_t views_seed) {
  if (!views.any()) return vit_distill(student, pool, targets, distill);
  const size_t T = static_cast<size_t>(student.spec.tokens());
  std::vector<int> high_counts(static_cast<size_t>(pool.rows()), 0);
  for (size_t b = 0; b < high_counts.size(); ++b)
    for (size_t t = 0; t < T; ++t) high_counts[b] += targets.high[b * T + t];
  Rng rng(views_seed);
  VitModel out = student;
  const int epochs = distill.epochs;
  distill.epochs = 1;
  for (int e = 0; e < epochs; ++e) {
    const MatrixF seen = random_views(pool, student.spec, views, rng);
    distill.seed = rng.next();
    out = vit_distill(out, seen, ensemble_view_targets(ensemble, seen, high_counts, mix), distill);
  }
  return out;
}

}  // namespace

VitModel distil_ensemble(const std::vector<VitModel>& ensemble, const std::vector<double>& samples,
                         const VitModel& start, const ReceiverOptions& o,
                         ReceiverVariant variant, uint64_t seed, const std::function<void(const std::string&)>& progress,
                         const std::atomic<bool>* stop, ReceiverTimes* times, const Features* watch) {
  if (ensemble.empty()) throw InputError("FedMITR: no model to distil");
  if (o.stages < 0 || o.images_per_stage < 1)
    throw InputError("FedMITR: the stages must be >= 0 and the images per stage >= 1");
  const VitSpec& s = ensemble[0].spec;
  const int C = s.classes, T = s.tokens();
  const EnsembleMix mix{o.ensemble, samples};
  mix.shares(ensemble.size());  // refuses counts that do not fit before any work
  InversionOptions inversion = o.inversion;
  if (variant == ReceiverVariant::DenseKd) inversion.mask_at.clear();
  DistillOptions distill = o.distill;
  distill.loss = variant == ReceiverVariant::FedMitr   ? DistillLoss::TokenRelabel
                 : variant == ReceiverVariant::DenseKd ? DistillLoss::Kd
                                                       : DistillLoss::PseudoLabel;
  VitModel student = start;
  MatrixF pool(0, s.pixels());
  DistillTargets targets;
  for (int stage = 0; stage < o.stages; ++stage) {
    interruption_point(stop);
    const auto t0 = std::chrono::steady_clock::now();
    Rng rng = Rng::stream(seed, Purpose::ModelInversion, static_cast<uint64_t>(stage));
    const int offset = static_cast<int>(rng.below(static_cast<uint64_t>(C)));
    Labels wanted(static_cast<size_t>(o.images_per_stage));
    for (int i = 0; i < o.images_per_stage; ++i) wanted[static_cast<size_t>(i)] = (offset + i) % C;
    inversion.seed = rng.next();
    const Inversion inv = vit_invert(ensemble, &student, wanted, inversion, mix);
    // The patches sparse inversion kept inverting to the end are the ones the ensemble attends
    // to: the high-attention tokens, relabelled with the pseudo-label. With views only their
    // counts are used (each view is labelled anew), but the scores on the images themselves cost
    // one pass over the stage's images where the views cost one over the whole pool each epoch.
    DistillTargets batch = ensemble_targets(ensemble, inv.images, inv.keep, mix);
    const double t_inversion = seconds_since(t0);

    const auto t1 = std::chrono::steady_clock::now();
    const Eigen::Index before = pool.rows();
    pool.conservativeResize(before + inv.images.rows(), Eigen::NoChange);
    pool.bottomRows(inv.images.rows()) = inv.images;
    targets.teacher_logits.conservativeResize(before + inv.images.rows(), C);
    targets.teacher_logits.bottomRows(inv.images.rows()) = batch.teacher_logits;
    targets.pseudo.insert(targets.pseudo.end(), batch.pseudo.begin(), batch.pseudo.end());
    targets.high.insert(targets.high.end(), batch.high.begin(), batch.high.end());
    distill.seed = rng.next();
    // Drawn only with views, so that a receiver without them keeps its stream (and results).
    const uint64_t views_seed = o.views.any() ? rng.next() : 0;
    student = distil_pool(student, pool, targets, distill, ensemble, mix, o.views, views_seed);
    const double t_distillation = seconds_since(t1);
    if (times) {
      times->inversion += t_inversion;
      times->distillation += t_distillation;
    }
    if (progress) {
      int64_t high = 0;
      for (uint8_t h : batch.high) high += h;
      char line[256];
      std::snprintf(line, sizeof line,
                    "%s: stage %d/%d: inverted %lld images in %.1f s (the ensemble's loss %.3f -> %.3f, %.1f of %d "
                    "patches high), distilled on %lld in %.1f s",
                    to_string(variant), stage + 1, o.stages, static_cast<long long>(inv.images.rows()), t_inversion,
                    inv.first_loss, inv.last_loss, static_cast<double>(high) / static_cast<double>(inv.images.rows()), T,
                    static_cast<long long>(pool.rows()), t_distillation);
      std::string said = line;
      if (watch && watch->size() > 0) {
        std::snprintf(line, sizeof line, "; the student scores %.3f on the test set",
                      VitHead(student).accuracy(*watch));
        said += line;
      }
      progress(said);
    }
  }
  return student;
}

}  // namespace fednode
