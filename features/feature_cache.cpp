#include "features/feature_cache.h"

#include "core/digest.h"
#include "features/npy.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace fs = std::filesystem;

namespace fednode {

namespace {

constexpr const char* kMetaHeader = "fednode-feature-cache 1";

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::map<std::string, std::string> read_meta(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError("meta.txt missing");
  std::string line;
  if (!std::getline(in, line) || line != kMetaHeader) throw InputError("meta.txt has no valid header");
  std::map<std::string, std::string> meta;
  int lines = 0;
  while (std::getline(in, line)) {
    if (++lines > 64) throw InputError("meta.txt is too long");
    const auto eq = line.find(" = ");
    if (eq == std::string::npos) throw InputError("meta.txt line '" + line + "' is not 'key = value'");
    meta[line.substr(0, eq)] = line.substr(eq + 3);
  }
  return meta;
}

const std::string& field(const std::map<std::string, std::string>& meta, const std::string& key) {
  auto it = meta.find(key);
  if (it == meta.end()) throw InputError("meta.txt lacks " + key);
  return it->second;
}

}  // namespace

std::string CacheKey::digest() const {
  Sha256 h;
  h.update(fingerprint);
  h.update(std::string("\n--fednode-dataset--\n"));
  h.update(dataset_identity);
  return h.hex();
}

FeatureCache::FeatureCache(std::string root) : root_(std::move(root)) {}

std::string FeatureCache::entry_path(const CacheKey& key) const {
  return (fs::path(root_) / "features" / key.digest()).string();
}

std::optional<Features> FeatureCache::load(const CacheKey& key, std::string* problem) const {
  const fs::path dir = entry_path(key);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  try {
    const auto meta = read_meta(dir / "meta.txt");
    if (field(meta, "fingerprint") != key.fingerprint)
      throw InputError("entry belongs to another backbone fingerprint");
    if (field(meta, "dataset_sha256") != sha256_hex(key.dataset_identity))
      throw InputError("entry belongs to another dataset");
    const fs::path x_path = dir / "X.npy", y_path = dir / "y.npy";
    // Hash before parsing: a file changed on disk after it was written is caught even when it
    // still parses as a valid array.
    if (sha256_file_hex(x_path.string()) != field(meta, "x_sha256")) throw InputError("X.npy does not match its checksum");
    if (sha256_file_hex(y_path.string()) != field(meta, "y_sha256")) throw InputError("y.npy does not match its checksum");
    Features f;
    f.X = read_npy_features(x_path.string());
    f.y = read_npy_labels(y_path.string());
    f.num_classes = std::stoi(field(meta, "num_classes"));
    if (std::to_string(f.X.rows()) != field(meta, "rows") || std::to_string(f.X.cols()) != field(meta, "dim"))
      throw InputError("X.npy shape differs from meta.txt");
    f.validate(dir.string());
    return f;
  } catch (const std::exception& e) {
    if (problem) *problem = dir.string() + ": " + e.what();
    return std::nullopt;
  }
}

void FeatureCache::store(const CacheKey& key, const Features& features) const {
  const fs::path final_dir = entry_path(key);
  const fs::path tmp = final_dir.string() + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw InputError(tmp.string() + ": cannot create feature-cache folder: " + ec.message());
  try {
    write_npy_features((tmp / "X.npy").string(), features.X);
    write_npy_labels((tmp / "y.npy").string(), features.y);
    std::ostringstream meta;
    meta << kMetaHeader << "\n"
         << "fingerprint = " << key.fingerprint << "\n"
         << "dataset = " << one_line(key.description) << "\n"
         << "dataset_sha256 = " << sha256_hex(key.dataset_identity) << "\n"
         << "rows = " << features.X.rows() << "\n"
         << "dim = " << features.X.cols() << "\n"
         << "num_classes = " << features.num_classes << "\n"
         << "x_sha256 = " << sha256_file_hex((tmp / "X.npy").string()) << "\n"
         << "y_sha256 = " << sha256_file_hex((tmp / "y.npy").string()) << "\n";
    std::ofstream out(tmp / "meta.txt");
    out << meta.str();
    out.close();
    if (!out) throw InputError((tmp / "meta.txt").string() + ": write failed");
    // Also keep the dataset identity beside the entry, for whoever wonders what it holds.
    std::ofstream ident(tmp / "dataset.txt");
    ident << key.dataset_identity;
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fs::remove_all(final_dir, ec);
  fs::rename(tmp, final_dir, ec);
  // Another process may have stored the same entry between our remove and rename; theirs is as
  // good as ours.
  if (ec) fs::remove_all(tmp, ec);
}

std::string default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return (fs::path(xdg) / "fednode").string();
  if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache" / "fednode").string();
  return "";
}

}  // namespace fednode
