// FedPFT's head in closed form (`--head-fit lda`, a fednode option; the paper trains a linear layer
// on synthetic draws). The mixtures' own moments are the additive statistics FedCGS solves its head
// from: for a class mixture standing for n samples, with weights w_k, means mu_k and covariances S_k,
//   A_c += n sum_k w_k mu_k,   N_c += n,   B += n sum_k w_k (S_k + mu_k mu_k^T),
// the local real rows adding themselves. Linear discriminant analysis of those statistics
// (methods/fedcgs/lda.h) is the Gaussian classifier of the distribution the paper's head is trained
// on draws from, solved exactly: no draw, no gradient step, a fraction of a second at d = 1 280
// where the trained head takes seconds (docs/methods/fedpft.md, "A head in closed form").
//
// The shrinkage of the shared covariance, unless given, is chosen on the node's own real rows: the
// head is solved for each candidate from everything else (the received mixtures' moments alone)
// and scored on them; the least shrinkage within one standard error of the
// best score is solved again from all. A node that received nothing scores them by 5-fold
// cross-validation over its rows instead. Draws from the mixtures were tried as the held-out set
// first, and misled: drawn from diagonal components they lack the correlations real features
// have, and favour shrinkage (Fashion-MNIST at alpha 0.1: 0.9 chosen, test 0.778 against 0.823
// with what the local rows choose). A node without local rows of its own (its data already among
// the pieces' contributors) applies none, FedCGS's default.
//
// With --sample-correlation local, diagonal and spherical components take the receiver's own
// within-class correlation (methods/fedpft/correlation.h) into their moments; the candidates
// solved without the local rows still carry that estimate of them, a correlation, not their rows.
#pragma once

#include "methods/fedpft/fedpft_core.h"
#include "methods/heads/head.h"

#include <memory>
#include <string>
#include <vector>

namespace fednode {

// What the choice found, for progress lines.
struct ShrinkageChoice {
  double shrinkage = 0.0;
  bool given = false;              // --lda-shrinkage S: not chosen
  int64_t validation_samples = 0;  // the local rows it was chosen on; 0: not chosen
  int folds = 0;                   // 1: scored by what was received; more: cross-validated on the rows alone
  struct Tried {
    double shrinkage;
    double accuracy;
  };
  std::vector<Tried> tried;
  std::string summary() const;  // "closed form (LDA of the mixtures' moments), shrinkage 0.5 chosen on ..."
};

// A, N and B of the mixtures (and `local`, if not null): what fit_lda_head reads. With
// `correlation` (d x d, unit diagonal), a diagonal or spherical component's covariance is taken as
// diag(s) R diag(s) instead of diag(s^2): the within-class correlation it cannot carry.
StatsKnowledge mixture_statistics(const std::vector<const ClassMixture*>& mixtures, const Features* local,
                                  int num_classes, int dim, const MatrixD* correlation = nullptr);

// Of the candidates (in the order tried, least shrinkage first), the first whose accuracy on `rows`
// rows is within one standard error of the best's: a node's own rows are few (83-167 on the
// digits' 10-node star), and the highest score alone, ahead by one row, took 0.9 where none was
// right (test 0.919 against 0.957).
double least_shrinkage_near_best(const std::vector<ShrinkageChoice::Tried>& tried, int64_t rows);

// The head. Throws InputError when the sources hold no sample.
std::unique_ptr<LinearHead> fit_closed_form_head(const HeadSources& sources, const FedPftOptions& options,
                                                 const NodeContext& ctx, ShrinkageChoice* chosen = nullptr);

}  // namespace fednode
