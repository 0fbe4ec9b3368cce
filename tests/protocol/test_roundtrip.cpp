// Every message type and every Knowledge variant survives encode -> decode, with float16 and
// float32 rounding exactly as docs/protocol.md specifies.
#include "samples.h"

#include "core/float16.h"

#include "methods/fgl/cnn.h"
#include "methods/fedmitr/ensemble_head.h"
#include "methods/fedmitr/model_knowledge.h"
#include "methods/fgl/prompt_knowledge.h"

#include <gtest/gtest.h>
#include <omp.h>

namespace fednode {
namespace {

using test::header_for;

Payload roundtrip(const Payload& p, const EncodeOptions& options = {}) {
  const std::string bytes = encode_payload(p, options);
  return decode_payload(header_for(type_of(p)), bytes, Limits{});
}

MatrixD through_float(const MatrixD& m) { return m.cast<float>().cast<double>(); }
MatrixD through_half(const MatrixD& m) {
  return m.unaryExpr([](double v) { return static_cast<double>(round_to_half(static_cast<float>(v))); });
}

TEST(ProtocolRoundTrip, Header) {
  EnvelopeHeader h = header_for(MessageType::Knowledge, 0x1234567890ULL);
  h.from = 0xFFFFFFFFu;
  const std::string bytes = encode_header(h);
  const EnvelopeHeader back = decode_header(bytes, Limits{});
  EXPECT_EQ(back.version, kProtocolVersion);
  EXPECT_EQ(back.type, MessageType::Knowledge);
  EXPECT_EQ(back.from, 0xFFFFFFFFu);
  EXPECT_EQ(back.to, 5u);
  EXPECT_EQ(back.msg_id, 0x1234567890ULL);
  EXPECT_EQ(back.run, test::sample_run());
  EXPECT_EQ(static_cast<uint8_t>(bytes[0]), 0x86);  // fixmap of 6 entries
  EXPECT_LE(bytes.size(), kMaxHeaderBytes);
  EXPECT_EQ(encode_header(back), bytes);  // canonical: decoding and re-encoding is the identity
}

TEST(ProtocolRoundTrip, Frame) {
  const std::string header = encode_header(header_for(MessageType::Ack));
  const std::string tag(kHeaderTagBytes, '\x11'), nonce(kNonceBytes, '\x22'), ct(40, '\x33');
  const std::string bytes = encode_frame({header, tag, nonce, ct});
  const FrameView f = decode_frame(bytes, Limits{});
  EXPECT_EQ(f.header, header);
  EXPECT_EQ(f.header_tag, tag);
  EXPECT_EQ(f.nonce, nonce);
  EXPECT_EQ(f.ciphertext, ct);
  // The views point into the frame: nothing is copied.
  EXPECT_GE(f.ciphertext.data(), bytes.data());
  EXPECT_LE(f.ciphertext.data() + f.ciphertext.size(), bytes.data() + bytes.size());
}

// A sender that encodes straight into an open frame must end with exactly the bytes of the
// canonical frame (layout_frame's), which has a 4-byte length field from 65536 bytes on.
TEST(ProtocolRoundTrip, OpenFrameClosesToTheCanonicalFrame) {
  const std::string header = encode_header(header_for(MessageType::Knowledge));
  for (size_t size : {kMinOpenCiphertext, kMinOpenCiphertext + 1, size_t{300000}}) {
    std::string ct(size, '\0');
    for (size_t i = 0; i < size; ++i) ct[i] = static_cast<char>(i * 7 + 3);
    FrameLayout open = open_frame(header, size);
    const size_t capacity = open.bytes.capacity();
    open.bytes += ct;
    EXPECT_EQ(open.bytes.capacity(), capacity) << "the reserve must cover the ciphertext";
    ASSERT_TRUE(close_frame(open)) << size;
    const std::string tag(kHeaderTagBytes, '\0'), nonce(kNonceBytes, '\0');
    EXPECT_EQ(open.bytes, encode_frame({header, tag, nonce, ct})) << size;
    const FrameLayout laid = layout_frame(header, size);
    EXPECT_EQ(open.header_tag_at, laid.header_tag_at);
    EXPECT_EQ(open.nonce_at, laid.nonce_at);
    EXPECT_EQ(open.ciphertext_at, laid.ciphertext_at);
  }
  // Shorter ciphertexts have shorter length fields: the open frame refuses to close.
  FrameLayout small = open_frame(header, 100);
  small.bytes += std::string(kMinOpenCiphertext - 1, 'x');
  const std::string before = small.bytes;
  EXPECT_FALSE(close_frame(small));
  EXPECT_EQ(small.bytes, before);
}

TEST(ProtocolRoundTrip, AppendPayloadAppendsTheEncoding) {
  const Knowledge k = test::sample_gmm(3, CovarianceType::Diag);
  for (Precision p : {Precision::Float32, Precision::Float16}) {
    const std::string encoded = encode_payload(k, {p});
    std::string out = "prefix";
    append_payload(out, k, {p});
    EXPECT_EQ(out, "prefix" + encoded);
    EXPECT_GE(encoded_payload_bound(k, {p}), encoded.size());
  }
  // The bound holds for each variant, including many classes with little data each.
  const Knowledge wide = test::sample_gmm(4, CovarianceType::Spherical, 1, 1, 200);
  EXPECT_GE(encoded_payload_bound(wide, {Precision::Float16}), encode_payload(wide, {Precision::Float16}).size());
  const Knowledge stats = test::sample_stats(5);
  EXPECT_GE(encoded_payload_bound(stats), encode_payload(stats).size());
  const Knowledge protos = test::sample_prototypes(6);
  EXPECT_GE(encoded_payload_bound(protos), encode_payload(protos).size());
}

TEST(ProtocolRoundTrip, Hello) {
  Hello h = test::sample_hello();
  h.versions = {1, 2};
  const Hello back = std::get<Hello>(roundtrip(h));
  EXPECT_EQ(back.versions, h.versions);
  EXPECT_EQ(back.node, h.node);
  EXPECT_EQ(back.method, h.method);
  EXPECT_EQ(back.backbone_fingerprint, h.backbone_fingerprint);
  EXPECT_EQ(back.dim, h.dim);
  EXPECT_EQ(back.num_classes, h.num_classes);
  EXPECT_EQ(back.software, h.software);
}

TEST(ProtocolRoundTrip, AckAndError) {
  EXPECT_EQ(std::get<Ack>(roundtrip(Ack{0xFFFFFFFFFFFFULL})).acked_id, 0xFFFFFFFFFFFFULL);
  ErrorMessage e;
  e.reason = ErrorReason::Incompatible;
  e.ref_id = 42;
  e.abort = true;
  e.text = "backbone differs";
  const ErrorMessage back = std::get<ErrorMessage>(roundtrip(e));
  EXPECT_EQ(back.reason, ErrorReason::Incompatible);
  EXPECT_EQ(back.ref_id, 42u);
  EXPECT_TRUE(back.abort);
  EXPECT_EQ(back.text, e.text);
  // A code from a newer peer is kept, not refused.
  e.reason = static_cast<ErrorReason>(900);
  EXPECT_EQ(static_cast<int>(std::get<ErrorMessage>(roundtrip(e)).reason), 900);
  EXPECT_STREQ(to_string(static_cast<ErrorReason>(900)), "unknown");
}

void expect_same_frame(const Knowledge& a, const Knowledge& b) {
  EXPECT_EQ(a.contributors, b.contributors);
  EXPECT_EQ(a.backbone_fingerprint, b.backbone_fingerprint);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.num_classes, b.num_classes);
  EXPECT_STREQ(a.method_name(), b.method_name());
}

class GmmRoundTrip : public ::testing::TestWithParam<std::tuple<CovarianceType, Precision>> {};

TEST_P(GmmRoundTrip, ValuesRoundAsSpecified) {
  const auto [type, precision] = GetParam();
  const Knowledge k = test::sample_gmm(11, type);
  const Knowledge back = std::get<Knowledge>(roundtrip(k, {precision}));
  expect_same_frame(k, back);
  const auto& in = std::get<GmmKnowledge>(k.payload).classes;
  const auto& out = std::get<GmmKnowledge>(back.payload).classes;
  ASSERT_EQ(in.size(), out.size());
  auto expected = [&](const MatrixD& m) { return precision == Precision::Float16 ? through_half(m) : through_float(m); };
  for (size_t c = 0; c < in.size(); ++c) {
    EXPECT_EQ(out[c].label, in[c].label);
    EXPECT_EQ(out[c].count, in[c].count);
    EXPECT_EQ(out[c].mixture.type, type);
    // Bit-exact: the receiver sees the sender's values rounded to the wire precision, nothing else.
    EXPECT_EQ(MatrixD(out[c].mixture.weights), expected(in[c].mixture.weights));
    EXPECT_EQ(out[c].mixture.means, expected(in[c].mixture.means));
    MatrixD covs = expected(in[c].mixture.covariances);
    if (type == CovarianceType::Full) {
      // Only the upper triangle travels; the receiver mirrors it.
      const int d = k.dim;
      for (int q = 0; q < in[c].mixture.components(); ++q) {
        MatrixD S = covs.block(q * d, 0, d, d);
        covs.block(q * d, 0, d, d) = S.triangularView<Eigen::Upper>().toDenseMatrix() +
                                     S.triangularView<Eigen::StrictlyUpper>().toDenseMatrix().transpose();
        const MatrixD R = out[c].mixture.covariances.block(q * d, 0, d, d);
        EXPECT_EQ(R, R.transpose());
      }
    }
    EXPECT_EQ(out[c].mixture.covariances, covs);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GmmRoundTrip,
                         ::testing::Combine(::testing::Values(CovarianceType::Full, CovarianceType::Diag,
                                                              CovarianceType::Spherical),
                                            ::testing::Values(Precision::Float32, Precision::Float16)));

TEST_P(GmmRoundTrip, ACovarianceSketchTravelsInTheMixturesPrecision) {
  const Precision precision = std::get<1>(GetParam());
  Knowledge k = test::sample_gmm(12, CovarianceType::Diag);
  Rng rng(3);
  CovarianceSketch s;
  s.residuals = 17;
  s.variances = VectorD(k.dim);
  s.factor = MatrixD(2, k.dim);
  for (Eigen::Index j = 0; j < k.dim; ++j) s.variances[j] = 1.0 + rng.uniform();
  for (Eigen::Index i = 0; i < s.factor.size(); ++i) s.factor.data()[i] = rng.normal() / 3.0;
  std::get<GmmKnowledge>(k.payload).within_class = s;
  const Knowledge back = std::get<Knowledge>(roundtrip(k, {precision}));
  const auto& got = std::get<GmmKnowledge>(back.payload).within_class;
  ASSERT_TRUE(got.has_value());
  auto expected = [&](const MatrixD& m) { return precision == Precision::Float16 ? through_half(m) : through_float(m); };
  EXPECT_EQ(got->residuals, 17);
  EXPECT_EQ(MatrixD(got->variances), expected(s.variances));
  EXPECT_EQ(got->factor, expected(s.factor));
  // What the payload counts is what the tensors take, give or take two tensors' framing (about 60 bytes each).
  Knowledge without = k;
  std::get<GmmKnowledge>(without.payload).within_class.reset();
  const bool half = precision == Precision::Float16;
  EXPECT_NEAR(static_cast<double>(encode_payload(k, {precision}).size() - encode_payload(without, {precision}).size()),
              static_cast<double>(k.payload_bytes(half) - without.payload_bytes(half)), 130.0);
  // A sketch of no rows (a node without a class of two samples) travels too.
  std::get<GmmKnowledge>(k.payload).within_class = CovarianceSketch{0, VectorD::Zero(k.dim), MatrixD(0, k.dim)};
  const Knowledge empty = std::get<Knowledge>(roundtrip(k, {precision}));
  EXPECT_EQ(std::get<GmmKnowledge>(empty.payload).within_class->factor.rows(), 0);
}

TEST(ProtocolRoundTrip, CompleteIsKnowledgeUnderAnotherType) {
  // The ring's second pass: the payload bytes are exactly those of knowledge; only the header's
  // type says which pass a message belongs to.
  EnvelopeHeader h = header_for(MessageType::Complete);
  const EnvelopeHeader back = decode_header(encode_header(h), Limits{});
  EXPECT_EQ(back.type, MessageType::Complete);
  EXPECT_STREQ(to_string(back.type), "complete");
  const Knowledge k = test::sample_stats(4);
  const std::string bytes = encode_payload(k);
  const Payload as_complete = decode_payload(back, bytes, Limits{});
  const Knowledge& got = std::get<Knowledge>(as_complete);
  expect_same_frame(k, got);
  EXPECT_EQ(std::get<StatsKnowledge>(got.payload).B, std::get<StatsKnowledge>(k.payload).B);
  EXPECT_EQ(encode_payload(got), bytes);
}

TEST(ProtocolRoundTrip, Float16HalvesTheTensorsAndIsIdempotent) {
  const Knowledge k = test::sample_gmm(5, CovarianceType::Diag, 4, 32, 6);
  const std::string f32 = encode_payload(k, {Precision::Float32});
  const std::string f16 = encode_payload(k, {Precision::Float16});
  const int64_t tensors32 = k.payload_bytes(false), tensors16 = k.payload_bytes(true);
  // Framing overhead is small and the same for both; the tensors are what halves.
  EXPECT_NEAR(static_cast<double>(f32.size() - f16.size()), static_cast<double>(tensors32 - tensors16), 64.0);
  // A value that already went through float16 travels unchanged: re-sending received knowledge
  // does not drift.
  const Knowledge once = std::get<Knowledge>(decode_payload(header_for(MessageType::Knowledge), f16, Limits{}));
  EXPECT_EQ(encode_payload(once, {Precision::Float16}), f16);
}

// A FedPFT message of several megabytes converts its tensors on the worker pool: the bytes, the
// decoded values and the error a bad value gets must not depend on how many threads did it.
TEST(ProtocolRoundTrip, LargeMessagesConvertTheSameOnAnyNumberOfThreads) {
  const int saved = omp_get_max_threads();
  Knowledge k = test::sample_gmm(11, CovarianceType::Diag, 10, 1280, 60);  // 30 classes, 1.5 MB in f16
  std::string bytes[2][2];
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (Precision p : {Precision::Float32, Precision::Float16})
      bytes[threads - 1][p == Precision::Float16] = encode_payload(k, {p});
  }
  EXPECT_EQ(bytes[0][0], bytes[1][0]);
  EXPECT_EQ(bytes[0][1], bytes[1][1]);
  ASSERT_GT(bytes[0][1].size(), size_t{1} << 20);  // over the threshold for the pool
  Knowledge decoded[2];
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    decoded[threads - 1] = std::get<Knowledge>(decode_payload(header_for(MessageType::Knowledge), bytes[0][1], Limits{}));
  }
  const auto& one = std::get<GmmKnowledge>(decoded[0].payload).classes;
  const auto& two = std::get<GmmKnowledge>(decoded[1].payload).classes;
  const auto& sent = std::get<GmmKnowledge>(k.payload).classes;
  ASSERT_EQ(two.size(), sent.size());
  for (size_t c = 0; c < sent.size(); ++c) {
    EXPECT_EQ(one[c].mixture.means, two[c].mixture.means);
    EXPECT_EQ(two[c].mixture.means, through_half(sent[c].mixture.means));
    EXPECT_EQ(two[c].mixture.covariances, through_half(sent[c].mixture.covariances));
  }
  // With either thread count, encoding names the earliest bad class.
  auto refusal_names = [&](const std::string& where) {
    for (int threads : {2, 1}) {
      omp_set_num_threads(threads);
      try {
        encode_payload(k, {Precision::Float16});
        ADD_FAILURE() << "encoded bad values (" << threads << " threads)";
      } catch (const ProtocolError& e) {
        EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << threads << " threads: " << e.what();
      }
    }
  };
  auto& classes = std::get<GmmKnowledge>(k.payload).classes;
  classes[12].mixture.means(1, 5) = std::nan("");
  classes[3].mixture.covariances(2, 7) = 1e-9;  // underflows float16
  refusal_names("classes[3].covariances");
  // The mixtures' structural checks run on the pool as well, with the same rule.
  classes[12].mixture.means(1, 5) = 0.5;
  classes[3].mixture.covariances(2, 7) = 0.5;
  classes[20].mixture.covariances(0, 0) = -1.0;
  classes[7].mixture.covariances(4, 4) = 0.0;
  refusal_names("classes[7].covariances");
  omp_set_num_threads(saved);
}

TEST(ProtocolRoundTrip, FullCovarianceTravelsAsOneTriangle) {
  const int K = 2, d = 20;
  const Knowledge k = test::sample_gmm(3, CovarianceType::Full, K, d, 2);
  const std::string bytes = encode_payload(k, {Precision::Float32});
  const size_t classes = std::get<GmmKnowledge>(k.payload).classes.size();
  const size_t triangle = classes * K * (d * (d + 1) / 2) * 4, square = classes * K * d * d * 4;
  EXPECT_LT(bytes.size(), square);
  EXPECT_GT(bytes.size(), triangle);
}

TEST(ProtocolRoundTrip, StatsAreExact) {
  const Knowledge k = test::sample_stats(21);
  const Knowledge back = std::get<Knowledge>(roundtrip(k, {Precision::Float16}));  // precision ignored
  expect_same_frame(k, back);
  const auto& s = std::get<StatsKnowledge>(k.payload);
  const auto& t = std::get<StatsKnowledge>(back.payload);
  EXPECT_EQ(t.A, s.A);
  EXPECT_EQ(t.B, s.B);
  EXPECT_EQ(t.N, s.N);
}

TEST(ProtocolRoundTrip, Prototypes) {
  for (Precision p : {Precision::Float32, Precision::Float16}) {
    const Knowledge k = test::sample_prototypes(8);
    const Knowledge back = std::get<Knowledge>(roundtrip(k, {p}));
    expect_same_frame(k, back);
    const auto& in = std::get<PrototypeKnowledge>(k.payload).classes;
    const auto& out = std::get<PrototypeKnowledge>(back.payload).classes;
    ASSERT_EQ(in.size(), out.size());
    for (size_t c = 0; c < in.size(); ++c) {
      EXPECT_EQ(out[c].label, in[c].label);
      EXPECT_EQ(out[c].count, in[c].count);
      const MatrixF expected = p == Precision::Float16 ? MatrixF(in[c].prototypes.unaryExpr(&round_to_half))
                                                       : in[c].prototypes;
      EXPECT_EQ(out[c].prototypes, expected);
    }
  }
}

// FedMITR's models: float32 bit-exact, float16 as rounded; spec, owner and count as sent.
TEST(ProtocolRoundTrip, Models) {
  const Knowledge k = test::sample_models(1, 2);
  const VitSpec s = test::small_vit(2);
  const ModelKnowledge& m = body_of<ModelKnowledge>(k.payload);
  for (Precision p : {Precision::Float32, Precision::Float16}) {
    const Knowledge back = std::get<Knowledge>(roundtrip(k, {p}));
    expect_same_frame(k, back);
    const auto& out = body_of<ModelKnowledge>(back.payload).models;
    ASSERT_EQ(out.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(out[i].owner, m.models[i].owner);
      EXPECT_EQ(out[i].count, m.models[i].count);
      EXPECT_TRUE(out[i].model.spec == s);
      std::vector<float> expected = m.models[i].model.parameters;
      if (p == Precision::Float16)
        for (float& v : expected) v = round_to_half(v);
      EXPECT_EQ(out[i].model.parameters, expected);
    }
  }
  // A user's TorchScript ViT travels as its file's SHA-256 and parameter count.
  Knowledge scripted = k;
  for (ClientModel& c : body_of<ModelKnowledge>(scripted.payload).models) {
    c.model.spec.dim = c.model.spec.depth = c.model.spec.heads = c.model.spec.mlp_dim = 0;
    c.model.spec.script = std::string(64, 'f');
    c.model.spec.script_parameters = static_cast<int64_t>(c.model.parameters.size());
  }
  const Knowledge back = std::get<Knowledge>(roundtrip(scripted));
  const auto& out = body_of<ModelKnowledge>(back.payload).models;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[1].model.spec == body_of<ModelKnowledge>(scripted.payload).models[1].model.spec);
  EXPECT_EQ(out[1].model.parameters, m.models[1].model.parameters);
}

// FGL's prompts: every string byte for byte, counts and captions as sent.
TEST(ProtocolRoundTrip, Prompts) {
  const Knowledge k = test::sample_prompts();
  const Knowledge back = std::get<Knowledge>(roundtrip(k));
  expect_same_frame(k, back);
  const auto& in = body_of<PromptKnowledge>(k.payload).shards;
  const auto& out = body_of<PromptKnowledge>(back.payload).shards;
  ASSERT_EQ(in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].owner, in[i].owner);
    ASSERT_EQ(out[i].classes.size(), in[i].classes.size());
    for (size_t c = 0; c < in[i].classes.size(); ++c) {
      const ClassPrompts &a = in[i].classes[c], &b = out[i].classes[c];
      EXPECT_EQ(b.label, a.label);
      EXPECT_EQ(b.count, a.count);
      EXPECT_EQ(b.name, a.name);
      EXPECT_EQ(b.prompt, a.prompt);
      EXPECT_EQ(b.negative_prompt, a.negative_prompt);
      EXPECT_EQ(b.captions, a.captions);
    }
  }
  // Prompts are orders of magnitude smaller than what other methods send.
  EXPECT_LT(encode_payload(k, {}).size(), 1000u);
}

TEST(ProtocolRoundTrip, Heads) {
  for (const std::string kind : {"linear", "lda"}) {
    const HeadMessage h = test::sample_linear_head(4, 6, 4, kind);
    const HeadMessage back = std::get<HeadMessage>(roundtrip(h));
    EXPECT_EQ(back.head->kind(), kind);
    EXPECT_EQ(back.contributors, h.contributors);
    EXPECT_EQ(back.backbone_fingerprint, h.backbone_fingerprint);
    const auto& a = dynamic_cast<const LinearHead&>(*h.head);
    const auto& b = dynamic_cast<const LinearHead&>(*back.head);
    EXPECT_EQ(a.weights(), b.weights());
    EXPECT_EQ(a.bias(), b.bias());
  }
  const HeadMessage h = test::sample_adapter_head(6);
  const HeadMessage back = std::get<HeadMessage>(roundtrip(h));
  EXPECT_EQ(back.head->kind(), "adapter");
  const auto& a = dynamic_cast<const AdapterHead&>(*h.head).layers();
  const auto& b = dynamic_cast<const AdapterHead&>(*back.head).layers();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].W, b[i].W);
    EXPECT_EQ(a[i].b, b[i].b);
  }
  Rng rng(1);
  const MatrixF X = test::random_matrix(rng, 5, 6);
  EXPECT_EQ(h.head->scores(X), back.head->scores(X));

  // FedMITR's head is its distilled ViT, float32 on the wire.
  const VitSpec s = test::small_vit();
  const HeadMessage v = test::sample_vit_head(3);
  const HeadMessage vit_back = std::get<HeadMessage>(roundtrip(v));
  ASSERT_EQ(vit_back.head->kind(), "vit");
  EXPECT_EQ(dynamic_cast<const VitHead&>(*vit_back.head).model().parameters,
            dynamic_cast<const VitHead&>(*v.head).model().parameters);
  EXPECT_TRUE(dynamic_cast<const VitHead&>(*vit_back.head).model().spec == s);

  // Its ensemble head: the rule, each model's count, spec and parameters, float32 on the wire.
  for (EnsembleRule rule : {EnsembleRule::WeightedProbabilities, EnsembleRule::MeanLogits}) {
    HeadMessage e = v;
    e.head = std::make_shared<EnsembleHead>(std::vector<VitModel>{vit_init(s, 4), vit_init(s, 5)}, EnsembleMix{rule, {30, 12}});
    const HeadMessage e_back = std::get<HeadMessage>(roundtrip(e));
    ASSERT_EQ(e_back.head->kind(), "vit-ensemble");
    const auto& sent = dynamic_cast<const EnsembleHead&>(*e.head);
    const auto& got = dynamic_cast<const EnsembleHead&>(*e_back.head);
    EXPECT_EQ(got.mix().rule, rule);
    EXPECT_EQ(got.mix().samples, sent.mix().samples);
    ASSERT_EQ(got.models().size(), 2u);
    EXPECT_EQ(got.models()[1].parameters, sent.models()[1].parameters);
    const MatrixF images = MatrixF::Constant(3, s.pixels(), 0.25f);
    EXPECT_EQ(got.scores(images), sent.scores(images));
  }

  // FGL's head is its CNN, float32 on the wire.
  CnnSpec cs;
  cs.image_size = 8;
  cs.width = 2;
  cs.hidden = 3;
  cs.classes = 4;
  HeadMessage c;
  c.head = std::make_shared<CnnHead>(cnn_init(cs, 5));
  c.contributors = {2};
  c.backbone_fingerprint = "pixels";
  const HeadMessage cnn_back = std::get<HeadMessage>(roundtrip(c));
  ASSERT_EQ(cnn_back.head->kind(), "cnn");
  EXPECT_EQ(dynamic_cast<const CnnHead&>(*cnn_back.head).model().parameters,
            dynamic_cast<const CnnHead&>(*c.head).model().parameters);
  EXPECT_TRUE(dynamic_cast<const CnnHead&>(*cnn_back.head).model().spec == cs);
}

// Personalised FedCGS: a hub's head carries the class means its leaves align to (5.3); an absent
// class's row must be zero, and the means must be C x d.
TEST(ProtocolRoundTrip, AHeadWithClassMeans) {
  HeadMessage h = test::sample_linear_head(4, 6, 4, "lda");
  auto means = std::make_shared<ClassMeans>();
  Rng rng(3);
  means->means = test::random_matrix(rng, 4, 6).cast<double>();
  means->means.row(2).setZero();
  means->present = {true, true, false, true};
  h.class_means = means;
  const HeadMessage back = std::get<HeadMessage>(roundtrip(h));
  ASSERT_TRUE(back.class_means);
  EXPECT_EQ(back.class_means->means, means->means);
  EXPECT_EQ(back.class_means->present, means->present);
  EXPECT_FALSE(std::get<HeadMessage>(roundtrip(test::sample_linear_head(4, 6, 4, "lda"))).class_means);
  means->present[1] = false;  // but row 1 is not zero
  try {
    roundtrip(h);
    ADD_FAILURE() << "an absent class with a mean was accepted";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("class 1 is absent but has a non-zero mean"), std::string::npos) << e.what();
  }
  auto wrong = std::make_shared<ClassMeans>();
  wrong->means = MatrixD::Zero(3, 6);
  wrong->present.assign(3, false);
  h.class_means = wrong;
  EXPECT_THROW(encode_payload(h), ProtocolError);
}

TEST(ProtocolRoundTrip, DecodedKnowledgeIsCompatibleWithTheMethodsRules) {
  const Knowledge k = std::get<Knowledge>(roundtrip(test::sample_gmm(2, CovarianceType::Diag)));
  EXPECT_NO_THROW(check_compatible(k, "fedpft", 6, 4, "resnet18:abc123", "test"));
  EXPECT_NO_THROW(validate_knowledge(k, Limits{}, "knowledge"));
}

}  // namespace
}  // namespace fednode
