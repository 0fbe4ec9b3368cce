// Small, seeded sample messages shared by the protocol tests.
#pragma once

#include "methods/fedmitr/vit_head.h"
#include "core/rng.h"
#include "protocol/codec.h"
#include "methods/fedmitr/model_knowledge.h"
#include "methods/fgl/prompt_knowledge.h"

#include <memory>

namespace fednode::test {

// The FedCGS knowledge of docs/protocol.md's worked example: 2 classes, dimension 2.
inline Knowledge worked_example_knowledge() {
  Knowledge k;
  k.contributors = {1};
  k.backbone_fingerprint = "pixels";
  k.dim = 2;
  k.num_classes = 2;
  StatsKnowledge s;
  s.A.resize(2, 2);
  s.A << 1, 2, 3, 4;
  s.N = {3, 4};
  s.B.resize(2, 2);
  s.B << 5, 6, 6, 7;
  k.payload = s;
  return k;
}

inline RunId sample_run() {
  RunId r;
  for (size_t i = 0; i < r.bytes.size(); ++i) r.bytes[i] = static_cast<uint8_t>(0xA0 + i);
  return r;
}

inline EnvelopeHeader header_for(MessageType type, uint64_t msg_id = 7) {
  EnvelopeHeader h;
  h.type = type;
  h.from = 3;
  h.to = 5;
  h.msg_id = msg_id;
  h.run = sample_run();
  return h;
}

inline GaussianMixture sample_mixture(Rng& rng, CovarianceType type, int K, int d) {
  GaussianMixture g;
  g.type = type;
  g.weights.resize(K);
  for (int k = 0; k < K; ++k) g.weights[k] = 0.5 + rng.uniform();
  g.weights /= g.weights.sum();
  g.means.resize(K, d);
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < d; ++j) g.means(k, j) = 3.0 * rng.normal();
  switch (type) {
    case CovarianceType::Full: {
      g.covariances.resize(K * d, d);
      for (int k = 0; k < K; ++k) {
        MatrixD L(d, d);
        for (int i = 0; i < d; ++i)
          for (int j = 0; j < d; ++j) L(i, j) = rng.normal();
        MatrixD S = L * L.transpose() / d;
        S.diagonal().array() += 0.1;
        g.covariances.block(k * d, 0, d, d) = S;
      }
      break;
    }
    case CovarianceType::Diag:
      g.covariances.resize(K, d);
      for (int k = 0; k < K; ++k)
        for (int j = 0; j < d; ++j) g.covariances(k, j) = 0.05 + rng.uniform();
      break;
    case CovarianceType::Spherical:
      g.covariances.resize(K, 1);
      for (int k = 0; k < K; ++k) g.covariances(k, 0) = 0.05 + rng.uniform();
      break;
  }
  return g;
}

inline Knowledge sample_gmm(uint64_t seed, CovarianceType type, int K = 3, int d = 6, int C = 4) {
  Rng rng = Rng::stream(seed, Purpose::Generic);
  Knowledge k;
  k.contributors = {1, 2, 9};
  k.backbone_fingerprint = "resnet18:abc123";
  k.dim = d;
  k.num_classes = C;
  GmmKnowledge g;
  for (int c = 0; c < C; c += 2) g.classes.push_back({c, 10 + c, sample_mixture(rng, type, K, d)});
  k.payload = std::move(g);
  return k;
}

inline Knowledge sample_stats(uint64_t seed, int d = 5, int C = 3) {
  Rng rng = Rng::stream(seed, Purpose::Generic);
  Knowledge k;
  k.contributors = {4};
  k.backbone_fingerprint = "pixels";
  k.dim = d;
  k.num_classes = C;
  StatsKnowledge s;
  MatrixD X(20, d);
  for (int i = 0; i < X.rows(); ++i)
    for (int j = 0; j < d; ++j) X(i, j) = rng.normal() / 3.0;
  s.A = MatrixD::Zero(C, d);
  s.N.assign(C, 0);
  for (int i = 0; i < X.rows(); ++i) {
    s.A.row(i % C) += X.row(i);
    ++s.N[i % C];
  }
  s.B = X.transpose() * X;
  s.B = (0.5 * (s.B + s.B.transpose())).eval();
  k.payload = std::move(s);
  return k;
}

inline Knowledge sample_prototypes(uint64_t seed, int d = 7, int C = 5) {
  Rng rng = Rng::stream(seed, Purpose::Generic);
  Knowledge k;
  k.contributors = {2, 3};
  k.backbone_fingerprint = "clip-vit-b32";
  k.dim = d;
  k.num_classes = C;
  PrototypeKnowledge p;
  for (int c = 1; c < C; c += 2) {
    ClassPrototypes cp;
    cp.label = c;
    cp.count = 5 * (c + 1);
    cp.prototypes.resize(c + 1, d);
    for (int i = 0; i < cp.prototypes.rows(); ++i)
      for (int j = 0; j < d; ++j) cp.prototypes(i, j) = static_cast<float>(rng.normal());
    p.classes.push_back(std::move(cp));
  }
  k.payload = std::move(p);
  return k;
}

inline MatrixF random_matrix(Rng& rng, int rows, int cols) {
  MatrixF m(rows, cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) m(i, j) = static_cast<float>(rng.normal());
  return m;
}

inline HeadMessage sample_linear_head(uint64_t seed, int d = 6, int C = 4, const std::string& kind = "linear") {
  Rng rng = Rng::stream(seed, Purpose::Generic);
  HeadMessage h;
  MatrixF W = random_matrix(rng, C, d);
  VectorF b = random_matrix(rng, C, 1).col(0);
  h.head = std::make_shared<LinearHead>(kind, W, b);
  h.contributors = {1, 2, 3};
  h.backbone_fingerprint = "resnet18:abc123";
  return h;
}

// A ViT for 8x8 images of 3 classes, `depth` blocks.
inline VitSpec small_vit(int depth = 1) {
  VitSpec s;
  s.image_size = 8;
  s.patch = 4;
  s.dim = 8;
  s.depth = depth;
  s.heads = 2;
  s.mlp_dim = 8;
  s.classes = 3;
  return s;
}

// FedMITR's models of nodes 2 and 7, with values float16 rounds.
inline Knowledge sample_models(uint64_t seed, int depth = 1) {
  const VitSpec s = small_vit(depth);
  Knowledge k;
  k.contributors = {2, 7};
  k.backbone_fingerprint = "pixels";
  k.dim = s.pixels();
  k.num_classes = s.classes;
  ModelKnowledge m;
  for (NodeId owner : {2u, 7u}) {
    ClientModel c;
    c.owner = owner;
    c.count = 100 + owner;
    c.model = vit_init(s, seed + owner);
    for (float& v : c.model.parameters) v *= 3.7f;
    m.models.push_back(c);
  }
  k.payload = std::move(m);
  return k;
}

// FGL's prompts of nodes 1 and 4: class-level for both, captions and non-ASCII names for node 4.
inline Knowledge sample_prompts() {
  Knowledge k;
  k.contributors = {1, 4};
  k.backbone_fingerprint = "pixels";
  k.dim = 784;
  k.num_classes = 10;
  PromptKnowledge p;
  for (NodeId owner : {1u, 4u}) {
    PromptShard shard;
    shard.owner = owner;
    for (int label : {0, 3, 9}) {
      ClassPrompts c;
      c.label = label;
      c.count = 10 * label + owner;
      c.name = owner == 4 && label == 3 ? "Kleid \xc3\xa0 fleurs \xe2\x9c\xbf" : "class " + std::to_string(label);
      c.prompt = c.name + ", real world images, high resolution";
      c.negative_prompt = owner == 1 ? "" : "low quality, low resolution";
      if (owner == 4 && label == 9) c.captions = {"a brown ankle boot, \"laced\"", "a black boot on white"};
      shard.classes.push_back(c);
    }
    p.shards.push_back(shard);
  }
  k.payload = std::move(p);
  return k;
}

inline HeadMessage sample_vit_head(uint64_t seed) {
  HeadMessage h;
  h.head = std::make_shared<VitHead>(vit_init(small_vit(), seed));
  h.contributors = {0, 1};
  h.backbone_fingerprint = "pixels";
  return h;
}

inline HeadMessage sample_adapter_head(uint64_t seed, int d = 6, int h1 = 5, int h2 = 4, int C = 3) {
  Rng rng = Rng::stream(seed, Purpose::Generic);
  std::vector<AdapterHead::Layer> layers(3);
  const int sizes[4] = {d, h1, h2, C};
  for (int i = 0; i < 3; ++i) {
    layers[i].W = random_matrix(rng, sizes[i + 1], sizes[i]);
    layers[i].b = random_matrix(rng, sizes[i + 1], 1).col(0);
  }
  HeadMessage h;
  h.head = std::make_shared<AdapterHead>(std::move(layers));
  h.contributors = {7};
  h.backbone_fingerprint = "clip-vit-b32";
  return h;
}

inline Hello sample_hello() {
  Hello h;
  h.node = 3;
  h.method = "fedpft";
  h.backbone_fingerprint = "resnet18:abc123";
  h.dim = 512;
  h.num_classes = 10;
  h.software = "fednode 0.1.0";
  return h;
}

}  // namespace fednode::test
