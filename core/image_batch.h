// Images as a federation's pixel features: what a generator draws, what an image encoder turns
// into features. Not any one method's: FGL's generators hand their images over as this, and the
// classifier and the encoders read it.
#pragma once

#include "core/types.h"

namespace fednode {

// One row per image, channels * size * size values in [0, 1], channel by channel, each row by row.
struct ImageBatch {
  MatrixF pixels;
  Labels labels;
  int channels = 0;
  int size = 0;
};

}  // namespace fednode
