// FedMITR's model (paper 004): a small Vision Transformer whose parameters are one flat vector in
// a documented order, so that a node can send it as knowledge and any node can run it. It
// returns what sparse inversion and token relabelling need beside the class scores: the last
// layer's attention from the CLS token to every patch token, and a class score per patch token;
// and it takes a keep-mask, so that the patches whose inversion was stopped take no part.
//
// No LibTorch here: the forward pass runs in libfednode_torch.so (core/torch_library.h), loaded
// the first time one is asked for. The initialisation is fednode's own seeded draw, so that every
// node of a federation starts from the same model (FedAvg's premise) without LibTorch's RNG.
#pragma once

#include "core/types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fednode {

// The architecture. The defaults are the measured small ViT for 28x28 images: patch 7
// (16 tokens and CLS), dim 64, depth 4, 4 heads, MLP 128 (about 139 000 parameters).
struct VitSpec {
  int image_size = 28;  // square images
  int channels = 1;
  int patch = 7;        // must divide image_size
  int dim = 64;         // must be a multiple of heads
  int depth = 4;
  int heads = 4;
  int mlp_dim = 128;
  int classes = 10;
  // A user's TorchScript ViT instead of the built-in one (scripts/export_vit.py documents the
  // interface): the SHA-256 of its file, lowercase hex, and its parameter count. Empty for the
  // built-in; when set, dim, depth, heads and mlp_dim are 0 and patch is the token grid's.
  std::string script;
  int64_t script_parameters = 0;

  bool scripted() const { return !script.empty(); }
  int grid() const { return image_size / patch; }
  int tokens() const { return grid() * grid(); }  // patch tokens, CLS not counted
  int pixels() const { return channels * image_size * image_size; }
  int64_t parameter_count() const;
  // Throws InputError naming `where` and the setting for a spec no ViT can have, or one beyond
  // the bounds a received model may claim (kMaxVitParameters), checked before any allocation.
  void validate(const std::string& where) const;
};

bool operator==(const VitSpec& a, const VitSpec& b);

// What a received model may claim at most: 64 M parameters (256 MB as float32).
constexpr int64_t kMaxVitParameters = int64_t{1} << 26;

// The parameters, flat, in this order (the wire order too): the patch embedding W [dim,
// channels*patch*patch] (a patch flattened channel-major, then row, then column) and b [dim];
// the CLS token [dim]; the position embedding [tokens+1, dim] (CLS first); per block: LayerNorm
// 1 gain and bias [dim], qkv W [3*dim, dim] (q, then k, then v; heads contiguous within each) and b
// [3*dim], the attention's output W [dim, dim] and b [dim], LayerNorm 2 gain and bias, MLP fc1
// W [mlp_dim, dim] and b, fc2 W [dim, mlp_dim] and b; the final LayerNorm gain and bias; the head
// W [classes, dim] and b [classes]. Matrices row-major.
struct VitModel {
  VitSpec spec;
  std::vector<float> parameters;
};

// The shared initialisation of a federation's run: every Linear layer (patch embedding, qkv,
// the attention's output, the MLP, the head) as PyTorch starts one, weights and biases from
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)); CLS and position embeddings from N(0, 0.02^2) truncated at
// two standard deviations; LayerNorm gains one, biases zero. Chosen on the validation split over
// timm's start (every weight from that normal, biases zero), which left the clients' FedAvg and
// ensemble collapsed and hard to invert at alpha 0.05 (docs/methods/fedmitr.md, "Choosing the
// settings"). The same spec and seed give the same bytes. A scripted spec's
// start is its file's parameters (a pretrained model's, for the paper's fine-tuning; no seed).
VitModel vit_init(const VitSpec& spec, uint64_t seed);

// Loads a user's TorchScript ViT (scripts/export_vit.py: forward(images [B, C, S, S], keep [B, T])
// -> (logits, token_logits, cls_attention); int attributes image_size, channels, patch, classes;
// float32 parameters, trained and sent in named_parameters() order) and returns its spec; every
// vit_* function then runs it for that spec, in this process. Throws InputError naming the file
// and what is wrong when it cannot be read, lacks the interface, or answers a probe in the wrong
// shapes.
VitSpec load_vit_script(const std::string& path);

// The bytes of a TorchScript file in that interface that computes `model`'s built-in ViT, its
// parameters the file's (in vit.h's flat order): a pretrained model as a federation's shared
// start (`fednode train-vit`). No file is written here. Throws InputError for a scripted model.
std::string vit_script_file(const VitModel& model);

struct VitOutput {
  MatrixF logits;         // [B, classes], from the CLS token
  MatrixF token_logits;   // [B * tokens, classes]: row b * tokens + t is patch token t of image b
  MatrixF cls_attention;  // [B, tokens]: the last layer's attention from CLS, averaged over heads
};

// Images as rows of `pixels()` values, channel-major then row then column (as .npy and IDX
// images are laid out). `keep`, if not empty, holds B * tokens flags (row-major, 1 = keep): a
// dropped patch is no key for any query, so no output depends on its pixels, and CLS gives it
// attention 0. With `drop_stopped`, the dropped patches leave the sequence instead of staying as
// queries: the same class scores and CLS attention for less work (what makes sparse inversion
// cheap), no token_logits (left empty), and every image must keep as many patches as the others.
// Throws InputError for shapes that do not fit the spec, a parameter count other than the
// spec's, an image with every patch dropped, or unequal counts to drop.
VitOutput vit_forward(const VitModel& model, const MatrixF& images, const std::vector<uint8_t>& keep = {},
                      bool drop_stopped = false);
// vit_forward without the per-token scores (token_logits left empty), for whoever reads the class
// scores and the CLS attention alone (a head, the ensemble's targets): the last block then runs
// its projection and MLP on the CLS token only, which is all those read.
VitOutput vit_class_scores(const VitModel& model, const MatrixF& images);

// A client's training (paper 004, Section V: SGD with momentum 0.9 and weight decay 1e-4, as
// torch.optim.SGD; batch 64) from the federation's shared initialisation. The epochs and the
// learning rate are the node's settings: the paper fine-tunes a pretrained DeiT for 50 epochs at
// 0.001, while ours starts from scratch (no pretrained ViT can be had here).
struct VitTrainOptions {
  int epochs = 3;
  // At least this many SGD steps: a client with few images trains more epochs (whole epochs,
  // epochs_for() says how many), as a ViT from scratch learns nothing in a hundred steps.
  int min_steps = 0;
  double lr = 0.05;
  int batch_size = 64;
  double momentum = 0.9;
  double weight_decay = 1e-4;
  uint64_t seed = 0;  // the batches' order

  // The epochs training on n images runs: `epochs`, or more to reach min_steps.
  int epochs_for(int64_t n) const;
};

// Labels in [0, classes). Throws InputError for shapes that do not fit, labels out of range,
// options out of range, or training that diverges. The same start, data and options give the
// same parameters (LibTorch's threads set as the caller leaves them).
VitModel vit_train(const VitModel& start, const MatrixF& images, const Labels& labels, const VitTrainOptions& options);

// How an ensemble's models combine into its class scores. The paper (004, Eq. 1) weighs each
// model's logits, "typically" alike; on the validation split a model trained on one class, whose
// logits are large and the same for every image, moved the mean of logits towards its class for
// every image, where a mixture of the models' probabilities weighted by their images did not
// (docs/methods/fedmitr.md, "Choosing the settings").
enum class EnsembleRule {
  MeanLogits,             // the paper's: the models' logits averaged, every model alike
  WeightedProbabilities,  // log of the mixture of the models' softmax probabilities, weighted by their images
};
const char* to_string(EnsembleRule rule);  // "mean-logits" | "weighted-probabilities"

struct EnsembleMix {
  EnsembleRule rule = EnsembleRule::MeanLogits;
  std::vector<double> samples;  // WeightedProbabilities: the images each model trained on, one per model

  // Each model's share of the ensemble (summing to 1). Throws InputError naming what is wrong
  // for WeightedProbabilities without one positive, finite count per model.
  std::vector<double> shares(size_t models) const;
  bool probabilities() const { return rule == EnsembleRule::WeightedProbabilities; }
};

// The receiver's model inversion (paper 004, Section IV-A): images synthesised from noise by Adam
// on the pixels so that the received models' ensemble (its class scores, `mix`) predicts the
// target labels, with a total-variation prior, and, given a student, pushed to where the student
// and the ensemble disagree (the Jensen-Shannon term, subtracted):
//   loss = CE(ensemble(x), y) - js_weight * JS(student(x), ensemble(x)) + tv_weight * TV(x) + l2_weight * ||x||^2.
// Sparse inversion: at each iteration in `mask_at`, every image stops inverting the mask_ratio of
// its remaining patches that the ensemble's CLS attention of the iteration before rated lowest;
// a stopped patch keeps its pixels and, through the keep-mask, takes no part in any model's
// output from then on. Empty `mask_at` is dense inversion.
struct InversionOptions {
  int iterations = 100;      // Adam steps (the paper's 100)
  double lr = 0.1;           // Adam's, on pixels in [0, 1]
  double tv_weight = 1e-4;   // the paper's image prior scale
  double l2_weight = 0.0;
  double js_weight = 1.0;    // the paper's; used only with a student
  double mask_ratio = 0.3;   // the paper's
  std::vector<int> mask_at = {25, 50, 75};
  uint64_t seed = 0;         // the starting noise, uniform in [0, 1]
};

struct Inversion {
  MatrixF images;               // [B, pixels]
  std::vector<uint8_t> keep;    // [B * tokens]: the patches still inverted at the end
  MatrixF cls_attention;        // [B, tokens]: the ensemble's, at the last iteration
  double first_loss = 0, last_loss = 0;  // the ensemble's cross-entropy on the targets
};

// Throws InputError for an empty ensemble, models of different specs, targets out of range, or
// options out of range.
Inversion vit_invert(const std::vector<VitModel>& ensemble, const VitModel* student, const Labels& targets,
                     const InversionOptions& options, const EnsembleMix& mix = {});

// The receiver's distillation (paper 004, Section IV-B): the student learns the ensemble on the
// synthetic images. What the student is taught is `loss`:
//   Kd:           KL(ensemble || student) on the class scores at `temperature`, times its square
//                 (the paper's KD baseline);
//   PseudoLabel:  cross-entropy of the class scores against the ensemble's pseudo-label (its argmax);
//   TokenRelabel: Kd, plus token_weight times the token relabelling loss: every patch token's own
//                 class scores learn the pseudo-label where the token is a high-attention one
//                 (`high`), the ensemble's soft label elsewhere,
//                   high_weight * mean over high tokens CE(token, pseudo)
//                 + low_weight * mean over low tokens KL(ensemble || token)
//                 (the paper's 0.5 / 0.5; a mean over no token is 0).
// The student sees the whole image: the test images it will classify have every patch.
enum class DistillLoss { Kd, PseudoLabel, TokenRelabel };
const char* to_string(DistillLoss loss);  // "kd" | "pseudo-label" | "token-relabel"

struct DistillTargets {
  MatrixF teacher_logits;     // [B, classes]: the ensemble's, on the whole image
  Labels pseudo;              // [B]: the ensemble's argmax
  std::vector<uint8_t> high;  // [B * tokens]: 1 where a token is a high-attention one
};

struct DistillOptions {
  DistillLoss loss = DistillLoss::TokenRelabel;
  int epochs = 5;             // over all the images synthesised so far, at each stage
  double lr = 0.01;           // SGD, as the clients' optimiser
  int batch_size = 64;
  double momentum = 0.9;
  double weight_decay = 1e-4;
  double temperature = 1.0;
  double token_weight = 1.0;
  double high_weight = 0.5;   // the paper's
  double low_weight = 0.5;    // the paper's
  uint64_t seed = 0;          // the batches' order
};

// The class scores of the ensemble on `images`, combined as `mix` says (log-probabilities for
// WeightedProbabilities, whose softmax is the mixture). Throws InputError for no model, models of
// different specs, or a mix that does not fit them.
MatrixF ensemble_logits(const std::vector<VitModel>& ensemble, const MatrixF& images, const EnsembleMix& mix = {});

// ensemble_logits, and the models' CLS attention weighted by their shares (as inversion weighs it).
struct EnsembleOutput {
  MatrixF logits;         // [B, classes]
  MatrixF cls_attention;  // [B, tokens]
};
EnsembleOutput ensemble_forward(const std::vector<VitModel>& ensemble, const MatrixF& images, const EnsembleMix& mix = {});

// The ensemble's targets for `images`: its class scores on the whole image, their argmax, and
// `high` as given (B * tokens flags, or empty for every token high).
DistillTargets ensemble_targets(const std::vector<VitModel>& ensemble, const MatrixF& images, std::vector<uint8_t> high,
                                const EnsembleMix& mix = {});

// Trains `student` on `images` against `targets`. Throws InputError for shapes that do not fit,
// options out of range, or training that diverges. Deterministic like vit_train.
VitModel vit_distill(const VitModel& student, const MatrixF& images, const DistillTargets& targets, const DistillOptions& options);
// The loss vit_distill minimises, on all of `images` at once, without training (tests, progress).
double vit_distill_loss(const VitModel& student, const MatrixF& images, const DistillTargets& targets,
                        const DistillOptions& options);

}  // namespace fednode
