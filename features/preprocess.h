// How raw 8-bit images become the float tensor a backbone expects, and the sidecar file that
// describes it. Kept free of LibTorch: it is plain pixel arithmetic, testable and cheap to compile.
//
// Sidecar format (MODEL.pt.preprocessing, next to the model): one `key = value` per line, `#`
// starts a comment, blank lines are ignored, every key at most once, unknown keys are errors.
//   input_size    = 224          square side the module is fed (required)
//   channels      = 3            input channels of the module: 3, or 1 for grayscale models
//   channel_order = rgb          rgb | bgr
//   grayscale     = repeat       repeat: 1-channel images become 3 identical channels | reject
//   resize        = bilinear     bilinear | nearest, as torch.nn.functional.interpolate with
//                                align_corners=False and no antialiasing
//   fit           = stretch      stretch: whole image to input_size x input_size |
//                                center_crop: shorter side to input_size (longer side scaled and
//                                truncated as torchvision's Resize), then a centred square crop
//   value_range   = 0-1          0-1: pixel / 255 | 0-255: pixel as is
//   mean          = none         none (the module normalises itself) | one number per channel,
//   std           = none         comma-separated; applied as (value - mean) / std after resizing
//   output_dim    = 1280         expected feature dimension, checked on a probe batch (optional)
#pragma once

#include "core/types.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fednode {

enum class ChannelOrder { Rgb, Bgr };
enum class ResizeMode { Bilinear, Nearest };
enum class FitMode { Stretch, CenterCrop };
enum class ValueRange { Unit, Byte };

struct Preprocessing {
  int input_size = 224;
  int channels = 3;
  ChannelOrder channel_order = ChannelOrder::Rgb;
  bool grayscale_to_rgb = true;
  ResizeMode resize = ResizeMode::Bilinear;
  FitMode fit = FitMode::Stretch;
  ValueRange value_range = ValueRange::Unit;
  std::vector<float> mean;  // empty: no normalisation
  std::vector<float> std;
  int64_t output_dim = 0;   // 0: not checked

  // Throws InputError naming `where` and the offending field.
  void validate(const std::string& where) const;
  // Every field that changes the features, in a fixed order and number format; part of the
  // backbone fingerprint. output_dim is a check, not a transformation, so it is left out.
  std::string canonical() const;
  // A complete sidecar file that parse() reads back to an equal value.
  std::string to_text() const;

  static Preprocessing parse(const std::string& text, const std::string& where);
  static Preprocessing load(const std::string& path);
};

// MODEL.pt -> MODEL.pt.preprocessing
std::string sidecar_path(const std::string& model_path);

// An 8-bit image, rows top to bottom, channels interleaved (gray: 1, RGB: 3).
struct ImageView {
  const uint8_t* pixels = nullptr;
  int height = 0;
  int width = 0;
  int channels = 0;
};

struct Image {
  int height = 0;
  int width = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
  // A decoded file holds its share of the pixels all decoding threads may hold at once
  // (features/images.h) until the last copy of the image is gone.
  std::shared_ptr<const void> pixel_share;
  ImageView view() const { return {pixels.data(), height, width, channels}; }
};

// Writes p.channels * p.input_size^2 floats, planar (CHW), into `out`. Throws InputError
// (naming `where`) for images the preprocessing cannot accept.
void preprocess_image(const ImageView& image, const Preprocessing& p, float* out,
                      const std::string& where);

}  // namespace fednode
