// The data's image encoder (features/data_encoder.h), what FGL's receiver reads synthetic images
// through: an image must give the features the node's own copy of it was given, through the
// bundled MobileNetV2, the pixels and the feature expansion alike.
#include "features/data_encoder.h"
#include "features/data_options.h"
#include "features/extract.h"
#include "features/idx.h"

#include "../common/expect_error.h"
#include "../common/temp_dir.h"

#include <atomic>

#include <gtest/gtest.h>

namespace fednode {
namespace {

constexpr int kImages = 6;

// Fashion-MNIST's first test images as a generator hands them over: [0, 1], one row each.
ImageBatch first_test_images() {
  const Features f = load_fashion_mnist(default_fashion_mnist_dir(), "test", kImages);
  ImageBatch images;
  images.pixels = f.X;
  images.labels = f.y;
  images.channels = 1;
  images.size = 28;
  return images;
}

float max_difference(const MatrixF& a, const MatrixF& b) {
  EXPECT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.cols(), b.cols());
  if (a.rows() != b.rows() || a.cols() != b.cols()) return 1e9f;
  return (a - b).cwiseAbs().maxCoeff();
}

ExtractOptions small_extraction() {
  ExtractOptions x;
  x.dataset = "fashion-mnist";
  x.split = "test";
  x.limit = kImages;
  x.input_size = 64;
  x.use_cache = false;
  x.progress = false;
  return x;
}

TEST(DataEncoder, GivesABackbonesImagesTheFeaturesExtractionGaveThem) {
  const Extracted real = extract_features(small_extraction());
  const BackboneFile file = open_backbone_file("", 64);
  const auto encoder = backbone_encoder(file.model, file.preprocessing, {}, {});
  EXPECT_LE(max_difference(encoder->encode(first_test_images(), nullptr), real.features.X), 1e-6f);
  EXPECT_NE(encoder->describe().find(real.fingerprint.substr(0, 12)), std::string::npos) << encoder->describe();

  FeatureExpansion wide;
  wide.dim = 40;
  wide.seed = 7;
  const auto expanding = backbone_encoder(file.model, file.preprocessing, {}, wide);
  EXPECT_LE(max_difference(expanding->encode(first_test_images(), nullptr), expand_features(real.features, wide).X),
            1e-5f);
}

TEST(DataEncoder, PixelsAreTheirOwnFeaturesThenExpanded) {
  const ImageBatch images = first_test_images();
  EXPECT_EQ(max_difference(pixel_encoder({})->encode(images, nullptr), images.pixels), 0.0f);
  FeatureExpansion wide;
  wide.dim = 50;
  Features f;
  f.X = images.pixels;
  f.y = images.labels;
  f.num_classes = 10;
  EXPECT_EQ(max_difference(pixel_encoder(wide)->encode(images, nullptr), expand_features(f, wide).X), 0.0f);
}

TEST(DataEncoder, RefusesImagesOfAnotherShapeAndStops) {
  ImageBatch images = first_test_images();
  images.size = 27;  // 784 values are not 27 x 27
  test::expect_input_error([&] { pixel_encoder({})->encode(images, nullptr); }, {"1 x 27 x 27"});
  const BackboneFile file = open_backbone_file("", 64);
  const auto encoder = backbone_encoder(file.model, file.preprocessing, {}, {});
  test::expect_input_error([&] { encoder->encode(images, nullptr); }, {"1 x 27 x 27"});
  const std::atomic<bool> stop{true};
  EXPECT_THROW(encoder->encode(first_test_images(), &stop), Interrupted);
}

TEST(DataEncoder, FashionMnistPixelsCarryTheirEncoder) {
  const Args pixels({"--dataset", "fashion-mnist", "--train-limit", "20", "--test-limit", "10"}, data_option_names(), {});
  const LoadedData d = load_data(pixels, 1u << 20, true);
  ASSERT_TRUE(d.encoder);
  EXPECT_EQ(d.encoder->describe(), "pixels");
  EXPECT_EQ(max_difference(d.encoder->encode(first_test_images(), nullptr), d.test.X.topRows(kImages)), 0.0f);
}

// `fednode extract`'s .npy files, named by the backbone they came from: the same fingerprint as
// extraction gave them and an encoder that reads images as it did; without --backbone, none.
TEST(DataEncoder, NpyFeaturesNamedByTheirBackboneCarryItsEncoder) {
  const test::TempDir dir;
  const Extracted real = extract_features(small_extraction());
  write_extracted(dir / "fm", real);
  const auto args = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {"--train-features", dir / "fm_X.npy", "--train-labels", dir / "fm_y.npy",
                                     "--test-features",  dir / "fm_X.npy", "--test-labels",  dir / "fm_y.npy"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return Args(argv, data_option_names(), {});
  };
  const LoadedData named = load_data(args({"--backbone", "default", "--input-size", "64"}), 1u << 20, true);
  EXPECT_EQ(named.fingerprint, real.fingerprint);
  ASSERT_TRUE(named.encoder);
  EXPECT_LE(max_difference(named.encoder->encode(first_test_images(), nullptr), real.features.X), 1e-6f);
  EXPECT_FALSE(load_data(args({}), 1u << 20, true).encoder);

  Extracted pixels = real;
  pixels.features = load_fashion_mnist(default_fashion_mnist_dir(), "test", kImages);
  write_extracted(dir / "px", pixels);
  const Args wrong({"--train-features", dir / "px_X.npy", "--train-labels", dir / "px_y.npy", "--test-features",
                    dir / "px_X.npy", "--test-labels", dir / "px_y.npy", "--backbone", "default"},
                   data_option_names(), {});
  test::expect_input_error([&] { load_data(wrong, 1u << 20, true); }, {"px_X.npy", "784 dimensions", "1280"});
}

}  // namespace
}  // namespace fednode
