// Head files: version 2 carries its card and a checksum, version 1 (the head alone) stays
// readable, and damaged or foreign bytes are refused with an error, never a crash or a guess.
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

HeadCard pixel_card() {
  HeadCard card;
  card.method = "fedtc";
  card.run = "test-run";
  card.node = "node 4 (n4)";
  card.contributors = {0, 1, 4};
  card.class_names = {"cat", "dog", "bird, with a comma\nand a newline"};
  card.recipe.source = FeatureRecipe::Source::Pixels;
  card.recipe.backbone_fingerprint = "pixels";
  card.recipe.preprocessing.input_size = 8;
  card.recipe.preprocessing.channels = 1;
  card.recipe.expansion = {6, 9};
  return card;
}

TEST(HeadFile, RoundTripsTheHeadAndItsCard) {
  test::TempDir tmp{"fednode_head"};
  const std::string path = tmp / "head";
  const AdapterHead adapter = small_adapter();
  save_head_file(adapter, pixel_card(), path);
  const HeadFile back = read_head_file(path);
  EXPECT_EQ(back.version, 2);
  EXPECT_EQ(bytes_of(*back.head), bytes_of(adapter));
  EXPECT_EQ(back.card.method, "fedtc");
  EXPECT_EQ(back.card.run, "test-run");
  EXPECT_EQ(back.card.node, "node 4 (n4)");
  EXPECT_EQ(back.card.contributors, (Contributors{0, 1, 4}));
  EXPECT_EQ(back.card.class_names, pixel_card().class_names);
  EXPECT_EQ(back.card.recipe.source, FeatureRecipe::Source::Pixels);
  EXPECT_EQ(back.card.recipe.fingerprint(), "pixels+relu-projection-6-seed-9");
  EXPECT_EQ(back.card.recipe.preprocessing.input_size, 8);
  EXPECT_EQ(back.card.class_name(2), "bird, with a comma\nand a newline");
  EXPECT_NE(head_info_text(back).find("classes: 3 (cat, dog"), std::string::npos);
  EXPECT_NE(head_info_json(back).find("\"fingerprint\": \"pixels+relu-projection-6-seed-9\""), std::string::npos);

  // Bytes after the checksum mean the file is not what it claims to be.
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out << "junk";
  }
  EXPECT_THROW(read_head_file(path), InputError);
  std::filesystem::remove(path);
  EXPECT_THROW(read_head_file(path), InputError);
  EXPECT_THROW(read_head_file(tmp.str()), InputError);  // a directory, not a head
  EXPECT_THROW(save_head_file(adapter, pixel_card(), "/nonexistent-dir/x/head.bin"), InputError);
}

TEST(HeadFile, VersionOneFilesStayReadable) {
  const AdapterHead adapter = small_adapter();
  const HeadFile back = parse_head_file(bytes_of(adapter), "v1");
  EXPECT_EQ(back.version, 1);
  EXPECT_EQ(bytes_of(*back.head), bytes_of(adapter));
  EXPECT_EQ(back.card.recipe.source, FeatureRecipe::Source::Features);
  EXPECT_EQ(back.card.recipe.fingerprint(), "unknown");
  EXPECT_THROW(parse_head_file(bytes_of(adapter) + "x", "v1"), InputError);
}

TEST(HeadFile, ACardThatDoesNotFitItsHeadIsNotWritten) {
  HeadCard card = pixel_card();
  card.class_names.pop_back();
  EXPECT_THROW(head_file_bytes(small_adapter(), card), InputError);
  card = pixel_card();
  card.recipe.expansion.dim = 7;  // the recipe gives 7 features, the adapter reads 6
  EXPECT_THROW(head_file_bytes(small_adapter(), card), InputError);
}

TEST(HeadFile, EveryTruncationAndEveryFlippedBitIsAnError) {
  const std::string good = head_file_bytes(small_adapter(), pixel_card());
  for (size_t n = 0; n < good.size(); ++n) EXPECT_THROW(parse_head_file(good.substr(0, n), "cut"), InputError) << n;
  for (size_t i = 0; i < good.size(); ++i)
    for (int bit : {0, 7}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      EXPECT_THROW(parse_head_file(bad, "flipped"), InputError) << i << " bit " << bit;
    }
}

TEST(HeadFile, ForeignBytesAreNamed) {
  try {
    parse_head_file("\x89PNG\r\n\x1a\n and more bytes than that", "photo.png");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("photo.png: not a fednode head file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fednode
