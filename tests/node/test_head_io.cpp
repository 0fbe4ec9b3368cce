// A head in a file of its own: the bytes Head::save writes, and nothing after them.
#include "node/head_io.h"

#include "../common/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fednode {
namespace {

std::string bytes_of(const Head& h) {
  std::ostringstream out;
  h.save(out);
  return out.str();
}

AdapterHead small_adapter() {
  std::vector<AdapterHead::Layer> layers(3);
  const int sizes[4] = {6, 8, 5, 3};
  for (int i = 0; i < 3; ++i) {
    layers[i].W = MatrixF::Random(sizes[i + 1], sizes[i]);
    layers[i].b = VectorF::Random(sizes[i + 1]);
  }
  return AdapterHead(std::move(layers));
}

TEST(HeadFile, RoundTripsThroughAFile) {
  test::TempDir tmp{"fednode_head"};
  const std::string path = tmp / "head";
  const AdapterHead adapter = small_adapter();
  save_head_file(adapter, path);
  const auto back = load_head_file(path);
  EXPECT_EQ(bytes_of(*back), bytes_of(adapter));

  // Bytes after the head mean the file is not what it claims to be.
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out << "junk";
  }
  EXPECT_THROW(load_head_file(path), InputError);
  std::filesystem::remove(path);
  EXPECT_THROW(load_head_file(path), InputError);
  EXPECT_THROW(load_head_file(tmp.str()), InputError);  // a directory, not a head
  EXPECT_THROW(save_head_file(adapter, "/nonexistent-dir/x/head.bin"), InputError);
}

}  // namespace
}  // namespace fednode
