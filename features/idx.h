// Fashion-MNIST (and MNIST) IDX files, gzip-compressed or plain.
// Every header field is checked before anything is allocated, so a corrupt or hostile file
// gives an InputError naming the file and the field, never a huge allocation.
#pragma once

#include "core/types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fednode {

struct IdxImages {
  int64_t count = 0;
  int rows = 0;
  int cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols, row-major, image after image
};

// limit < 0 reads every item; otherwise at most `limit` (the first ones in the file).
IdxImages read_idx_images(const std::string& path, int64_t limit = -1);
std::vector<uint8_t> read_idx_labels(const std::string& path, int64_t limit = -1);

// "/usr/share/datasets/fashion-mnist" (Debian's dataset-fashion-mnist), or the value of the
// environment variable FEDNODE_FASHION_MNIST_DIR when set and non-empty.
std::string default_fashion_mnist_dir();
// DIR/STEM.gz, as Debian ships it, else DIR/STEM (unpacked); throws InputError naming both.
std::string find_idx_file(const std::string& dir, const std::string& stem);

// Reads <dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] for split "train" or "test".
// Features are pixels / 255 as float32 (784 dims), num_classes 10.
Features load_fashion_mnist(const std::string& dir, const std::string& split, int64_t limit = -1);

}  // namespace fednode
