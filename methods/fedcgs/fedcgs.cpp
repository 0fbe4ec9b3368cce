#include "methods/fedcgs/fedcgs.h"

#include "core/json_writer.h"
#include "methods/registry.h"

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
  }

  std::string name() const override { return "fedcgs"; }

  Knowledge summarize(const Features& local, const NodeContext& ctx) const override {
    check_local(local, ctx);
    return wrap(compute_stats(local), Contributors{ctx.node}, ctx);
  }

  Knowledge merge(const KnowledgeList& received, const Features* local,
                  const NodeContext& ctx) const override {
    if (local) check_local(*local, ctx);
    const Selection sel = select_for_combination(received, local, ctx, name());
    if (sel.pieces.empty() && !sel.use_local)
      throw InputError("FedCGS merge on node " + std::to_string(ctx.node) +
                       ": neither received statistics nor local data to combine");
    StatsSum sum(ctx.num_classes, ctx.dim);
    if (sel.use_folded) {
      const auto* folded = dynamic_cast<const FoldedStats*>(received.folded());
      if (!folded) throw std::logic_error("FedCGS merge: the folded sum is not FedCGS's");
      sum.add(folded->sum);
    }
    for (const Knowledge* piece : sel.pieces) {
      const std::string where = "statistics from contributors " + to_string(piece->contributors);
      const auto& stats = std::get<StatsKnowledge>(piece->payload);
      validate_stats(stats, ctx.num_classes, ctx.dim, where);
      sum.add(stats, where);
    }
    if (sel.use_local) sum.add(compute_stats(*local), "local statistics");
    return wrap(sum.total(), sel.contributors, ctx);
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
    const Knowledge k = merge(received, local, ctx);
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
    }
    return head;
  }

 private:
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

void parse_fedcgs_options(const Args& a, MethodOptions& m) {
  auto& c = m.fedcgs;
  const std::string cov = a.str("lda-covariance", c.covariance == LdaCovariance::Total ? "total" : "within");
  if (cov == "total") c.covariance = LdaCovariance::Total;
  else if (cov == "within") c.covariance = LdaCovariance::Within;
  else throw UsageError("--lda-covariance must be total or within, got '" + cov + "'");
  c.shrinkage = a.real("shrinkage", c.shrinkage, 0.0, 1.0);
}

std::string fedcgs_options_help() {
  const FedCgsOptions c;
  std::ostringstream h;
  h << "FedCGS:\n"
       "  --lda-covariance total|within     ("
    << (c.covariance == LdaCovariance::Within ? "within" : "total") << ")\n"
    << "  --shrinkage S in [0, 1]           (" << c.shrinkage << ")\n";
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
  d.options = {"lda-covariance", "shrinkage"};
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
    w.end_object();
  };
  return d;
}

}  // namespace fednode
