// FedPFT without head training: summarising local features into per-class mixtures, merging
// received mixtures with local data (decentralised FedPFT), and assembling the synthetic +
// real training set a head is trained on. Kept apart from the Method (fedpft.cpp) so that it
// can be used and tested without LibTorch.
//
// Seeds (core/rng.h), all from the run seed ctx.seed:
//   EM initialisation of class c at node v:      (KMeansInit, v, c)
//   DP noise of class c at node v:               (DpNoise, v, c)
//   samples node v draws from piece P, class c:  (GmmSampling, v, c, hash of P's contributors)
// so every (receiving node, piece, class) has its own stream, and merge() and the training set
// of the same node draw the very same synthetic features.
#pragma once

#include "methods/method.h"

#include <string>
#include <vector>

namespace fednode {

// Throws InputError if the options are unusable.
void validate_fedpft_options(const FedPftOptions& options, const std::string& where);

// Throws InputError unless `k` is well-formed FedPFT knowledge for this node: compatible
// (method, dimension, classes, backbone), classes sorted and unique, labels in range, counts
// positive and bounded, mixtures valid and of the right dimension, and a covariance sketch, if
// any, of the right shape and no more residuals than the mixtures' samples.
void validate_gmm_knowledge(const Knowledge& k, const NodeContext& ctx, const std::string& where);

// Per class with data: a mixture (or, with options.dp, the DP Gaussian) and the count; with
// SampleCorrelation::Shared also a sketch of the local within-class covariance.
Knowledge fedpft_summarize(const Features& local, const FedPftOptions& options,
                           const NodeContext& ctx);

// Decentralised FedPFT: the chosen received pieces (select_for_combination) and, if this node
// is not already among their contributors, its local data, combined per class. A class present
// in exactly one source is forwarded unchanged (refitting a mixture to its own samples can only
// lose information); otherwise each piece is sampled to its count, the local rows are added and
// the class is refitted on the union (count = sum). Contributors = union. With
// SampleCorrelation::Shared the pieces' sketches and the local data's are combined and truncated
// to options.correlation_rank.
Knowledge fedpft_merge(const KnowledgeList& received, const Features* local,
                       const FedPftOptions& options, const NodeContext& ctx);

// Throws InputError if sampling this piece alone to its counts (times the synthetic
// multiplier) would exceed the limit on a node's synthetic training set.
void check_piece_fits(const Knowledge& k, const FedPftOptions& options, const NodeContext& ctx,
                      const std::string& where);

// What the head is trained on: every chosen piece sampled to its counts (or, for the pieces in
// a folded fedpft_start_drawn_samples sum, the samples drawn as they came), plus the local real
// features if this node is not already among the pieces' contributors. Diagonal and spherical
// mixtures are drawn with the correlation options.sample_correlation names.
Features fedpft_training_set(const KnowledgeList& received, const Features* local,
                             const FedPftOptions& options, const NodeContext& ctx);

// What a head learns from, as the closed-form head reads it (methods/fedpft/closed_form_head.h):
// every class mixture of the chosen pieces, with the piece's contributors, and the local real rows
// when fedpft_training_set would add them (null otherwise). Throws std::logic_error if `received`
// holds a folded sum of drawn samples: a closed-form head never starts one.
struct HeadSources {
  struct Mixture {
    const ClassMixture* mixture;
    const Contributors* contributors;
  };
  std::vector<Mixture> mixtures;
  const Features* local = nullptr;
};
HeadSources fedpft_head_sources(const KnowledgeList& received, const Features* local, const NodeContext& ctx);

// A star hub's running sum (Method::start_head_sum): each piece's synthetic features, drawn as
// the piece arrives exactly as fedpft_training_set would draw them, so that the piece itself,
// full covariances and all, need not be kept; fedpft_training_set then takes them in the order
// the pieces would have had. Null unless synthetic features are drawn without correlation (the
// correlation is a property of every piece together, known only at the end).
std::unique_ptr<KnowledgeSum> fedpft_start_drawn_samples(const FedPftOptions& options, const NodeContext& ctx);

// The seed of the stream node ctx.node draws class `label` of a piece with these contributors from.
uint64_t fedpft_sampling_seed(const NodeContext& ctx, const Contributors& piece, int label);

// Upper bound on a class count accepted from a peer (bounds the synthetic data allocated).
constexpr int64_t kMaxClassCount = 100000000;
// Upper bound on FedPftOptions::synthetic_multiplier; the 2^31-value limit on the training set
// is what really bounds the memory.
constexpr int kMaxSyntheticMultiplier = 1000;
constexpr int kMaxCorrelationRank = 4096;  // a sketch beyond this is no longer a sketch

}  // namespace fednode
