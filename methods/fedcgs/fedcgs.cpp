#include "methods/fedcgs/fedcgs.h"

#include "methods/fedcgs/stats_codec.h"

#include "methods/fedcgs/dp_stats.h"
#include "methods/fedcgs/masked_stats.h"
#include "methods/fedcgs/personalize.h"

#include "core/json_writer.h"
#include "core/rng.h"
#include "methods/registry.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>

namespace fednode {
namespace {

// FedCGS's running sum: statistics summed exactly, so that folding pieces as they arrive gives
// bit for bit what merging the same pieces at once gives.
class FoldedStats final : public KnowledgeSum {
 public:
  FoldedStats(int num_classes, int dim) : sum(num_classes, dim) {}
  StatsSum sum;

 private:
  void add_payload(const Knowledge& piece, const std::string& where) override {
    sum.add(std::get<StatsKnowledge>(piece.payload), where);
  }
};

class FedCgs final : public Method {
 public:
  explicit FedCgs(const FedCgsOptions& options) : options_(options) {
    if (!(options_.shrinkage >= 0.0 && options_.shrinkage <= 1.0))
      throw InputError("FedCGS shrinkage must lie in [0, 1], got " + std::to_string(options_.shrinkage));
    if (options_.dp) stats_noise_scale(options_);  // refuses a bad epsilon, delta, norm or split now
  }

  std::string name() const override { return "fedcgs"; }

  Knowledge summarize(const Features& local, const NodeContext& ctx) const override {
    check_local(local, ctx);
    return wrap(local_stats(local, ctx, true, ctx.masking != nullptr), Contributors{ctx.node}, ctx);
  }

  Knowledge merge(const KnowledgeList& received, const Features* local,
                  const NodeContext& ctx) const override {
    return combine(received, local, ctx, true);
  }

  std::vector<PrivacyRelease> privacy(const Features& local, const NodeContext& ctx) const override {
    if (!options_.dp) return Method::privacy(local, ctx);
    if (!distributes_noise(ctx)) return {private_stats_release(options_)};
    return {private_stats_release(options_, ctx.masking->group.size(), ctx.masking->counts_only)};
  }

  bool personalizes() const override { return options_.personalize.has_value(); }

  // The means of exactly what the node's head trains on (its own data exact, noisy statistics
  // under DP as they came).
  ClassMeans class_means(const KnowledgeList& received, const Features* local, const NodeContext& ctx) const override {
    const Knowledge k = combine(received, local, ctx, false);
    ClassMeans m;
    m.means = global_class_means(std::get<StatsKnowledge>(k.payload), &m.present);
    return m;
  }

  std::unique_ptr<Head> personal_head(const Features& local, const ClassMeans& means, const Head& global,
                                      const NodeContext& ctx) const override {
    if (!options_.personalize) throw std::logic_error("FedCGS: personalisation is off");
    PersonalizeOptions o = *options_.personalize;
    o.seed = personal_seed(ctx.seed, ctx.node);
    return personalize_head(local, means.means, means.present, o, dynamic_cast<const LinearHead*>(&global));
  }

  std::unique_ptr<KnowledgeSum> start_sum(const NodeContext& ctx) const override {
    return std::make_unique<FoldedStats>(ctx.num_classes, ctx.dim);
  }

  void validate(const Knowledge& piece, const NodeContext& ctx, const std::string& where) const override {
    check_compatible(piece, name(), ctx.dim, ctx.num_classes, ctx.backbone_fingerprint, where);
    validate_stats(std::get<StatsKnowledge>(piece.payload), ctx.num_classes, ctx.dim, where);
  }

  std::unique_ptr<Head> fit_head(const KnowledgeList& received, const Features* local,
                                 const NodeContext& ctx) const override {
    // The node's own data enters its own head exactly: only what leaves the node is noised.
    const Knowledge k = combine(received, local, ctx, false);
    LdaDiagnostics diag;
    auto head = fit_lda_head(std::get<StatsKnowledge>(k.payload), options_, &diag);
    if (ctx.progress) {
      if (!diag.absent.empty()) {
        std::string list;
        for (int c : diag.absent) list += (list.empty() ? "" : ", ") + std::to_string(c);
        ctx.progress("fedcgs: no node holds class(es) " + list + "; the head never predicts them");
      }
      if (diag.identity) ctx.progress("fedcgs: every feature is constant; using an identity covariance");
      if (diag.ridge > 0) {
        char ridge[32];
        std::snprintf(ridge, sizeof ridge, "%.3g", diag.ridge);  // tiny ridges are the usual case
        ctx.progress(std::string("fedcgs: covariance is singular; added a ridge of ") + ridge);
      }
      if (std::get<StatsKnowledge>(k.payload).noise.any()) {
        char line[128];
        std::snprintf(line, sizeof line, "fedcgs: noisy statistics; shrinkage %.3g, eigenvalue floor %.3g",
                      diag.shrinkage, diag.eigen_floor);
        ctx.progress(line);
      }
    }
    return head;
  }

 private:
  // What merge sends (`released`: the local part through DP-FedCGS when it is on) or what the
  // node's own head trains on (the local part exact).
  Knowledge combine(const KnowledgeList& received, const Features* local, const NodeContext& ctx,
                    bool released) const {
    if (local) check_local(*local, ctx);
    const Selection sel = select_for_combination(received, local, ctx, name());
    if (sel.pieces.empty() && !sel.use_local)
      throw InputError("FedCGS merge on node " + std::to_string(ctx.node) +
                       ": neither received statistics nor local data to combine");
    StatsSum sum(ctx.num_classes, ctx.dim);
    bool masked_inputs = false;
    if (sel.use_folded) {
      const auto* folded = dynamic_cast<const FoldedStats*>(received.folded());
      if (!folded) throw std::logic_error("FedCGS merge: the folded sum is not FedCGS's");
      sum.add(folded->sum);
      masked_inputs = folded->sum.masked();
    }
    for (const Knowledge* piece : sel.pieces) {
      const std::string where = "statistics from contributors " + to_string(piece->contributors);
      const auto& stats = std::get<StatsKnowledge>(piece->payload);
      validate_stats(stats, ctx.num_classes, ctx.dim, where);
      sum.add(stats, where);
      masked_inputs |= stats.masked.has_value();
    }
    // Under secure aggregation what leaves the node is masked; so is the local part of a head on
    // masked pieces, whose masks cancel only against this node's. A head on plain pieces (the
    // ring's complete knowledge, or none) takes the local data plain.
    if (sel.use_local)
      sum.add(local_stats(*local, ctx, released, ctx.masking && (released || masked_inputs)), "local statistics");
    StatsKnowledge total = sum.total();
    if (total.masked && ctx.unmasking) recover(*total.masked, sel.contributors, *ctx.unmasking);
    // Secure aggregation: once the whole mask group is in, the masks have cancelled and the sum
    // is read back; before, what is forwarded stays masked and no head can be fitted on it.
    if (total.masked && (!released || unmaskable(*total.masked, sel.contributors)))
      total = unmask(total, sel.contributors, "FedCGS on node " + std::to_string(ctx.node));
    return wrap(std::move(total), sel.contributors, ctx);
  }

  StatsKnowledge local_stats(const Features& local, const NodeContext& ctx, bool released, bool masked) const {
    StatsKnowledge s;
    if (!released || !options_.dp) {
      s = compute_stats(local);
    } else {
      int64_t clipped = 0;
      std::array<double, 3> shares = {1.0, 1.0, 1.0};
      if (distributes_noise(ctx)) {
        const double share = distributed_noise_share(options_, ctx.masking->group.size());
        shares = {ctx.masking->counts_only ? 1.0 : share, share, ctx.masking->counts_only ? 1.0 : share};
      }
      s = release_private_stats(local, options_, ctx.secret_noise_key("DP-FedCGS"), ctx.node, &clipped, shares);
      if (ctx.progress)
        ctx.progress("fedcgs: DP release of " + std::to_string(local.size()) + " samples, " + std::to_string(clipped) +
                     " clipped to norm " + std::to_string(options_.clip_norm));
    }
    if (masked) {
      s = encode_for_masking(s, ctx.masking->group, ctx.masking->counts_only,
                             "node " + std::to_string(ctx.node) + "'s statistics");
      add_masks(*s.masked, ctx.masking->add_masks);
    }
    return s;
  }

  // Distributed DP applies to what a node masks; a star's hub, which masks nothing, releases the
  // summary behind the head it sends with the full noise.
  bool distributes_noise(const NodeContext& ctx) const { return options_.dp && options_.dp_distributed && ctx.masking; }

  static void check_local(const Features& local, const NodeContext& ctx) {
    if (local.dim() != ctx.dim)
      throw InputError("FedCGS node " + std::to_string(ctx.node) + ": local features have dimension " +
                       std::to_string(local.dim()) + ", expected " + std::to_string(ctx.dim));
    if (local.num_classes != ctx.num_classes)
      throw InputError("FedCGS node " + std::to_string(ctx.node) + ": local features have " +
                       std::to_string(local.num_classes) + " classes, expected " +
                       std::to_string(ctx.num_classes));
  }

  static Knowledge wrap(StatsKnowledge stats, Contributors contributors, const NodeContext& ctx) {
    Knowledge k;
    k.contributors = std::move(contributors);
    k.backbone_fingerprint = ctx.backbone_fingerprint;
    k.dim = ctx.dim;
    k.num_classes = ctx.num_classes;
    k.payload = std::move(stats);
    return k;
  }

  FedCgsOptions options_;
};

void parse_personalize_options(const Args& a, FedCgsOptions& c) {
  static const char* const settings[] = {"personal-lambda", "personal-epochs", "personal-rank", "personal-lr",
                                         "personal-start"};
  if (!a.flag("personalize")) {
    for (const char* name : settings)
      if (a.has(name)) throw UsageError(std::string("--") + name + " applies to --personalize only");
    return;
  }
  PersonalizeOptions p;
  p.lambda = a.real("personal-lambda", p.lambda, 0.0, 1e6);
  if (a.has("personal-epochs")) p.epochs = static_cast<int>(a.integer("personal-epochs", 50, 1, 100000));
  p.rank = static_cast<int>(a.integer("personal-rank", p.rank, 1, 100000));
  if (a.has("personal-lr")) p.lr = a.real("personal-lr", 0.01, 1e-9, 10.0);
  const std::string start = a.str("personal-start", "global");
  if (start != "global" && start != "scratch")
    throw UsageError("--personal-start must be global or scratch, got '" + start + "'");
  p.from_global_head = start == "global";
  c.personalize = p;
}

void parse_fedcgs_options(const Args& a, MethodOptions& m) {
  auto& c = m.fedcgs;
  const std::string cov = a.str("lda-covariance", c.covariance == LdaCovariance::Total ? "total" : "within");
  if (cov == "total") c.covariance = LdaCovariance::Total;
  else if (cov == "within") c.covariance = LdaCovariance::Within;
  else throw UsageError("--lda-covariance must be total or within, got '" + cov + "'");
  c.shrinkage = a.real("shrinkage", c.shrinkage, 0.0, 1.0);
  c.dp = a.flag("dp");
  if (!c.dp)
    for (const char* name : {"dp-epsilon", "dp-delta", "clip-norm", "dp-split", "dp-distributed", "dp-colluders"})
      if (a.has(name)) throw UsageError(std::string("--") + name + " applies to --dp only");
  c.dp_distributed = a.flag("dp-distributed");
  if (c.dp_distributed && m.secure_aggregation == SecureAggregation::Off)
    throw UsageError("--dp-distributed shares the noise among the members of a secure aggregation: it needs --secure-aggregation");
  if (!c.dp_distributed && a.has("dp-colluders")) throw UsageError("--dp-colluders applies to --dp-distributed only");
  c.dp_colluders = static_cast<int>(a.integer("dp-colluders", c.dp_colluders, 0, 1 << 20));
  c.dp_epsilon = a.real("dp-epsilon", c.dp_epsilon, 1e-9, 1e9);
  if (a.str("dp-delta", "") == "per-class")
    throw UsageError("--dp-delta per-class is DP-FedPFT's rule; DP-FedCGS releases all classes at once: give a number");
  c.dp_delta = a.real("dp-delta", c.dp_delta, 1e-300, 1.0 - 1e-12);
  c.clip_norm = a.real("clip-norm", c.clip_norm, 1e-30, 1e30);
  if (a.has("dp-split")) {
    const std::string text = a.str("dp-split", "");
    double v[3];
    char tail = 0;
    if (std::sscanf(text.c_str(), "%lf,%lf,%lf%c", &v[0], &v[1], &v[2], &tail) != 3 || !(v[0] > 0) || !(v[1] > 0) ||
        !(v[2] > 0) || !std::isfinite(v[0] + v[1] + v[2]))
      throw UsageError("--dp-split must be three positive numbers A,N,B (shares of the budget), got '" + text + "'");
    c.dp_split = {v[0], v[1], v[2]};
  }
  parse_personalize_options(a, c);
}

std::string fedcgs_options_help() {
  const FedCgsOptions c;
  std::ostringstream h;
  h << "FedCGS:\n"
       "  --lda-covariance total|within     ("
    << (c.covariance == LdaCovariance::Within ? "within" : "total") << ")\n"
    << "  --shrinkage S in [0, 1]           (" << c.shrinkage << "; noisy statistics get at least what their noise needs)\n"
    << "  --dp --dp-epsilon E (" << c.dp_epsilon << ") --dp-delta D (" << c.dp_delta << ")\n"
    << "                                    DP-FedCGS: each node's statistics through the Gaussian mechanism\n"
    << "  --clip-norm R                     (" << c.clip_norm << ") features scaled down to norm <= R first\n"
    << "  --dp-split A,N,B                  (" << c.dp_split[0] << "," << c.dp_split[1] << "," << c.dp_split[2]
    << ") shares of the budget\n"
    << "  --dp-distributed [--dp-colluders T (" << c.dp_colluders << ")]\n"
    << "                                    with --secure-aggregation: each of m members adds 1/(m-1-T) of\n"
    << "                                    the noise; every sum read still carries all of it\n"
    << "  --personalize                     every node also trains a personal head on its own data,\n"
    << "                                    aligned to the global class means (paper 001, Eq. 12; a\n"
    << "                                    star's hub sends them with its head): result.json's\n"
    << "                                    personal_accuracy (docs/methods/fedcgs.md)\n"
    << "  --personal-start global|scratch   (global) from the node's federation head, or from zero as\n"
    << "                                    the paper does\n"
    << "  --personal-lambda L (1) --personal-rank R (16) --personal-epochs E (50; 200 from scratch)\n"
    << "  --personal-lr LR                  (0.001; 0.01 from scratch)\n";
  return h.str();
}

}  // namespace

std::unique_ptr<Method> make_fedcgs(const FedCgsOptions& options) {
  return std::make_unique<FedCgs>(options);
}

MethodDescriptor fedcgs_descriptor() {
  MethodDescriptor d;
  d.name = "fedcgs";
  d.knowledge = KnowledgeKind::Stats;
  d.codec = std::make_shared<StatsCodec>();
  d.options = {"lda-covariance", "shrinkage", "dp", "dp-epsilon", "dp-delta", "clip-norm", "dp-split",
               "dp-distributed", "dp-colluders", "personalize", "personal-lambda", "personal-epochs", "personal-rank",
               "personal-lr", "personal-start"};
  d.flags = {"dp", "dp-distributed", "personalize"};
  d.parse_options = parse_fedcgs_options;
  d.help = fedcgs_options_help;
  d.make = [](const MethodOptions& o) { return make_fedcgs(o.fedcgs); };
  d.half_precision = [](const MethodOptions&) { return false; };  // statistics travel as float64
  // No seed draws an LDA head; the record keeps the linear head's, as it always has.
  d.head_seed = [](const MethodOptions& o) { return o.fedpft.head.seed; };
  d.write_options = [](JsonWriter& w, const MethodOptions& o) {
    w.key("fedcgs").begin_object();
    w.key("covariance").value(o.fedcgs.covariance == LdaCovariance::Total ? "total" : "within");
    w.key("shrinkage").value(o.fedcgs.shrinkage);
    // Only with DP, so that reports and configuration records of runs without it are unchanged.
    if (o.fedcgs.dp) {
      w.key("dp").value(true);
      w.key("dp_epsilon").value(o.fedcgs.dp_epsilon);
      w.key("dp_delta").value(o.fedcgs.dp_delta);
      w.key("clip_norm").value(o.fedcgs.clip_norm);
      w.key("dp_split").array(std::vector<double>(o.fedcgs.dp_split.begin(), o.fedcgs.dp_split.end()));
      if (o.fedcgs.dp_distributed) {
        w.key("dp_distributed").value(true);
        w.key("dp_colluders").value(static_cast<int64_t>(o.fedcgs.dp_colluders));
      }
    }
    if (const auto& p = o.fedcgs.personalize) {
      w.key("personalize").begin_object();
      w.key("start").value(p->from_global_head ? "global" : "scratch");
      w.key("lambda").value(p->lambda);
      w.key("rank").value(static_cast<int64_t>(p->rank));
      w.key("epochs").value(static_cast<int64_t>(p->epoch_count()));
      w.key("lr").value(p->learning_rate());
      w.end_object();
    }
    w.end_object();
  };
  return d;
}

}  // namespace fednode
