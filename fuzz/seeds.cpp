// fuzz_seeds DIR: writes the seed corpus of every target under DIR/<target>/, made by the
// encoders themselves (so the seeds follow the format as it changes) and from the worked examples
// and fixtures in the source tree. Usage: scripts/fuzz.sh runs it before fuzzing.
#include "../tests/protocol/samples.h"

#include "crypto/key_files.h"
#include "crypto/replay.h"
#include "crypto/run_id.h"
#include "features/npy.h"
#include "features/preprocess.h"
#include "node/head_io.h"
#include "node/secure_channel.h"
#include "node/secure_stream.h"
#include "protocol/beacon.h"
#include "protocol/codec.h"

#include <zlib.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

namespace fs = std::filesystem;
using namespace fednode;

namespace {

fs::path out_dir;
std::map<std::string, int> counts;

void seed(const std::string& target, const std::string& bytes) {
  const fs::path dir = out_dir / target;
  fs::create_directories(dir);
  std::ofstream(dir / ("seed-" + std::to_string(counts[target]++)), std::ios::binary) << bytes;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<Payload> sample_payloads() {
  std::vector<Payload> out;
  out.push_back(test::sample_hello());
  out.push_back(Ack{12});
  Ack versions{13};
  versions.versions = {1, 2};
  versions.ciphers = {"aes-256-gcm", "chacha20-poly1305"};
  out.push_back(versions);
  out.push_back(ErrorMessage{ErrorReason::Busy, 3, false, "later"});
  out.push_back(UnmaskRequest{{1, 2, 4}, {3}, {}});
  UnmaskRequest tagged{{1, 2, 4}, {3}, {}};
  tagged.tags.assign(2, Seed32{});
  tagged.tags[0].fill(0x7a);
  out.push_back(tagged);
  // A survivor's two answers: its consistency tags, then its seeds.
  UnmaskReply confirmation{tagged.survivors, tagged.dropped, tagged.tags, {}, {}};
  out.push_back(confirmation);
  UnmaskReply reply{tagged.survivors, tagged.dropped, {}, {}, {}};
  reply.self_seed.fill(0x5e);
  reply.pair_seeds[3].fill(0xa1);
  out.push_back(reply);
  for (auto type : {CovarianceType::Full, CovarianceType::Diag, CovarianceType::Spherical})
    out.push_back(test::sample_gmm(1, type, 2, 3, 3));
  Knowledge sketched = test::sample_gmm(1, CovarianceType::Diag, 2, 3, 3);
  std::get<GmmKnowledge>(sketched.payload).within_class =
      CovarianceSketch{5, VectorD::Constant(3, 0.5), MatrixD::Constant(2, 3, 0.25)};
  out.push_back(sketched);
  out.push_back(test::worked_example_knowledge());
  out.push_back(test::sample_stats(2, 3, 2));
  out.push_back(test::sample_prototypes(3, 3, 4));
  out.push_back(test::sample_linear_head(4, 3, 2, "lda"));
  out.push_back(test::sample_linear_head(4, 3, 2));
  out.push_back(test::sample_adapter_head(5, 3, 3, 2, 2));
  out.push_back(test::sample_models(6));
  out.push_back(test::sample_prompts());
  out.push_back(test::sample_vit_head(7));
  HeadMessage with_means = test::sample_linear_head(4, 3, 2, "lda");
  auto means = std::make_shared<ClassMeans>();
  means->means = MatrixD::Constant(2, 3, 0.5);
  means->present = {true, true};
  with_means.class_means = means;
  out.push_back(with_means);
  return out;
}

const char* payload_target(MessageType type) {
  switch (type) {
    case MessageType::Hello: return "payload_hello";
    case MessageType::Knowledge:
    case MessageType::Complete: return "payload_knowledge";
    case MessageType::Head: return "payload_head";
    case MessageType::Ack: return "payload_ack";
    case MessageType::Error: return "payload_error";
    case MessageType::UnmaskRequest: return "payload_unmask_request";
    case MessageType::UnmaskReply: return "payload_unmask_reply";
  }
  return "payload_other";
}

void protocol_seeds() {
  std::array<uint8_t, 32> seed0{}, seed1{};
  seed0.fill(0x11);  // the identities fuzz_sealed_frame.cpp's receiver expects
  seed1.fill(0x22);
  Identity node0 = Identity::from_seed(seed0);
  const Identity node1 = Identity::from_seed(seed1);
  const PeerKeys peers{{0, node0.public_key()}, {1, node1.public_key()}};
  const SecureChannel sender(std::move(node0), 0, test::sample_run(), peers);

  uint64_t msg_id = 1;
  for (const Payload& p : sample_payloads()) {
    for (auto precision : {Precision::Float32, Precision::Float16}) {
      const std::string plaintext = encode_payload(p, {precision});
      seed(payload_target(type_of(p)), plaintext);
      const std::string frame = sender.seal_encoded(1, msg_id++, type_of(p), plaintext);
      seed("sealed_frame", frame);
      seed("frame", frame);
      seed("header", std::string(decode_frame(frame, Limits{}).header));
      if (!std::holds_alternative<Knowledge>(p)) break;  // precision changes knowledge only
    }
  }
  // Version 2: a stream's head and its chunks, of a knowledge payload cut into 1 KiB chunks (the least).
  const std::string plaintext = encode_payload(Payload{test::sample_stats(2, 24, 3)});
  for (auto cipher : available_stream_ciphers()) {
    auto stream = sender.seal_stream(1, msg_id++, MessageType::Knowledge, plaintext, cipher, 1024);
    for (size_t i = 0; i < stream->count(); ++i) {
      const std::string message = stream->take(i);
      if (i == 0) {
        seed("sealed_frame", message);
        seed("frame", message);
        seed("header", std::string(decode_frame(message, Limits{}).header));
      } else {
        seed("chunk", message);
      }
    }
  }
}

void beacon_seeds() {
  Beacon b;
  b.run = beacon_run_tag(derive_run_id("seed run"));
  b.node = 3;
  b.port = 7300;
  b.key = Identity::from_seed(std::array<uint8_t, 32>{}).public_key().bytes;
  seed("beacon", encode_beacon(b));
  b.node = 0xffffffff;
  b.port = 65535;
  seed("beacon", encode_beacon(b));
}

void file_seeds(const fs::path& source) {
  // The first byte picks the variant (fuzz_files.cpp): 0 features, 1 labels.
  for (const auto& entry : fs::directory_iterator(source / "tests/features/data/npy")) {
    const std::string name = entry.path().filename().string();
    seed("npy", std::string(1, name[0] == 'y' ? '\1' : '\0') + read_file(entry.path()));
  }
  for (const auto& entry : fs::recursive_directory_iterator(source / "tests/features/data/images"))
    if (entry.is_regular_file() && entry.path().extension() != ".txt") seed("image", read_file(entry.path()));
  for (const auto& entry : fs::directory_iterator(source / "examples/topologies"))
    seed("topology", read_file(entry.path()));
  for (const auto& entry : fs::directory_iterator(source / "models"))
    if (entry.path().extension() == ".preprocessing") seed("preprocessing", read_file(entry.path()));
  seed("preprocessing", Preprocessing{}.to_text());

  // IDX: 2 images of 3 x 3, and 2 labels; plain and gzip.
  std::string images("\0\0\x08\x03\0\0\0\x02\0\0\0\x03\0\0\0\x03", 16);
  for (int i = 0; i < 18; ++i) images.push_back(static_cast<char>(i * 14));
  const std::string labels("\0\0\x08\x01\0\0\0\x02\x07\x01", 10);
  const fs::path tmp = fs::temp_directory_path() / ("fednode-seeds-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  for (const auto& [variant, bytes] : {std::pair<char, std::string>{'\0', images}, {'\1', labels}}) {
    seed("idx", std::string(1, variant) + bytes);
    const std::string gz = (tmp / "idx.gz").string();
    gzFile f = gzopen(gz.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    seed("idx", std::string(1, variant) + read_file(gz));
  }

  // Key files as fednode keygen writes them; variant 0 secret, 1 public file, 2 key text.
  std::array<uint8_t, 32> key_seed{};
  key_seed.fill(0x33);
  write_identity((tmp / "keys").string(), Identity::from_seed(key_seed));
  seed("keys", std::string(1, '\0') + read_file(tmp / "keys/node.key"));
  seed("keys", std::string(1, '\1') + read_file(tmp / "keys/node.pub"));
  seed("keys", std::string(1, '\2') + Identity::from_seed(key_seed).public_key().to_base64());

  ReplayGuard replay;
  for (uint64_t id : {1, 2, 3, 70, 71}) replay.accept(4, id);
  replay.accept(9, 1000);
  seed("replay_state", replay.serialize());

  // Head files as nodes write them: variant 1 (the checksum recomputed) without their checksum,
  // and one whole with variant 0; a version 1 file; every head kind's body.
  MatrixF W(3, 4);
  W << 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12;
  VectorF b(3);
  b << 0.5f, -1, 2;
  HeadCard card;
  card.method = "fedpft";
  card.run = "fuzz";
  card.node = "node 1 (n1)";
  card.contributors = {0, 1};
  card.class_names = {"a", "b", "c"};
  card.recipe.backbone_fingerprint = "pixels";
  card.recipe.expansion = {4, 7};
  const std::string head = head_file_bytes(LinearHead("linear", W, b), card);
  seed("head_file", std::string(1, '\0') + head);
  seed("head_file", std::string(1, '\1') + head.substr(0, head.size() - 64));
  std::ostringstream v1;
  LinearHead("lda", W, b).save(v1);
  seed("head_file", std::string(1, '\0') + v1.str());
  std::vector<AdapterHead::Layer> layers(3);
  for (int i = 0; i < 3; ++i) {
    layers[i].W = MatrixF::Constant(i == 2 ? 3 : 4, 4, 0.25f * static_cast<float>(i + 1));
    layers[i].b = VectorF::Zero(i == 2 ? 3 : 4);
  }
  card.recipe = fashion_mnist_pixel_recipe({4, 7});
  const std::string adapter = head_file_bytes(AdapterHead(std::move(layers)), card);
  seed("head_file", std::string(1, '\1') + adapter.substr(0, adapter.size() - 64));
  fs::remove_all(tmp);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_seeds DIR\n";
    return 2;
  }
  out_dir = argv[1];
  try {
    protocol_seeds();
    beacon_seeds();
    file_seeds(FEDNODE_SOURCE_DIR);
  } catch (const std::exception& e) {
    std::cerr << "fuzz_seeds: " << e.what() << "\n";
    return 1;
  }
  for (const auto& [target, n] : counts) std::cout << target << ": " << n << " seeds\n";
  return 0;
}
