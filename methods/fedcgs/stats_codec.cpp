#include "methods/fedcgs/stats_codec.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace fednode {
namespace {

// Ring elements (core/fixed_ring.h) as one bin: 16 bytes each, the low 64-bit word first, both
// little-endian (docs/protocol.md 6.2, "Masked statistics").
void write_ring(BodyWriter& w, const std::vector<Ring128>& v) {
  std::string bytes(v.size() * 16, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint64_t lo = ring_low(v[i]), hi = ring_high(v[i]);
    for (int b = 0; b < 8; ++b) {
      bytes[16 * i + static_cast<size_t>(b)] = static_cast<char>(lo >> (8 * b));
      bytes[16 * i + 8 + static_cast<size_t>(b)] = static_cast<char>(hi >> (8 * b));
    }
  }
  w.bytes(bytes);
}

std::vector<Ring128> read_ring(BodyValue& v, size_t count) {
  const std::string_view bytes = v.bytes();
  if (bytes.size() != count * 16)
    wire_fail(ProtocolErrorCode::DimensionMismatch, v.path() + ": " + std::to_string(bytes.size()) +
                                                        " bytes, expected " + std::to_string(count) +
                                                        " ring elements of 16");
  std::vector<Ring128> out(count);
  for (size_t i = 0; i < count; ++i) {
    uint64_t lo = 0, hi = 0;
    for (int b = 7; b >= 0; --b) {
      lo = (lo << 8) | static_cast<uint8_t>(bytes[16 * i + static_cast<size_t>(b)]);
      hi = (hi << 8) | static_cast<uint8_t>(bytes[16 * i + 8 + static_cast<size_t>(b)]);
    }
    out[i] = ring_from_words(lo, hi);
  }
  return out;
}

void write_masked(BodyWriter& w, const MaskedStats& m) {
  w.map(m.counts_only ? 3 : 5);
  w.text("group");
  write_contributors(w, m.group);
  w.text("parts");
  w.text(m.counts_only ? "counts" : "all");
  w.text("N");
  write_ring(w, m.N);
  if (m.counts_only) return;
  w.text("A");
  write_ring(w, m.A);
  w.text("B");
  write_ring(w, m.B);
}

MaskedStats read_masked(BodyValue& m, uint64_t C, uint64_t d, const Limits& limits) {
  MaskedStats masked;
  masked.group = read_contributors(*m.at("group"), limits);
  const std::string parts = m.at("parts")->text();
  if (parts != "all" && parts != "counts")
    wire_fail(ProtocolErrorCode::InvalidValue, m.path("parts") + ": '" + printable_text(parts) + "', expected all or counts");
  masked.counts_only = parts == "counts";
  masked.N = read_ring(*m.at("N"), C);
  if (!masked.counts_only) {
    masked.A = read_ring(*m.at("A"), checked_mul(C, d, m.path("A")));
    masked.B = read_ring(*m.at("B"), checked_mul(d, d + 1, m.path("B")) / 2);
  }
  m.finish();
  return masked;
}

void read_noise(BodyValue& v, StatsKnowledge& s) {
  const uint32_t n = v.items();
  if (n != 3) wire_fail(ProtocolErrorCode::InvalidValue, v.path() + ": " + std::to_string(n) + " variances, expected 3");
  double* into[3] = {&s.noise.a, &s.noise.n, &s.noise.b};
  for (uint32_t i = 0; i < 3; ++i) {
    const auto item = v.item(i);
    *into[i] = item->real();
    if (*into[i] < 0) wire_fail(ProtocolErrorCode::InvalidValue, item->path() + ": a variance is negative");
  }
  if (!s.noise.any())
    wire_fail(ProtocolErrorCode::InvalidValue, v.path() + ": present but all zero (exact statistics carry none)");
}

// DP-FedCGS's noisy counts may be negative (docs/protocol.md, 6.2), down to -max_samples.
std::vector<int64_t> read_counts(BodyValue& N, uint64_t C, bool noisy, const Limits& limits) {
  const uint32_t n = N.items();
  if (n != C)
    wire_fail(ProtocolErrorCode::DimensionMismatch, N.path() + ": " + std::to_string(n) + " counts for " +
                                                        std::to_string(C) + " classes");
  std::vector<int64_t> out(static_cast<size_t>(C), 0);
  uint64_t samples = 0;
  for (uint32_t c = 0; c < n; ++c) {
    const auto item = N.item(c);
    const int64_t v = noisy ? item->integer() : static_cast<int64_t>(item->uint());
    if (v < 0 && v < -static_cast<int64_t>(limits.max_samples))
      wire_fail(ProtocolErrorCode::TooLarge, item->path() + ": " + std::to_string(v) + " is beyond -max_samples");
    if (v >= 0) add_samples(samples, static_cast<uint64_t>(v), item->path(), limits);
    out[c] = v;
  }
  return out;
}

}  // namespace

void StatsCodec::write(const Knowledge& k, BodyWriter& w) const {
  const auto& s = std::get<StatsKnowledge>(k.payload);
  const uint64_t C = static_cast<uint64_t>(s.A.rows()), d = static_cast<uint64_t>(s.A.cols());
  const bool noisy = s.noise.any();
  // A masked part travels only in the ring: its plain counterpart, all zero, is left out.
  const bool plain_a_b = !s.masked || s.masked->counts_only;
  w.map((plain_a_b ? 2 : 0) + (s.masked ? 0 : 1) + (noisy ? 1 : 0) + (s.masked ? 1 : 0));
  if (plain_a_b) {
    w.text("A");
    w.tensor(WireFloat::F64, WireLayout::Dense, WireShape{C, d}, s.A.data(), "knowledge.body.A");
  }
  if (!s.masked) {
    w.text("N");
    w.array(static_cast<uint32_t>(s.N.size()));
    for (int64_t n : s.N) w.integer(n);
  }
  if (plain_a_b) {
    w.text("B");
    w.tensor(WireFloat::F64, WireLayout::Upper, WireShape{d, d}, s.B.data(), "knowledge.body.B");
  }
  if (s.masked) {
    w.text("masked");
    write_masked(w, *s.masked);
  }
  if (!noisy) return;
  w.text("noise");
  w.array(3);
  w.real(s.noise.a);
  w.real(s.noise.n);
  w.real(s.noise.b);
}

KnowledgePayload StatsCodec::read(BodyValue& body, const Knowledge& k, BodyReader& r) const {
  const uint64_t C = static_cast<uint64_t>(k.num_classes), d = static_cast<uint64_t>(k.dim);
  StatsKnowledge s;
  // Secure aggregation: the masked parts travel in the ring, and their plain ones are left out.
  if (const auto masked = body.find("masked")) s.masked = read_masked(*masked, C, d, r.limits());
  const bool plain_a_b = !s.masked || s.masked->counts_only, plain_n = !s.masked;
  if (!plain_a_b && (body.find("A") || body.find("B")))
    wire_fail(ProtocolErrorCode::InvalidValue,
              body.path() + ": A and B travel masked; plain ones as well would say them twice");
  if (!plain_n && body.find("N"))
    wire_fail(ProtocolErrorCode::InvalidValue, body.path() + ": N travels masked; a plain N as well would say it twice");
  std::optional<BodyTensor> A, B;
  if (plain_a_b) {
    A = body.at("A")->tensor();
    B = body.at("B")->tensor();
  }
  std::unique_ptr<BodyValue> N = plain_n ? body.at("N") : nullptr;
  if (N) N->items();  // an array, or WrongType before the noise is read
  if (const auto noise = body.find("noise")) read_noise(*noise, s);
  body.finish();
  const auto rows = static_cast<Eigen::Index>(C), cols = static_cast<Eigen::Index>(d);
  if (plain_a_b) {
    // Additive statistics must stay exact (docs/architecture.md): nothing narrower than float64.
    r.expect_dtype(*A, WireFloat::F64);
    r.expect_dtype(*B, WireFloat::F64);
    r.expect_shape(*A, {C, d}, WireLayout::Dense);
    r.expect_shape(*B, {d, d}, WireLayout::Upper);
  }
  s.N = N ? read_counts(*N, C, s.noise.any(), r.limits()) : std::vector<int64_t>(static_cast<size_t>(C), 0);
  if (plain_a_b) {
    s.A.resize(rows, cols);
    s.B.resize(cols, cols);
    r.unpack(*A, s.A.data());
    r.unpack(*B, s.B.data());
  } else {
    s.A = MatrixD::Zero(rows, cols);
    s.B = MatrixD::Zero(cols, cols);
  }
  return s;
}

void StatsCodec::check(const Knowledge& k, const std::string& where, bool check_values) const {
  const auto& s = std::get<StatsKnowledge>(k.payload);
  expect_dims(s.A, k.num_classes, k.dim, where + ".body.A");
  expect_dims(s.B, k.dim, k.dim, where + ".body.B");
  if (s.N.size() != static_cast<size_t>(k.num_classes))
    wire_fail(ProtocolErrorCode::DimensionMismatch, where + ".body.N: " + std::to_string(s.N.size()) + " counts for " +
                                                        std::to_string(k.num_classes) + " classes");
  // DP-FedCGS's noisy counts may be negative (docs/protocol.md, 6.2).
  for (size_t c = 0; c < s.N.size(); ++c)
    if (s.N[c] < 0 && !s.noise.any())
      wire_fail(ProtocolErrorCode::InvalidValue, where + ".body.N[" + std::to_string(c) + "]: negative");
  for (double v : {s.noise.a, s.noise.n, s.noise.b})
    if (!(v >= 0) || !std::isfinite(v))
      wire_fail(ProtocolErrorCode::InvalidValue, where + ".body.noise: a variance is negative, NaN or Inf");
  if (const auto& m = s.masked) {
    const size_t C = static_cast<size_t>(k.num_classes), d = static_cast<size_t>(k.dim);
    if (m->group.empty()) wire_fail(ProtocolErrorCode::InvalidValue, where + ".body.masked.group: empty");
    if (m->N.size() != C || m->A.size() != (m->counts_only ? 0 : C * d) ||
        m->B.size() != (m->counts_only ? 0 : d * (d + 1) / 2))
      wire_fail(ProtocolErrorCode::DimensionMismatch, where + ".body.masked: parts of the wrong size");
    // The masked parts' plain counterparts are left off the wire: they must hold nothing.
    const bool plain_left_out_empty = std::all_of(s.N.begin(), s.N.end(), [](int64_t n) { return n == 0; }) &&
                                      (m->counts_only || (s.A.isZero(0.0) && s.B.isZero(0.0)));
    if (!plain_left_out_empty)
      wire_fail(ProtocolErrorCode::InvalidValue, where + ".body: a masked part's plain counterpart is not zero");
  }
  if (check_values) {
    expect_finite(s.A, where + ".body.A");
    expect_finite(s.B, where + ".body.B");
  }
}

void StatsCodec::bound(const Knowledge& k, const Limits& limits, const std::string& where, uint64_t& samples) const {
  for (int64_t n : std::get<StatsKnowledge>(k.payload).N)
    add_samples(samples, static_cast<uint64_t>(std::max<int64_t>(n, 0)), where + ".body.N", limits);
}

size_t StatsCodec::entries(const Knowledge& k) const { return std::get<StatsKnowledge>(k.payload).N.size(); }

}  // namespace fednode
