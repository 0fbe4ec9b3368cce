// Seeded fuzzing: valid messages mutated at the byte level and at the structure level, and plain
// random bytes. Whatever comes in, the decoders either return a valid message or throw
// ProtocolError; nothing else escapes, nothing crashes or hangs.
#include "samples.h"
#include "spec_values.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

namespace fednode {
namespace {

using test::Array;
using test::Bin;
using test::Map;
using test::Value;

constexpr uint64_t kSeed = 0x5EED2024;

enum class Target { Payload, Header, Frame, Chunk };

struct Sample {
  Target target;
  MessageType type;  // for payloads
  std::string bytes;
};

std::vector<Sample> corpus() {
  std::vector<Sample> out;
  auto add = [&](const Payload& p, Precision precision = Precision::Float32) {
    out.push_back({Target::Payload, type_of(p), encode_payload(p, {precision})});
  };
  add(test::sample_hello());
  add(Ack{12});
  add(ErrorMessage{ErrorReason::Busy, 3, false, "later"});
  for (auto type : {CovarianceType::Full, CovarianceType::Diag, CovarianceType::Spherical})
    for (auto precision : {Precision::Float32, Precision::Float16})
      add(test::sample_gmm(1, type, 2, 3, 3), precision);
  for (auto precision : {Precision::Float32, Precision::Float16}) {
    Knowledge k = test::sample_gmm(1, CovarianceType::Diag, 2, 3, 3);
    std::get<GmmKnowledge>(k.payload).within_class =
        CovarianceSketch{5, VectorD::Constant(3, 0.5), MatrixD::Constant(2, 3, 0.25)};
    add(k, precision);
  }
  add(test::sample_stats(2, 3, 2));
  add(test::sample_prototypes(3, 3, 4), Precision::Float16);
  add(test::sample_prototypes(3, 3, 4), Precision::Float32);
  add(test::sample_linear_head(4, 3, 2, "lda"));
  add(test::sample_adapter_head(5, 3, 3, 2, 2));
  for (const Value& v : {test::prototypes_value(), test::stats_value(), test::gmm_value("full"), test::gmm_sketch_value()})
    out.push_back({Target::Payload, MessageType::Knowledge, test::pack(v)});
  const std::string header = encode_header(test::header_for(MessageType::Knowledge, 77));
  out.push_back({Target::Header, MessageType::Knowledge, header});
  out.push_back({Target::Frame, MessageType::Knowledge,
                 encode_frame({header, std::string(16, 't'), std::string(24, 'n'), std::string(40, 'c')})});
  // Version 2: a stream's header, and a chunk message.
  EnvelopeHeader streamed = test::header_for(MessageType::Knowledge, 78);
  streamed.version = kStreamVersion;
  streamed.stream = StreamLayout{"aes-256-gcm", 300000, 65536};
  out.push_back({Target::Header, MessageType::Knowledge, encode_header(streamed)});
  Ack versions{12};
  versions.versions = {1, 2};
  versions.ciphers = {"aes-256-gcm", "chacha20-poly1305"};
  add(versions);
  out.push_back({Target::Chunk, MessageType::Knowledge, chunk_prefix(78, 3, 40) + std::string(40, 'c')});
  return out;
}

uint8_t interesting_byte(Rng& rng) {
  static const uint8_t bytes[] = {0x00, 0x01, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3,
                                  0xc4, 0xc5, 0xc6, 0xca, 0xcb, 0xcf, 0xd3, 0xd4, 0xd9, 0xdb, 0xdc, 0xdd, 0xde,
                                  0xdf, 0xe0, 0xff};
  return bytes[rng.below(sizeof(bytes))];
}

std::string mutate_bytes(std::string s, const std::vector<Sample>& all, Rng& rng) {
  const int rounds = 1 + static_cast<int>(rng.below(3));
  for (int r = 0; r < rounds; ++r) {
    const size_t n = s.size();
    const size_t pos = n ? rng.below(n) : 0;
    switch (rng.below(9)) {
      case 0:  // flip bits
        if (n) s[pos] = static_cast<char>(s[pos] ^ (1u << rng.below(8)));
        break;
      case 1:  // a byte MessagePack gives meaning to
        if (n) s[pos] = static_cast<char>(interesting_byte(rng));
        break;
      case 2:  // truncate
        s.resize(pos);
        break;
      case 3: {  // insert random bytes
        std::string ins(1 + rng.below(8), '\0');
        for (char& c : ins) c = static_cast<char>(rng.below(256));
        s.insert(pos, ins);
        break;
      }
      case 4:  // delete a range
        s.erase(pos, 1 + rng.below(16));
        break;
      case 5:  // duplicate a range
        s.insert(pos, s.substr(pos, 1 + rng.below(32)));
        break;
      case 6: {  // splice with another message
        const std::string& other = all[rng.below(all.size())].bytes;
        s = s.substr(0, pos) + other.substr(other.empty() ? 0 : rng.below(other.size()));
        break;
      }
      case 7: {  // large lengths and counts, NaN and Inf patterns
        static const uint32_t words[] = {0xFFFFFFFFu, 0x7FFFFFFFu, 0x80000000u, 0x7FC00000u, 0x7F800000u,
                                         0x00010000u, 0x0000FFFFu};
        const uint32_t w = words[rng.below(sizeof(words) / sizeof(words[0]))];
        for (size_t i = 0; i < 4 && pos + i < n; ++i) s[pos + i] = static_cast<char>((w >> (24 - 8 * i)) & 0xFF);
        break;
      }
      default:  // small integer nudges: dims, counts, labels, lengths off by one
        if (n) s[pos] = static_cast<char>(s[pos] + (rng.below(2) ? 1 : -1));
        break;
    }
  }
  return s;
}

Value random_value(Rng& rng, int depth) {
  static const char* words[] = {"method", "fedpft", "fedcgs", "fedtc", "dim", "classes", "body", "label",
                                "count", "covariance", "full", "diag", "spherical", "weights", "means",
                                "covariances", "prototypes", "dtype", "f16", "f32", "f64", "shape", "layout",
                                "dense", "upper", "data", "A", "N", "B", "contributors", "backbone"};
  const size_t nwords = sizeof(words) / sizeof(words[0]);
  switch (rng.below(depth > 0 ? 10 : 8)) {
    case 0: return Value();
    case 1: return Value(rng.below(2) == 1);
    case 2: {
      static const uint64_t ints[] = {0, 1, 2, 3, 7, 255, 65535, 65536, uint64_t{1} << 32, UINT64_MAX};
      return Value(ints[rng.below(10)]);
    }
    case 3: return Value(-static_cast<int64_t>(1 + rng.below(1000)));
    case 4: {
      static const double ds[] = {0.5, -1.0, std::nan(""), std::numeric_limits<double>::infinity(), 1e308};
      return Value(ds[rng.below(5)]);
    }
    case 5: return Value(words[rng.below(nwords)]);
    case 6: {
      Bin b;
      b.bytes.resize(rng.below(48));
      for (char& c : b.bytes) c = static_cast<char>(rng.below(256));
      return Value(b);
    }
    case 7: return Value(Array{});
    case 8: {
      Array a;
      for (uint64_t i = rng.below(5); i > 0; --i) a.push_back(random_value(rng, depth - 1));
      return Value(a);
    }
    default: {
      Map m;
      for (uint64_t i = rng.below(5); i > 0; --i) m.emplace_back(words[rng.below(nwords)], random_value(rng, depth - 1));
      return Value(m);
    }
  }
}

// Replaces, removes or adds one field somewhere in the tree.
void mutate_tree(Value& v, Rng& rng) {
  if (auto* m = std::get_if<Map>(&v.v)) {
    if (!m->empty() && rng.below(3) != 0) {
      auto& entry = (*m)[rng.below(m->size())];
      if (rng.below(3) == 0) entry.second = random_value(rng, 2);
      else mutate_tree(entry.second, rng);
      return;
    }
    if (!m->empty() && rng.below(2) == 0) m->erase(m->begin() + static_cast<long>(rng.below(m->size())));
    else m->emplace_back("dim", random_value(rng, 1));
    return;
  }
  if (auto* a = std::get_if<Array>(&v.v)) {
    if (!a->empty() && rng.below(4) != 0) {
      mutate_tree((*a)[rng.below(a->size())], rng);
      return;
    }
    if (!a->empty() && rng.below(2) == 0) a->pop_back();
    else a->push_back(a->empty() ? random_value(rng, 1) : a->front());
    return;
  }
  v = random_value(rng, 2);
}

struct Outcome {
  std::map<ProtocolErrorCode, int> codes;
  int decoded = 0;
  int failures = 0;
};

std::string hex_prefix(const std::string& s) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < s.size() && i < 48; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", static_cast<unsigned char>(s[i]));
    out += buf;
  }
  return out;
}

void feed(Target target, MessageType type, const std::string& bytes, Outcome& o) {
  try {
    switch (target) {
      case Target::Header: decode_header(bytes, Limits{}); break;
      case Target::Frame: decode_frame(bytes, Limits{}); break;
      case Target::Chunk: decode_chunk(bytes, Limits{}); break;
      case Target::Payload: {
        const Payload p = decode_payload(test::header_for(type), bytes, Limits{});
        // Whatever decodes must satisfy the same rules the encoder enforces.
        if (auto* k = std::get_if<Knowledge>(&p)) {
          validate_knowledge(*k, Limits{}, "decoded");
          // ...and the methods' own rules, which the protocol must not be laxer than.
          if (auto* g = std::get_if<GmmKnowledge>(&k->payload))
            for (const auto& c : g->classes) c.mixture.validate("decoded");
        }
        if (auto* h = std::get_if<HeadMessage>(&p)) EXPECT_TRUE(h->head);
        break;
      }
    }
    ++o.decoded;
  } catch (const ProtocolError& e) {
    ++o.codes[e.code];
  } catch (const std::exception& e) {
    ++o.failures;
    ADD_FAILURE() << "non-protocol exception " << e.what() << " for input " << hex_prefix(bytes);
  }
}

MessageType random_type(Rng& rng) {
  return static_cast<MessageType>(1 + rng.below(static_cast<uint8_t>(MessageType::Complete)));
}

TEST(ProtocolFuzz, MutatedBytes) {
  const std::vector<Sample> all = corpus();
  Rng rng = Rng::stream(kSeed, Purpose::Generic, 1);
  Outcome o;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 40000; ++i) {
    const Sample& s = all[rng.below(all.size())];
    const std::string m = mutate_bytes(s.bytes, all, rng);
    // Mostly the type the bytes were made for; sometimes another, as a confused peer would send.
    feed(s.target, rng.below(8) == 0 ? random_type(rng) : s.type, m, o);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(o.failures, 0);
  EXPECT_LT(seconds, 20.0);
  // The fuzzer reaches past the parser into every layer of validation. (A renamed key is
  // reported missing before it could be reported unknown; MutatedStructure covers that code.)
  for (auto code : {ProtocolErrorCode::Malformed, ProtocolErrorCode::Truncated, ProtocolErrorCode::TrailingBytes,
                    ProtocolErrorCode::WrongType, ProtocolErrorCode::MissingField,
                    ProtocolErrorCode::DimensionMismatch, ProtocolErrorCode::InvalidValue, ProtocolErrorCode::NonFinite})
    EXPECT_GT(o.codes[code], 0) << to_string(code);
  EXPECT_GT(o.decoded, 0);  // flips inside tensor data still decode: values, not structure
}

TEST(ProtocolFuzz, MutatedStructure) {
  Rng rng = Rng::stream(kSeed, Purpose::Generic, 2);
  std::vector<Value> seeds = {test::prototypes_value(), test::stats_value(), test::gmm_value("diag"),
                              test::gmm_value("full"), test::gmm_sketch_value()};
  Outcome o;
  for (int i = 0; i < 20000; ++i) {
    Value v = seeds[rng.below(seeds.size())];
    for (uint64_t r = 1 + rng.below(3); r > 0; --r) mutate_tree(v, rng);
    feed(Target::Payload, rng.below(8) == 0 ? random_type(rng) : MessageType::Knowledge, test::pack(v), o);
  }
  EXPECT_EQ(o.failures, 0);
  for (auto code : {ProtocolErrorCode::WrongType, ProtocolErrorCode::MissingField, ProtocolErrorCode::UnknownField,
                    ProtocolErrorCode::InvalidValue, ProtocolErrorCode::DimensionMismatch})
    EXPECT_GT(o.codes[code], 0) << to_string(code);
}

TEST(ProtocolFuzz, RandomBytes) {
  Rng rng = Rng::stream(kSeed, Purpose::Generic, 3);
  Outcome o;
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng.below(400), '\0');
    for (char& c : s) c = static_cast<char>(rng.below(256));
    // Half start like a real payload or frame so that parsing gets somewhere.
    if (!s.empty() && rng.below(2) == 0) s[0] = static_cast<char>(rng.below(3) == 0 ? 0x94 : rng.below(2) ? 0x86 : 0x95);
    const Target target = static_cast<Target>(rng.below(4));
    feed(target, random_type(rng), s, o);
  }
  EXPECT_EQ(o.failures, 0);
}

}  // namespace
}  // namespace fednode
