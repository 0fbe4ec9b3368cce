#include "features/idx.h"

#include "core/rng.h"

#include "../common/expect_error.h"
#include "../common/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace fednode;
using fednode::test::expect_input_error;
using fednode::test::TempDir;

namespace {

void put_be32(std::vector<uint8_t>& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

std::vector<uint8_t> images_bytes(uint32_t count, uint32_t rows, uint32_t cols,
                                  uint32_t magic = 0x803) {
  std::vector<uint8_t> b;
  put_be32(b, magic);
  put_be32(b, count);
  put_be32(b, rows);
  put_be32(b, cols);
  for (uint32_t i = 0; i < count * rows * cols; ++i) b.push_back(static_cast<uint8_t>(i * 7 + 3));
  return b;
}

std::vector<uint8_t> labels_bytes(uint32_t count, uint32_t magic = 0x801) {
  std::vector<uint8_t> b;
  put_be32(b, magic);
  put_be32(b, count);
  for (uint32_t i = 0; i < count; ++i) b.push_back(static_cast<uint8_t>(i % 10));
  return b;
}

void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  if (!bytes.empty())
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  gzclose(f);
}

void write_plain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST(Idx, ReadsGzipAndPlainImages) {
  TempDir dir;
  const auto bytes = images_bytes(5, 3, 4);
  write_gz(dir / "a.gz", bytes);
  write_plain(dir / "a", bytes);
  for (const std::string name : {"a.gz", "a"}) {
    const IdxImages im = read_idx_images(dir / name);
    EXPECT_EQ(im.count, 5);
    EXPECT_EQ(im.rows, 3);
    EXPECT_EQ(im.cols, 4);
    ASSERT_EQ(im.pixels.size(), 60u);
    EXPECT_TRUE(std::equal(im.pixels.begin(), im.pixels.end(), bytes.begin() + 16));
  }
}

TEST(Idx, LimitReadsPrefix) {
  TempDir dir;
  const auto bytes = images_bytes(5, 2, 2);
  write_gz(dir / "a.gz", bytes);
  const IdxImages im = read_idx_images(dir / "a.gz", 2);
  EXPECT_EQ(im.count, 2);
  ASSERT_EQ(im.pixels.size(), 8u);
  EXPECT_TRUE(std::equal(im.pixels.begin(), im.pixels.end(), bytes.begin() + 16));
  EXPECT_EQ(read_idx_images(dir / "a.gz", 0).count, 0);
  EXPECT_EQ(read_idx_images(dir / "a.gz", 99).count, 5);

  write_gz(dir / "l.gz", labels_bytes(7));
  const auto labels = read_idx_labels(dir / "l.gz", 3);
  EXPECT_EQ(labels, (std::vector<uint8_t>{0, 1, 2}));
  EXPECT_EQ(read_idx_labels(dir / "l.gz").size(), 7u);
}

TEST(Idx, RejectsBadMagic) {
  TempDir dir;
  write_gz(dir / "l.gz", labels_bytes(3));
  expect_input_error([&] { read_idx_images(dir / "l.gz"); },
                     {"l.gz", "bad magic", "0x00000801", "labels file"});
  write_gz(dir / "i.gz", images_bytes(1, 2, 2));
  expect_input_error([&] { read_idx_labels(dir / "i.gz"); }, {"i.gz", "bad magic"});
  write_plain(dir / "junk", std::vector<uint8_t>(64, 0xAB));
  expect_input_error([&] { read_idx_images(dir / "junk"); }, {"junk", "not an IDX file"});
}

TEST(Idx, RejectsImplausibleHeaderBeforeAllocating) {
  TempDir dir;
  std::vector<uint8_t> b;
  put_be32(b, 0x803);
  put_be32(b, 0xFFFFFFFFu);
  put_be32(b, 28);
  put_be32(b, 28);
  write_gz(dir / "huge_count.gz", b);
  expect_input_error([&] { read_idx_images(dir / "huge_count.gz"); },
                     {"huge_count.gz", "implausible image count"});
  b.clear();
  put_be32(b, 0x803);
  put_be32(b, 10);
  put_be32(b, 100000);
  put_be32(b, 28);
  write_gz(dir / "huge_side.gz", b);
  expect_input_error([&] { read_idx_images(dir / "huge_side.gz"); },
                     {"huge_side.gz", "implausible image size"});
  b.clear();
  put_be32(b, 0x803);
  put_be32(b, 10);
  put_be32(b, 0);
  put_be32(b, 28);
  write_gz(dir / "zero.gz", b);
  expect_input_error([&] { read_idx_images(dir / "zero.gz"); }, {"implausible image size"});
  b.clear();
  put_be32(b, 0x801);
  put_be32(b, 0xF0000000u);
  write_gz(dir / "lab.gz", b);
  expect_input_error([&] { read_idx_labels(dir / "lab.gz"); }, {"implausible label count"});
  // Within each bound, but the product is too large to read in one go.
  b.clear();
  put_be32(b, 0x803);
  put_be32(b, 100000000);
  put_be32(b, 4096);
  put_be32(b, 4096);
  write_gz(dir / "product.gz", b);
  expect_input_error([&] { read_idx_images(dir / "product.gz"); }, {"4 GiB"});
}

TEST(Idx, RejectsTruncation) {
  TempDir dir;
  auto b = images_bytes(4, 3, 3);
  b.resize(b.size() - 5);
  write_gz(dir / "trunc.gz", b);
  expect_input_error([&] { read_idx_images(dir / "trunc.gz"); },
                     {"trunc.gz", "truncated image data", "declares 4 images"});
  // Only the first image was asked for, and it is complete; but the file is still not what its
  // header says.
  expect_input_error([&] { read_idx_images(dir / "trunc.gz", 1); }, {"trunc.gz", "truncated image data"});

  write_gz(dir / "hdr.gz", std::vector<uint8_t>{0, 0, 8, 3, 0, 0});
  expect_input_error([&] { read_idx_images(dir / "hdr.gz"); }, {"hdr.gz", "truncated header"});
  write_gz(dir / "empty.gz", {});
  expect_input_error([&] { read_idx_labels(dir / "empty.gz"); }, {"empty.gz", "truncated header"});

  auto l = labels_bytes(10);
  l.resize(l.size() - 1);
  write_plain(dir / "lab", l);
  expect_input_error([&] { read_idx_labels(dir / "lab"); }, {"lab", "truncated label data"});
}

TEST(Idx, MissingFileNamed) {
  expect_input_error([] { read_idx_images("/nonexistent/dir/x.gz"); },
                     {"/nonexistent/dir/x.gz", "no such IDX file"});
}

TEST(Idx, LoadFashionMnistLayoutAndMismatch) {
  TempDir dir;
  write_gz(dir / "t10k-images-idx3-ubyte.gz", images_bytes(6, 28, 28));
  write_gz(dir / "t10k-labels-idx1-ubyte.gz", labels_bytes(6));
  const Features f = load_fashion_mnist(dir.str(), "test");
  EXPECT_EQ(f.size(), 6);
  EXPECT_EQ(f.dim(), 784);
  EXPECT_EQ(f.num_classes, 10);
  EXPECT_FLOAT_EQ(f.X(0, 0), 3.0f / 255.0f);
  EXPECT_FLOAT_EQ(f.X(1, 2), static_cast<uint8_t>((784 + 2) * 7 + 3) / 255.0f);
  EXPECT_EQ(f.y[5], 5);
  EXPECT_NO_THROW(f.validate("fmnist"));
  EXPECT_EQ(load_fashion_mnist(dir.str(), "test", 2).size(), 2);

  // Uncompressed files are found by their plain names.
  write_plain(dir / "train-images-idx3-ubyte", images_bytes(3, 28, 28));
  write_plain(dir / "train-labels-idx1-ubyte", labels_bytes(4));
  expect_input_error([&] { load_fashion_mnist(dir.str(), "train"); },
                     {"3 images", "4 labels"});
  expect_input_error([&] { load_fashion_mnist(dir.str(), "train", 2); },
                     {"3 images", "4 labels"});
  expect_input_error([&] { load_fashion_mnist(dir.str(), "valid"); }, {"unknown split"});
  expect_input_error([&] { load_fashion_mnist(dir / "nope", "train"); },
                     {"FEDNODE_FASHION_MNIST_DIR"});

  write_gz(dir / "t10k-labels-idx1-ubyte.gz", std::vector<uint8_t>{0, 0, 8, 1, 0, 0, 0, 6,
                                                                      1, 2, 3, 4, 10, 0});
  expect_input_error([&] { load_fashion_mnist(dir.str(), "test"); },
                     {"label 10", "index 4"});
}

TEST(Idx, DefaultDirHonoursEnvironment) {
  const char* old = std::getenv("FEDNODE_FASHION_MNIST_DIR");
  const std::string saved = old ? old : "";
  ::unsetenv("FEDNODE_FASHION_MNIST_DIR");
  EXPECT_EQ(default_fashion_mnist_dir(), "/usr/share/datasets/fashion-mnist");
  ::setenv("FEDNODE_FASHION_MNIST_DIR", "/tmp/elsewhere", 1);
  EXPECT_EQ(default_fashion_mnist_dir(), "/tmp/elsewhere");
  if (old)
    ::setenv("FEDNODE_FASHION_MNIST_DIR", saved.c_str(), 1);
  else
    ::unsetenv("FEDNODE_FASHION_MNIST_DIR");
}

TEST(Idx, RealFashionMnistWhenInstalled) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const Features f = load_fashion_mnist(dir, "test", 200);
  EXPECT_EQ(f.size(), 200);
  EXPECT_EQ(f.dim(), 784);
  // Known first test labels of Fashion-MNIST: ankle boot, pullover, trouser, trouser, shirt.
  EXPECT_EQ((std::vector<int32_t>(f.y.begin(), f.y.begin() + 5)), (std::vector<int32_t>{9, 2, 1, 1, 6}));
  EXPECT_GE(f.X.minCoeff(), 0.0f);
  EXPECT_LE(f.X.maxCoeff(), 1.0f);
  EXPECT_GT(f.X.maxCoeff(), 0.9f);
  const IdxImages full = read_idx_images(dir + "/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(full.count, 10000);
}

TEST(Idx, SurvivesRandomCorruption) {
  TempDir dir;
  const auto good = images_bytes(3, 5, 5);
  uint64_t state = 99;
  int rejected = 0;
  for (int trial = 0; trial < 80; ++trial) {
    auto bytes = good;
    const uint64_t r = fednode::splitmix64(state);
    bytes[r % 16] = static_cast<uint8_t>(r >> 8);  // damage the header
    if ((r >> 16) % 3 == 0) bytes.resize((r >> 24) % bytes.size());
    write_gz(dir / "c.gz", bytes);
    try {
      const IdxImages im = read_idx_images(dir / "c.gz");
      EXPECT_EQ(im.pixels.size(), static_cast<size_t>(im.count * im.rows * im.cols));
    } catch (const InputError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 20);
}

TEST(Idx, TheWholeFileIsCheckedNotOnlyTheItemsRead) {
  TempDir dir;
  // More items than the header declares.
  auto longer = labels_bytes(5);
  longer[7] = 4;  // the header says 4
  write_gz(dir / "extra.gz", longer);
  expect_input_error([&] { read_idx_labels(dir / "extra.gz"); }, {"extra.gz", "more label data than its header declares"});
  expect_input_error([&] { read_idx_labels(dir / "extra.gz", 2); }, {"more label data"});

  // A flipped bit in the gzip trailer's CRC: the data inflate fine, zlib's check finds it, also
  // when only the first item was asked for.
  write_gz(dir / "crc.gz", images_bytes(4, 3, 3));
  std::string gz;
  {
    std::ifstream in(dir / "crc.gz", std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  gz[gz.size() - 6] = static_cast<char>(gz[gz.size() - 6] ^ 0x20);
  std::ofstream(dir / "crc.gz", std::ios::binary) << gz;
  expect_input_error([&] { read_idx_images(dir / "crc.gz"); }, {"crc.gz", "damaged file", "incorrect data check"});
  expect_input_error([&] { read_idx_images(dir / "crc.gz", 1); }, {"damaged file"});

  // A trailer cut off.
  gz[gz.size() - 6] = static_cast<char>(gz[gz.size() - 6] ^ 0x20);  // the good file again
  for (size_t cut : {1, 4, 8}) {
    std::ofstream(dir / "cut.gz", std::ios::binary | std::ios::trunc) << gz.substr(0, gz.size() - cut);
    expect_input_error([&] { read_idx_images(dir / "cut.gz"); }, {"cut.gz", "damaged file", "unexpected end of file"});
  }
}

TEST(Idx, AFifoInPlaceOfAFileIsRefusedNotWaitedOn) {
  TempDir dir;
  write_gz(dir / "t10k-labels-idx1-ubyte.gz", labels_bytes(6));
  ASSERT_EQ(::mkfifo((dir / "t10k-images-idx3-ubyte.gz").c_str(), 0600), 0);
  expect_input_error([&] { load_fashion_mnist(dir.str(), "test"); }, {"t10k-images-idx3-ubyte.gz", "not a regular file"});
}
