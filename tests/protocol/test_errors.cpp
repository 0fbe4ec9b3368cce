// Every way a message can be wrong yields a ProtocolError with its own code and a message that
// names the field. Messages are written by hand from docs/protocol.md (value.h), so these tests
// also check that the spec and the library agree byte for byte.
#include "protocol/msgpack_io.h"
#include "samples.h"
#include "spec_values.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

namespace fednode {
namespace {

using test::Array;
using test::Bin;
using test::Map;
using test::Value;
using test::f32_bytes;
using test::f64_bytes;
using test::pack;
using test::tensor;
using test::prototypes_value;
using test::stats_value;
using test::gmm_value;
using test::models_value;

void expect_code(ProtocolErrorCode code, const std::function<void()>& f, const std::string& mentions = "") {
  try {
    f();
    ADD_FAILURE() << "expected ProtocolError " << to_string(code) << ", nothing thrown";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.code, code) << e.what();
    if (!mentions.empty()) EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
  }
}

Payload decode(MessageType type, const std::string& bytes, const Limits& limits = Limits{}) {
  return decode_payload(test::header_for(type), bytes, limits);
}
Payload decode_knowledge(const Value& v, const Limits& limits = Limits{}) {
  return decode(MessageType::Knowledge, pack(v), limits);
}
void expect_knowledge_error(ProtocolErrorCode code, const Value& v, const std::string& mentions = "",
                            const Limits& limits = Limits{}) {
  expect_code(code, [&] { decode_knowledge(v, limits); }, mentions);
}

Value& first_class(Value& v) { return v["body"]["classes"][0]; }

TEST(ProtocolSpec, HandWrittenMessagesDecode) {
  const Knowledge p = std::get<Knowledge>(decode_knowledge(prototypes_value()));
  EXPECT_EQ(std::get<PrototypeKnowledge>(p.payload).classes[1].prototypes(0, 1), 6.0f);
  const Knowledge s = std::get<Knowledge>(decode_knowledge(stats_value()));
  const auto& stats = std::get<StatsKnowledge>(s.payload);
  EXPECT_EQ(stats.B(1, 0), 6.0);  // mirrored from the upper triangle
  EXPECT_EQ(stats.B(1, 1), 7.0);
  EXPECT_EQ(stats.N, (std::vector<int64_t>{3, 4}));
  for (const char* cov : {"diag", "full"}) {
    const Knowledge g = std::get<Knowledge>(decode_knowledge(gmm_value(cov)));
    const auto& m = std::get<GmmKnowledge>(g.payload).classes.at(0).mixture;
    EXPECT_EQ(m.weights(1), 0.75);
    EXPECT_EQ(std::string(cov) == "full" ? m.covariances(3, 1) : m.covariances(1, 1), 2.0);
  }
}

TEST(ProtocolSpec, LibraryEncodesExactlyTheDocumentedBytes) {
  const Knowledge k = test::worked_example_knowledge();
  EXPECT_EQ(encode_payload(k), pack(stats_value()));

  const EnvelopeHeader h = test::header_for(MessageType::Knowledge, 300);
  Bin run;
  run.bytes.assign(reinterpret_cast<const char*>(h.run.bytes.data()), 16);
  const Value header = Map{{"version", 1}, {"type", 2}, {"from", 3}, {"to", 5}, {"msg_id", 300}, {"run", run}};
  EXPECT_EQ(encode_header(h), pack(header));
}

TEST(ProtocolErrors, EveryPrefixIsTruncated) {
  const std::string bytes = encode_payload(test::sample_gmm(1, CovarianceType::Full));
  for (size_t n = 0; n < bytes.size(); ++n)
    expect_code(ProtocolErrorCode::Truncated, [&] { decode(MessageType::Knowledge, bytes.substr(0, n)); });
  expect_code(ProtocolErrorCode::TrailingBytes, [&] { decode(MessageType::Knowledge, bytes + '\0'); });
}

TEST(ProtocolErrors, NotTheSchema) {
  expect_code(ProtocolErrorCode::Malformed, [] { decode(MessageType::Ack, "\xc1"); });
  expect_code(ProtocolErrorCode::WrongType, [] { decode(MessageType::Ack, pack(Array{1})); });
  expect_code(ProtocolErrorCode::WrongType, [] { decode(MessageType::Ack, "\x81\x01\x02"); }, "keys must be strings");
  expect_code(ProtocolErrorCode::WrongType, [] { decode(MessageType::Ack, pack(Map{{"acked", "7"}})); }, "ack.acked");
  expect_code(ProtocolErrorCode::MissingField, [] { decode(MessageType::Ack, pack(Map{})); }, "acked");
  expect_code(ProtocolErrorCode::UnknownField,
              [] { decode(MessageType::Ack, pack(Map{{"acked", 1}, {"later", 2}})); }, "later");
  expect_code(ProtocolErrorCode::Malformed,
              [] { decode(MessageType::Ack, pack(Map{{"acked", 1}, {"acked", 2}})); }, "twice");
  expect_code(ProtocolErrorCode::InvalidValue, [] { decode(MessageType::Ack, pack(Map{{"acked", -1}})); });
  expect_code(ProtocolErrorCode::InvalidValue, [] { decode(MessageType::Ack, pack(Map{{"acked", 0}})); });
  expect_code(ProtocolErrorCode::WrongType, [] { decode(MessageType::Ack, std::string("\xd4\x01\x00", 3)); }, "extension");
  expect_code(ProtocolErrorCode::WrongType, [] { decode(MessageType::Ack, pack(Map{{"acked", 1.5}})); });
  // A message of one type read as another is a schema error, not a crash.
  expect_code(ProtocolErrorCode::MissingField, [] { decode(MessageType::Hello, pack(Map{{"acked", 1}})); });
}

TEST(ProtocolErrors, KnowledgeFields) {
  Value v = prototypes_value();
  v.erase("backbone");
  expect_knowledge_error(ProtocolErrorCode::MissingField, v, "backbone");
  v = prototypes_value();
  v.add("privacy_budget", 1);
  expect_knowledge_error(ProtocolErrorCode::UnknownField, v, "privacy_budget");
  v = prototypes_value();
  v["method"] = "fedavg";
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "fedavg");
  v["method"] = "fed\navg";
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "fed?avg");  // no raw control bytes in logs
  v = prototypes_value();
  v["dim"] = "2";
  expect_knowledge_error(ProtocolErrorCode::WrongType, v, "knowledge.dim");
  v["dim"] = 0;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "knowledge.dim");
  v["dim"] = -2;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "knowledge.dim");
  v["dim"] = 100000;
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "max_dim");
  v = prototypes_value();
  v["classes"] = 2;  // label 2 no longer exists
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "label");
  v["classes"] = 1;  // and now two entries for one class
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "2 entries for 1 classes");
}

TEST(ProtocolErrors, Contributors) {
  for (const Array& bad : {Array{}, Array{3, 2}, Array{2, 2}}) {
    Value v = prototypes_value();
    v["contributors"] = bad;
    expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "contributors");
  }
  Value v = prototypes_value();
  v["contributors"] = Array{uint64_t{1} << 32};
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "32 bits");
  v["contributors"] = Array{1, 2, 3};
  Limits limits;
  limits.max_contributors = 2;
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "max_contributors", limits);
}

TEST(ProtocolErrors, PerClassEntries) {
  Value v = prototypes_value();
  v["body"]["classes"][1]["label"] = 0;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "strictly increasing");
  v = prototypes_value();
  first_class(v)["count"] = 0;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "count");
  v = prototypes_value();
  Limits limits;
  limits.max_prototypes = 1;
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "max_prototypes", limits);
}

// A piece's counts decide what merging it allocates (FedPFT samples every count), so they are
// bounded, each and all classes together, before anything is sized.
TEST(ProtocolErrors, SampleCountsAreBoundedByMaxSamples) {
  Value v = gmm_value();
  first_class(v)["count"] = uint64_t{1} << 60;
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "max_samples");
  v = stats_value();  // N = {3, 4}
  Limits limits;
  limits.max_samples = 6;
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "all classes together", limits);
  limits.max_samples = 7;
  EXPECT_NO_THROW(decode_knowledge(v, limits));
  v = prototypes_value();  // counts 4 and 1
  limits.max_samples = 4;
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "all classes together", limits);
  limits.max_samples = 3;
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "classes[0].count", limits);
}

TEST(ProtocolErrors, Tensors) {
  auto with_prototypes = [](Value t) {
    Value v = prototypes_value();
    first_class(v)["prototypes"] = std::move(t);
    return v;
  };
  const std::string at = "knowledge.body.classes[0].prototypes";
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch,
                         with_prototypes(tensor("f32", Array{2, 3}, "dense", f32_bytes({1, 2, 3, 4, 5, 6}))), at);
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch,
                         with_prototypes(tensor("f32", Array{2, 2}, "dense", f32_bytes({1, 2, 3}))), "needs 16");
  expect_knowledge_error(ProtocolErrorCode::InvalidValue,
                         with_prototypes(tensor("f8", Array{2, 2}, "dense", f32_bytes({1, 2, 3, 4}))), "dtype");
  expect_knowledge_error(ProtocolErrorCode::InvalidValue,
                         with_prototypes(tensor("f32", Array{2, 2}, "lower", f32_bytes({1, 2, 3, 4}))), "layout");
  expect_knowledge_error(ProtocolErrorCode::InvalidValue,
                         with_prototypes(tensor("f32", Array{1, 1, 2, 2}, "dense", f32_bytes({1, 2, 3, 4}))), "dimensions");
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch,
                         with_prototypes(tensor("f32", Array{2, 3}, "upper", f32_bytes({1, 2, 3}))), "square");
  expect_knowledge_error(ProtocolErrorCode::TooLarge,
                         with_prototypes(tensor("f32", Array{uint64_t{1} << 33, 2}, "dense", f32_bytes({}))), "shape");
  // Shapes whose product overflows 64 bits are refused before any arithmetic wraps.
  expect_knowledge_error(ProtocolErrorCode::TooLarge,
                         with_prototypes(tensor("f32", Array{uint64_t{UINT32_MAX}, uint64_t{UINT32_MAX}, uint64_t{UINT32_MAX}},
                                                "dense", f32_bytes({}))),
                         "overflows");
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  expect_knowledge_error(ProtocolErrorCode::NonFinite,
                         with_prototypes(tensor("f32", Array{2, 2}, "dense", f32_bytes({1, nan, 3, 4}))), "element 1");
  expect_knowledge_error(ProtocolErrorCode::NonFinite,
                         with_prototypes(tensor("f32", Array{2, 2}, "dense", f32_bytes({1, 2, -inf, 4}))), "element 2");
  Bin half_inf;
  half_inf.bytes = std::string("\x00\x3c\x00\x7c\x00\x3c\x00\x3c", 8);  // 1, +inf, 1, 1 in float16
  expect_knowledge_error(ProtocolErrorCode::NonFinite, with_prototypes(tensor("f16", Array{2, 2}, "dense", half_inf)));
  // float64 on the wire is accepted where float32 is stored, unless it does not fit.
  EXPECT_NO_THROW(decode_knowledge(with_prototypes(tensor("f64", Array{2, 2}, "dense", f64_bytes({1, 2, 3, 4})))));
  expect_knowledge_error(ProtocolErrorCode::NonFinite,
                         with_prototypes(tensor("f64", Array{2, 2}, "dense", f64_bytes({1, 1e300, 3, 4}))), "float32");
  Value t = tensor("f32", Array{2, 2}, "dense", f32_bytes({1, 2, 3, 4}));
  t["data"] = "not binary";
  expect_knowledge_error(ProtocolErrorCode::WrongType, with_prototypes(t), "data");
}

TEST(ProtocolErrors, Statistics) {
  Value v = stats_value();
  v["body"]["A"] = tensor("f32", Array{2, 2}, "dense", f32_bytes({1, 2, 3, 4}));
  expect_knowledge_error(ProtocolErrorCode::WrongType, v, "must be f64");
  v = stats_value();
  v["body"]["N"] = Array{3};
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch, v, "1 counts for 2 classes");
  v = stats_value();
  v["body"]["B"] = tensor("f64", Array{2, 2}, "dense", f64_bytes({5, 6, 6, 7}));
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch, v, "upper");
  v = stats_value();
  v["body"]["B"] = tensor("f64", Array{2, 2}, "upper", f64_bytes({5, 6, 7, 8}));
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch, v, "needs 24");
  v = stats_value();
  v["body"]["A"] = tensor("f64", Array{3, 2}, "dense", f64_bytes({1, 2, 3, 4, 5, 6}));
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch, v, "knowledge.body.A");
}

// DP-FedCGS's noisy statistics (docs/protocol.md 6.2): counts may be negative only when the
// body says how much noise it carries.
// Secure aggregation's unmasking round (docs/protocol.md, 6.6): both messages round-trip, and a
// split of the group that names someone twice, a seed of another length or a seed count other
// than the dropped leaves' is refused.
TEST(ProtocolErrors, UnmaskingRound) {
  const UnmaskRequest request{{1, 3, 4}, {2}};
  const std::string request_bytes = encode_payload(Payload(request));
  const auto back = std::get<UnmaskRequest>(decode(MessageType::UnmaskRequest, request_bytes));
  EXPECT_EQ(back.survivors, request.survivors);
  EXPECT_EQ(back.dropped, request.dropped);
  UnmaskReply reply;
  reply.survivors = request.survivors;
  reply.dropped = request.dropped;
  reply.self_seed.fill(7);
  reply.pair_seeds[2].fill(9);
  const std::string reply_bytes = encode_payload(Payload(reply));
  const auto answer = std::get<UnmaskReply>(decode(MessageType::UnmaskReply, reply_bytes));
  EXPECT_EQ(answer.self_seed, reply.self_seed);
  EXPECT_EQ(answer.pair_seeds, reply.pair_seeds);
  EXPECT_EQ(encode_payload(Payload(answer)), reply_bytes);
  // No dropout: an empty list of the dropped, and no pair seed.
  const UnmaskRequest all{{1, 2}, {}};
  EXPECT_TRUE(std::get<UnmaskRequest>(decode(MessageType::UnmaskRequest, encode_payload(Payload(all)))).dropped.empty());

  auto request_value = [] { return Value(Map{{"survivors", Array{1, 3}}, {"dropped", Array{2}}}); };
  Value v = request_value();
  v["dropped"] = Array{3};
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode(MessageType::UnmaskRequest, pack(v)); }, "both a survivor and dropped");
  v = request_value();
  v["survivors"] = Array{};
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode(MessageType::UnmaskRequest, pack(v)); }, "names nobody");
  v = request_value();
  v["survivors"] = Array{3, 1};
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode(MessageType::UnmaskRequest, pack(v)); }, "strictly increasing");
  v = request_value();
  v.erase("dropped");
  expect_code(ProtocolErrorCode::MissingField, [&] { decode(MessageType::UnmaskRequest, pack(v)); });
  auto reply_value = [] {
    return Value(Map{{"survivors", Array{1, 3}}, {"dropped", Array{2}}, {"self", Bin{std::string(32, '\1')}},
                     {"pairs", Array{Value(Bin{std::string(32, '\2')})}}});
  };
  EXPECT_NO_THROW(decode(MessageType::UnmaskReply, pack(reply_value())));
  v = reply_value();
  v["self"] = Bin{std::string(31, '\1')};
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode(MessageType::UnmaskReply, pack(v)); }, "a seed is 32 bytes");
  v = reply_value();
  v["pairs"] = Array{};
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode(MessageType::UnmaskReply, pack(v)); }, "0 seeds for 1 dropped");
  v = reply_value();
  v.add("extra", 1);
  expect_code(ProtocolErrorCode::UnknownField, [&] { decode(MessageType::UnmaskReply, pack(v)); });
  // An encoder never sends a reply whose seeds are not for exactly the dropped.
  reply.pair_seeds.clear();
  expect_code(ProtocolErrorCode::InvalidValue, [&] { encode_payload(Payload(reply)); }, "exactly the dropped");

  // The consistency step: a tag for every survivor but one, in requests and answers alike; an
  // answer with tags carries no seeds.
  UnmaskRequest tagged = request;
  tagged.tags.assign(2, Seed32{});
  tagged.tags[1].fill(4);
  EXPECT_EQ(std::get<UnmaskRequest>(decode(MessageType::UnmaskRequest, encode_payload(Payload(tagged)))).tags, tagged.tags);
  UnmaskReply confirmation;
  confirmation.survivors = request.survivors;
  confirmation.dropped = request.dropped;
  confirmation.tags.assign(2, Seed32{});
  const auto confirmed = std::get<UnmaskReply>(decode(MessageType::UnmaskReply, encode_payload(Payload(confirmation))));
  EXPECT_TRUE(confirmed.consistency());
  EXPECT_EQ(confirmed.tags.size(), 2u);
  tagged.tags.pop_back();
  expect_code(ProtocolErrorCode::InvalidValue, [&] { encode_payload(Payload(tagged)); }, "1 tags for 3 survivors");
  auto tags_value = [](int n) {
    Array tags;
    for (int i = 0; i < n; ++i) tags.push_back(Value(Bin{std::string(32, '\3')}));
    return Value(Map{{"survivors", Array{1, 3}}, {"dropped", Array{2}}, {"tags", tags}});
  };
  EXPECT_NO_THROW(decode(MessageType::UnmaskReply, pack(tags_value(1))));
  EXPECT_NO_THROW(decode(MessageType::UnmaskRequest, pack(tags_value(1))));
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode(MessageType::UnmaskReply, pack(tags_value(2))); }, "2 tags for 2 survivors");
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode(MessageType::UnmaskReply, pack(tags_value(0))); }, "empty");
  v = tags_value(1);
  v.add("self", Bin{std::string(32, '\1')});
  expect_code(ProtocolErrorCode::UnknownField, [&] { decode(MessageType::UnmaskReply, pack(v)); }, "self");
}

TEST(ProtocolErrors, NoisyStatistics) {
  Value v = stats_value();
  v["body"]["N"] = Array{-2, 4};
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "must not be negative");
  v["body"].add("noise", Array{0.5, 2.5, 0.25});
  const Knowledge k = std::get<Knowledge>(decode_knowledge(v));
  const auto& s = std::get<StatsKnowledge>(k.payload);
  EXPECT_EQ(s.N, (std::vector<int64_t>{-2, 4}));
  EXPECT_EQ(s.noise.a, 0.5);
  EXPECT_EQ(s.noise.n, 2.5);
  EXPECT_EQ(s.noise.b, 0.25);
  EXPECT_EQ(encode_payload(k), pack(v)) << "what decodes re-encodes to the same bytes";
  v["body"]["noise"] = Array{0.5, -2.5, 0.25};
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "noise[1]");
  v["body"]["noise"] = Array{0.5, 2.5};
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "2 variances");
  v["body"]["noise"] = Array{0.0, 0.0, 0.0};
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "all zero");
  v["body"]["noise"] = Array{0.5, "two", 0.25};
  expect_knowledge_error(ProtocolErrorCode::WrongType, v, "a number");
  v["body"]["noise"] = Array{0.5, std::numeric_limits<double>::infinity(), 0.25};
  expect_knowledge_error(ProtocolErrorCode::NonFinite, v, "noise[1]");
  v["body"]["noise"] = Array{0.5, 2.5, 0.25};
  v["body"]["N"] = Array{int64_t{-(int64_t{1} << 40)}, 4};
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "max_samples");
}

// Secure aggregation's masked statistics (docs/protocol.md 6.2): ring elements round-trip bit
// for bit, and a body that says a part twice, or in the wrong size, is refused.
TEST(ProtocolErrors, MaskedStatistics) {
  for (bool counts_only : {false, true}) {
    Knowledge k = std::get<Knowledge>(decode_knowledge(stats_value()));
    auto& s = std::get<StatsKnowledge>(k.payload);
    MaskedStats m;
    m.group = {1, 2, 7};
    m.counts_only = counts_only;
    m.N = {ring_from_words(1, 2), ring_from_words(~uint64_t{0}, 0x8000000000000000ULL)};
    if (!counts_only) {
      m.A = {ring_from_words(3, 4), ring_from_words(5, 6), ring_from_words(7, 8), ring_from_words(9, 10)};
      m.B = {ring_from_words(11, 12), ring_from_words(13, 14), ring_from_words(15, 16)};
      s.A.setZero();
      s.B.setZero();
    }
    s.N = {0, 0};
    s.masked = m;
    const std::string bytes = encode_payload(k);
    const Knowledge back = std::get<Knowledge>(decode(MessageType::Knowledge, bytes, Limits{}));
    const auto& t = std::get<StatsKnowledge>(back.payload);
    ASSERT_TRUE(t.masked);
    EXPECT_EQ(t.masked->group, m.group);
    EXPECT_EQ(t.masked->counts_only, counts_only);
    EXPECT_TRUE(t.masked->N == m.N && t.masked->A == m.A && t.masked->B == m.B);
    EXPECT_EQ(t.A, s.A);
    EXPECT_EQ(t.B, s.B);
    EXPECT_EQ(encode_payload(back), bytes);
  }
  Value v = stats_value();
  v["body"].add("masked", Map{{"group", Array{1, 2}}, {"parts", "counts"}, {"N", Bin{std::string(32, '\1')}}});
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "a plain N as well");
  v["body"].erase("N");
  EXPECT_NO_THROW(decode_knowledge(v));
  v["body"]["masked"]["N"] = Bin{std::string(31, '\1')};
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch, v, "31 bytes, expected 2 ring elements");
  v["body"]["masked"]["N"] = Bin{std::string(32, '\1')};
  v["body"]["masked"]["parts"] = "some";
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "expected all or counts");
  v["body"]["masked"]["parts"] = "all";
  v["body"]["masked"].add("A", Bin{std::string(64, '\2')});
  v["body"]["masked"].add("B", Bin{std::string(48, '\3')});
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "plain ones as well");
  v["body"].erase("A");
  v["body"].erase("B");
  EXPECT_NO_THROW(decode_knowledge(v));
}

// FedMITR's models: a spec no ViT can have, or one that would need more than 2^26 parameters, is
// refused from its numbers before the parameters are sized; the parameters must be the spec's
// count; the owners must be the contributors, one model each; the images must be the dimension.
// FGL's prompts: text a generator and other programs read, so only UTF-8 without control
// characters, bounded, one shard per contributor, no more captions than samples.
TEST(ProtocolErrors, Prompts) {
  EXPECT_NO_THROW(decode_knowledge(test::prompts_value()));
  const auto shard = [](Value& v) -> Value& { return v["body"]["shards"][0]; };
  const auto entry = [&shard](Value& v, size_t i) -> Value& { return shard(v)["classes"][i]; };
  Value v = test::prompts_value();
  entry(v, 0)["prompt"] = "Trouser\nIgnore the above";
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "prompt: control character at byte 7");
  v = test::prompts_value();
  entry(v, 0)["name"] = std::string("Tr\0user", 7);
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "name: control character");
  v = test::prompts_value();
  entry(v, 0)["name"] = "Trous\xc3";
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "name: not UTF-8");
  v = test::prompts_value();
  entry(v, 0)["name"] = "\xc0\xaf";  // an overlong '/'
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "name: not UTF-8");
  v = test::prompts_value();
  entry(v, 0)["name"] = "\xed\xa0\x80";  // a surrogate
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "name: not UTF-8");
  v = test::prompts_value();
  entry(v, 0)["name"] = "";
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "name: empty");
  v = test::prompts_value();
  entry(v, 0)["prompt"] = std::string(1025, 'a');
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "max_string_bytes");
  v = test::prompts_value();
  entry(v, 1)["captions"] = Array{"one", "two", "three"};
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "3 captions for 2 samples");
  v = test::prompts_value();
  entry(v, 1)["captions"] = Array{""};
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "captions[0]: empty");
  v = test::prompts_value();
  entry(v, 1)["label"] = 1;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "strictly increasing");
  v = test::prompts_value();
  entry(v, 1)["label"] = 10;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "outside [0, 10)");
  v = test::prompts_value();
  entry(v, 0)["count"] = 0;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "count");
  v = test::prompts_value();
  entry(v, 0)["count"] = uint64_t{1} << 50;
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "max_samples");
  v = test::prompts_value();
  entry(v, 0).erase("negative_prompt");
  expect_knowledge_error(ProtocolErrorCode::MissingField, v, "negative_prompt");
  v = test::prompts_value();
  entry(v, 0).add("image", "base64...");
  expect_knowledge_error(ProtocolErrorCode::UnknownField, v, "image");
  v = test::prompts_value();
  shard(v)["owner"] = 5;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "owner");
  v = test::prompts_value();
  shard(v)["classes"] = Array{};
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "classes: empty");
  v = test::prompts_value();
  v["contributors"] = Array{3, 4};
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "1 shards for 2 contributors");
  v = test::prompts_value();
  shard(v)["classes"] = Array(11, Value(Map{}));
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "11 entries for 10 classes");
}

TEST(ProtocolErrors, Models) {
  EXPECT_NO_THROW(decode_knowledge(models_value()));
  const auto model = [](Value& v) -> Value& { return v["body"]["models"][0]; };
  Value v = models_value();
  model(v)["spec"]["dim"] = 16384;
  model(v)["spec"]["depth"] = 256;
  model(v)["spec"]["heads"] = 1;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "parameters, at most");
  v = models_value();
  model(v)["spec"]["depth"] = uint64_t{1} << 40;
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "spec.depth");
  v = models_value();
  model(v)["spec"]["patch"] = 3;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "does not divide");
  v = models_value();
  model(v)["spec"]["heads"] = 0;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "heads");
  v = models_value();
  model(v)["spec"]["image_size"] = 8;
  model(v)["spec"]["patch"] = 4;
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch, v, "64 pixels");
  v = models_value();
  model(v)["spec"].erase("mlp_dim");
  expect_knowledge_error(ProtocolErrorCode::MissingField, v, "mlp_dim");
  v = models_value();
  model(v)["parameters"] = tensor("f32", Array{75}, "dense", f32_bytes(std::vector<float>(75, 0.5f)));
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch, v, "parameters");
  v = models_value();
  std::vector<float> p = test::model_parameters();
  p[10] = std::numeric_limits<float>::quiet_NaN();
  model(v)["parameters"] = tensor("f32", Array{76}, "dense", f32_bytes(p));
  expect_knowledge_error(ProtocolErrorCode::NonFinite, v, "parameters");
  v = models_value();
  model(v)["owner"] = 5;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "owner");
  v = models_value();
  v["contributors"] = Array{4, 5};
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "1 models for 2 contributors");
  v = models_value();
  model(v)["count"] = 0;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "count");
  v = models_value();
  model(v)["count"] = uint64_t{1} << 50;
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "max_samples");

  // A user's TorchScript ViT: the file's SHA-256 and its parameter count, the built-in fields 0.
  const auto scripted = [&model] {
    Value s = models_value();
    for (const char* k : {"dim", "depth", "heads", "mlp_dim"}) model(s)["spec"][k] = 0;
    model(s)["spec"].add("script", std::string(64, 'c'));
    model(s)["spec"].add("parameters", 76);
    return s;
  };
  EXPECT_NO_THROW(decode_knowledge(scripted()));
  v = scripted();
  model(v)["spec"]["script"] = std::string(65, 'c');
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "spec.script");
  v = scripted();
  model(v)["spec"]["script"] = "C0FFEE";
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "SHA-256");
  v = scripted();
  model(v)["spec"]["dim"] = 2;
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "dim, depth, heads and mlp_dim 0");
  v = scripted();
  model(v)["spec"]["parameters"] = uint64_t{1} << 40;
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "spec.parameters");
  v = scripted();
  model(v)["spec"]["parameters"] = 75;
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch, v, "parameters");
  v = scripted();
  model(v)["spec"].erase("parameters");
  expect_knowledge_error(ProtocolErrorCode::MissingField, v, "parameters");
  v = models_value();
  model(v)["spec"].add("parameters", 76);
  expect_knowledge_error(ProtocolErrorCode::UnknownField, v, "parameters");
}

TEST(ProtocolErrors, Mixtures) {
  Value v = gmm_value();
  first_class(v)["weights"] = tensor("f32", Array{2}, "dense", f32_bytes({0.5f, 1.0f}));
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "sum to 1");
  v = gmm_value();
  first_class(v)["covariances"] = tensor("f32", Array{2, 2}, "dense", f32_bytes({1, -1, 2, 2}));
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "covariances: element 1 is not positive");
  // The same rule in every dtype, found as the values are converted: a zero, a negative zero.
  v = gmm_value();
  first_class(v)["covariances"] = tensor("f64", Array{2, 2}, "dense", f64_bytes({1, 2, 0, 2}));
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "covariances: element 2 is not positive");
  v = gmm_value();
  // float16 1.0, 1.0, 1.0, -0.0, little-endian.
  first_class(v)["covariances"] = tensor("f16", Array{2, 2}, "dense", Bin{std::string("\x00\x3c\x00\x3c\x00\x3c\x00\x80", 8)});
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "covariances: element 3 is not positive");
  v = gmm_value();
  first_class(v)["covariance"] = "banana";
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, v, "banana");
  v = gmm_value("full");
  first_class(v)["covariances"] = tensor("f32", Array{2, 2, 2}, "dense", f32_bytes({1, 0, 0, 1, 2, 0, 0, 2}));
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch, v, "(upper)");
  v = gmm_value();
  first_class(v)["means"] = tensor("f32", Array{2, 3}, "dense", f32_bytes({0, 1, 2, 3, 4, 5}));
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch, v, "means");
  v = gmm_value();
  Limits limits;
  limits.max_components = 1;
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "max_components", limits);
}

TEST(ProtocolErrors, CovarianceSketch) {
  const auto with_sketch = [](uint64_t residuals, const Value& variances, const Value& factor) {
    return test::gmm_sketch_value(residuals, variances, factor);
  };
  const Value variances = tensor("f32", Array{2}, "dense", f32_bytes({1, 2}));
  const Value factor = tensor("f32", Array{1, 2}, "dense", f32_bytes({0.5f, -0.5f}));
  EXPECT_NO_THROW(decode_knowledge(with_sketch(30, variances, factor)));
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, with_sketch(31, variances, factor),
                         "knowledge.body.within_class.residuals: 31 outside [0, 30]");
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch,
                         with_sketch(30, tensor("f32", Array{3}, "dense", f32_bytes({1, 2, 3})), factor),
                         "within_class.variances");
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch,
                         with_sketch(30, variances, tensor("f32", Array{1, 3}, "dense", f32_bytes({1, 2, 3}))),
                         "expected [rank, 2] with rank <= 2");
  expect_knowledge_error(ProtocolErrorCode::DimensionMismatch,
                         with_sketch(30, variances, tensor("f32", Array{3, 2}, "dense", f32_bytes({1, 2, 3, 4, 5, 6}))),
                         "rank <= 2");
  expect_knowledge_error(ProtocolErrorCode::InvalidValue,
                         with_sketch(30, tensor("f32", Array{2}, "dense", f32_bytes({1, -2})), factor),
                         "within_class.variances: a variance is negative");
  expect_knowledge_error(ProtocolErrorCode::InvalidValue, with_sketch(0, variances, factor),
                         "summarises no residuals but is not empty");
  expect_knowledge_error(ProtocolErrorCode::NonFinite,
                         with_sketch(30, variances, tensor("f32", Array{1, 2}, "dense", f32_bytes({NAN, 1}))),
                         "within_class.factor");
  Value extra = test::gmm_sketch_value();
  std::get<Map>(extra["body"]["within_class"].v).emplace_back("rank", 1);
  expect_knowledge_error(ProtocolErrorCode::UnknownField, extra, "within_class: unknown field 'rank'");
  Value missing = gmm_value();
  std::get<Map>(missing["body"].v).emplace_back("within_class", Map{{"residuals", 3}, {"variances", variances}});
  expect_knowledge_error(ProtocolErrorCode::MissingField, missing, "missing field 'factor'");
}

TEST(ProtocolErrors, HelloHeadAndError) {
  Hello hello = test::sample_hello();
  const EnvelopeHeader from_other = test::header_for(MessageType::Hello);
  hello.node = from_other.from + 1;
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_payload(from_other, encode_payload(hello), Limits{}); },
              "sent by node");
  hello = test::sample_hello();
  hello.versions = {2};
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_payload(from_other, encode_payload(hello), Limits{}); },
              "does not list version 1");

  const std::string adapter = encode_payload(test::sample_adapter_head(1));
  EXPECT_NO_THROW(decode(MessageType::Head, adapter));
  Limits narrow;
  narrow.max_dim = 4;  // the adapter's first hidden layer has 5 units, input 6
  expect_code(ProtocolErrorCode::TooLarge, [&] { decode(MessageType::Head, adapter, narrow); }, "max_dim");
  // The same head claimed as a linear one has the wrong number of layers.
  std::string as_linear = adapter;
  const size_t at = as_linear.find("adapter");
  as_linear.replace(at, 7, "linear\xc0", 7);  // keep the length: "linear" + a byte the str holds
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode(MessageType::Head, as_linear); }, "head kind");

  expect_code(ProtocolErrorCode::InvalidValue,
              [] {
                decode(MessageType::Error,
                       pack(Map{{"reason", 70000}, {"ref", 0}, {"abort", false}, {"text", ""}}));
              },
              "16 bits");
  expect_code(ProtocolErrorCode::WrongType,
              [] { decode(MessageType::Error, pack(Map{{"reason", 1}, {"ref", 0}, {"abort", 1}, {"text", ""}})); },
              "error.abort");
}

TEST(ProtocolErrors, HeadShapes) {
  const HeadMessage h = test::sample_linear_head(2, 6, 4);
  // Decoded with a header that says 5 classes: hand-edit "classes": 4 -> 5.
  std::string bytes = encode_payload(h);
  const std::string key = std::string("\xa7") + "classes";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes[at + key.size()], '\x04');
  bytes[at + key.size()] = '\x05';
  expect_code(ProtocolErrorCode::DimensionMismatch, [&] { decode(MessageType::Head, bytes); }, "expected 5");
  bytes[at + key.size()] = '\x04';
  const std::string dim_key = std::string("\xa3") + "dim";
  const size_t d = bytes.find(dim_key);
  bytes[d + dim_key.size()] = '\x07';
  expect_code(ProtocolErrorCode::DimensionMismatch, [&] { decode(MessageType::Head, bytes); }, "head.layers[0].W");
}

// FGL's CNN head: its spec is checked (and its parameter count bounded) before the parameters
// are sized, and must describe the message's dim.
TEST(ProtocolErrors, CnnHeads) {
  // 8 x 8 x 1, width 1, hidden 2, 2 classes: 10 + 20 + 18 + 6 parameters.
  const auto cnn_head = [] {
    return Value(Map{{"kind", "cnn"},
                     {"contributors", Array{0, 1}},
                     {"backbone", "pixels"},
                     {"dim", 64},
                     {"classes", 2},
                     {"spec", Map{{"image_size", 8}, {"channels", 1}, {"width", 1}, {"hidden", 2}}},
                     {"parameters", tensor("f32", Array{54}, "dense", f32_bytes(std::vector<float>(54, 0.1f)))}});
  };
  const auto decode_head = [](const Value& v) { return decode(MessageType::Head, pack(v)); };
  EXPECT_EQ(std::get<HeadMessage>(decode_head(cnn_head())).head->kind(), "cnn");
  const auto expect = [&](ProtocolErrorCode code, const Value& v, const std::string& mentions) {
    expect_code(code, [&] { decode_head(v); }, mentions);
  };
  Value v = cnn_head();
  v["spec"]["width"] = 4096;
  v["spec"]["hidden"] = 65536;
  expect(ProtocolErrorCode::InvalidValue, v, "parameters, at most");
  v = cnn_head();
  v["spec"]["width"] = uint64_t{1} << 40;
  expect(ProtocolErrorCode::TooLarge, v, "spec.width");
  v = cnn_head();
  v["spec"]["image_size"] = 6;
  expect(ProtocolErrorCode::InvalidValue, v, "multiple of 4");
  v = cnn_head();
  v["dim"] = 48;
  expect(ProtocolErrorCode::DimensionMismatch, v, "64 pixels");
  v = cnn_head();
  v["parameters"] = tensor("f32", Array{53}, "dense", f32_bytes(std::vector<float>(53, 0.1f)));
  expect(ProtocolErrorCode::DimensionMismatch, v, "parameters");
  v = cnn_head();
  v["spec"].add("depth", 3);
  expect(ProtocolErrorCode::UnknownField, v, "depth");
  v = cnn_head();
  v["spec"].erase("hidden");
  expect(ProtocolErrorCode::MissingField, v, "hidden");
}

// FedMITR's ensemble head: its rule is one of two, its models are 1 to kMaxEnsembleModels of one
// spec that describes the message's images, each with a count, bounded before any is read.
TEST(ProtocolErrors, EnsembleHeads) {
  // 4 x 4 x 1 images, patch 2, dim 2, depth 1, 1 head, MLP 2, 2 classes: 76 parameters.
  const auto member = [](uint64_t count) {
    return Value(Map{{"count", count},
                     {"spec", Map{{"image_size", 4}, {"channels", 1}, {"patch", 2}, {"dim", 2}, {"depth", 1}, {"heads", 1},
                                  {"mlp_dim", 2}}},
                     {"parameters", tensor("f32", Array{76}, "dense", f32_bytes(std::vector<float>(76, 0.1f)))}});
  };
  const auto ensemble_head = [&] {
    return Value(Map{{"kind", "vit-ensemble"},
                     {"contributors", Array{0, 1}},
                     {"backbone", "pixels"},
                     {"dim", 16},
                     {"classes", 2},
                     {"rule", "weighted-probabilities"},
                     {"models", Array{member(30), member(10)}}});
  };
  const auto decode_head = [](const Value& v) { return decode(MessageType::Head, pack(v)); };
  EXPECT_EQ(std::get<HeadMessage>(decode_head(ensemble_head())).head->kind(), "vit-ensemble");
  const auto expect = [&](ProtocolErrorCode code, const Value& v, const std::string& mentions) {
    expect_code(code, [&] { decode_head(v); }, mentions);
  };
  Value v = ensemble_head();
  v["rule"] = "median";
  expect(ProtocolErrorCode::InvalidValue, v, "head.rule");
  v = ensemble_head();
  v["models"] = Array{};
  expect(ProtocolErrorCode::InvalidValue, v, "0 models");
  v = ensemble_head();
  v["models"] = Array(4097, member(1));
  expect(ProtocolErrorCode::TooLarge, v, "4097 models");
  v = ensemble_head();
  v["models"][1]["count"] = 0;
  expect(ProtocolErrorCode::InvalidValue, v, "models[1].count");
  v = ensemble_head();
  v["models"][1]["count"] = uint64_t{1} << 50;
  expect(ProtocolErrorCode::TooLarge, v, "max_samples");
  v = ensemble_head();
  v["models"][1]["spec"]["mlp_dim"] = 4;
  expect(ProtocolErrorCode::InvalidValue, v, "not the spec of models[0]");
  v = ensemble_head();
  v["dim"] = 64;
  expect(ProtocolErrorCode::DimensionMismatch, v, "16 pixels");
  v = ensemble_head();
  v["models"][0]["parameters"] = tensor("f32", Array{75}, "dense", f32_bytes(std::vector<float>(75, 0.1f)));
  expect(ProtocolErrorCode::DimensionMismatch, v, "parameters");
  v = ensemble_head();
  v["models"][0].add("owner", 3);
  expect(ProtocolErrorCode::UnknownField, v, "owner");
  v = ensemble_head();
  v.erase("rule");
  expect(ProtocolErrorCode::MissingField, v, "rule");
}

TEST(ProtocolErrors, EnvelopeHeader) {
  const EnvelopeHeader h = test::header_for(MessageType::Ack);
  Bin run;
  run.bytes.assign(reinterpret_cast<const char*>(h.run.bytes.data()), 16);
  auto header = [&] {
    return Value(Map{{"version", 1}, {"type", 4}, {"from", 3}, {"to", 5}, {"msg_id", 9}, {"run", run}});
  };
  EXPECT_NO_THROW(decode_header(pack(header()), Limits{}));
  Value v = header();
  v["version"] = 3;
  v["type"] = "garbage";  // irrelevant: the version is judged first
  expect_code(ProtocolErrorCode::UnsupportedVersion, [&] { decode_header(pack(v), Limits{}); }, "version 3");
  v = header();
  v["type"] = 6;  // complete, the last type of version 1
  EXPECT_EQ(decode_header(pack(v), Limits{}).type, MessageType::Complete);
  v["type"] = 8;  // unmask reply, the last type
  EXPECT_EQ(decode_header(pack(v), Limits{}).type, MessageType::UnmaskReply);
  v["type"] = 9;
  expect_code(ProtocolErrorCode::UnknownMessageType, [&] { decode_header(pack(v), Limits{}); });
  v["type"] = 0;
  expect_code(ProtocolErrorCode::UnknownMessageType, [&] { decode_header(pack(v), Limits{}); });
  v = header();
  v["msg_id"] = 0;
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_header(pack(v), Limits{}); }, "msg_id");
  v = header();
  v["to"] = uint64_t{1} << 32;
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_header(pack(v), Limits{}); }, "header.to");
  // Truncated to 32 bits, this sender would pass for node 5.
  v = header();
  v["from"] = (uint64_t{1} << 32) + 5;
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_header(pack(v), Limits{}); }, "header.from");
  v = header();
  v["run"] = Bin{std::string(15, 'x')};
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_header(pack(v), Limits{}); }, "16 bytes");
  v = header();
  v.add("padding", std::string(300, 'x'));
  expect_code(ProtocolErrorCode::TooLarge, [&] { decode_header(pack(v), Limits{}); }, "256");
}

TEST(ProtocolErrors, StreamHeaderAndChunk) {
  const EnvelopeHeader h = test::header_for(MessageType::Knowledge);
  Bin run;
  run.bytes.assign(reinterpret_cast<const char*>(h.run.bytes.data()), 16);
  auto header = [&] {
    Value v(Map{{"version", 2}, {"type", 2}, {"from", 3}, {"to", 5}, {"msg_id", 9}, {"run", run}});
    v.add("cipher", "aes-256-gcm");
    v.add("bytes", 5000000);
    v.add("chunk", 262144);
    return v;
  };
  const EnvelopeHeader ok = decode_header(pack(header()), Limits{});
  ASSERT_TRUE(ok.stream);
  EXPECT_EQ(ok.stream->chunks(), 20u);
  EXPECT_EQ(ok.stream->chunk_bytes(19), 5000000u - 19u * 262144u);
  EXPECT_EQ(decode_header(encode_header(ok), Limits{}).stream, ok.stream);
  Value v = header();
  v["version"] = 1;  // the layout is version 2's
  expect_code(ProtocolErrorCode::UnknownField, [&] { decode_header(pack(v), Limits{}); });
  v = header();
  v["chunk"] = 512;
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_header(pack(v), Limits{}); }, "header.chunk");
  v = header();
  v["chunk"] = uint64_t{1} << 40;
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_header(pack(v), Limits{}); }, "header.chunk");
  v = header();
  v["bytes"] = uint64_t{1} << 40;
  expect_code(ProtocolErrorCode::TooLarge, [&] { decode_header(pack(v), Limits{}); }, "header.bytes");
  v = header();
  v["cipher"] = "";
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_header(pack(v), Limits{}); }, "header.cipher");
  Value missing(Map{{"version", 2}, {"type", 2}, {"from", 3}, {"to", 5}, {"msg_id", 9}, {"run", run}});
  expect_code(ProtocolErrorCode::MissingField, [&] { decode_header(pack(missing), Limits{}); }, "cipher");

  const std::string ct(40, 'c');
  auto chunk = [&] { return Value(Array{"fednode", 9, 3, Bin{ct}}); };
  const std::string bytes = pack(chunk());
  EXPECT_TRUE(is_chunk_message(bytes));
  const ChunkView c = decode_chunk(bytes, Limits{});
  EXPECT_EQ(c.msg_id, 9u);
  EXPECT_EQ(c.index, 3u);
  EXPECT_EQ(c.ciphertext, ct);
  EXPECT_EQ(chunk_prefix(9, 3, ct.size()) + ct, bytes);
  v = chunk();
  v[3] = Bin{std::string(15, 'c')};
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_chunk(pack(v), Limits{}); }, "tag");
  v = chunk();
  v[1] = 0;
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_chunk(pack(v), Limits{}); }, "msg_id");
  v = chunk();
  v[0] = "fedn0de";
  expect_code(ProtocolErrorCode::Malformed, [&] { decode_chunk(pack(v), Limits{}); }, "not a fednode chunk");
  expect_code(ProtocolErrorCode::Truncated, [&] { decode_chunk(bytes.substr(0, bytes.size() - 1), Limits{}); });
}

TEST(ProtocolErrors, Frame) {
  const std::string tag(16, 't'), nonce(24, 'n'), ct(16, 'c');
  const std::string header = encode_header(test::header_for(MessageType::Ack));
  auto frame = [&] {
    return Value(Array{"fednode", Bin{header}, Bin{tag}, Bin{nonce}, Bin{ct}});
  };
  EXPECT_NO_THROW(decode_frame(pack(frame()), Limits{}));
  Value v = frame();
  v[0] = "fedn0de";
  expect_code(ProtocolErrorCode::Malformed, [&] { decode_frame(pack(v), Limits{}); }, "not a fednode frame");
  v = frame();
  std::get<Array>(v.v).pop_back();
  expect_code(ProtocolErrorCode::Malformed, [&] { decode_frame(pack(v), Limits{}); });
  v = frame();
  v[3] = Bin{std::string(23, 'n')};
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_frame(pack(v), Limits{}); }, "nonce");
  v = frame();
  v[4] = Bin{std::string(15, 'c')};
  expect_code(ProtocolErrorCode::InvalidValue, [&] { decode_frame(pack(v), Limits{}); }, "ciphertext");
  v = frame();
  v[2] = "tag as a string";
  expect_code(ProtocolErrorCode::WrongType, [&] { decode_frame(pack(v), Limits{}); }, "header_tag");
}

TEST(ProtocolLimits, ClaimsAreRefusedBeforeAllocation) {
  // Array and map headers claiming 4G entries: a decoder that allocated first would run out of
  // memory. Binaries and strings are only ever views of bytes that are present.
  for (const char* claim : {"\xdd\xff\xff\xff\xff", "\xdf\xff\xff\xff\xff"})
    expect_code(ProtocolErrorCode::TooLarge, [&] { decode(MessageType::Ack, std::string(claim, 5)); });
  for (const char* claim : {"\xc6\xff\xff\xff\xff", "\xdb\xff\xff\xff\xff"})
    expect_code(ProtocolErrorCode::Truncated, [&] { decode(MessageType::Ack, std::string(claim, 5)); });
  // Within the limits but not present: truncated, still without allocating 4 GiB.
  expect_code(ProtocolErrorCode::Truncated, [] { decode(MessageType::Ack, std::string("\xdd\x00\x00\xff\xff", 5)); });

  const std::string deep(100000, '\x91');
  expect_code(ProtocolErrorCode::TooLarge, [&] { decode(MessageType::Ack, deep); }, "max_depth");

  Limits few;
  few.max_items = 100;
  Array nils(200);
  expect_code(ProtocolErrorCode::TooLarge, [&] { decode(MessageType::Ack, pack(nils), few); }, "max_items");
  // The limits are inclusive: an array and 99 values make 100 items, 8 nested arrays depth 8.
  EXPECT_NO_THROW(wire::Document(pack(Array(99)), few, "items"));
  expect_code(ProtocolErrorCode::TooLarge, [&] { wire::Document(pack(Array(100)), few, "items"); }, "max_items");
  const Limits defaults;
  ASSERT_EQ(defaults.max_depth, 8u);
  EXPECT_NO_THROW(wire::Document(std::string(8, '\x91') + '\xc0', defaults, "depth"));
  expect_code(ProtocolErrorCode::TooLarge,
              [&] { wire::Document(std::string(9, '\x91') + '\xc0', defaults, "depth"); }, "max_depth");

  Limits small;
  small.max_message_bytes = 1024;
  expect_code(ProtocolErrorCode::TooLarge, [&] { decode(MessageType::Ack, std::string(2000, '\0'), small); },
              "max_message_bytes");
  expect_code(ProtocolErrorCode::TooLarge, [&] { decode_frame(std::string(2000, '\0'), small); });

  Limits strings;
  strings.max_string_bytes = 16;
  Value v = prototypes_value();
  v["backbone"] = std::string(17, 'b');
  expect_knowledge_error(ProtocolErrorCode::TooLarge, v, "max_string_bytes", strings);
}

TEST(ProtocolLimits, Validate) {
  EXPECT_NO_THROW(Limits{}.validate());
  Limits l;
  l.max_depth = 3;  // the schema nests 6 deep
  EXPECT_THROW(l.validate(), InputError);
  l = Limits{};
  l.max_dim = 0;
  EXPECT_THROW(l.validate(), InputError);
  l = Limits{};
  l.max_message_bytes = uint64_t{1} << 33;
  EXPECT_THROW(l.validate(), InputError);
  // Sample counts are summed across pieces; up to 2^40 each, the sums stay exact.
  l = Limits{};
  l.max_samples = uint64_t{1} << 40;
  EXPECT_NO_THROW(l.validate());
  l.max_samples = (uint64_t{1} << 40) + 1;
  EXPECT_THROW(l.validate(), InputError);
}

TEST(ProtocolEncoder, RefusesWhatPeersWouldReject) {
  Knowledge k = test::sample_gmm(1, CovarianceType::Diag);
  auto& m = std::get<GmmKnowledge>(k.payload).classes[0].mixture;
  m.means(0, 0) = std::nan("");
  expect_code(ProtocolErrorCode::NonFinite, [&] { encode_payload(k); }, "means");
  m.means(0, 0) = 1e5;  // fine in float32, +inf in float16
  EXPECT_NO_THROW(encode_payload(k, {Precision::Float32}));
  expect_code(ProtocolErrorCode::NonFinite, [&] { encode_payload(k, {Precision::Float16}); }, "overflows f16");
  m.means(0, 0) = 1;
  m.covariances(1, 2) = 1e-9;  // positive, but zero in float16
  EXPECT_NO_THROW(encode_payload(k, {Precision::Float32}));
  expect_code(ProtocolErrorCode::InvalidValue, [&] { encode_payload(k, {Precision::Float16}); }, "underflows");
  m.covariances(1, 2) = 1;
  Knowledge full = test::sample_gmm(1, CovarianceType::Full);
  std::get<GmmKnowledge>(full.payload).classes[0].mixture.covariances(0, 0) = 1e-9;  // a variance
  EXPECT_NO_THROW(encode_payload(full, {Precision::Float32}));
  expect_code(ProtocolErrorCode::InvalidValue, [&] { encode_payload(full, {Precision::Float16}); }, "underflows");
  m.means.conservativeResize(m.means.rows(), m.means.cols() - 1);
  expect_code(ProtocolErrorCode::DimensionMismatch, [&] { encode_payload(k); }, "means");

  Knowledge s = test::sample_stats(1);
  std::get<StatsKnowledge>(s.payload).N.pop_back();
  expect_code(ProtocolErrorCode::DimensionMismatch, [&] { encode_payload(s); }, "N");

  HeadMessage h = test::sample_linear_head(1);
  h.contributors.clear();
  expect_code(ProtocolErrorCode::InvalidValue, [&] { encode_payload(h); }, "contributors");
  EXPECT_THROW(encode_header(test::header_for(MessageType::Ack, 0)), ProtocolError);
}

}  // namespace
}  // namespace fednode
