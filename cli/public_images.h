// The labelled images a model is pre-trained on before any node runs: a range of Fashion-MNIST's
// training split that the federation leaves out, or a folder of class folders. `fednode
// train-generator` (FGL's stand-in generator) and `fednode train-vit` (FedMITR's pretrained start)
// read them the same way.
#pragma once

#include "core/options.h"
#include "core/types.h"

#include <string>
#include <vector>

namespace fednode::cli {

struct PublicImages {
  MatrixF pixels;  // n x channels*size*size in [0, 1], channel-major
  Labels labels;   // indices into names
  int channels = 1, size = 0;
  std::vector<std::string> names;
  std::string description;  // where they came from, for provenance lines
};

// The options --dataset fashion-mnist [--from A] [--to B] | --images DIR, as the help of both
// commands describes them (default 50000 to 60000: what `simulate --train-limit 50000` leaves
// out). Throws UsageError for a bad combination, InputError for images that cannot be read, are
// not square, or differ in size or channels.
PublicImages read_public_images(const Args& a);
// `help` with its "%s" replaced by the help lines of those options.
std::string with_public_images_help(const std::string& help);

}  // namespace fednode::cli
