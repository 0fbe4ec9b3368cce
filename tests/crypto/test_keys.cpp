// Identities, their printable public keys, and key files.
#include "crypto/key_files.h"
#include "crypto/errors.h"
#include "crypto/secret_access.h"

#include "../common/expect_error.h"
#include "../common/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <type_traits>

namespace fednode {
namespace {

namespace fs = std::filesystem;
using test::expect_input_error;
using test::TempDir;

// No operator<< may exist for an Identity: secrets must not be printable by accident.
template <typename T, typename = void>
struct is_streamable : std::false_type {};
template <typename T>
struct is_streamable<T, std::void_t<decltype(std::declval<std::ostream&>() << std::declval<const T&>())>>
    : std::true_type {};
static_assert(!is_streamable<Identity>::value, "an Identity must not be printable");
static_assert(is_streamable<PublicKey>::value, "a PublicKey prints as hex");
static_assert(!std::is_copy_constructible_v<Identity>, "secrets are not copied around");

std::array<uint8_t, 32> seed(uint8_t b) {
  std::array<uint8_t, 32> s;
  s.fill(b);
  return s;
}

unsigned mode_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void overwrite(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::trunc) << content;
}

TEST(CryptoKeys, PublicKeyText) {
  const Identity id = Identity::generate();
  const PublicKey& pk = id.public_key();
  EXPECT_EQ(pk.to_hex().size(), 64u);
  EXPECT_EQ(pk.to_base64().size(), 44u);
  EXPECT_EQ(PublicKey::parse(pk.to_hex(), "t"), pk);
  EXPECT_EQ(PublicKey::parse(pk.to_base64(), "t"), pk);
  EXPECT_EQ(PublicKey::parse(pk.to_base64().substr(0, 43), "t"), pk);  // unpadded
  EXPECT_EQ(PublicKey::parse("  " + pk.to_hex() + "\n", "t"), pk);
  std::ostringstream printed;
  printed << pk;
  EXPECT_EQ(printed.str(), pk.to_hex());
  EXPECT_NE(Identity::generate().public_key(), pk);
}

TEST(CryptoKeys, PublicKeyParseErrors) {
  const std::string hex = Identity::generate().public_key().to_hex();
  for (const std::string bad : {std::string(""), hex.substr(1), hex + "00", "z" + hex.substr(1),
                                std::string(44, '!'), std::string(43, '*')}) {
    try {
      PublicKey::parse(bad, "topology.toml:12");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const SecurityError& e) {
      EXPECT_EQ(e.code, SecurityCode::InvalidKey);
      EXPECT_NE(std::string(e.what()).find("topology.toml:12"), std::string::npos);
    }
  }
}

TEST(CryptoKeys, SeedsAreDeterministicAndMovesWipe) {
  Identity a = Identity::from_seed(seed(7));
  EXPECT_EQ(a.public_key(), Identity::from_seed(seed(7)).public_key());
  EXPECT_NE(a.public_key(), Identity::from_seed(seed(8)).public_key());
  const PublicKey pk = a.public_key();
  Identity b = std::move(a);
  EXPECT_EQ(b.public_key(), pk);
  const auto& left = SecretKeyAccess::secret(a);  // NOLINT(bugprone-use-after-move): checking the wipe
  EXPECT_TRUE(std::all_of(left.begin(), left.end(), [](uint8_t x) { return x == 0; }));
  const auto& secret = SecretKeyAccess::secret(b);
  const Identity c = Identity::from_secret(secret.data(), secret.size(), "t");
  EXPECT_EQ(c.public_key(), pk);
  EXPECT_THROW(Identity::from_secret(secret.data(), 31, "t"), SecurityError);
}

TEST(CryptoKeyFiles, WriteAndLoad) {
  TempDir dir;
  const std::string keys = dir / "n1";  // created by write
  const PublicKey pk = write_new_identity(keys);
  const std::string sk_path = keys + "/node.key", pk_path = keys + "/node.pub";
  EXPECT_EQ(mode_of(sk_path), 0600u);
  EXPECT_EQ(mode_of(keys), 0700u);
  EXPECT_EQ(slurp(pk_path), pk.to_hex() + "\n");
  const std::string secret_text = slurp(sk_path);
  EXPECT_EQ(secret_text.rfind("fednode-secret-key:", 0), 0u);
  EXPECT_EQ(secret_text.size(), 19u + 64u + 1u);
  EXPECT_EQ(secret_text.find(pk.to_hex()), std::string::npos);
  EXPECT_EQ(load_identity(keys).public_key(), pk);
  EXPECT_EQ(load_public_key_file(pk_path), pk);
  EXPECT_EQ(load_secret_key_file(sk_path).public_key(), pk);
}

TEST(CryptoKeyFiles, UmaskCannotLoosenTheSecretFile) {
  TempDir dir;
  const mode_t old = ::umask(0);
  write_new_identity(dir / "k");
  ::umask(old);
  EXPECT_EQ(mode_of(dir / "k/node.key"), 0600u);
}

TEST(CryptoKeyFiles, RefusesToOverwrite) {
  TempDir dir;
  const PublicKey first = write_new_identity(dir.path());
  expect_input_error([&] { write_new_identity(dir.path()); }, {"refusing to overwrite"});
  EXPECT_EQ(load_identity(dir.path()).public_key(), first);
  // Even when only the public half is there, nothing is written.
  fs::remove(dir / "node.key");
  expect_input_error([&] { write_new_identity(dir.path()); }, {"node.pub already exists"});
  EXPECT_FALSE(fs::exists(dir / "node.key"));
  fs::remove(dir / "node.pub");
  overwrite(dir / "not-a-dir", "x");
  expect_input_error([&] { write_new_identity(dir / "not-a-dir"); }, {"not a directory"});
}

TEST(CryptoKeyFiles, LoadErrors) {
  TempDir dir;
  write_new_identity(dir.path());
  const std::string sk = dir / "node.key";
  const std::string good = slurp(sk);

  ::chmod(sk.c_str(), 0644);
  expect_input_error([&] { load_identity(dir.path()); }, {"chmod 600"});
  ::chmod(sk.c_str(), 0620);
  expect_input_error([&] { load_identity(dir.path()); }, {"mode 0620"});
  ::chmod(sk.c_str(), 0600);
  EXPECT_NO_THROW(load_identity(dir.path()));

  overwrite(sk, good.substr(0, good.size() - 3) + "\n");
  expect_input_error([&] { load_identity(dir.path()); }, {"wrong size"});
  overwrite(sk, "fednode-secret-key:" + std::string(64, 'g') + "\n");
  expect_input_error([&] { load_identity(dir.path()); }, {"not valid hex"});
  overwrite(sk, good.substr(19));  // the bare hex, as a public key file looks
  expect_input_error([&] { load_identity(dir.path()); }, {"not a fednode secret key file"});
  overwrite(sk, std::string(4096, 'a'));
  expect_input_error([&] { load_identity(dir.path()); }, {"too large"});

  overwrite(sk, good);
  overwrite(dir / "node.pub", Identity::generate().public_key().to_hex() + "\n");
  expect_input_error([&] { load_identity(dir.path()); }, {"does not belong"});
  fs::remove(dir / "node.pub");
  EXPECT_NO_THROW(load_identity(dir.path()));  // the public file is optional
  expect_input_error([&] { load_identity(dir / "missing"); }, {"cannot open"});
  expect_input_error([&] { load_secret_key_file(dir.path()); }, {"not a regular file"});
  // A FIFO is refused too, not waited on.
  fs::remove(sk);
  ASSERT_EQ(::mkfifo(sk.c_str(), 0600), 0);
  expect_input_error([&] { load_identity(dir.path()); }, {"not a regular file"});
}

}  // namespace
}  // namespace fednode
