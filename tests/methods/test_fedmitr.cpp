// FedMITR's receiver and method (methods/fedmitr/receiver.h, fedmitr.h): token relabelling
// teaches the pseudo-label on exactly the high-attention tokens and the ensemble's soft label on
// the others; distillation lowers that loss; FedAvg weighs by samples; knowledge merges by union
// of models; a received model of another architecture is refused; the head is the distilled ViT
// and survives a file.
#include "../common/node_context.h"
#include "core/rng.h"
#include "core/torch_library.h"
#include "methods/fedmitr/fedmitr.h"
#include "methods/fedmitr/ensemble_head.h"
#include "methods/fedmitr/receiver.h"
#include "methods/fedmitr/vit_head.h"
#include "vit_samples.h"
#include "methods/fedmitr/model_knowledge.h"
#include "methods/fedmitr/fedmitr_options.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace fednode {
namespace {

using FedMitr = test::OneTorchThread;
using TokenRelabel = FedMitr;
using test::random_images;
using test::scaled_model;

double log_softmax_at(const Eigen::RowVectorXf& z, int c) {
  const double m = z.maxCoeff();
  double sum = 0;
  for (int j = 0; j < z.size(); ++j) sum += std::exp(z[j] - m);
  return z[c] - m - std::log(sum);
}

// The loss written out from the forward pass's per-token scores: CE against the pseudo-label on
// the tokens flagged high, KL from the teacher's softmax on the rest, KD on the class scores.
double expected_loss(const VitModel& student, const MatrixF& images, const DistillTargets& t, const DistillOptions& o) {
  const VitOutput out = vit_forward(student, images);
  const int T = student.spec.tokens(), C = student.spec.classes;
  const int B = static_cast<int>(images.rows());
  double kd = 0, ce_high = 0, kl_low = 0;
  int high = 0, low = 0;
  for (int b = 0; b < B; ++b) {
    const Eigen::RowVectorXf teacher = t.teacher_logits.row(b);
    Eigen::RowVectorXd p(C);
    for (int c = 0; c < C; ++c) p[c] = std::exp(log_softmax_at(teacher, c));
    const Eigen::RowVectorXf cls = out.logits.row(b);
    for (int c = 0; c < C; ++c) kd += p[c] * (std::log(p[c]) - log_softmax_at(cls, c));
    for (int k = 0; k < T; ++k) {
      const Eigen::RowVectorXf token = out.token_logits.row(b * T + k);
      if (t.high[static_cast<size_t>(b * T + k)]) {
        ce_high -= log_softmax_at(token, t.pseudo[static_cast<size_t>(b)]);
        ++high;
      } else {
        for (int c = 0; c < C; ++c) kl_low += p[c] * (std::log(p[c]) - log_softmax_at(token, c));
        ++low;
      }
    }
  }
  return kd / B + o.token_weight * (o.high_weight * (high ? ce_high / high : 0) + o.low_weight * (low ? kl_low / low : 0));
}

TEST_F(TokenRelabel, UsesThePseudoLabelOnExactlyTheHighAttentionTokens) {
  const VitSpec s;
  const VitModel student = scaled_model(s, 3);
  const std::vector<VitModel> ensemble = {scaled_model(s, 4), scaled_model(s, 5)};
  const MatrixF images = random_images(s, 3, 7);
  Rng rng(9);
  std::vector<uint8_t> high(static_cast<size_t>(3 * s.tokens()));
  for (auto& h : high) h = rng.uniform() < 0.4;
  DistillTargets t = ensemble_targets(ensemble, images, high);
  DistillOptions o;
  o.loss = DistillLoss::TokenRelabel;
  const double loss = vit_distill_loss(student, images, t, o);
  EXPECT_NEAR(loss, expected_loss(student, images, t, o), 1e-4 * std::abs(loss));
  // The pseudo-label reaches the high tokens only: with none high, it changes nothing.
  std::fill(t.high.begin(), t.high.end(), 0);
  const double none_high = vit_distill_loss(student, images, t, o);
  t.pseudo = {(t.pseudo[0] + 1) % s.classes, (t.pseudo[1] + 3) % s.classes, (t.pseudo[2] + 5) % s.classes};
  EXPECT_DOUBLE_EQ(vit_distill_loss(student, images, t, o), none_high);
  EXPECT_NEAR(none_high, expected_loss(student, images, t, o), 1e-4 * none_high);
  // With every token high it does, and the soft labels reach no token.
  std::fill(t.high.begin(), t.high.end(), 1);
  EXPECT_NEAR(vit_distill_loss(student, images, t, o), expected_loss(student, images, t, o), 1e-4 * loss);
  // KD alone is the token weight at zero; pseudo-labels alone are the cross-entropy on the class scores.
  o.token_weight = 0;
  const double kd = vit_distill_loss(student, images, t, o);
  o.loss = DistillLoss::Kd;
  o.token_weight = 1;
  EXPECT_DOUBLE_EQ(vit_distill_loss(student, images, t, o), kd);
  o.loss = DistillLoss::PseudoLabel;
  const VitOutput out = vit_forward(student, images);
  double ce = 0;
  for (int b = 0; b < 3; ++b) ce -= log_softmax_at(out.logits.row(b), t.pseudo[static_cast<size_t>(b)]) / 3;
  EXPECT_NEAR(vit_distill_loss(student, images, t, o), ce, 1e-5 * ce);
}

TEST_F(TokenRelabel, DistillationLowersTheLossAndBadTargetsAreRefused) {
  const VitSpec s;
  const std::vector<VitModel> ensemble = {scaled_model(s, 14), scaled_model(s, 15)};
  const MatrixF images = random_images(s, 64, 8);
  const DistillTargets t = ensemble_targets(ensemble, images, {});
  DistillOptions o;
  o.epochs = 8;
  o.seed = 2;
  const VitModel start = vit_init(s, 1);
  const VitModel learned = vit_distill(start, images, t, o);
  EXPECT_LT(vit_distill_loss(learned, images, t, o), 0.7 * vit_distill_loss(start, images, t, o));
  EXPECT_EQ(vit_distill(start, images, t, o).parameters, learned.parameters);  // seeded
  DistillTargets bad = t;
  bad.pseudo[3] = s.classes;
  EXPECT_THROW(vit_distill(start, images, bad, o), InputError);
  bad = t;
  bad.high.pop_back();
  EXPECT_THROW(vit_distill(start, images, bad, o), InputError);
  bad = t;
  bad.teacher_logits(0, 0) = NAN;
  EXPECT_THROW(vit_distill(start, images, bad, o), InputError);
}

// The teacher as the receiver builds it by default: the models' softmax probabilities mixed by
// their images, handed on as log-probabilities; the paper's plain mean of logits on request.
TEST_F(FedMitr, TheEnsembleMixesProbabilitiesByImagesOrAveragesLogits) {
  const VitSpec s;
  const std::vector<VitModel> ensemble = {scaled_model(s, 21), scaled_model(s, 22), scaled_model(s, 23)};
  const MatrixF images = random_images(s, 4, 9);
  const std::vector<double> samples = {100, 300, 600};
  std::vector<VitOutput> each;
  for (const VitModel& m : ensemble) each.push_back(vit_forward(m, images));
  const MatrixF mixed = ensemble_logits(ensemble, images, EnsembleMix{EnsembleRule::WeightedProbabilities, samples});
  const MatrixF mean = ensemble_logits(ensemble, images);
  for (int b = 0; b < 4; ++b)
    for (int c = 0; c < s.classes; ++c) {
      double p = 0, z = 0;
      for (size_t k = 0; k < 3; ++k) {
        p += samples[k] / 1000.0 * std::exp(log_softmax_at(each[k].logits.row(b), c));
        z += each[k].logits(b, c) / 3.0;
      }
      EXPECT_NEAR(mixed(b, c), std::log(p), 1e-5 * (1 + std::abs(std::log(p)))) << "image " << b << " class " << c;
      EXPECT_NEAR(mean(b, c), z, 1e-5 * (1 + std::abs(z)));
    }
  // A model that answers one class for every image, however loudly, adds its share to that class
  // and no more: the mixture's probability of it stays within the model's share of 1.
  VitModel loud = ensemble[0];
  const int64_t head_bias = static_cast<int64_t>(loud.parameters.size()) - s.classes;
  loud.parameters[static_cast<size_t>(head_bias + 7)] = 200.0f;
  const MatrixF with_loud =
      ensemble_logits({loud, ensemble[1], ensemble[2]}, images, EnsembleMix{EnsembleRule::WeightedProbabilities, samples});
  const MatrixF without = ensemble_logits({ensemble[1], ensemble[2]}, images,
                                          EnsembleMix{EnsembleRule::WeightedProbabilities, {300, 600}});
  for (int b = 0; b < 4; ++b)
    EXPECT_NEAR(std::exp(with_loud(b, 7)), 0.1 + 0.9 * std::exp(without(b, 7)), 1e-5);
  const MatrixF loud_mean = ensemble_logits({loud, ensemble[1], ensemble[2]}, images);
  for (int b = 0; b < 4; ++b) {
    Eigen::Index best;
    loud_mean.row(b).maxCoeff(&best);
    EXPECT_EQ(best, 7) << "the mean of logits follows the loud model";
  }
  // Counts that do not fit the models are refused, naming them.
  EXPECT_THROW(ensemble_logits(ensemble, images, EnsembleMix{EnsembleRule::WeightedProbabilities, {1, 2}}), InputError);
  EXPECT_THROW(ensemble_logits(ensemble, images, EnsembleMix{EnsembleRule::WeightedProbabilities, {1, 0, 2}}), InputError);
  EXPECT_THROW(vit_invert(ensemble, nullptr, Labels{1, 2}, InversionOptions{}, EnsembleMix{EnsembleRule::WeightedProbabilities, {}}),
               InputError);
}

TEST_F(FedMitr, OneShotFedAvgWeighsTheModelsBySamples) {
  VitSpec s;
  s.depth = 1;
  const VitModel a = vit_init(s, 1), b = vit_init(s, 2);
  const VitModel avg = average_models({a, b}, {1.0, 3.0});
  for (size_t i = 0; i < avg.parameters.size(); i += 97)
    EXPECT_NEAR(avg.parameters[i], 0.25f * a.parameters[i] + 0.75f * b.parameters[i], 1e-7);
  EXPECT_THROW(average_models({a, b}, {0.0, 0.0}), InputError);
  VitSpec other = s;
  other.depth = 2;
  EXPECT_THROW(average_models({a, vit_init(other, 1)}, {1.0, 1.0}), InputError);
}

// Features that are 12x12 images with four classes told apart by brightness.
Features brightness_images(int n, uint64_t seed) {
  Rng rng(seed);
  Features f;
  f.num_classes = 4;
  f.X.resize(n, 144);
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng.below(4));
    f.y.push_back(c);
    for (int k = 0; k < 144; ++k) f.X(i, k) = static_cast<float>(0.3 * rng.uniform() + 0.2 * c);
  }
  return f;
}

FedMitrOptions small_options() {
  FedMitrOptions o;
  o.vit.patch = 4;
  o.vit.dim = 16;
  o.vit.depth = 1;
  o.vit.heads = 2;
  o.vit.mlp_dim = 16;
  o.client.epochs = 2;
  o.client.min_steps = 0;
  o.receiver.stages = 1;
  o.receiver.images_per_stage = 8;
  o.receiver.inversion.iterations = 6;
  o.receiver.inversion.mask_at = {2, 4};
  o.receiver.distill.epochs = 1;
  return o;
}

TEST_F(FedMitr, KnowledgeIsTheUnionOfModelsAndTheHeadTheDistilledVit) {
  FedMitrOptions options = small_options();
  options.receiver_head = ReceiverHead::Student;
  const auto method = make_fedmitr(options);
  const Features a = brightness_images(60, 1), b = brightness_images(50, 2), c = brightness_images(40, 3);
  const NodeContext c0 = test::node_context(0, 4, 144, 5), c1 = test::node_context(1, 4, 144, 5),
                    c2 = test::node_context(2, 4, 144, 5);
  const Knowledge k0 = method->summarize(a, c0);
  const Knowledge k01 = method->merge({k0}, &b, c1);
  EXPECT_EQ(k01.contributors, (Contributors{0, 1}));
  const auto& models = body_of<ModelKnowledge>(k01.payload).models;
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].model.parameters, body_of<ModelKnowledge>(k0.payload).models[0].model.parameters);
  EXPECT_EQ(models[1].count, 50);
  // Partial overlaps ({0,1} and {1,2}) still make one ensemble, each model once.
  const Knowledge k12 = method->merge({method->summarize(b, c1)}, &c, c2);
  const Knowledge all = method->merge({k01, k12}, nullptr, c0);
  EXPECT_EQ(all.contributors, (Contributors{0, 1, 2}));
  EXPECT_EQ(body_of<ModelKnowledge>(all.payload).models.size(), 3u);
  // The client's model comes from the shared start and the node's own batch order.
  EXPECT_EQ(body_of<ModelKnowledge>(k0.payload).models[0].model.parameters,
            train_client_model(options, a, 5, 0).parameters);

  // One model: the head is that model. Several: a distilled ViT, of the federation's spec.
  const auto alone = method->fit_head({}, &a, c0);
  ASSERT_EQ(alone->kind(), "vit");
  EXPECT_EQ(dynamic_cast<const VitHead&>(*alone).model().parameters, body_of<ModelKnowledge>(k0.payload).models[0].model.parameters);
  const auto head = method->fit_head({k12}, &a, c0);
  EXPECT_EQ(head->num_classes(), 4);
  EXPECT_EQ(head->dim(), 144);
  EXPECT_EQ(dynamic_cast<const VitHead&>(*head).model().parameters,
            dynamic_cast<const VitHead&>(*method->fit_head({k12}, &a, c0)).model().parameters);  // seeded
  std::stringstream file;
  head->save(file);
  const auto loaded = Head::load(file, "head file");
  EXPECT_EQ(loaded->kind(), "vit");
  const Features test = brightness_images(30, 9);
  EXPECT_EQ(loaded->scores(test.X), head->scores(test.X));
}

// The ensemble head is the received models themselves: it scores what the teacher (and the
// simulator's "ensemble" baseline, ensemble_logits) scores, is the same from the same inputs,
// survives its file, and a corrupt file is refused by name.
TEST_F(FedMitr, TheEnsembleHeadScoresAsTheTeacher) {
  const FedMitrOptions options = small_options();
  ASSERT_EQ(options.receiver_head, ReceiverHead::Ensemble);  // the default
  // `best` weighs it and FedAvg unless told otherwise.
  ASSERT_EQ(options.head_candidates, (std::vector<ReceiverHead>{ReceiverHead::Ensemble, ReceiverHead::Fedavg}));
  const auto method = make_fedmitr(options);
  const Features a = brightness_images(60, 1), b = brightness_images(50, 2), c = brightness_images(40, 3);
  const NodeContext c0 = test::node_context(0, 4, 144, 5);
  const Knowledge k12 = method->merge({method->summarize(b, test::node_context(1, 4, 144, 5))}, &c,
                                      test::node_context(2, 4, 144, 5));
  const auto head = method->fit_head({k12}, &a, c0);
  ASSERT_EQ(head->kind(), "vit-ensemble");
  const auto& ensemble = dynamic_cast<const EnsembleHead&>(*head);
  ASSERT_EQ(ensemble.models().size(), 3u);
  EXPECT_EQ(ensemble.mix().samples, (std::vector<double>{60, 50, 40}));  // by owner: 0, 1, 2
  EXPECT_NE(head->composition().find("3 ViTs"), std::string::npos) << head->composition();
  EXPECT_NE(head->composition().find("trained on 60, 50, 40 images: 3 forward passes per image"), std::string::npos)
      << head->composition();
  EXPECT_EQ(ensemble.models()[0].parameters, train_client_model(options, a, 5, 0).parameters);
  const std::vector<VitModel> models = ensemble.models();
  const Features test = brightness_images(30, 9);
  const MatrixF teacher = ensemble_logits(models, test.X, EnsembleMix{EnsembleRule::WeightedProbabilities, {60, 50, 40}});
  EXPECT_EQ(head->scores(test.X), teacher);
  int64_t correct = 0;
  for (Eigen::Index r = 0; r < teacher.rows(); ++r) {
    Eigen::Index best = 0;
    teacher.row(r).maxCoeff(&best);
    correct += best == test.y[static_cast<size_t>(r)];
  }
  EXPECT_DOUBLE_EQ(head->accuracy(test), static_cast<double>(correct) / 30.0);
  EXPECT_EQ(method->fit_head({k12}, &a, c0)->scores(test.X), teacher);  // deterministic

  std::stringstream file;
  head->save(file);
  const std::string bytes = file.str();
  std::stringstream in(bytes);
  const auto loaded = Head::load(in, "head file");
  EXPECT_EQ(loaded->kind(), "vit-ensemble");
  EXPECT_EQ(loaded->scores(test.X), teacher);
  // The rule, then the count, follow the kind; a bad one of each, and a file cut short.
  const size_t body = bytes.find("vit-ensemble") + std::string("vit-ensemble").size();
  for (const auto& [offset, value, says] : std::vector<std::tuple<size_t, char, std::string>>{
           {0, 7, "ensemble rule 7"}, {8, 0, "0 models"}}) {
    std::string bad = bytes;
    bad[body + offset] = value;
    std::stringstream bad_in(bad);
    try {
      Head::load(bad_in, "bad.head");
      ADD_FAILURE() << "accepted: " << says;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
  std::stringstream cut(bytes.substr(0, bytes.size() - 100));
  EXPECT_THROW(Head::load(cut, "cut.head"), InputError);
}

// --receiver-head best: the client trains on all but a held-out split of each class, which then
// chooses among the ensemble, the student and FedAvg; with no images of its own the node keeps
// the ensemble.
TEST_F(FedMitr, TheBestHeadIsChosenOnImagesTheNodesOwnModelNeverSaw) {
  FedMitrOptions options = small_options();
  options.receiver_head = ReceiverHead::Best;  // of the ensemble and FedAvg, its default candidates
  options.validation_fraction = 0.2;
  const auto method = make_fedmitr(options);
  const Features a = brightness_images(60, 1), b = brightness_images(50, 2);
  NodeContext c0 = test::node_context(0, 4, 144, 5);
  Features validation;
  Features labelled = a;
  labelled.num_classes = 4;
  const Features fit = client_training_images(options, labelled, 5, 0, &validation);
  EXPECT_EQ(fit.size() + validation.size(), 60);
  EXPECT_GE(validation.size(), 8);
  EXPECT_LE(validation.size(), 16);
  const Knowledge k0 = method->summarize(a, c0);
  EXPECT_EQ(body_of<ModelKnowledge>(k0.payload).models[0].count, fit.size());
  EXPECT_EQ(body_of<ModelKnowledge>(k0.payload).models[0].model.parameters,
            train_client_model(options, fit, 5, 0).parameters);

  std::vector<std::string> said;
  c0.progress = [&said](const std::string& line) { said.push_back(line); };
  const Knowledge k1 = method->summarize(b, test::node_context(1, 4, 144, 5));
  const auto head = method->fit_head({k1}, &a, c0);
  ASSERT_FALSE(said.empty());
  const std::string choice = said.back();
  ASSERT_NE(choice.find("fedmitr: the head is the "), std::string::npos) << choice;
  EXPECT_NE(choice.find(std::to_string(validation.size()) + " of its own images"), std::string::npos) << choice;
  const std::string kind = choice.find("the ensemble (") != std::string::npos ? "vit-ensemble" : "vit";
  EXPECT_EQ(head->kind(), kind) << choice;

  // A pure receiver has nothing to validate on.
  const auto alone = method->fit_head({k0, k1}, nullptr, test::node_context(2, 4, 144, 5));
  EXPECT_EQ(alone->kind(), "vit-ensemble");

  // By default the student is no candidate, and nothing is distilled; named, it is.
  for (const std::string& line : said) EXPECT_EQ(line.find("distilling"), std::string::npos) << line;
  EXPECT_EQ(choice.find("student"), std::string::npos) << choice;
  FedMitrOptions with_student = options;
  with_student.head_candidates = {ReceiverHead::Ensemble, ReceiverHead::Student, ReceiverHead::Fedavg};
  said.clear();
  make_fedmitr(with_student)->fit_head({k1}, &a, c0);
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said.back().find("student "), std::string::npos) << said.back();
  EXPECT_NE(said.front().find("distilling"), std::string::npos) << said.front();

  // --receiver-head fedavg: the models' one-shot average, weighted by their images.
  FedMitrOptions averaged = small_options();
  averaged.receiver_head = ReceiverHead::Fedavg;
  const auto fedavg = make_fedmitr(averaged)->fit_head({k1}, &b, test::node_context(3, 4, 144, 5));
  ASSERT_EQ(fedavg->kind(), "vit");
  const Knowledge k3 = make_fedmitr(averaged)->summarize(b, test::node_context(3, 4, 144, 5));
  const ClientModel& m1 = body_of<ModelKnowledge>(k1.payload).models[0];  // trained by a node holding out images
  const ClientModel& m3 = body_of<ModelKnowledge>(k3.payload).models[0];
  const VitModel expected = average_models({m1.model, m3.model}, {static_cast<double>(m1.count), static_cast<double>(m3.count)});
  EXPECT_EQ(dynamic_cast<const VitHead&>(*fedavg).model().parameters, expected.parameters);
}

TEST_F(FedMitr, AModelOfAnotherArchitectureOrOwnerIsRefused) {
  const FedMitrOptions options = small_options();
  const auto method = make_fedmitr(options);
  const NodeContext ctx = test::node_context(0, 4, 144, 5);
  const Knowledge k = method->summarize(brightness_images(30, 1), test::node_context(1, 4, 144, 5));
  EXPECT_NO_THROW(method->validate(k, ctx, "piece"));
  FedMitrOptions deeper = options;
  deeper.vit.depth = 2;
  const Knowledge other = make_fedmitr(deeper)->summarize(brightness_images(30, 1), test::node_context(1, 4, 144, 5));
  try {
    method->validate(other, ctx, "piece");
    ADD_FAILURE() << "a deeper ViT was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not this federation's"), std::string::npos) << e.what();
  }
  Knowledge wrong_owner = k;
  wrong_owner.contributors = {2};
  EXPECT_THROW(method->validate(wrong_owner, ctx, "piece"), InputError);
  Knowledge nan = k;
  body_of<ModelKnowledge>(nan.payload).models[0].model.parameters[5] = NAN;
  EXPECT_THROW(method->validate(nan, ctx, "piece"), InputError);
  // Pixels that are no square image are refused with the reason.
  EXPECT_THROW(fedmitr_spec(options, 145, 4), InputError);
  EXPECT_EQ(fedmitr_spec(options, 144, 4).image_size, 12);
}

}  // namespace
}  // namespace fednode
