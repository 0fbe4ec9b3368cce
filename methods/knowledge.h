// Knowledge: what travels between nodes. One variant per method, each carrying the set of
// node ids whose data it summarises and the backbone fingerprint it was computed with.
#pragma once

#include "core/cloned.h"
#include "core/fixed_ring.h"
#include "core/types.h"

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <variant>
#include <vector>

namespace fednode {

enum class CovarianceType { Full, Diag, Spherical };
const char* to_string(CovarianceType t);
CovarianceType parse_covariance_type(const std::string& s);  // throws InputError

// A Gaussian mixture in double precision. Covariance storage by type:
//   Full:      covariances is K*d rows of d  (component k occupies rows [k*d, (k+1)*d))
//   Diag:      covariances is K x d          (variances)
//   Spherical: covariances is K x 1          (one variance per component)
struct GaussianMixture {
  CovarianceType type = CovarianceType::Diag;
  VectorD weights;    // K, sums to 1
  MatrixD means;      // K x d
  MatrixD covariances;

  int components() const { return static_cast<int>(weights.size()); }
  int dim() const { return static_cast<int>(means.cols()); }
  // Number of scalars a transfer of this mixture carries (FedPFT Eq. 10-12).
  int64_t parameter_count() const;
  void validate(const std::string& what) const;  // shapes, finiteness, weights, positive variances
};

// FedPFT: per class a mixture and the number of real samples it stands for.
struct ClassMixture {
  int label = 0;
  int64_t count = 0;
  GaussianMixture mixture;
};

// FedPFT with FedPftOptions::SampleCorrelation::Shared (a fednode extension, not the paper's
// message): the contributors' pooled within-class covariance, each row minus its own node's class
// mean, as a low-rank part plus a diagonal,
//   Sigma ~ factor^T factor + diag(variances - column sums of squares of factor),
// so the variances are exact and only the correlation between dimensions is truncated. Sketches of
// disjoint contributors add up weighted by their residuals (methods/fedpft/correlation.h).
struct CovarianceSketch {
  int64_t residuals = 0;  // rows summarised, of classes with at least two rows at their node
  VectorD variances;      // d
  MatrixD factor;         // rank x d, rank <= d
};

struct GmmKnowledge {
  std::vector<ClassMixture> classes;  // only classes with data, sorted by label
  std::optional<CovarianceSketch> within_class;
};

// The noise DP-FedCGS added to statistics (docs/privacy.md): the variance of every entry's
// noise, of A, of N and of B's upper triangle (mirrored). Independent noise adds its variances
// when statistics are summed, so a sum still says how much noise it carries, which the head uses
// to shrink and floor its covariance. All zero for exact statistics.
struct StatsNoise {
  double a = 0, n = 0, b = 0;
  bool any() const { return a > 0 || n > 0 || b > 0; }
};

// Secure aggregation (docs/privacy.md): parts of statistics that travel as elements of Z/2^128
// (core/fixed_ring.h) with pairwise masks added (crypto/secure_aggregation.h). The masks cancel
// only in the sum of the pieces of every member of `group`; until then the parts say nothing.
struct MaskedStats {
  Contributors group;            // whose masks are in play
  bool counts_only = false;      // only N is masked (the FedCGS paper's cheaper option)
  std::vector<Ring128> A;        // C * d, row-major; empty when counts_only
  std::vector<Ring128> N;        // C
  std::vector<Ring128> B;        // B's upper triangle row by row from the diagonal; empty when counts_only
};

// Adds a node's pairwise masks to `n` ring elements of mask stream `stream`, in place (one stream
// per part masked, so that no stream spans two parts).
using AddMasks = std::function<void(uint64_t stream, Ring128* values, size_t n)>;

// How a node masks its own summary under secure aggregation (node/secure_aggregation.h).
struct LocalMasking {
  Contributors group;        // the mask group: the masks cancel in the sum of all its members' pieces
  bool counts_only = false;  // mask N alone (the FedCGS paper's cheaper option)
  AddMasks add_masks;
};

// How a star's hub reads its leaves' masked sum after secure aggregation's unmasking round: the
// masks that do not cancel among the survivors (their self masks, their pair masks with the
// dropped) taken off, after which the sum is that of the survivors' pieces alone.
struct Unmasking {
  Contributors group;      // the mask group the round was for
  Contributors survivors;  // whose pieces the sum must hold, exactly
  AddMasks remove;
};

// FedCGS: additive statistics, accumulated in double precision. With `masked`, the statistics are
// the plain parts plus the masked parts once unmasked (methods/fedcgs/masked_stats.h); a masked
// part's plain counterpart is then zero.
struct StatsKnowledge {
  MatrixD A;                    // C x d, per-class sums of features
  std::vector<int64_t> N;       // C, per-class counts (noisy ones, rounded, may be negative)
  MatrixD B;                    // d x d, sum of f f^T over all samples (symmetric)
  StatsNoise noise;
  std::optional<MaskedStats> masked;
};

// FedTC: per class a set of prototype vectors (batch means of cleaned features).
struct ClassPrototypes {
  int label = 0;
  int64_t count = 0;            // real samples behind these prototypes
  MatrixF prototypes;           // P x d
};

struct PrototypeKnowledge {
  std::vector<ClassPrototypes> classes;  // sorted by label
};

// Knowledge of a kind a method defines in its own folder (a trained model per contributor, a set
// of prompts: methods/*/..._knowledge.h): everything outside that folder sees only this, and the
// method its own type (body_of<T>). A new method whose knowledge is none of the kinds above
// defines its own, and touches nothing here.
class KnowledgeBody {
 public:
  virtual ~KnowledgeBody() = default;
  virtual const char* method() const = 0;  // the method that sends it, as the registry names it
  // Its size as it travels (MethodKnowledge::payload_bytes), excluding framing.
  virtual int64_t payload_bytes(bool half_precision) const = 0;
  virtual std::unique_ptr<KnowledgeBody> clone() const = 0;
};

// Holds a KnowledgeBody with value semantics: copying knowledge copies its body.
class MethodKnowledge : public Cloned<KnowledgeBody> {
 public:
  MethodKnowledge() = default;
  template <class T, class = std::enable_if_t<std::is_base_of_v<KnowledgeBody, T>>>
  MethodKnowledge(T body) : Cloned<KnowledgeBody>(std::make_unique<T>(std::move(body))) {}  // NOLINT: converts
};

using KnowledgePayload = std::variant<GmmKnowledge, StatsKnowledge, PrototypeKnowledge, MethodKnowledge>;

// A method's own kind of knowledge in `payload`: null (body_if) or std::logic_error (body_of) when
// it holds another.
template <class T>
const T* body_if(const KnowledgePayload* payload) {
  const auto* m = payload ? std::get_if<MethodKnowledge>(payload) : nullptr;
  return m ? dynamic_cast<const T*>(m->get()) : nullptr;
}
template <class T>
T* body_if(KnowledgePayload* payload) {
  auto* m = payload ? std::get_if<MethodKnowledge>(payload) : nullptr;
  return m ? dynamic_cast<T*>(m->get()) : nullptr;
}
template <class T>
const T& body_of(const KnowledgePayload& payload) {
  if (const T* body = body_if<T>(&payload)) return *body;
  throw std::logic_error("knowledge of another kind than the method's own");
}
template <class T>
T& body_of(KnowledgePayload& payload) {
  if (T* body = body_if<T>(&payload)) return *body;
  throw std::logic_error("knowledge of another kind than the method's own");
}

// Per class the mean feature of a federation's data (personalised FedCGS's alignment targets);
// `present[c]` false, and row c zero, for a class no one holds.
struct ClassMeans {
  MatrixD means;  // C x d
  std::vector<bool> present;
};

struct Knowledge {
  Contributors contributors;
  std::string backbone_fingerprint;
  int dim = 0;
  int num_classes = 0;
  KnowledgePayload payload;

  const char* method_name() const;  // the method that sends this kind (methods/registry.h)
  // Size of the payload as it travels (float32 or float16 tensors, float64 statistics),
  // excluding framing; used for the bytes-sent columns of reports.
  int64_t payload_bytes(bool half_precision) const;
};

// Knowledge that adds up (FedCGS's statistics), folded piece by piece into one running sum as it
// arrives (Method::start_sum), so that a node holds the sum rather than every piece: a star's hub
// of 128 leaves held 128 Gram matrices. Only the method that made a sum reads what it holds.
class KnowledgeSum {
 public:
  virtual ~KnowledgeSum() = default;
  // Adds `piece`, which passed the method's validate() and whose contributors are disjoint from
  // those already added (std::logic_error otherwise: the caller decides what may be folded).
  // Throws InputError, the sum unchanged, if the piece cannot be summed.
  void add(const Knowledge& piece, const std::string& where);
  // Whose data the sum holds: the union of the pieces' contributors.
  const Contributors& contributors() const { return contributors_; }

 protected:
  virtual void add_payload(const Knowledge& piece, const std::string& where) = 0;

 private:
  Contributors contributors_;
};

// The pieces a method combines, seen where they lie: a node holds each received piece once, and
// merging 128 FedCGS pieces of a 5 MB Gram matrix each must not copy them first (a star's hub
// held three copies of every piece at its peak). Built from the node's own storage (pointers,
// or a vector of pieces), or, for tests and small programs, from a braced list of pieces, which
// it then holds. Neither copyable nor movable: it is made where a call needs it.
// It may also carry a sum of pieces already folded (KnowledgeSum): the contributor rules treat
// the sum as one more piece whose contributors are the union of the folded pieces'.
class KnowledgeList {
 public:
  KnowledgeList() = default;
  KnowledgeList(std::vector<const Knowledge*> pieces) : refs_(std::move(pieces)) {}  // NOLINT: a view
  KnowledgeList(std::vector<const Knowledge*> pieces, const KnowledgeSum* folded)
      : refs_(std::move(pieces)), folded_(folded) {}
  KnowledgeList(const std::vector<Knowledge>& pieces) {  // NOLINT: a view
    for (const Knowledge& k : pieces) refs_.push_back(&k);
  }
  KnowledgeList(std::initializer_list<Knowledge> pieces) : owned_(pieces) {
    for (const Knowledge& k : owned_) refs_.push_back(&k);
  }
  KnowledgeList(const KnowledgeList&) = delete;
  KnowledgeList& operator=(const KnowledgeList&) = delete;

  // The pieces, not counting the folded sum.
  size_t size() const { return refs_.size(); }
  const Knowledge& operator[](size_t i) const { return *refs_[i]; }
  // Nothing received: no piece, and no folded sum with any contributor.
  bool empty() const { return refs_.empty() && (!folded_ || folded_->contributors().empty()); }
  const KnowledgeSum* folded() const { return folded_; }

  class const_iterator {
   public:
    explicit const_iterator(std::vector<const Knowledge*>::const_iterator at) : at_(at) {}
    const Knowledge& operator*() const { return **at_; }
    const Knowledge* operator->() const { return *at_; }
    const_iterator& operator++() {
      ++at_;
      return *this;
    }
    bool operator!=(const const_iterator& o) const { return at_ != o.at_; }
    bool operator==(const const_iterator& o) const { return at_ == o.at_; }

   private:
    std::vector<const Knowledge*>::const_iterator at_;
  };
  const_iterator begin() const { return const_iterator(refs_.begin()); }
  const_iterator end() const { return const_iterator(refs_.end()); }

 private:
  std::vector<Knowledge> owned_;
  std::vector<const Knowledge*> refs_;
  const KnowledgeSum* folded_ = nullptr;
};

// Contributor rules (docs/architecture.md, "Rules that keep merging honest").
std::string to_string(const Contributors& c);  // "{0,2,5}", as logs and errors name node sets
bool disjoint(const Contributors& a, const Contributors& b);
bool is_subset(const Contributors& a, const Contributors& b);  // a ⊆ b
Contributors united(const Contributors& a, const Contributors& b);

// Given pieces of knowledge, chooses which may be combined without counting anyone twice:
// pieces that are subsets of another are dropped (this makes receiving the same piece twice a
// no-op), then a disjoint family is chosen greedily, largest contributor set first, ties broken
// by the smallest contributor ids so that the choice is deterministic. Pieces that partially
// overlap the chosen ones are returned in `left_out`, never summed.
struct CombinePlan {
  std::vector<size_t> chosen;    // indices into the input, disjoint contributor sets
  std::vector<size_t> left_out;  // partial overlaps, kept apart
};
CombinePlan plan_combination(const std::vector<const Contributors*>& pieces);

// Throws InputError if `k` cannot be merged with knowledge of the given method, dimension,
// class count and backbone.
void check_compatible(const Knowledge& k, const std::string& method, int dim, int num_classes,
                      const std::string& backbone_fingerprint, const std::string& where);

}  // namespace fednode
