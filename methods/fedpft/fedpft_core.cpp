#include "methods/fedpft/fedpft_core.h"

#include "methods/fedpft/correlation.h"
#include "methods/fedpft/dp.h"
#include "methods/fedpft/half.h"
#include "core/float16.h"
#include "methods/gmm/gmm.h"
#include "core/parallel.h"
#include "core/rng.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace fednode {

namespace {

// Refuse to materialise more synthetic scalars than this (8 GiB of float32) in one call.
constexpr double kMaxSyntheticScalars = 2147483648.0;

double variance_floor(const FedPftOptions& o) { return o.gmm.reg_covar > 0 ? o.gmm.reg_covar : 1e-6; }

void check_local(const Features& local, const NodeContext& ctx) {
  local.validate("local features");
  if (local.size() > 0 && local.dim() != ctx.dim)
    throw InputError("local features have dimension " + std::to_string(local.dim()) +
                     ", the node expects " + std::to_string(ctx.dim));
  if (local.num_classes != ctx.num_classes)
    throw InputError("local features have " + std::to_string(local.num_classes) +
                     " classes, the node expects " + std::to_string(ctx.num_classes));
}

// reg_covar is absolute (scikit-learn's meaning, and the paper's 1e-6 for features of order 1),
// and float16 carries no variance below its smallest subnormal. On features whose spread is below
// either floor, every variance would be mostly floor and the synthetic features noise around the
// class means: refused, rather than a head at chance.
void check_spread_above_floors(const Features& local, const FedPftOptions& o) {
  const double reg_covar = o.gmm.reg_covar;
  const double half_floor = o.half_precision ? kHalfSmallestSubnormal : 0.0;
  if (!(std::max(reg_covar, half_floor) > 0)) return;
  // Two passes (class means, then squared deviations), without copying the features.
  const Eigen::Index n = local.X.rows();
  MatrixD means = MatrixD::Zero(local.num_classes, local.dim());
  const auto counts = local.class_counts();
  for (Eigen::Index i = 0; i < n; ++i) means.row(local.y[static_cast<size_t>(i)]) += local.X.row(i).cast<double>();
  for (int c = 0; c < local.num_classes; ++c)
    if (counts[static_cast<size_t>(c)] > 0) means.row(c) /= static_cast<double>(counts[static_cast<size_t>(c)]);
  double squares = 0;
  for (Eigen::Index i = 0; i < n; ++i)
    squares += (local.X.row(i).cast<double>() - means.row(local.y[static_cast<size_t>(i)])).squaredNorm();
  const double spread = squares / (static_cast<double>(n) * static_cast<double>(local.dim()));
  if (!(spread > 0)) return;
  std::ostringstream msg;
  msg << "fedpft: the local features vary within their classes by a variance of " << spread
      << " per dimension on average, below ";
  if (spread < reg_covar) {
    msg << "reg_covar " << reg_covar << ", which every mixture's variances would then mostly be; scale the "
        << "features up, or give a smaller --reg-covar (0 adds none)";
    throw InputError(msg.str());
  }
  if (spread < half_floor) {
    msg << "the smallest variance float16 carries (" << half_floor << "); scale the features up, or use the "
        << "float32 transfer";
    throw InputError(msg.str());
  }
}

Knowledge empty_knowledge(const NodeContext& ctx) {
  Knowledge k;
  k.backbone_fingerprint = ctx.backbone_fingerprint;
  k.dim = ctx.dim;
  k.num_classes = ctx.num_classes;
  k.payload = GmmKnowledge{};
  return k;
}

// Empty for a class that DP-FedPFT with the paper's delta (1/n) does not release: one sample.
std::optional<ClassMixture> summarize_class(const MatrixF& X, int label, const FedPftOptions& o,
                                            const NodeContext& ctx) {
  ClassMixture cm;
  cm.label = label;
  cm.count = X.rows();
  const std::string where = "fedpft class " + std::to_string(label);
  // A DP covariance is noise projected onto the PSD cone: about half its eigenvalues sit at the
  // floor, far below float16's rounding, so the rounded matrix is almost never positive definite.
  // Each of these directions shows that with probability about one half, for one pass over the
  // matrix, where the factorisation that would find it out is about a tenth of the release.
  constexpr int kFloorProbes = 8;
  MatrixD at_floor;
  if (o.dp) {
    if (o.dp_delta_per_class && X.rows() < 2) {
      if (ctx.progress) ctx.progress(where + ": one sample, not released (delta = 1/n would be 1)");
      return std::nullopt;
    }
    const double delta = o.dp_delta_per_class ? 1.0 / static_cast<double>(X.rows()) : o.dp_delta;
    SecretRng noise(ctx.secret_noise_key("DP-FedPFT"), Purpose::DpNoise, ctx.node, static_cast<uint64_t>(label));
    cm.mixture = dp_gaussian(X, o.dp_epsilon, delta, variance_floor(o), noise,
                             o.half_precision ? EigenArithmetic::Single : EigenArithmetic::Double, &at_floor,
                             kFloorProbes);
    if (ctx.progress)
      ctx.progress(where + ": DP Gaussian of " + std::to_string(X.rows()) + " samples, delta " +
                   std::to_string(delta) + ", noise sigma " +
                   std::to_string(dp_noise_sigma(X.rows(), o.dp_epsilon, delta)));
  } else {
    FitInfo info;
    cm.mixture = fit_gmm(X, o.gmm,
                         derive_seed(ctx.seed, {static_cast<uint64_t>(Purpose::KMeansInit), ctx.node,
                                                static_cast<uint64_t>(label)}),
                         &info);
    if (ctx.progress)
      ctx.progress(where + ": " + std::to_string(X.rows()) + " samples, K=" +
                   std::to_string(info.components) + ", " + std::to_string(info.iterations) +
                   " EM iterations, log-likelihood " + std::to_string(info.lower_bound));
  }
  if (o.half_precision) cm.mixture = round_mixture_to_half(cm.mixture, variance_floor(o), where, &at_floor);
  ctx.interruption_point();  // a class's EM at a time
  return cm;
}

// Runs release(i, context) for every class i in [0, n): side by side for DP-FedPFT (each class a
// d x d eigen-decomposition and a few factorisations on one LAPACK thread, with its own noise
// stream, so the result is the same in any order), one after another otherwise (EM runs its
// passes on the pool already). Progress lines are said afterwards, in class order.
void for_each_class(size_t n, bool side_by_side, const NodeContext& ctx,
                    const std::function<void(size_t, const NodeContext&)>& release) {
  if (!side_by_side) {
    for (size_t i = 0; i < n; ++i) release(i, ctx);
    return;
  }
  std::vector<std::vector<std::string>> said(n);
  for_each_chunk_ordered(n, true, [&](size_t i) {
    NodeContext own = ctx;
    if (ctx.progress) own.progress = [&said, i](const std::string& line) { said[i].push_back(line); };
    release(i, own);
  });
  if (ctx.progress)
    for (const auto& lines : said)
      for (const auto& line : lines) ctx.progress(line);
}

// A sketch as it travels: what this node keeps and what its receivers decode are the same values.
CovarianceSketch for_transfer(CovarianceSketch sketch, const FedPftOptions& o) {
  return o.half_precision ? round_sketch_to_half(sketch, "fedpft covariance sketch") : sketch;
}

const ClassMixture* find_class(const Knowledge& k, int label) {
  const auto& classes = std::get<GmmKnowledge>(k.payload).classes;
  auto it = std::lower_bound(classes.begin(), classes.end(), label,
                             [](const ClassMixture& c, int l) { return c.label < l; });
  return it != classes.end() && it->label == label ? &*it : nullptr;
}

// The pieces select_for_combination chose, validated.
Selection choose(const KnowledgeList& received, const Features* local,
                 const NodeContext& ctx) {
  if (local) check_local(*local, ctx);
  for (size_t i = 0; i < received.size(); ++i)
    validate_gmm_knowledge(received[i], ctx, "received knowledge #" + std::to_string(i));
  return select_for_combination(received, local, ctx, "fedpft");
}

void check_synthetic_size(double rows, int dim, const std::string& where) {
  if (rows * static_cast<double>(dim) > kMaxSyntheticScalars)
    throw InputError(where + ": " + std::to_string(static_cast<int64_t>(rows)) +
                     " samples of dimension " + std::to_string(dim) +
                     " exceed the limit of 2^31 synthetic values");
}

// The sketch a node's knowledge carries under SampleCorrelation::Shared: the pieces' sketches and,
// if this node's data is not among their contributors, a sketch of it, combined. `rank` as
// combine_sketches: what is forwarded is truncated, what a head is drawn with keeps every direction.
// `without`, if given, receives the contributors of every piece that came without a sketch.
std::optional<CovarianceSketch> shared_sketch(const Selection& sel, const Features* local, const FedPftOptions& o,
                                              int rank, std::vector<std::string>* without = nullptr) {
  std::vector<const CovarianceSketch*> parts;
  for (const Knowledge* piece : sel.pieces) {
    const auto& g = std::get<GmmKnowledge>(piece->payload);
    if (g.within_class) parts.push_back(&*g.within_class);
    else if (without) without->push_back(to_string(piece->contributors));
  }
  CovarianceSketch own;
  if (sel.use_local) {
    own = sketch_within_class(*local, o.correlation_rank);
    parts.push_back(&own);
  }
  if (parts.empty()) return std::nullopt;
  return combine_sketches(parts, rank);
}

// The correlation the head's synthetic features are drawn with: none unless asked for and there is
// a diagonal or spherical mixture to draw from; then this node's own estimate (Local, from its own
// features whether or not they are already among the pieces' contributors) or the contributors'
// sketches added up (Shared).
WithinClassCorrelation correlation_to_draw_with(const Selection& sel, const Features* local,
                                                const FedPftOptions& o, const NodeContext& ctx) {
  using SC = FedPftOptions::SampleCorrelation;
  if (o.sample_correlation == SC::None) return {};
  const bool any_uncorrelated = std::any_of(sel.pieces.begin(), sel.pieces.end(), [](const Knowledge* piece) {
    const auto& classes = std::get<GmmKnowledge>(piece->payload).classes;
    return std::any_of(classes.begin(), classes.end(),
                       [](const ClassMixture& c) { return c.mixture.type != CovarianceType::Full; });
  });
  if (!any_uncorrelated) return {};
  WithinClassCorrelation c;
  std::string source;
  if (o.sample_correlation == SC::Local) {
    if (!local || local->size() == 0) return {};
    c = within_class_correlation(*local);
    source = std::to_string(c.residuals) + " local samples (Ledoit-Wolf shrinkage " + std::to_string(c.shrinkage) + ")";
  } else {
    // Reported here, where the head's draw is made, not again when a merge forwards the same pieces.
    std::vector<std::string> without;
    const auto sketch = shared_sketch(sel, local, o, 0, &without);
    if (!without.empty() && ctx.progress) {
      std::string names;
      for (const auto& w : without) names += (names.empty() ? "" : ", ") + w;
      ctx.progress("fedpft: knowledge from " + names + " carries no within-class covariance sketch; the correlation " +
                   "synthetic features are drawn with leaves those nodes out");
    }
    if (!sketch) return {};
    c = correlation_of(*sketch);
    source = std::to_string(c.residuals) + " samples' covariance sketches (" + std::to_string(sketch->factor.rows()) +
             " directions)";
  }
  if (ctx.progress) {
    if (c.factor.size() == 0)
      ctx.progress("fedpft: no class holds two samples, so synthetic features are drawn without correlation");
    else
      ctx.progress("fedpft: synthetic features drawn with the within-class correlation of " + source);
  }
  return c;
}

}  // namespace

void validate_fedpft_options(const FedPftOptions& o, const std::string& where) {
  validate_gmm_options(o.gmm, where);
  // With the per-class delta, every released class has n >= 2, so its delta 1/n is in (0, 1).
  if (o.dp) validate_dp_parameters(o.dp_epsilon, o.dp_delta_per_class ? 0.5 : o.dp_delta, where);
  if (o.synthetic_multiplier < 1 || o.synthetic_multiplier > kMaxSyntheticMultiplier)
    throw InputError(where + ": synthetic multiplier must be in [1, " +
                     std::to_string(kMaxSyntheticMultiplier) + "], got " +
                     std::to_string(o.synthetic_multiplier));
  if (o.sample_correlation == FedPftOptions::SampleCorrelation::Shared) {
    if (o.correlation_rank < 1 || o.correlation_rank > kMaxCorrelationRank)
      throw InputError(where + ": correlation rank must be in [1, " + std::to_string(kMaxCorrelationRank) + "], got " +
                       std::to_string(o.correlation_rank));
    // A sketch is the features' exact second moments, without noise: sent beside DP-FedPFT's Gaussians it
    // would void their guarantee.
    if (o.dp) throw InputError(where + ": a shared correlation sketch is not differentially private; not with dp");
  }
  if (o.lda_shrinkage && !(*o.lda_shrinkage >= 0.0 && *o.lda_shrinkage <= 1.0))
    throw InputError(where + ": LDA shrinkage must lie in [0, 1], got " + std::to_string(*o.lda_shrinkage));
  // A closed-form head holds every received piece until it is solved (its sums in arrival order
  // would make the head depend on the order pieces came in); full covariances are 13 MB a class at
  // d = 1 280 and a star's hub would hold them all, so they are drawn on arrival as before instead.
  if (o.head_fit == FedPftOptions::HeadFit::Lda && (o.dp || o.gmm.covariance == CovarianceType::Full))
    throw InputError(where + ": the closed-form head reads diagonal or spherical mixtures; " +
                     (o.dp ? std::string("DP-FedPFT's full Gaussians") : std::string("full covariances")) +
                     " are drawn from as they arrive (--head-fit sgd)");
  // The closed form takes the receiver's own correlation into the moments (closed_form_head.h);
  // the contributors' sketches are drawn with, not yet read by it.
  if (o.head_fit == FedPftOptions::HeadFit::Lda && o.sample_correlation == FedPftOptions::SampleCorrelation::Shared)
    throw InputError(where + ": the closed-form head reads the receiver's own correlation (local), not the "
                     "contributors' sketches (shared); shared needs --head-fit sgd");
}

void validate_gmm_knowledge(const Knowledge& k, const NodeContext& ctx, const std::string& where) {
  check_compatible(k, "fedpft", ctx.dim, ctx.num_classes, ctx.backbone_fingerprint, where);
  const auto& classes = std::get<GmmKnowledge>(k.payload).classes;
  int previous = -1;
  for (const auto& c : classes) {
    const std::string w = where + ", class " + std::to_string(c.label);
    if (c.label < 0 || c.label >= ctx.num_classes)
      throw InputError(w + ": label outside [0, " + std::to_string(ctx.num_classes) + ")");
    if (c.label <= previous) throw InputError(w + ": classes must be sorted and unique");
    previous = c.label;
    if (c.count < 1 || c.count > kMaxClassCount)
      throw InputError(w + ": sample count " + std::to_string(c.count) + " outside [1, " +
                       std::to_string(kMaxClassCount) + "]");
    c.mixture.validate(w);
    if (c.mixture.dim() != ctx.dim)
      throw InputError(w + ": mixture dimension " + std::to_string(c.mixture.dim()) + ", expected " +
                       std::to_string(ctx.dim));
  }
  if (const auto& sketch = std::get<GmmKnowledge>(k.payload).within_class) {
    int64_t samples = 0;
    for (const auto& c : classes) samples += c.count;
    validate_sketch(*sketch, ctx.dim, samples, where);
  }
}

void check_piece_fits(const Knowledge& k, const FedPftOptions& o, const NodeContext& ctx, const std::string& where) {
  double total = 0;
  for (const auto& c : std::get<GmmKnowledge>(k.payload).classes) total += static_cast<double>(c.count);
  check_synthetic_size(total * o.synthetic_multiplier, ctx.dim, where);
}

uint64_t fedpft_sampling_seed(const NodeContext& ctx, const Contributors& piece, int label) {
  uint64_t h = derive_seed(0x70696563655F6964ULL, {static_cast<uint64_t>(piece.size())});
  for (NodeId id : piece) h = derive_seed(h, {id});
  return derive_seed(ctx.seed, {static_cast<uint64_t>(Purpose::GmmSampling), ctx.node,
                                static_cast<uint64_t>(label), h});
}

Knowledge fedpft_summarize(const Features& local, const FedPftOptions& o, const NodeContext& ctx) {
  validate_fedpft_options(o, "fedpft options");
  check_local(local, ctx);
  if (local.size() == 0) throw InputError("fedpft: this node has no local features to summarise");
  if (!o.dp) check_spread_above_floors(local, o);  // DP floors variances on purpose
  Knowledge k = empty_knowledge(ctx);
  k.contributors = {ctx.node};
  auto& g = std::get<GmmKnowledge>(k.payload);
  const auto counts = local.class_counts();
  std::vector<int> labels;
  for (int c = 0; c < ctx.num_classes; ++c)
    if (counts[static_cast<size_t>(c)] > 0) labels.push_back(c);
  std::vector<std::optional<ClassMixture>> classes(labels.size());
  for_each_class(labels.size(), o.dp, ctx, [&](size_t i, const NodeContext& own) {
    classes[i] = summarize_class(local.rows_of_class(labels[i]), labels[i], o, own);
  });
  for (auto& cm : classes)
    if (cm) g.classes.push_back(std::move(*cm));
  if (o.sample_correlation == FedPftOptions::SampleCorrelation::Shared)
    g.within_class = for_transfer(sketch_within_class(local, o.correlation_rank), o);
  return k;
}

namespace {

// Class c of a merge: the one source's mixture forwarded (rounded as it travels), or the union of
// every source's synthetic features and the local rows summarised again; empty if the class is
// nowhere, or DP-FedPFT does not release it.
std::optional<ClassMixture> merge_class(int c, const Selection& sel, const Features* local, const FedPftOptions& o,
                                        const NodeContext& ctx) {
  std::vector<std::pair<const Knowledge*, const ClassMixture*>> sources;
  for (const Knowledge* piece : sel.pieces)
    if (const ClassMixture* cm = find_class(*piece, c)) sources.emplace_back(piece, cm);
  MatrixF local_rows = sel.use_local ? local->rows_of_class(c) : MatrixF(0, ctx.dim);
  if (sources.empty() && local_rows.rows() == 0) return std::nullopt;
  if (sources.size() == 1 && local_rows.rows() == 0) {
    ClassMixture forwarded = *sources[0].second;
    if (o.half_precision)
      forwarded.mixture = round_mixture_to_half(forwarded.mixture, variance_floor(o), "fedpft class " + std::to_string(c));
    return forwarded;
  }
  double total = static_cast<double>(local_rows.rows());
  for (const auto& s : sources) total += static_cast<double>(s.second->count);
  check_synthetic_size(total, ctx.dim, "fedpft merge, class " + std::to_string(c));
  MatrixF X(static_cast<Eigen::Index>(total), ctx.dim);
  Eigen::Index row = 0;
  for (const auto& s : sources) {
    Rng rng(fedpft_sampling_seed(ctx, s.first->contributors, c));
    const MatrixF samples = sample_gmm(s.second->mixture, s.second->count, rng, o.component_draws);
    X.middleRows(row, samples.rows()) = samples;
    row += samples.rows();
  }
  X.bottomRows(local_rows.rows()) = local_rows;
  return summarize_class(X, c, o, ctx);
}

}  // namespace

Knowledge fedpft_merge(const KnowledgeList& received, const Features* local,
                       const FedPftOptions& o, const NodeContext& ctx) {
  validate_fedpft_options(o, "fedpft options");
  const Selection sel = choose(received, local, ctx);
  if (sel.use_folded) throw std::logic_error("fedpft merge: given samples drawn for a head (start_head_sum)");
  if (sel.pieces.empty() && !sel.use_local)
    throw InputError("fedpft merge: nothing to merge (no usable received knowledge and no local data)");
  Knowledge out = empty_knowledge(ctx);
  out.contributors = sel.contributors;
  auto& g = std::get<GmmKnowledge>(out.payload);
  std::vector<std::optional<ClassMixture>> classes(static_cast<size_t>(ctx.num_classes));
  for_each_class(classes.size(), o.dp, ctx, [&](size_t i, const NodeContext& own) {
    classes[i] = merge_class(static_cast<int>(i), sel, local, o, own);
  });
  for (auto& cm : classes)
    if (cm) g.classes.push_back(std::move(*cm));
  if (o.sample_correlation == FedPftOptions::SampleCorrelation::Shared)
    if (auto sketch = shared_sketch(sel, local, o, o.correlation_rank)) g.within_class = for_transfer(*sketch, o);
  return out;
}

namespace {

// Draws piece `piece`'s synthetic features, every class to its count times
// o.synthetic_multiplier, into rows [row, row + n) of X and appends their labels to y; returns n.
// Every class's rows have their place before any is drawn, so classes draw side by side with
// the same rows in any order: a full covariance's Cholesky factorisation is one thread's work
// (DP-FedPFT's hub factors a 1 280 x 1 280 covariance per leaf and class).
Eigen::Index draw_piece_into(const Knowledge& piece, const FedPftOptions& o, const WithinClassCorrelation& correlation,
                             const NodeContext& ctx, MatrixF& X, Eigen::Index row, Labels& y) {
  const auto& classes = std::get<GmmKnowledge>(piece.payload).classes;
  std::vector<Eigen::Index> first(classes.size() + 1, row);
  for (size_t i = 0; i < classes.size(); ++i) {
    const Eigen::Index rows = classes[i].count * o.synthetic_multiplier;
    first[i + 1] = first[i] + rows;
    y.insert(y.end(), static_cast<size_t>(rows), classes[i].label);
  }
  for_each_chunk_ordered(classes.size(), true, [&](size_t i) {
    const ClassMixture& cm = classes[i];
    Rng rng(fedpft_sampling_seed(ctx, piece.contributors, cm.label));
    const bool correlate = correlation.factor.size() > 0 && cm.mixture.type != CovarianceType::Full;
    X.middleRows(first[i], first[i + 1] - first[i]) =
        sample_gmm(cm.mixture, cm.count * o.synthetic_multiplier, rng, o.component_draws,
                   correlate ? &correlation.factor : nullptr);
  });
  return first.back() - row;
}

double piece_samples(const Knowledge& piece) {
  double n = 0;
  for (const auto& cm : std::get<GmmKnowledge>(piece.payload).classes) n += static_cast<double>(cm.count);
  return n;
}

// A piece's synthetic features, drawn on arrival.
struct DrawnPiece {
  Contributors contributors;
  Features rows;
};

class DrawnSamples final : public KnowledgeSum {
 public:
  DrawnSamples(const FedPftOptions& o, const NodeContext& ctx) : options_(o), ctx_(ctx) {}
  const std::vector<DrawnPiece>& pieces() const { return pieces_; }

 protected:
  // `piece` passed the method's validate() (KnowledgeSum::add's contract): only what depends on
  // the pieces before it is checked here.
  void add_payload(const Knowledge& piece, const std::string& where) override {
    double total = piece_samples(piece) * options_.synthetic_multiplier;
    for (const DrawnPiece& p : pieces_) total += static_cast<double>(p.rows.size());
    check_synthetic_size(total, ctx_.dim, where + ": with the pieces drawn before it, the training set");
    DrawnPiece drawn;
    drawn.contributors = piece.contributors;
    drawn.rows.num_classes = ctx_.num_classes;
    drawn.rows.X.resize(static_cast<Eigen::Index>(piece_samples(piece) * options_.synthetic_multiplier), ctx_.dim);
    draw_piece_into(piece, options_, {}, ctx_, drawn.rows.X, 0, drawn.rows.y);
    pieces_.push_back(std::move(drawn));
  }

 private:
  FedPftOptions options_;
  NodeContext ctx_;
  std::vector<DrawnPiece> pieces_;
};

}  // namespace

std::unique_ptr<KnowledgeSum> fedpft_start_drawn_samples(const FedPftOptions& o, const NodeContext& ctx) {
  if (o.sample_correlation != FedPftOptions::SampleCorrelation::None) return nullptr;
  return std::make_unique<DrawnSamples>(o, ctx);
}

HeadSources fedpft_head_sources(const KnowledgeList& received, const Features* local, const NodeContext& ctx) {
  const Selection sel = choose(received, local, ctx);
  if (sel.use_folded) throw std::logic_error("fedpft: a closed-form head given pieces folded into drawn samples");
  HeadSources out;
  for (const Knowledge* piece : sel.pieces)
    for (const ClassMixture& cm : std::get<GmmKnowledge>(piece->payload).classes)
      out.mixtures.push_back({&cm, &piece->contributors});
  if (sel.use_local) out.local = local;
  return out;
}

Features fedpft_training_set(const KnowledgeList& received, const Features* local,
                             const FedPftOptions& o, const NodeContext& ctx) {
  validate_fedpft_options(o, "fedpft options");
  const Selection sel = choose(received, local, ctx);
  const int64_t m = o.synthetic_multiplier;
  // Each source of synthetic rows: a piece to draw from now, or one drawn as it arrived. Taken
  // in the order select_for_combination gives pieces (larger contributor sets first, then by
  // ids), so that folding pieces on arrival changes no row of the training set.
  struct Source {
    const Contributors* contributors;
    const Knowledge* piece;     // or
    const Features* drawn;
  };
  std::vector<Source> sources;
  for (const Knowledge* piece : sel.pieces) sources.push_back({&piece->contributors, piece, nullptr});
  if (sel.use_folded) {
    const auto* folded = dynamic_cast<const DrawnSamples*>(received.folded());
    if (!folded) throw std::logic_error("fedpft: a folded sum that fedpft_start_drawn_samples did not make");
    for (const DrawnPiece& p : folded->pieces()) sources.push_back({&p.contributors, nullptr, &p.rows});
  }
  std::stable_sort(sources.begin(), sources.end(), [](const Source& a, const Source& b) {
    if (a.contributors->size() != b.contributors->size()) return a.contributors->size() > b.contributors->size();
    return *a.contributors < *b.contributors;
  });
  double total = sel.use_local ? static_cast<double>(local->size()) * static_cast<double>(m) : 0.0;
  for (const Source& s : sources)
    total += s.piece ? piece_samples(*s.piece) * static_cast<double>(m) : static_cast<double>(s.drawn->size());
  if (total == 0) throw InputError("fedpft: no knowledge and no local data to train a head on");
  check_synthetic_size(total, ctx.dim, "fedpft training set");
  Features out;
  out.num_classes = ctx.num_classes;
  out.X.resize(static_cast<Eigen::Index>(total), ctx.dim);
  out.y.reserve(static_cast<size_t>(total));
  const WithinClassCorrelation correlation = correlation_to_draw_with(sel, local, o, ctx);
  if (sel.use_folded && correlation.factor.size() > 0)
    throw std::logic_error("fedpft: pieces folded on arrival were drawn without the correlation now asked for");
  Eigen::Index row = 0;
  for (const Source& s : sources) {
    if (s.piece) {
      row += draw_piece_into(*s.piece, o, correlation, ctx, out.X, row, out.y);
    } else {
      out.X.middleRows(row, s.drawn->size()) = s.drawn->X;
      out.y.insert(out.y.end(), s.drawn->y.begin(), s.drawn->y.end());
      row += s.drawn->size();
    }
  }
  // Real rows are repeated m times: weighting them like the m-fold synthetic draws keeps each
  // class's share of the training set equal to its share of the federation's data.
  if (sel.use_local)
    for (int64_t r = 0; r < m; ++r) {
      out.X.middleRows(row, local->size()) = local->X;
      out.y.insert(out.y.end(), local->y.begin(), local->y.end());
      row += local->size();
    }
  return out;
}

}  // namespace fednode
