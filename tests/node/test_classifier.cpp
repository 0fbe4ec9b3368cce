// fednode::Classifier: a head file's head with the recipe its features came through. Images and
// the node's own rows give the same classes bit for bit; several threads may classify at once;
// features of another width, and images for a head that records no recipe, are refused.
#include "node/classifier.h"

#include "features/extract.h"
#include "features/idx.h"
#include "features/image_sources.h"

#include <gtest/gtest.h>

#include <thread>

namespace fednode {
namespace {

// A linear head on Fashion-MNIST's pixels expanded to 64 features, with fixed weights.
HeadFile pixel_head() {
  HeadFile f;
  f.card.recipe = fashion_mnist_pixel_recipe({64, 3});
  f.card.class_names = fashion_mnist_class_names();
  MatrixF W(10, 64);
  for (int c = 0; c < 10; ++c)
    for (int j = 0; j < 64; ++j) W(c, j) = static_cast<float>((c * 7 + j * 13) % 11 - 5) / 10.0f;
  f.head = std::make_shared<LinearHead>("linear", W, VectorF::LinSpaced(10, -1, 1));
  return f;
}

IdxSource test_images(int64_t n) {
  return IdxSource(read_idx_images(find_idx_file(default_fashion_mnist_dir(), "t10k-images-idx3-ubyte"), n), "test");
}

TEST(Classifier, ImagesGiveExactlyWhatTheNodesOwnPixelRowsGive) {
  const Classifier classifier(pixel_head());
  ASSERT_TRUE(classifier.reads_images());
  const Features rows = load_fashion_mnist(default_fashion_mnist_dir(), "test", 300);
  const Classification from_rows = classifier.classify_features(rows.X);
  const Classification from_images = classifier.classify_images(test_images(300));
  EXPECT_EQ(from_images.labels, from_rows.labels);
  EXPECT_TRUE(from_images.logits == from_rows.logits);  // bit for bit: the same arithmetic
  for (Eigen::Index i = 0; i < from_rows.probabilities.rows(); ++i)
    EXPECT_NEAR(from_rows.probabilities.row(i).sum(), 1.0f, 1e-5f);
  EXPECT_EQ(classifier.card().class_name(9), "Ankle boot");
}

TEST(Classifier, SeveralThreadsClassifyAtOnceAndAgree) {
  const Classifier classifier(pixel_head());
  const IdxSource images = test_images(200);
  const Classification alone = classifier.classify_images(images);
  std::vector<Classification> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) threads.emplace_back([&, t] { got[t] = classifier.classify_images(images); });
  for (auto& t : threads) t.join();
  for (const auto& c : got) {
    EXPECT_EQ(c.labels, alone.labels);
    EXPECT_TRUE(c.logits == alone.logits);
  }
}

TEST(Classifier, RefusesFeaturesOfAnotherWidthAndImagesWithoutARecipe) {
  const Classifier classifier(pixel_head());
  EXPECT_THROW(classifier.classify_features(MatrixF::Zero(3, 64)), InputError);  // expanded already: 784 expected
  HeadFile npy = pixel_head();
  npy.card.recipe = FeatureRecipe{};
  npy.card.recipe.backbone_fingerprint = "my-backbone";
  npy.card.recipe.expansion = {64, 3};
  const Classifier features_only(npy);
  EXPECT_FALSE(features_only.reads_images());
  EXPECT_THROW(features_only.classify_images(test_images(2)), InputError);
  EXPECT_EQ(features_only.classify_features(MatrixF::Ones(2, 5)).labels.size(), 2u);  // any width: unrecorded
  // A backbone named for it must give its fingerprint; the bundled one does not.
  ClassifierOptions other;
  other.backbone = default_backbone_path();
  EXPECT_THROW(Classifier(npy, other), InputError);
}

}  // namespace
}  // namespace fednode
