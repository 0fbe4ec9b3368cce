// Random views of the receiver's synthetic images, for distillation. A few hundred inverted images
// teach a student little of an ensemble that was trained on thousands; a view (the image moved by
// a pixel or two, or mirrored) is a new input the ensemble can be asked about, so that the student
// learns the ensemble's function around each image rather than its answers at the image alone
// ("consistent teaching": the teacher labels the very view the student sees). Chosen on the
// validation split (docs/methods/fedmitr.md, "A student worth its cost").
#pragma once

#include "core/rng.h"
#include "core/types.h"
#include "methods/fedmitr/vit.h"

#include <string>
#include <vector>

namespace fednode {

// How far "shift" moves a view, each way: of 28 pixels, a shift the classes survive (the
// mirror's choice on the validation split).
constexpr int kViewShiftPixels = 2;

struct ViewOptions {
  int max_shift = 0;  // pixels, each way, drawn per view and axis; the uncovered border is 0
  bool flip = false;  // mirrored left to right with probability one half
  bool any() const { return max_shift > 0 || flip; }
};

// "none", "shift", "flip" or "shift,flip" (the option's own spelling).
std::string to_string(const ViewOptions& o);
// Parses that spelling ("shift" moves by up to 2 pixels). Throws UsageError naming `option`.
ViewOptions parse_view_options(const std::string& text, const std::string& option);

// One random view of each image (rows of spec.pixels(), channel-major, as vit.h lays images out).
// Throws InputError for images of another width than the spec's.
MatrixF random_views(const MatrixF& images, const VitSpec& spec, const ViewOptions& o, Rng& rng);

// The ensemble's targets on `views`: its class scores, their argmax, and as high-attention tokens
// the high_counts[b] patches its CLS attends to most on view b (the count its source image kept
// through sparse inversion: a moved image's patches are not the ones that were kept).
DistillTargets ensemble_view_targets(const std::vector<VitModel>& ensemble, const MatrixF& views,
                                     const std::vector<int>& high_counts, const EnsembleMix& mix);

}  // namespace fednode
