#include "methods/fedmitr/baselines.h"

#include "core/elapsed.h"
#include "methods/fedmitr/fedmitr.h"
#include "methods/fedmitr/receiver.h"
#include "methods/fedmitr/vit_head.h"
#include "methods/method_options.h"
#include "methods/fedmitr/fedmitr_options.h"

#include <chrono>

namespace fednode {

// The paper's Table III beside FedMITR: one-shot FedAvg, the ensemble (an upper reference), dense
// inversion with KD, sparse inversion with pseudo-labels, each node's own model, and the same ViT
// trained on all the data. The clients' models are retrained from the run's seeds, which gives
// the models the run's nodes sent; the receivers use the hub's (node 0's) seed, as FedMITR's own
// head at node 0 does, so that the variants differ in their method alone.
MethodBaselines fedmitr_baselines(const Features& all, const std::vector<Features>& local, const Features& test,
                                  const MethodOptions& m, uint64_t seed,
                                  const std::function<void(const std::string&)>& progress) {
  const FedMitrOptions& o = own_options<FedMitrOptions>(m);
  const auto say = [&progress](const std::string& line) {
    if (progress) progress(line);
  };
  MethodBaselines out;
  std::vector<VitModel> models;
  std::vector<double> weights;
  out.local_only.assign(local.size(), -1.0);
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < local.size(); ++i) {
    if (local[i].size() == 0) continue;
    say("baselines: node " + std::to_string(i) + "'s ViT");
    Features own = local[i];
    own.num_classes = all.num_classes;
    const Features f = client_training_images(o, own, seed, static_cast<NodeId>(i));
    models.push_back(train_client_model(o, f, seed, static_cast<NodeId>(i)));
    weights.push_back(static_cast<double>(f.size()));
    out.local_only[i] = VitHead(models.back()).accuracy(test);
  }
  out.shared_seconds.push_back({"client training (all nodes)", -1, seconds_since(t0)});
  if (models.empty()) return out;
  const auto add = [&](const std::string& name, const VitModel& model, std::chrono::steady_clock::time_point start) {
    const double seconds = seconds_since(start);
    out.run.push_back({name, VitHead(model).accuracy(test), seconds});
    say("baselines: " + name + " " + std::to_string(out.run.back().accuracy));
  };
  t0 = std::chrono::steady_clock::now();
  const VitModel fedavg = average_models(models, weights);
  add("fedavg", fedavg, t0);

  t0 = std::chrono::steady_clock::now();
  const MatrixF scores = ensemble_logits(models, test.X, EnsembleMix{o.receiver.ensemble, weights});
  int64_t correct = 0;
  for (Eigen::Index r = 0; r < scores.rows(); ++r) {
    Eigen::Index best = 0;
    scores.row(r).maxCoeff(&best);
    correct += static_cast<int>(best) == test.y[static_cast<size_t>(r)];
  }
  out.run.push_back({"ensemble", test.size() ? static_cast<double>(correct) / static_cast<double>(test.size()) : 0.0,
                     seconds_since(t0)});
  say("baselines: ensemble " + std::to_string(out.run.back().accuracy));

  // The paper's student too when the node's head is not it, so that every head is in the table.
  std::vector<ReceiverVariant> receivers = {ReceiverVariant::DenseKd, ReceiverVariant::SparsePseudoLabel};
  if (o.receiver_head != ReceiverHead::Student) receivers.push_back(ReceiverVariant::FedMitr);
  for (ReceiverVariant v : receivers) {
    t0 = std::chrono::steady_clock::now();
    const VitModel distilled = distil_ensemble(models, weights, fedavg, o.receiver, v, fedmitr_receiver_seed(seed, 0), say, nullptr,
                                                 nullptr, progress ? &test : nullptr);
    add(v == ReceiverVariant::FedMitr ? "student" : to_string(v), distilled, t0);
  }
  t0 = std::chrono::steady_clock::now();
  say("baselines: the ViT on all the data");
  add("centralized", train_client_model(o, all, seed, 0xCE27), t0);
  return out;
}

}  // namespace fednode
