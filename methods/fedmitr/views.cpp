#include "methods/fedmitr/views.h"

#include "core/options.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace fednode {

std::string to_string(const ViewOptions& o) {
  if (!o.any()) return "none";
  if (o.max_shift > 0 && o.flip) return "shift,flip";
  return o.flip ? "flip" : "shift";
}

ViewOptions parse_view_options(const std::string& text, const std::string& option) {
  ViewOptions o;
  if (text == "none") return o;
  const auto refuse = [&] {
    return UsageError("--" + option + ": '" + text + "' (expected none, or shift and/or flip, comma-separated, each once)");
  };
  if (text.empty() || text.back() == ',') throw refuse();
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item == "shift" && o.max_shift == 0)
      o.max_shift = kViewShiftPixels;
    else if (item == "flip" && !o.flip)
      o.flip = true;
    else
      throw refuse();
  }
  return o;
}

MatrixF random_views(const MatrixF& images, const VitSpec& s, const ViewOptions& o, Rng& rng) {
  if (images.cols() != s.pixels())
    throw InputError("ViT views: images of " + std::to_string(images.cols()) + " values, the spec's have " +
                     std::to_string(s.pixels()));
  const int n = s.image_size, span = 2 * o.max_shift + 1;
  MatrixF out = MatrixF::Zero(images.rows(), images.cols());
  for (Eigen::Index b = 0; b < images.rows(); ++b) {
    // Drawn in this order whatever is enabled, so that a view depends on its image's place alone.
    const int dx = static_cast<int>(rng.below(static_cast<uint64_t>(span))) - o.max_shift;
    const int dy = static_cast<int>(rng.below(static_cast<uint64_t>(span))) - o.max_shift;
    const bool mirror = o.flip && rng.uniform() < 0.5;
    for (int c = 0; c < s.channels; ++c)
      for (int y = 0; y < n; ++y) {
        const int from_y = y - dy;
        if (from_y < 0 || from_y >= n) continue;
        for (int x = 0; x < n; ++x) {
          int from_x = x - dx;
          if (from_x < 0 || from_x >= n) continue;
          if (mirror) from_x = n - 1 - from_x;
          out(b, (c * n + y) * n + x) = images(b, (c * n + from_y) * n + from_x);
        }
      }
  }
  return out;
}

DistillTargets ensemble_view_targets(const std::vector<VitModel>& ensemble, const MatrixF& views,
                                     const std::vector<int>& high_counts, const EnsembleMix& mix) {
  if (ensemble.empty()) throw InputError("ViT views: no model");
  if (high_counts.size() != static_cast<size_t>(views.rows()))
    throw InputError("ViT views: " + std::to_string(high_counts.size()) + " high-token counts for " +
                     std::to_string(views.rows()) + " views");
  const int T = ensemble[0].spec.tokens();
  DistillTargets t;
  t.teacher_logits.resize(views.rows(), ensemble[0].spec.classes);
  t.pseudo.resize(static_cast<size_t>(views.rows()));
  t.high.assign(static_cast<size_t>(views.rows()) * static_cast<size_t>(T), 0);
  std::vector<int> order(static_cast<size_t>(T));
  // In slices, so that every model's activations for a whole pool are never held at once.
  constexpr Eigen::Index kSlice = 2048;
  for (Eigen::Index first = 0; first < views.rows(); first += kSlice) {
    const Eigen::Index n = std::min(kSlice, views.rows() - first);
    const EnsembleOutput e = ensemble_forward(ensemble, views.middleRows(first, n), mix);
    t.teacher_logits.middleRows(first, n) = e.logits;
    for (Eigen::Index i = 0; i < n; ++i) {
      const size_t b = static_cast<size_t>(first + i);
      Eigen::Index best = 0;
      e.logits.row(i).maxCoeff(&best);
      t.pseudo[b] = static_cast<int>(best);
      std::iota(order.begin(), order.end(), 0);
      // Ties (equal attention) go to the earlier patch, so that the choice does not depend on the sort.
      std::stable_sort(order.begin(), order.end(),
                       [&](int x, int y) { return e.cls_attention(i, x) > e.cls_attention(i, y); });
      const int high = std::clamp(high_counts[b], 0, T);
      for (int j = 0; j < high; ++j) t.high[b * static_cast<size_t>(T) + static_cast<size_t>(order[static_cast<size_t>(j)])] = 1;
    }
  }
  return t;
}

}  // namespace fednode
