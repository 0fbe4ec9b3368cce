// One hop of a large FedPFT message between two nodes, against the same bytes over plain ZeroMQ,
// in the same run (issue 3, acceptance 4; issue 25, section 4).
//
//   fednode: SecureChannel::seal (encode_payload + XChaCha20-Poly1305, float16 tensors) on node A,
//            A's Transport sends the frame (its DEALER to B's ROUTER, TCP loopback), B's Transport
//            receives it, SecureChannel::open_in_place on B as the node does (header checks,
//            decrypt in the received frame, decode into Knowledge).
//   v2:      the same message as a protocol-version-2 stream (node/secure_stream.h): A, on a
//            thread of its own, encodes the structure and hands the stream to its transport,
//            which takes 256 KiB chunks as its queue has room while A seals them in batches on
//            the pool; B opens each batch of chunks as it arrives and decodes after the last.
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
// Each contender's CPU time per hop (every thread of this process: both ends, ZeroMQ's I/O
// threads, the pool) is reported too: on loopback the two ends share the cores.
//
// Usage: bench_hop [--reps R] [--warmup W] [--classes C] [--components K] [--dim D]
//                  [--memory cold|warm] [--chunk BYTES] [--stream-encode chunks|whole]
//                  [--cipher aes-256-gcm|chacha20-poly1305] [--json FILE]
#include "core/float16.h"
#include "core/rng.h"
#include "node/secure_channel.h"
#include "node/secure_stream.h"
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
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
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

// Node A's side of a streamed hop runs on a thread of its own, as it would in its own process:
// it seals chunks while B opens the ones before. run() hands it one job and returns at once.
class SenderThread {
 public:
  SenderThread() : thread_([this] { loop(); }) {}
  ~SenderThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void run(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = std::move(job);
    }
    wake_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return !job_; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || job_; });
      if (stop_) return;
      lock.unlock();
      job_();
      lock.lock();
      job_ = nullptr;
      done_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::function<void()> job_;
  bool stop_ = false;
  std::thread thread_;
};

struct Series {
  std::vector<double> v;
  double med() const { return median(v); }
  double min() const { return minimum(v); }
};

}  // namespace

int bench_main(int argc, char** argv) {
  int reps = 20, warmup = 3, C = 100, K = 10, d = 1280;
  uint32_t chunk = kDefaultStreamChunk;
  bool encode_whole = false;
  StreamCipher cipher = available_stream_ciphers().front();
  std::string json_path, memory = "cold";
  if (fednode::bench::wants_help(argc, argv)) {
    std::printf("usage: bench_hop [--reps 20] [--warmup 3] [--classes 100] [--components 10] [--dim 1280] [--memory cold|warm (cold)] [--chunk 262144] [--stream-encode chunks|whole] [--cipher aes-256-gcm|chacha20-poly1305] [--json FILE]\n");
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
    else if (flag == "--stream-encode") {
      if (std::string(value) != "whole" && std::string(value) != "chunks") die("--stream-encode: whole or chunks");
      encode_whole = std::string(value) == "whole";
    } else if (flag == "--chunk")
      chunk = static_cast<uint32_t>(
          fednode::bench::parse_int("bench_hop", "--chunk", value, kMinStreamChunk, kMaxStreamChunk));
    else if (flag == "--cipher") {
      const auto named = stream_cipher_named(value);
      if (!named || !stream_cipher_available(*named))
        die(std::string("--cipher: '") + value + "' is not a cipher this machine has (aes-256-gcm, chacha20-poly1305)");
      cipher = *named;
    }
    else {
      std::fprintf(stderr, "usage: bench_hop [--reps R] [--warmup W] [--classes C] [--components K] [--dim D] "
                           "[--memory cold|warm] [--chunk BYTES] [--stream-encode chunks|whole] [--cipher NAME] [--json FILE]\n");
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
  // CPU of every thread of this process (both ends, their ZeroMQ I/O threads, the pool), per hop:
  // on loopback both nodes share this machine's cores, so a hop can take no less wall time than
  // its CPU time divided by the cores.
  Series hop_cpu, stream_cpu, raw_cpu;
  using fednode::bench::cpu_seconds;
  auto fednode_hop = [&](bool record) {
    const double c0 = cpu_seconds();
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
      hop_cpu.v.push_back(cpu_seconds() - c0);
    }
    if (in->frame.size() != frame_bytes) die("frame size changed between messages");
  };
  // Version 2: A encodes, then seals chunk after chunk as its queue takes them, on its own thread;
  // B opens each chunk as it arrives and decodes once the last is in.
  SenderThread sender;
  const auto shared_knowledge = std::make_shared<const Knowledge>(knowledge);
  Series stream_hop, stream_encode, stream_head, stream_opened, stream_decode;
  size_t stream_bytes = 0, stream_messages = 0;
  auto streamed_hop = [&](bool record, bool check) {
    const uint64_t id = msg_id++;
    double t_encode = 0;
    const double c0 = cpu_seconds();
    const auto t0 = Clock::now();
    sender.run([&] {
      std::unique_ptr<OutgoingMessages> s =
          encode_whole
              ? node_a.seal_stream(1, id, MessageType::Knowledge, encode_payload(knowledge, f16), cipher, chunk)
              : node_a.seal_stream(1, id, MessageType::Knowledge, shared_knowledge, f16, cipher, chunk);
      t_encode = since(t0);
      stream_messages = s->count();
      stream_bytes = 0;
      for (size_t i = 0; i < s->count(); ++i) stream_bytes += s->size(i);
      const auto deadline = Clock::now() + std::chrono::seconds(10);
      while (!transport_a.send(1, s)) {
        if (Clock::now() > deadline) die("node A's transport never took the stream");
        std::this_thread::yield();
      }
      while (transport_a.sending(1)) transport_a.receive(std::chrono::milliseconds(5));
    });
    std::unique_ptr<IncomingStream> stream;
    std::optional<Payload> payload;
    double t_head = 0, t_opened = 0;
    while (!payload) {
      auto in = transport_b.receive(std::chrono::seconds(10));
      if (!in) die("node B received no stream message within 10 s");
      if (!stream) {
        auto head = node_b.open_head(in->frame.data(), in->frame.size(), guard);
        t_head = since(t0);
        if (auto* opened = std::get_if<OpenedFrame>(&head)) {
          t_opened = since(t0);
          payload = decode_opened(*opened, Limits{});
          break;
        }
        stream = std::move(std::get<std::unique_ptr<IncomingStream>>(head));
      } else {
        const ChunkView chunk = decode_chunk(in->frame.view(), Limits{});
        stream->add(chunk, std::move(in->frame));
      }
      if (stream->complete()) {
        t_opened = since(t0);
        payload = decode_opened(stream->opened(), Limits{});
      }
    }
    const double t = since(t0);
    sender.wait();
    const double cpu = cpu_seconds() - c0;
    guard.accept(0, id);
    if (check && !same_knowledge(knowledge, std::get<Knowledge>(*payload)))
      die("the streamed knowledge B decoded differs from what A sent");
    if (record) {
      stream_hop.v.push_back(t);
      stream_encode.v.push_back(t_encode);
      stream_head.v.push_back(t_head);
      stream_opened.v.push_back(t_opened);
      stream_decode.v.push_back(t - t_opened);
      stream_cpu.v.push_back(cpu);
    }
  };
  streamed_hop(false, true);
  auto raw_hop_once = [&](bool record) {
    zmq::message_t data;
    const double c0 = cpu_seconds();
    const auto t0 = Clock::now();
    send_until_taken([&] { return raw.send(raw_bytes); }, "the raw DEALER");
    if (!raw.receive(data, std::chrono::seconds(10))) die("raw: nothing received within 10 s");
    const double t = since(t0);
    if (data.size() != frame_bytes) die("raw: wrong size received");
    if (record) {
      raw_hop.v.push_back(t);
      raw_cpu.v.push_back(cpu_seconds() - c0);
    }
  };
  for (int r = 0; r < warmup + reps; ++r) {
    const bool record = r >= warmup;
    if (r % 2 == 0) {
      fednode_hop(record);
      streamed_hop(record, false);
      raw_hop_once(record);
    } else {
      raw_hop_once(record);
      streamed_hop(record, false);
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

  // Every chunk sealed alone, for the cipher's cost.
  Series chunks_s;
  {
    const std::string plaintext = encode_payload(knowledge, f16);
    std::string out(plaintext.size(), '\0');
    uint8_t nonce[kStreamNonceBytes], tag[kStreamTagBytes];
    const StreamKey key = StreamKey::for_sealing(send_keys, cipher, nonce);
    for (int r = 0; r < warmup + reps; ++r) {
      const auto t = Clock::now();
      for (size_t at = 0, i = 0; at < plaintext.size(); at += chunk, ++i) {
        const size_t n = std::min<size_t>(chunk, plaintext.size() - at);
        key.seal_chunk(i, at + n == plaintext.size(), "header", plaintext.data() + at, n, out.data() + at, tag);
      }
      if (r >= warmup) chunks_s.v.push_back(since(t));
    }
  }

  const double ratio_med = hop.med() / raw_hop.med(), ratio_min = hop.min() / raw_hop.min();
  const double stream_ratio_med = stream_hop.med() / raw_hop.med(), stream_ratio_min = stream_hop.min() / raw_hop.min();
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
  std::printf("version 2: %zu messages, %zu bytes in all, %u-byte chunks, %s, encoded %s\n", stream_messages,
              stream_bytes, chunk, to_string(cipher), encode_whole ? "whole before sealing" : "chunk by chunk");
  row("fednode v2 stream hop (encode -> decoded)", stream_hop);
  row(encode_whole ? "  encode on A" : "  encode the structure on A", stream_encode);
  row("  head opened on B (since start)", stream_head);
  row("  last chunk opened on B (since start)", stream_opened);
  row("  decode on B", stream_decode);
  row("raw ZeroMQ, same bytes", raw_hop);
  std::printf("CPU ms per hop, all threads of both ends (median): v1 %.3f, v2 stream %.3f, raw %.3f\n",
              1e3 * hop_cpu.med(), 1e3 * stream_cpu.med(), 1e3 * raw_cpu.med());
  std::printf("%-44s %10.2fx %9.2fx\n", "ratio fednode v1 / raw", ratio_med, ratio_min);
  std::printf("%-44s %10.2fx %9.2fx\n", "ratio fednode v2 stream / raw", stream_ratio_med, stream_ratio_min);
  std::printf("stages alone, same data:\n");
  row("  encode_payload (float16)", encode_s);
  row("  encrypt (XChaCha20-Poly1305, seal_into)", encrypt_s);
  row("  decrypt (open)", decrypt_s);
  row("  decode_payload", decode_s);
  row((std::string("  seal every chunk (") + to_string(cipher) + ")").c_str(), chunks_s);
  row("  memcpy of the frame (for scale)", copy_s);

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
        << ", \"ratio_min\": " << ratio_min << ",\n  \"stream\": {\"chunk\": " << chunk << ", \"cipher\": \""
        << to_string(cipher) << "\", \"encode\": \"" << (encode_whole ? "whole" : "chunks") << "\", \"messages\": " << stream_messages << ", \"bytes\": " << stream_bytes
        << ", \"ratio_median\": " << stream_ratio_med << ", \"ratio_min\": " << stream_ratio_min
        << "},\n  \"timings\": {\n";
    series("fednode_hop", hop);
    series("seal", seal_s);
    series("transport", transport_s);
    series("open", open_s);
    series("stream_hop", stream_hop);
    series("stream_encode", stream_encode);
    series("stream_head_opened", stream_head);
    series("stream_last_chunk_opened", stream_opened);
    series("stream_decode", stream_decode);
    series("seal_every_chunk", chunks_s);
    series("raw_zeromq", raw_hop);
    series("cpu_fednode_hop", hop_cpu);
    series("cpu_stream_hop", stream_cpu);
    series("cpu_raw_zeromq", raw_cpu);
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
