// Every kind of payload, encoded from a fixed sample, against the bytes recorded in
// tests/protocol/golden/ (docs/protocol.md section 5). Codecs move out of protocol/ into their
// methods' folders (issue 50, item 3) without a protocol version: not one byte may change. The files
// were recorded with the encoder as it was before the first codec moved; FEDNODE_RECORD_GOLDEN=1
// writes them again, which only a deliberate change of the format (a new version) may do.
#include "samples.h"

#include "core/fixed_ring.h"
#include "protocol/codec.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace fednode {
namespace {

using test::sample_gmm;

struct GoldenCase {
  std::string name;
  std::function<std::string()> encode;
};

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    out += digits[static_cast<unsigned char>(bytes[i]) >> 4];
    out += digits[static_cast<unsigned char>(bytes[i]) & 15];
    if (i % 32 == 31 || i + 1 == bytes.size()) out += '\n';
  }
  return out;
}

EncodeOptions half() {
  EncodeOptions o;
  o.precision = Precision::Float16;
  return o;
}

Knowledge with_sketch(Knowledge k) {
  CovarianceSketch s;
  auto& g = std::get<GmmKnowledge>(k.payload);
  s.residuals = 0;
  for (const auto& c : g.classes) s.residuals += c.count / 2;
  s.variances = VectorD::Constant(k.dim, 2.0);
  s.factor = MatrixD::Constant(2, k.dim, 0.25);
  g.within_class = std::move(s);
  return k;
}

Knowledge noisy_stats() {
  Knowledge k = test::sample_stats(11);
  auto& s = std::get<StatsKnowledge>(k.payload);
  s.noise = StatsNoise{0.5, 2.0, 0.25};
  s.N[0] = -1;
  return k;
}

// Secure aggregation's masked statistics: N alone (counts_only) or every part in the ring.
Knowledge masked_stats(bool counts_only) {
  Knowledge k = test::sample_stats(12);
  auto& s = std::get<StatsKnowledge>(k.payload);
  const size_t C = static_cast<size_t>(k.num_classes), d = static_cast<size_t>(k.dim);
  MaskedStats m;
  m.group = {1, 4, 6};
  m.counts_only = counts_only;
  for (size_t c = 0; c < C; ++c) m.N.push_back(ring_from_words(0x1111 * (c + 1), ~uint64_t{c}));
  s.N.assign(C, 0);
  if (!counts_only) {
    for (size_t i = 0; i < C * d; ++i) m.A.push_back(ring_from_words(i * 7919, i));
    for (size_t i = 0; i < d * (d + 1) / 2; ++i) m.B.push_back(ring_from_words(~uint64_t{i}, i * 31));
    s.A.setZero();
    s.B.setZero();
  }
  s.masked = std::move(m);
  return k;
}

HeadMessage head_with_means() {
  HeadMessage h = test::sample_linear_head(21);
  auto means = std::make_shared<ClassMeans>();
  means->means = MatrixD::Constant(h.head->num_classes(), h.head->dim(), 0.5);
  means->present.assign(static_cast<size_t>(h.head->num_classes()), true);
  means->present[1] = false;
  means->means.row(1).setZero();
  h.class_means = std::move(means);
  return h;
}

std::vector<GoldenCase> cases() {
  const auto knowledge = [](Knowledge k, EncodeOptions o = {}) {
    return [k = std::move(k), o] { return encode_payload(k, o); };
  };
  const auto payload = [](Payload p) { return [p = std::move(p)] { return encode_payload(p); }; };
  Ack ack;
  ack.acked_id = 41;
  ack.versions = {1, 2};
  ack.ciphers = {"aes-256-gcm", "chacha20-poly1305"};
  ErrorMessage error;
  error.reason = ErrorReason::Incompatible;
  error.ref_id = 9;
  error.abort = true;
  error.text = "backbone differs";
  UnmaskRequest request{{1, 2, 3}, {4}, {}};
  request.tags.assign(2, Seed32{});
  request.tags[1][5] = 7;
  UnmaskReply reply;
  reply.survivors = {1, 2, 3};
  reply.dropped = {4};
  reply.self_seed[0] = 1;
  reply.pair_seeds[4][31] = 9;
  return {
      {"gmm_full", knowledge(sample_gmm(1, CovarianceType::Full))},
      {"gmm_diag", knowledge(sample_gmm(2, CovarianceType::Diag))},
      {"gmm_spherical", knowledge(sample_gmm(3, CovarianceType::Spherical))},
      {"gmm_diag_f16", knowledge(sample_gmm(4, CovarianceType::Diag), half())},
      {"gmm_full_sketch", knowledge(with_sketch(sample_gmm(5, CovarianceType::Full)))},
      {"stats", knowledge(test::sample_stats(6))},
      {"stats_noisy", knowledge(noisy_stats())},
      {"stats_masked_counts", knowledge(masked_stats(true))},
      {"stats_masked_all", knowledge(masked_stats(false))},
      {"prototypes", knowledge(test::sample_prototypes(7))},
      {"prototypes_f16", knowledge(test::sample_prototypes(8), half())},
      {"models", knowledge(test::sample_models(9))},
      {"prompts", knowledge(test::sample_prompts())},
      {"head_linear", payload(test::sample_linear_head(10))},
      {"head_lda", payload(test::sample_linear_head(11, 5, 3, "lda"))},
      {"head_linear_class_means", payload(head_with_means())},
      {"head_adapter", payload(test::sample_adapter_head(12))},
      {"head_vit", payload(test::sample_vit_head(13))},
      {"hello", payload(test::sample_hello())},
      {"ack", payload(ack)},
      {"error", payload(error)},
      {"unmask_request", payload(request)},
      {"unmask_reply", payload(reply)},
  };
}

std::string golden_path(const std::string& name) {
  return std::string(FEDNODE_SOURCE_DIR) + "/tests/protocol/golden/" + name + ".hex";
}

TEST(GoldenPayloads, EveryKindEncodesToTheRecordedBytes) {
  const bool record = std::getenv("FEDNODE_RECORD_GOLDEN") != nullptr;
  for (const GoldenCase& c : cases()) {
    const std::string got = hex(c.encode());
    if (record) {
      std::ofstream(golden_path(c.name)) << got;
      continue;
    }
    std::ifstream in(golden_path(c.name));
    ASSERT_TRUE(in) << golden_path(c.name) << " is missing";
    std::stringstream expected;
    expected << in.rdbuf();
    EXPECT_EQ(got, expected.str()) << c.name << ": the encoding changed";
  }
}

}  // namespace
}  // namespace fednode
