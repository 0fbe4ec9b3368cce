// The receiver's random views (methods/fedmitr/views.h): a view is its image moved by at most two
// pixels or mirrored, nothing else; the ensemble labels each view itself, its high tokens the
// ones it attends to most, as many as the image kept; a receiver with views is seeded like one
// without, and one without them is untouched by their existence.
#include "core/options.h"
#include "core/rng.h"
#include "methods/fedmitr/receiver.h"
#include "methods/fedmitr/views.h"
#include "vit_samples.h"

#include <gtest/gtest.h>

namespace fednode {
namespace {

using FedMitrViews = test::OneTorchThread;
using test::random_images;
using test::scaled_model;

// The (dx, dy, mirrored) that makes `view` from `image`, or nothing.
bool is_moved_copy(const VitSpec& s, const MatrixF& image, const MatrixF& view, int max_shift, bool may_mirror) {
  const int n = s.image_size;
  for (int mirror = 0; mirror <= (may_mirror ? 1 : 0); ++mirror)
    for (int dy = -max_shift; dy <= max_shift; ++dy)
      for (int dx = -max_shift; dx <= max_shift; ++dx) {
        bool same = true;
        for (int y = 0; y < n && same; ++y)
          for (int x = 0; x < n && same; ++x) {
            const int fy = y - dy;
            int fx = x - dx;
            float want = 0;
            if (fy >= 0 && fy < n && fx >= 0 && fx < n) {
              if (mirror) fx = n - 1 - fx;
              want = image(0, fy * n + fx);
            }
            same = view(0, y * n + x) == want;
          }
        if (same) return true;
      }
  return false;
}

TEST_F(FedMitrViews, AViewIsItsImageMovedOrMirroredAndSeeded) {
  const VitSpec s;
  MatrixF images = random_images(s, 40, 3);
  images.array() += 0.01f;  // no pixel is 0, so that a border of zeros shows where the image moved
  for (const char* spelling : {"shift", "flip", "shift,flip"}) {
    const ViewOptions o = parse_view_options(spelling, "distill-views");
    EXPECT_EQ(to_string(o), spelling);
    Rng rng(7), again(7);
    const MatrixF views = random_views(images, s, o, rng);
    EXPECT_EQ(views, random_views(images, s, o, again)) << spelling;
    int unchanged = 0;
    for (Eigen::Index b = 0; b < images.rows(); ++b) {
      EXPECT_TRUE(is_moved_copy(s, images.row(b), views.row(b), o.max_shift, o.flip)) << spelling << ", image " << b;
      unchanged += views.row(b) == images.row(b);
    }
    // A mirror alone leaves half the images as they were; a shift of 0 both ways is 1 draw in 25.
    if (o.max_shift == 0) {
      EXPECT_GT(unchanged, 8) << spelling;
      EXPECT_LT(unchanged, 32) << spelling;
    } else {
      EXPECT_LT(unchanged, 8) << spelling;
    }
  }
  EXPECT_EQ(parse_view_options("flip,shift", "distill-views").max_shift, 2);
  EXPECT_FALSE(parse_view_options("none", "distill-views").any());
  for (const char* bad : {"", "shift,shift", "blur", "shift,", "none,flip"})
    EXPECT_THROW(parse_view_options(bad, "distill-views"), UsageError) << "'" << bad << "'";
  Rng rng(1);
  EXPECT_THROW(random_views(MatrixF::Zero(2, 10), s, ViewOptions{2, true}, rng), InputError);
}

TEST_F(FedMitrViews, TheEnsembleLabelsEachViewAndItsMostAttendedTokens) {
  const VitSpec s;
  const std::vector<VitModel> ensemble = {scaled_model(s, 31), scaled_model(s, 32)};
  const EnsembleMix mix{EnsembleRule::WeightedProbabilities, {100, 300}};
  const MatrixF views = random_images(s, 6, 4);
  const std::vector<int> counts = {0, 1, 7, 7, 16, 40};
  const DistillTargets t = ensemble_view_targets(ensemble, views, counts, mix);
  const EnsembleOutput e = ensemble_forward(ensemble, views, mix);
  EXPECT_EQ(t.teacher_logits, ensemble_logits(ensemble, views, mix));
  const int T = s.tokens();
  for (int b = 0; b < 6; ++b) {
    Eigen::Index best;
    e.logits.row(b).maxCoeff(&best);
    EXPECT_EQ(t.pseudo[static_cast<size_t>(b)], best);
    int high = 0;
    float lowest_high = 2, highest_low = -1;
    for (int k = 0; k < T; ++k) {
      const float a = e.cls_attention(b, k);
      if (t.high[static_cast<size_t>(b * T + k)]) {
        ++high;
        lowest_high = std::min(lowest_high, a);
      } else {
        highest_low = std::max(highest_low, a);
      }
    }
    EXPECT_EQ(high, std::min(counts[static_cast<size_t>(b)], T)) << "view " << b;
    if (high > 0 && high < T) EXPECT_GE(lowest_high, highest_low) << "view " << b;
  }
  EXPECT_THROW(ensemble_view_targets(ensemble, views, {1, 2}, mix), InputError);
}

TEST_F(FedMitrViews, AReceiverWithViewsIsSeededAndDiffersFromOneWithout) {
  VitSpec s;
  s.depth = 1;
  const std::vector<VitModel> ensemble = {scaled_model(s, 41), scaled_model(s, 42), scaled_model(s, 43)};
  const std::vector<double> samples = {50, 20, 30};
  const VitModel start = average_models(ensemble, samples);
  ReceiverOptions o;
  o.stages = 2;
  o.images_per_stage = 8;
  o.inversion.iterations = 4;
  o.inversion.mask_at = {1, 2};
  o.distill.epochs = 2;
  o.views = parse_view_options("none", "distill-views");
  const VitModel plain = distil_ensemble(ensemble, samples, start, o, ReceiverVariant::FedMitr, 5, {}, nullptr);
  o.views = parse_view_options("shift,flip", "distill-views");
  const VitModel viewed = distil_ensemble(ensemble, samples, start, o, ReceiverVariant::FedMitr, 5, {}, nullptr);
  EXPECT_EQ(distil_ensemble(ensemble, samples, start, o, ReceiverVariant::FedMitr, 5, {}, nullptr).parameters,
            viewed.parameters);
  EXPECT_NE(viewed.parameters, plain.parameters);
  EXPECT_NE(viewed.parameters, start.parameters);
  for (ReceiverVariant v : {ReceiverVariant::DenseKd, ReceiverVariant::SparsePseudoLabel})
    EXPECT_NE(distil_ensemble(ensemble, samples, start, o, v, 5, {}, nullptr).parameters, start.parameters) << to_string(v);
}

}  // namespace
}  // namespace fednode
