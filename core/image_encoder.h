// What turns images into a federation's features: the frozen backbone the node's own data came
// through, then the same feature expansion (features/data_encoder.h builds it). FGL's receiver
// trains the node's usual head on the features of its synthetic images through this, so that a
// head trained on generated images reads real ones in the same space; methods/ sees only this
// interface and so stays free of LibTorch and files.
#pragma once

#include "core/image_batch.h"
#include "core/types.h"

#include <atomic>
#include <string>

namespace fednode {

class ImageEncoder {
 public:
  virtual ~ImageEncoder() = default;
  // For progress lines and errors ("backbone 10467ba50b92 at 224 px").
  virtual std::string describe() const = 0;
  // One row of features per image, in order, exactly as the node's own data were computed from
  // images with the same pixels. Throws InputError for images the encoder cannot read (a channel
  // count it does not take) and Interrupted when `stop` fires.
  virtual MatrixF encode(const ImageBatch& images, const std::atomic<bool>* stop) const = 0;
};

}  // namespace fednode
