#include "features/idx.h"

#include <zlib.h>

#include <filesystem>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>

namespace fednode {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension
constexpr uint32_t kMaxSide = 4096;
constexpr uint32_t kMaxCount = 100000000;
// A guard on the product too, so rows * cols * count cannot ask for more than 4 GiB.
constexpr uint64_t kMaxPixels = 1ULL << 32;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// gzread reads plain files unchanged, so one path handles both compressed and raw IDX files.
GzFile open_file(const std::string& path) {
  require_regular_file(path, "IDX file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw InputError(path + ": cannot open file");
  return GzFile(f);
}

// Reads up to n bytes and returns how many there were before the end of the file. A damaged
// stream (a bad deflate block, a wrong CRC or length in the gzip trailer, a trailer cut off) is
// an error that says what zlib found.
uint64_t read_upto(gzFile f, const std::string& path, void* dst, uint64_t n, const char* what) {
  auto* out = static_cast<unsigned char*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const unsigned chunk =
        static_cast<unsigned>(std::min<uint64_t>(n - done, 1u << 30));
    const int got = gzread(f, out + done, chunk);
    // A gzip stream that stops early (the trailer cut off) ends without an error from gzread:
    // zlib only notes it (Z_BUF_ERROR), so the state is asked for at the end as well.
    int errnum = Z_OK;
    const char* zlib_says = gzerror(f, &errnum);
    if (got < 0 || errnum != Z_OK) {
      std::string msg = zlib_says ? zlib_says : "";
      if (msg.rfind(path + ": ", 0) == 0) msg = msg.substr(path.size() + 2);  // zlib names the file too
      throw InputError(path + ": damaged file while reading " + what + ": " + (msg.empty() ? "unknown zlib error" : msg));
    }
    if (got == 0) break;
    done += static_cast<uint64_t>(got);
  }
  return done;
}

// Reads exactly n bytes or throws, naming what was being read.
void read_exact(gzFile f, const std::string& path, void* dst, uint64_t n, const char* what) {
  const uint64_t got = read_upto(f, path, dst, n, what);
  if (got < n)
    throw InputError(path + ": truncated " + what + " (expected " + std::to_string(n) + " bytes, got " +
                     std::to_string(got) + ")");
}

// After the items a caller wanted: the rest must be exactly the items the header declares, and
// then the end of the file. Reading to the end is what makes zlib check the gzip trailer's CRC,
// so a flipped bit anywhere in the file is found, not only one that breaks the deflate stream.
void expect_declared_rest(gzFile f, const std::string& path, uint64_t rest_bytes, const char* what) {
  std::vector<unsigned char> sink(std::min<uint64_t>(rest_bytes, uint64_t{1} << 20));
  uint64_t left = rest_bytes;
  while (left > 0) {
    const uint64_t want = std::min<uint64_t>(left, sink.size());
    const uint64_t got = read_upto(f, path, sink.data(), want, what);
    if (got < want)
      throw InputError(path + ": truncated " + what + ": the file ends " + std::to_string(left - got) +
                       " bytes before the end its header declares");
    left -= got;
  }
  unsigned char extra = 0;
  if (read_upto(f, path, &extra, 1, what) != 0)
    throw InputError(path + ": more " + what + " than its header declares (the file goes on after them)");
}

// Items are read a block at a time and the output grows only as they arrive, so a truncated file
// whose header claims much costs one block beyond its own bytes (fuzz/fuzz_idx runs thousands of
// such files a second).
constexpr int64_t kReadBlockBytes = int64_t{64} << 10;

uint32_t read_be32(gzFile f, const std::string& path, const char* what) {
  unsigned char b[4];
  read_exact(f, path, b, 4, what);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

void check_magic(uint32_t magic, uint32_t expected, const std::string& path, const char* kind) {
  if (magic == expected) return;
  std::string hint;
  if (magic == kImagesMagic || magic == kLabelsMagic)
    hint = magic == kImagesMagic ? " (this is an IDX images file)" : " (this is an IDX labels file)";
  else if ((magic >> 16) != 0)
    hint = " (not an IDX file, or a corrupt gzip stream)";
  throw InputError(path + ": bad magic number " + hex32(magic) + ", expected " + hex32(expected) +
                   " for IDX " + kind + hint);
}

int64_t apply_limit(uint32_t count, int64_t limit) {
  if (limit < 0 || limit >= static_cast<int64_t>(count)) return count;
  return limit;
}

}  // namespace

std::string find_idx_file(const std::string& dir, const std::string& stem) {
  const std::string base = dir + "/" + stem;
  // Whatever is there is taken, and open_file says what is wrong with it (opening a FIFO to
  // probe it would block).
  for (const std::string& candidate : {base + ".gz", base}) {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::symlink_status(candidate, ec))) return candidate;
  }
  throw InputError("Fashion-MNIST: neither " + base + ".gz nor " + base +
                   " exists (install dataset-fashion-mnist, or set FEDNODE_FASHION_MNIST_DIR "
                   "to a folder holding the IDX files)");
}

IdxImages read_idx_images(const std::string& path, int64_t limit) {
  GzFile file = open_file(path);
  gzFile f = file.get();
  check_magic(read_be32(f, path, "header"), kImagesMagic, path, "images");
  const uint32_t count = read_be32(f, path, "header");
  const uint32_t rows = read_be32(f, path, "header");
  const uint32_t cols = read_be32(f, path, "header");
  if (count > kMaxCount)
    throw InputError(path + ": implausible image count " + std::to_string(count) + " (max " +
                     std::to_string(kMaxCount) + ")");
  if (rows == 0 || cols == 0 || rows > kMaxSide || cols > kMaxSide)
    throw InputError(path + ": implausible image size " + std::to_string(rows) + "x" +
                     std::to_string(cols) + " (each side must be in [1, " +
                     std::to_string(kMaxSide) + "])");
  IdxImages out;
  out.count = apply_limit(count, limit);
  out.rows = static_cast<int>(rows);
  out.cols = static_cast<int>(cols);
  const uint64_t bytes = static_cast<uint64_t>(out.count) * rows * cols;
  if (bytes > kMaxPixels)
    throw InputError(path + ": " + std::to_string(out.count) + " images of " +
                     std::to_string(rows) + "x" + std::to_string(cols) +
                     " exceed the 4 GiB reading limit; pass a smaller limit");
  // The declared size is only a claim: grow the buffer as data actually arrives, so a
  // truncated file with a huge header costs no more memory than the file itself.
  out.pixels.reserve(static_cast<size_t>(std::min<uint64_t>(bytes, kReadBlockBytes)));
  const uint64_t per_image = uint64_t{rows} * cols;
  std::vector<uint8_t> block;
  for (int64_t done = 0; done < out.count;) {
    const int64_t batch = std::min<int64_t>(out.count - done,
                                            std::max<int64_t>(1, kReadBlockBytes / per_image));
    block.resize(static_cast<size_t>(batch * per_image));
    if (read_upto(f, path, block.data(), block.size(), "image data") < block.size())
      throw InputError(path + ": truncated image data: header declares " + std::to_string(count) +
                       " images but the file ends within image " +
                       std::to_string(done + 1) + "-" + std::to_string(done + batch));
    out.pixels.insert(out.pixels.end(), block.begin(), block.end());
    done += batch;
  }
  expect_declared_rest(f, path, (uint64_t{count} - static_cast<uint64_t>(out.count)) * per_image, "image data");
  return out;
}

std::vector<uint8_t> read_idx_labels(const std::string& path, int64_t limit) {
  GzFile file = open_file(path);
  gzFile f = file.get();
  check_magic(read_be32(f, path, "header"), kLabelsMagic, path, "labels");
  const uint32_t count = read_be32(f, path, "header");
  if (count > kMaxCount)
    throw InputError(path + ": implausible label count " + std::to_string(count) + " (max " +
                     std::to_string(kMaxCount) + ")");
  const int64_t n = apply_limit(count, limit);
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(std::min<int64_t>(n, kReadBlockBytes)));
  std::vector<uint8_t> block;
  for (int64_t done = 0; done < n;) {
    const int64_t batch = std::min<int64_t>(n - done, kReadBlockBytes);
    block.resize(static_cast<size_t>(batch));
    if (read_upto(f, path, block.data(), block.size(), "label data") < block.size())
      throw InputError(path + ": truncated label data: header declares " + std::to_string(count) +
                       " labels but the file ends before label " + std::to_string(done + batch));
    out.insert(out.end(), block.begin(), block.end());
    done += batch;
  }
  expect_declared_rest(f, path, uint64_t{count} - static_cast<uint64_t>(n), "label data");
  return out;
}

std::string default_fashion_mnist_dir() {
  const char* env = std::getenv("FEDNODE_FASHION_MNIST_DIR");
  if (env && *env) return env;
  return "/usr/share/datasets/fashion-mnist";
}

namespace {

uint32_t declared_count(const std::string& path, uint32_t magic, const char* kind) {
  GzFile file = open_file(path);
  check_magic(read_be32(file.get(), path, "header"), magic, path, kind);
  return read_be32(file.get(), path, "header");
}

}  // namespace

Features load_fashion_mnist(const std::string& dir, const std::string& split, int64_t limit) {
  std::string prefix;
  if (split == "train")
    prefix = "train";
  else if (split == "test")
    prefix = "t10k";
  else
    throw InputError("Fashion-MNIST: unknown split '" + split + "' (expected train or test)");
  const std::string images_path = find_idx_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_idx_file(dir, prefix + "-labels-idx1-ubyte");

  // Compare the declared counts first: a mismatched pair must not pass just because a limit
  // cut both files to the same length.
  const uint32_t declared_images = declared_count(images_path, kImagesMagic, "images");
  const uint32_t declared_labels = declared_count(labels_path, kLabelsMagic, "labels");
  if (declared_images != declared_labels)
    throw InputError("Fashion-MNIST: " + images_path + " declares " +
                     std::to_string(declared_images) + " images but " + labels_path +
                     " declares " + std::to_string(declared_labels) + " labels");
  const IdxImages images = read_idx_images(images_path, limit);
  const std::vector<uint8_t> labels = read_idx_labels(labels_path, limit);
  if (static_cast<int64_t>(labels.size()) != images.count)
    throw InputError("Fashion-MNIST: " + images_path + " holds " + std::to_string(images.count) +
                     " images but " + labels_path + " holds " + std::to_string(labels.size()) +
                     " labels");
  if (images.rows != 28 || images.cols != 28)
    throw InputError(images_path + ": Fashion-MNIST images are 28x28, this file has " +
                     std::to_string(images.rows) + "x" + std::to_string(images.cols));
  constexpr int kClasses = 10;
  Features out;
  out.num_classes = kClasses;
  const int dim = images.rows * images.cols;
  out.X.resize(images.count, dim);
  const float scale = 1.0f / 255.0f;
  for (int64_t i = 0; i < images.count; ++i)
    for (int j = 0; j < dim; ++j)
      out.X(i, j) = static_cast<float>(images.pixels[static_cast<size_t>(i * dim + j)]) * scale;
  out.y.resize(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= kClasses)
      throw InputError(labels_path + ": label " + std::to_string(labels[i]) + " at index " +
                       std::to_string(i) + " is outside [0, 10)");
    out.y[i] = labels[i];
  }
  return out;
}

}  // namespace fednode
