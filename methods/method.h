// Method: the one interface every one-shot FL method implements (docs/architecture.md, "The flow of one node").
//   summarize(local)            -> Knowledge about the local data alone
//   merge(received, local)      -> Knowledge to forward: the received pieces combined with local data
//   fit_head(received, local)   -> this node's Head
// `received` may hold duplicates, subsets and partial overlaps; methods combine only the pieces
// chosen by plan_combination (knowledge.h), and the local data only if the node itself is not
// already a contributor of a chosen piece.
#pragma once

#include "core/cloned.h"
#include "core/image_encoder.h"
#include "core/secret_rng.h"
#include "methods/dp/accounting.h"
#include "methods/heads/head.h"
#include "methods/heads/train.h"
#include "methods/knowledge.h"
#include "methods/method_resource.h"

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fednode {

struct GmmOptions {
  int components = 10;                         // K
  CovarianceType covariance = CovarianceType::Diag;
  double reg_covar = 1e-6;                     // added to variances, as scikit-learn
  double tol = 1e-3;                           // on the change of mean log-likelihood per sample
  int max_iter = 100;
  int n_init = 1;
  enum class Init { KMeans, KMeansPlusPlus } init = Init::KMeans;
};

// How sample_gmm shares n draws among a mixture's components. Both give component k n w_k draws
// on average. Multinomial draws each sample's component independently, as scikit-learn's
// GaussianMixture.sample and the paper's code do; Systematic places n evenly spaced points, one
// random offset, on the cumulative weights, so that k gets floor(n w_k) or ceil(n w_k) draws: a
// class of n one-sample components is then drawn once from each, where the multinomial leaves
// about a third of them out (docs/methods/fedpft.md, "Drawing the synthetic features").
enum class ComponentDraws { Systematic, Multinomial };
const char* to_string(ComponentDraws d);  // "systematic" | "multinomial"

struct FedPftOptions {
  GmmOptions gmm;
  bool half_precision = true;   // transfer means/covariances/weights as float16 (the paper's setting)
  // DP-FedPFT (Theorem 4.1): forces K=1 and full covariance, clips features to ||f|| <= 1.
  bool dp = false;
  double dp_epsilon = 1.0;
  double dp_delta = 1e-5;
  // The paper's experiments set delta = 1/|D_ic| (section 5): 1/n for a class of n samples at the
  // node that releases it, instead of the fixed dp_delta. A class of one sample is then not
  // released at all (delta would be 1, which guarantees nothing), as the paper's reference code
  // drops classes of at most K samples. docs/methods/fedpft.md says which is the default and why.
  bool dp_delta_per_class = false;
  // Synthetic features drawn per transmitted sample when building the head's training set
  // (real local rows are repeated as often, so class proportions are unchanged). More draws
  // show the head the mixture rather than one small sample of it; docs/methods/fedpft.md.
  int synthetic_multiplier = 1;
  ComponentDraws component_draws = ComponentDraws::Systematic;
  // How the dimensions of a synthetic feature drawn from a diagonal or spherical component vary
  // together (methods/fedpft/correlation.h): not at all, as the paper draws them (None); with the
  // receiving node's own pooled within-class correlation (Local; nothing sent changes); or with the
  // correlation of every contributor's data (Shared): each node's knowledge then also carries a
  // sketch of its within-class covariance of `correlation_rank` directions, a fednode extension of
  // the paper's message. Full covariances always carry their own.
  enum class SampleCorrelation { None, Local, Shared };
  SampleCorrelation sample_correlation = SampleCorrelation::None;
  int correlation_rank = 64;
  // How the head is fitted: a linear layer trained on synthetic draws (Sgd, the paper's), or in
  // closed form from the mixtures' own moments (Lda, a fednode extension:
  // methods/fedpft/closed_form_head.h), with `lda_shrinkage` of the shared covariance or, unset,
  // the one the node's own rows choose. Auto, the default, is Lda wherever it applies and Sgd
  // where it cannot or where an option asks for draws (head_fit_used): as accurate over 27 runs and
  // three to four times faster (docs/methods/fedpft.md, "A head in closed form").
  enum class HeadFit { Auto, Sgd, Lda };
  HeadFit head_fit = HeadFit::Auto;
  std::optional<double> lda_shrinkage;
  LinearTrainOptions head;
};
const char* to_string(FedPftOptions::SampleCorrelation c);  // "none" | "local" | "shared"
const char* to_string(FedPftOptions::HeadFit f);            // "auto" | "sgd" | "lda"
// Sgd or Lda: what Auto means for these options. Lda needs diagonal or spherical mixtures without
// DP (full covariances are drawn from as they arrive) and nothing that shapes draws: a synthetic
// multiplier it would ignore, and a sample correlation, with which the trained head measured
// 0.2-0.3 points above an Lda that takes the local correlation into its moments (fedpft.md).
FedPftOptions::HeadFit head_fit_used(const FedPftOptions& o);

enum class LdaCovariance { Total, Within };

// Personalised FedCGS (methods/fedcgs/personalize.h, paper 001 Eq. 12): a node's own head, trained
// on its own data after the run, aligned to the global class means.
struct PersonalizeOptions {
  double learning_rate() const { return lr.value_or(from_global_head ? 1e-3 : 1e-2); }
  int epoch_count() const { return epochs.value_or(from_global_head ? 50 : 200); }
  double lambda = 1.0;
  int rank = 16;         // of the adapter's U V^T
  // Unset: the paper's 200 from scratch; 50 from the global head (measured: docs/methods/fedcgs.md).
  std::optional<int> epochs;
  int batch_size = 128;
  // Unset: the paper's 0.01 from scratch; 0.001 from the global head, whose LDA weights are large
  // in these units (0.01 diverged there on MobileNetV2 features, 0.001 gained on every node).
  std::optional<double> lr;
  double momentum = 0.5;
  double weight_decay = 5e-4;
  uint64_t seed = 0;
  // Start the classifier from the node's federation head (FedAvg-FT's idea, which the paper
  // finds the strongest baseline: the global model fine-tuned on local data) rather than from
  // zero as the paper does: from zero, its recipe ended below the global head on our features.
  bool from_global_head = true;
};

struct FedCgsOptions {
  // Within: 81.5 % vs Total's 80.7 % on Fashion-MNIST pixels (docs/methods/fedcgs.md).
  LdaCovariance covariance = LdaCovariance::Within;
  double shrinkage = 0.0;       // Sigma <- (1-s) Sigma + s * (tr(Sigma)/d) I
  // DP-FedCGS (methods/fedcgs/dp_stats.h, docs/privacy.md): what a node sends about its own data
  // goes through the Gaussian mechanism, (dp_epsilon, dp_delta)-DP per node.
  bool dp = false;
  double dp_epsilon = 1.0;
  double dp_delta = 1e-5;
  // R: features are scaled down to ||f||_2 <= R first. 30 is about the 5th percentile of the
  // norms of MobileNetV2's features of Fashion-MNIST (median 53), which gave the best DP-FedCGS
  // accuracy of 1, 30 and 53 at epsilon 1 (docs/privacy.md, "Which clipping norm").
  double clip_norm = 30.0;
  std::array<double, 3> dp_split = {1.0, 1.0, 1.0};  // shares of the budget for A, N and B
  // Distributed DP (docs/privacy.md, "Distributed DP"): under secure aggregation only sums are read,
  // so each of the m members of the mask group adds 1/(m - 1 - dp_colluders) of the noise variance
  // to what it masks; any member, alone or with dp_colluders others, still faces the full noise
  // of the others in every sum it can read.
  bool dp_distributed = false;
  int dp_colluders = 0;
  // Set: every node also trains a personal head once its federation head is final.
  std::optional<PersonalizeOptions> personalize;
};

struct FedTcOptions {
  double keep_ratio = 0.99;     // alpha: fraction of a class kept after cosine outlier filtering
  int batch_size = 5;           // B: samples averaged into one prototype
  AdapterTrainOptions head;
};

// Options only one method reads, defined in its own folder (FedMITR's, FGL's): MethodOptions holds
// them by method name, copied with it, and the method finds its own with own_options<T>, T naming
// its method in T::kMethod. A new method's options need no member here.
class OwnOptions {
 public:
  virtual ~OwnOptions() = default;
  virtual std::unique_ptr<OwnOptions> clone() const = 0;
};

using OwnOptionsSlot = Cloned<OwnOptions>;

// Secure aggregation of additive knowledge (docs/privacy.md): off, every part masked, or the
// class counts alone (the FedCGS paper's cheaper option).
enum class SecureAggregation { Off, All, Counts };
const char* to_string(SecureAggregation s);  // "off" | "all" | "counts"

struct MethodOptions {
  std::string method = "fedpft";  // a name in method_registry() (methods/registry.h)
  SecureAggregation secure_aggregation = SecureAggregation::Off;
  // The release policy (methods/dp/min_count.h): classes a node holds fewer samples of are not
  // released. 0: every class is.
  int min_class_count = 0;
  FedPftOptions fedpft;
  FedCgsOptions fedcgs;
  FedTcOptions fedtc;
  std::map<std::string, OwnOptionsSlot> own;  // by method name: the options own_options<T> finds
};

// A method's own options in `m`: made with their defaults on first use (the mutable form, for
// parsing), or the defaults when `m` holds none (the const form).
template <class T>
T& own_options(MethodOptions& m) {
  OwnOptionsSlot& slot = m.own[T::kMethod];
  if (!slot.get()) slot = OwnOptionsSlot(std::make_unique<T>());
  return dynamic_cast<T&>(*slot.get());
}
template <class T>
const T& own_options(const MethodOptions& m) {
  const auto it = m.own.find(T::kMethod);
  if (it == m.own.end() || !it->second.get()) {
    static const T defaults;
    return defaults;
  }
  return dynamic_cast<const T&>(*it->second.get());
}

// Who is running the method, for seeding and contributor bookkeeping.
struct NodeContext {
  NodeId node = 0;
  uint64_t seed = 0;
  std::string backbone_fingerprint;
  int num_classes = 0;
  int dim = 0;
  // Keys the noise of differentially private releases (core/secret_rng.h). A networked node's
  // is derived from its secret key; the simulator's from the seed. Unset, a DP method refuses
  // to run rather than draw noise every recipient could redraw.
  std::optional<SecretKey32> noise_key;
  // The release policy (MethodOptions::min_class_count), and whether the node's head leaves it
  // (a star's hub sends its head to every leaf): what the node sends, knowledge or head, is
  // computed only from what the policy and the method's DP release (node/step.h).
  int min_class_count = 0;
  bool head_is_sent = false;
  // Secure aggregation: a method whose knowledge adds up masks its summary of the local data with
  // this before combining it with anything (for what it sends and for its own head alike), so
  // that a sum reads back only once every member's piece is in it. Null: the node masks nothing.
  std::shared_ptr<const LocalMasking> masking;
  // A star's hub after the unmasking round: applied to a masked sum of exactly the survivors'
  // pieces before it is read. Null before the round, and for every other node.
  std::shared_ptr<const Unmasking> unmasking;
  // Label i's name where the data names its classes (Fashion-MNIST, image folders); may be empty.
  std::vector<std::string> class_names;
  // What the method's options name that the driver opened for it (MethodDescriptor::open_resource:
  // FGL's generator). Null for a method that opens nothing.
  std::shared_ptr<const MethodResource> resource;
  // What turns an image into this node's features, the way its own data were computed (a backbone,
  // or the pixels themselves): FGL's receiver reads its synthetic images through it to train the
  // node's usual head. Null where the data came as features (.npy), from images fednode never saw.
  std::shared_ptr<const ImageEncoder> image_encoder;
  // Progress for long steps (EM per class, head epochs); may be empty.
  std::function<void(const std::string&)> progress;
  // The simulator's test set, for progress lines that say how a head fitted in stages scores
  // after each stage (FedMITR's receiver), so that a run's course can be read, not only its end.
  // Nothing is fitted or chosen on it. Null for a networked node (it holds no test set) and
  // whenever progress is empty.
  const Features* watch = nullptr;
  // When set and true, long steps end at their next class or epoch by throwing Interrupted, so
  // that a node asked to stop (a signal) does not first finish minutes of EM or head training.
  const std::atomic<bool>* stop = nullptr;
  void interruption_point() const { fednode::interruption_point(stop); }
  // Throws InputError naming `method` when noise_key is unset.
  const SecretKey32& secret_noise_key(const std::string& method) const;
};

class Method {
 public:
  virtual ~Method() = default;
  virtual std::string name() const = 0;
  virtual Knowledge summarize(const Features& local, const NodeContext& ctx) const = 0;
  virtual Knowledge merge(const KnowledgeList& received, const Features* local,
                          const NodeContext& ctx) const = 0;
  virtual std::unique_ptr<Head> fit_head(const KnowledgeList& received, const Features* local,
                                         const NodeContext& ctx) const = 0;
  // Throws InputError if merge or fit_head would refuse this one piece: the same checks they
  // make, so that a node refuses a bad piece when it arrives rather than when it combines, by
  // which time the piece is stored and acknowledged (node/node.cpp).
  virtual void validate(const Knowledge& piece, const NodeContext& ctx, const std::string& where) const = 0;
  // An empty running sum, for a method whose knowledge adds up: a node may then fold pieces into
  // it as they arrive and hand it to merge and fit_head in a KnowledgeList, which must give what
  // the pieces themselves give. Null (the default) for knowledge that does not add: mixtures and
  // prototypes are merged by taking every piece's components.
  virtual std::unique_ptr<KnowledgeSum> start_sum(const NodeContext&) const { return nullptr; }
  // The same for a node that only fits a head on what it receives and never merges it to send
  // on (a star's hub): the sum need then only serve fit_head, so knowledge that does not add may
  // be folded too, into what the head trains on (FedPFT draws each piece's synthetic features as
  // it arrives and drops its covariances). Defaults to start_sum.
  virtual std::unique_ptr<KnowledgeSum> start_head_sum(const NodeContext& ctx) const { return start_sum(ctx); }
  // What summarize and merge release about `local` (the node's own part of what it sends), for
  // the node's privacy ledger (methods/dp/accounting.h; node/privacy_ledger.h adds who received
  // it). The default: one release of the exact summary, not private.
  virtual std::vector<PrivacyRelease> privacy(const Features& local, const NodeContext& ctx) const;
  // Personalisation (FedCGS's, paper 001 Eq. 12), off unless the method's options ask for it.
  virtual bool personalizes() const { return false; }
  // The class means of what a head on `received` and `local` trains on: a star's hub sends them
  // to its leaves with its head (the paper's extra round); others compute them from what they
  // hold. Throws InputError where fit_head would.
  virtual ClassMeans class_means(const KnowledgeList& received, const Features* local, const NodeContext& ctx) const;
  // The node's personal head: trained on its own data, from its federation head `global`,
  // aligned to `means`. Seeded per node from ctx.seed.
  virtual std::unique_ptr<Head> personal_head(const Features& local, const ClassMeans& means, const Head& global,
                                              const NodeContext& ctx) const;
};

std::unique_ptr<Method> make_method(const MethodOptions& options);

// The pieces of `received` a node may combine, and whether its own data is still new to them.
// A folded sum in `received` is one more candidate, by the same rules.
struct Selection {
  std::vector<const Knowledge*> pieces;  // disjoint contributor sets
  bool use_folded = false;               // received.folded() is combined too, disjoint from `pieces`
  bool use_local = false;                // the node is not among their contributors
  Contributors contributors;             // union of everything combined, local included
};
Selection select_for_combination(const KnowledgeList& received, const Features* local,
                                 const NodeContext& ctx, const std::string& method);

}  // namespace fednode
