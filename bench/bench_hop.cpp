// One hop of a large FedPFT message between two nodes, against the same bytes over plain ZeroMQ,
// in the same run (issue 3, acceptance 4).
//
//   fednode: SecureChannel::seal (encode_payload + XChaCha20-Poly1305, float16 tensors) on node A,
//            A's Transport sends the frame (its DEALER to B's ROUTER, TCP loopback), B's Transport
//            receives it, SecureChannel::open_in_place on B as the node does (header checks,
//            decrypt in the received frame, decode into Knowledge).
//   raw:     a buffer of exactly the frame's size, sent DEALER -> ROUTER over TCP loopback between
//            two contexts with the transport's socket options, copied into a zmq message and
//            received as Transport does it (poll, then read the parts), no encoding, no crypto.
//
// The acknowledgement that a node sends back is not part of the hop, and neither is destroying
// the frame and the decoded knowledge afterwards.
//
// Memory: how much of a multi-megabyte message's cost is page faults depends on whether the
// allocator hands back pages it has touched before, and glibc decides that with thresholds that
// move with the sizes freed so far, so that an unrelated change in allocation sizes can shift the
// hop by a third. --memory fixes the policy, for both contenders alike:
//   cold (default): glibc's default thresholds, held fixed (128 KiB): every buffer of a message
//        is fresh memory, as for a node that receives one such message in its life;
//   warm: freed memory is kept and reused, as in a process that moves such messages all the time.
// The two contenders take turns (their order
// alternating) so that background load on a shared machine hits both alike. After the hops the
// stages are timed one by one on the same data (encode, encrypt, decrypt, decode, and a memcpy of
// the frame for scale), to show where the time goes.
//
// Usage: bench_hop [--reps R] [--warmup W] [--classes C] [--components K] [--dim D]
//                  [--memory cold|warm] [--json FILE]
#include "core/float16.h"
#include "core/rng.h"
#include "node/secure_channel.h"
#include "node/socket_options.h"
#include "node/transport.h"

#include "bench_common.h"

#include <zmq.hpp>

#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace fednode;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

using fednode::bench::median;
double minimum(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "bench_hop: %s\n", why.c_str());
  std::exit(1);
}

double to_half_and_back(double v) { return half_to_float(float_to_half(static_cast<float>(v))); }

// FedPFT knowledge of one node: C classes, K diagonal components each, every value an exact
// float16 number, so that the float16 transfer is lossless and the decoded copy can be compared
// for equality.
Knowledge make_knowledge(int C, int K, int d) {
  Knowledge k;
  k.contributors = {0};
  k.backbone_fingerprint = "bench_hop";
  k.dim = d;
  k.num_classes = C;
  GmmKnowledge g;
  for (int c = 0; c < C; ++c) {
    Rng rng = Rng::stream(7, Purpose::Generic, 0, static_cast<uint64_t>(c));
    ClassMixture m;
    m.label = c;
    m.count = 500 + static_cast<int64_t>(rng.below(500));
    GaussianMixture& gm = m.mixture;
    gm.type = CovarianceType::Diag;
    gm.weights.resize(K);
    for (int j = 0; j < K; ++j) gm.weights[j] = 0.5 + rng.uniform();
    gm.weights /= gm.weights.sum();
    for (int j = 0; j < K; ++j) gm.weights[j] = to_half_and_back(gm.weights[j]);  // sum stays within 1e-3 of 1
    gm.means.resize(K, d);
    gm.covariances.resize(K, d);
    for (int j = 0; j < K; ++j)
      for (int i = 0; i < d; ++i) {
        gm.means(j, i) = to_half_and_back(2.0 * rng.normal());
        gm.covariances(j, i) = to_half_and_back(0.05 + 2.0 * rng.uniform());
      }
    g.classes.push_back(std::move(m));
  }
  k.payload = std::move(g);
  return k;
}

bool same_knowledge(const Knowledge& a, const Knowledge& b) {
  if (a.contributors != b.contributors || a.dim != b.dim || a.num_classes != b.num_classes ||
      a.backbone_fingerprint != b.backbone_fingerprint)
    return false;
  const auto& ga = std::get<GmmKnowledge>(a.payload);
  const auto* gb = std::get_if<GmmKnowledge>(&b.payload);
  if (!gb || ga.classes.size() != gb->classes.size()) return false;
  for (size_t c = 0; c < ga.classes.size(); ++c) {
    const auto &x = ga.classes[c], &y = gb->classes[c];
    if (x.label != y.label || x.count != y.count || x.mixture.type != y.mixture.type ||
        x.mixture.weights != y.mixture.weights || x.mixture.means != y.mixture.means ||
        x.mixture.covariances != y.mixture.covariances)
      return false;
  }
  return true;
}

// A free TCP port on loopback: bind port 0 and close again. A plain socket, because ZeroMQ closes
// its sockets asynchronously and the port could still be taken when the transport binds it.
std::string free_endpoint() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    die(std::string("cannot find a free port on 127.0.0.1: ") + std::strerror(errno));
  ::close(fd);
  return "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

// Plain ZeroMQ with the socket types and options of node/transport.cpp, in two contexts like two
// nodes' transports.
struct RawLink {
  zmq::context_t sender_ctx{1}, receiver_ctx{1};
  zmq::socket_t router{receiver_ctx, zmq::socket_type::router};
  zmq::socket_t dealer{sender_ctx, zmq::socket_type::dealer};

  explicit RawLink(const std::string& endpoint) {
    const TransportOptions o;
    apply_socket_options(router, o);
    router.set(zmq::sockopt::router_mandatory, 1);
    router.bind(endpoint);
    apply_socket_options(dealer, o);
    dealer.set(zmq::sockopt::immediate, 1);
    dealer.set(zmq::sockopt::sndhwm, 4);
    dealer.connect(endpoint);
  }

  bool send(const std::string& bytes) {
    zmq::message_t m(bytes.data(), bytes.size());
    return dealer.send(m, zmq::send_flags::dontwait).has_value();
  }

  // The data part of the next message, as Transport::receive finds it (poll, then the parts).
  bool receive(zmq::message_t& data, std::chrono::milliseconds timeout) {
    zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, timeout);
    if (!(item.revents & ZMQ_POLLIN)) return false;
    zmq::message_t id;
    if (!router.recv(id, zmq::recv_flags::dontwait) || !id.more()) return false;
    if (!router.recv(data, zmq::recv_flags::dontwait)) return false;
    return !data.more();
  }
};

struct Series {
  std::vector<double> v;
  double med() const { return median(v); }
  double min() const { return minimum(v); }
};

}  // namespace

int bench_main(int argc, char** argv) {
  int reps = 20, warmup = 3, C = 100, K = 10, d = 1280;
  std::string json_path, memory = "cold";
  if (fednode::bench::wants_help(argc, argv)) {
    std::printf("usage: bench_hop [--reps 20] [--warmup 3] [--classes 100] [--components 10] [--dim 1280] [--memory cold|warm (cold)] [--json FILE]\n");
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) die(flag + " needs a value");
    const char* value = argv[++i];
    if (flag == "--reps") reps = fednode::bench::parse_int("bench_hop", "--reps", value, 1, 1L << 20);
    else if (flag == "--warmup") warmup = fednode::bench::parse_int("bench_hop", "--warmup", value, 0, 1L << 20);
    else if (flag == "--classes") C = fednode::bench::parse_int("bench_hop", "--classes", value, 1, 1L << 20);
    else if (flag == "--components") K = fednode::bench::parse_int("bench_hop", "--components", value, 1, 1L << 20);
    else if (flag == "--dim") d = fednode::bench::parse_int("bench_hop", "--dim", value, 1, 16384);
    else if (flag == "--json") json_path = value, fednode::bench::require_writable("bench_hop", "--json", json_path);
    else if (flag == "--memory") memory = value;
    else {
      std::fprintf(stderr, "usage: bench_hop [--reps R] [--warmup W] [--classes C] [--components K] [--dim D] "
                           "[--memory cold|warm] [--json FILE]\n");
      return 2;
    }
  }
  // Setting a threshold also stops glibc from moving it (mallopt(3)).
  if (memory == "cold") {
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  } else if (memory == "warm") {
    mallopt(M_MMAP_THRESHOLD, 512 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
  } else {
    die("--memory must be cold or warm, got '" + memory + "'");
  }

  const Knowledge knowledge = make_knowledge(C, K, d);
  EncodeOptions f16;
  f16.precision = Precision::Float16;

  // Two nodes, 0 (A, sender) and 1 (B, receiver), that know each other.
  Identity id_a = Identity::generate(), id_b = Identity::generate();
  PeerKeys peers{{0, id_a.public_key()}, {1, id_b.public_key()}};
  const RunId run = derive_run_id("bench_hop");
  const MessageKeys send_keys = MessageKeys::for_sending(id_a, id_b.public_key());
  const MessageKeys receive_keys = MessageKeys::for_receiving(id_b, id_a.public_key());
  const SecureChannel node_a(std::move(id_a), 0, run, peers);
  const SecureChannel node_b(std::move(id_b), 1, run, peers);
  ReplayGuard guard;
  uint64_t msg_id = 1;

  const std::string addr_a = free_endpoint(), addr_b = free_endpoint(), addr_raw = free_endpoint();
  Transport transport_a(0, addr_a), transport_b(1, addr_b);
  transport_a.add_peer(1, addr_b);
  RawLink raw(addr_raw);

  // Connections up (ZMQ_IMMEDIATE refuses to queue until they are) and one frame through each.
  const std::string first = node_a.seal(1, msg_id++, knowledge, f16);
  const size_t frame_bytes = first.size();
  const std::string raw_bytes(frame_bytes, '\x5a');
  {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!transport_a.send(1, first)) {
      if (Clock::now() > deadline) die("node A's transport never connected to " + addr_b);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    auto in = transport_b.receive(std::chrono::seconds(10));
    if (!in) die("node B received nothing");
    const Payload payload = decode_opened(node_b.open_in_place(in->frame.data(), in->frame.size(), guard), Limits{});
    if (!same_knowledge(knowledge, std::get<Knowledge>(payload)))
      die("the knowledge B decoded differs from what A sent");
    while (!raw.send(raw_bytes)) {
      if (Clock::now() > deadline) die("the raw DEALER never connected to " + addr_raw);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    zmq::message_t data;
    if (!raw.receive(data, std::chrono::seconds(10)) || data.size() != frame_bytes) die("raw receive failed");
  }

  // A socket whose one-frame queue is still full (libzmq gives the credit back only after the
  // peer has read, asynchronously) refuses a send at once: both sides try again until it goes.
  auto send_until_taken = [&](auto&& send, const char* who) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!send()) {
      if (Clock::now() > deadline) die(std::string(who) + " refused the frame for 10 s");
      std::this_thread::yield();
    }
  };
  Series hop, seal_s, transport_s, open_s, raw_hop;
  auto fednode_hop = [&](bool record) {
    const auto t0 = Clock::now();
    const std::string frame = node_a.seal(1, msg_id++, knowledge, f16);
    const double t_seal = since(t0);
    const auto t1 = Clock::now();
    send_until_taken([&] { return transport_a.send(1, frame); }, "node A's transport");
    auto in = transport_b.receive(std::chrono::seconds(10));
    if (!in) die("node B received nothing within 10 s");
    const double t_transport = since(t1);
    const auto t2 = Clock::now();
    const OpenedFrame opened = node_b.open_in_place(in->frame.data(), in->frame.size(), guard);
    const Payload payload = decode_opened(opened, Limits{});
    guard.accept(opened.header.from, opened.header.msg_id);
    const double t_open = since(t2);
    if (record) {
      seal_s.v.push_back(t_seal);
      transport_s.v.push_back(t_transport);
      open_s.v.push_back(t_open);
      hop.v.push_back(t_seal + t_transport + t_open);
    }
    if (in->frame.size() != frame_bytes) die("frame size changed between messages");
  };
  auto raw_hop_once = [&](bool record) {
    zmq::message_t data;
    const auto t0 = Clock::now();
    send_until_taken([&] { return raw.send(raw_bytes); }, "the raw DEALER");
    if (!raw.receive(data, std::chrono::seconds(10))) die("raw: nothing received within 10 s");
    const double t = since(t0);
    if (data.size() != frame_bytes) die("raw: wrong size received");
    if (record) raw_hop.v.push_back(t);
  };
  for (int r = 0; r < warmup + reps; ++r) {
    const bool record = r >= warmup;
    if (r % 2 == 0) {
      fednode_hop(record);
      raw_hop_once(record);
    } else {
      raw_hop_once(record);
      fednode_hop(record);
    }
  }

  // The stages one by one, through the public APIs the channel itself calls.
  Series encode_s, encrypt_s, decrypt_s, decode_s, copy_s;
  {
    EnvelopeHeader header;
    header.type = MessageType::Knowledge;
    header.from = 0;
    header.to = 1;
    header.msg_id = 1;
    header.run = run;
    const std::string header_bytes = encode_header(header);
    const std::string plaintext = encode_payload(knowledge, f16);
    std::string ciphertext(plaintext.size() + kSealAeadTagBytes, '\0');
    std::string copy(frame_bytes, '\0');
    uint8_t nonce[kSealNonceBytes], tag[kSealHeaderTagBytes];
    for (int r = 0; r < warmup + reps; ++r) {
      const bool record = r >= warmup;
      auto t = Clock::now();
      const std::string p = encode_payload(knowledge, f16);
      if (record) encode_s.v.push_back(since(t));
      t = Clock::now();
      seal_into(send_keys, header_bytes, plaintext, nonce, tag, ciphertext.data());
      if (record) encrypt_s.v.push_back(since(t));
      const SealedView view{std::string_view(reinterpret_cast<const char*>(nonce), kSealNonceBytes),
                            std::string_view(reinterpret_cast<const char*>(tag), kSealHeaderTagBytes), ciphertext};
      t = Clock::now();
      const std::string opened = fednode::open(receive_keys, header_bytes, view);
      if (record) decrypt_s.v.push_back(since(t));
      t = Clock::now();
      const Payload decoded = decode_payload(header, opened, Limits{});
      if (record) decode_s.v.push_back(since(t));
      t = Clock::now();
      std::memcpy(copy.data(), raw_bytes.data(), frame_bytes);
      if (record) copy_s.v.push_back(since(t));
      if (opened != plaintext || p != plaintext) die("stage timing: round trip changed the payload");
    }
  }

  const double ratio_med = hop.med() / raw_hop.med(), ratio_min = hop.min() / raw_hop.min();
  const double mb = static_cast<double>(frame_bytes) / 1e6;
  std::printf("One hop of FedPFT knowledge: C=%d, K=%d, d=%d, diagonal, float16; frame %zu bytes (%.2f MB); "
              "%d hops each after %d warm-up, interleaved; memory %s\n",
              C, K, d, frame_bytes, mb, reps, warmup, memory.c_str());
  std::printf("%-44s %10s %10s %10s\n", "", "median ms", "min ms", "MB/s (med)");
  auto row = [&](const char* name, const Series& s) {
    std::printf("%-44s %10.3f %10.3f %10.0f\n", name, 1e3 * s.med(), 1e3 * s.min(), mb / s.med());
  };
  row("fednode hop (seal + transport + open)", hop);
  row("  seal (encode + encrypt) on A", seal_s);
  row("  transport (A send -> B receive)", transport_s);
  row("  open (checks + decrypt + decode) on B", open_s);
  row("raw ZeroMQ, same bytes", raw_hop);
  std::printf("%-44s %10.2fx %9.2fx\n", "ratio fednode / raw", ratio_med, ratio_min);
  std::printf("stages alone, same data:\n");
  row("  encode_payload (float16)", encode_s);
  row("  encrypt (XChaCha20-Poly1305, seal_into)", encrypt_s);
  row("  decrypt (open)", decrypt_s);
  row("  decode_payload", decode_s);
  row("  memcpy of the frame (for scale)", copy_s);
  std::printf("target: at most 1.5x -> %s\n", ratio_med <= 1.5 ? "met" : "missed");

  if (!json_path.empty()) {
    std::ofstream out(json_path);
    if (!out) die("cannot write '" + json_path + "'");
    auto series = [&](const char* name, const Series& s, bool last = false) {
      out << "    \"" << name << "\": {\"median_s\": " << s.med() << ", \"min_s\": " << s.min() << "}"
          << (last ? "\n" : ",\n");
    };
    out.precision(9);
    out << "{\n  \"classes\": " << C << ", \"components\": " << K << ", \"dim\": " << d
        << ", \"covariance\": \"diag\", \"precision\": \"float16\",\n  \"frame_bytes\": " << frame_bytes
        << ", \"memory\": \"" << memory << "\", \"reps\": " << reps << ", \"warmup\": " << warmup << ",\n  \"ratio_median\": " << ratio_med
        << ", \"ratio_min\": " << ratio_min << ",\n  \"timings\": {\n";
    series("fednode_hop", hop);
    series("seal", seal_s);
    series("transport", transport_s);
    series("open", open_s);
    series("raw_zeromq", raw_hop);
    series("encode_payload", encode_s);
    series("encrypt", encrypt_s);
    series("decrypt", decrypt_s);
    series("decode_payload", decode_s);
    series("memcpy", copy_s, true);
    out << "  }\n}\n";
  }
  return 0;
}

int main(int argc, char** argv) {
  return fednode::bench::guarded("bench_hop", [&] { return bench_main(argc, argv); });
}
