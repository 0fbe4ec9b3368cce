// Image files in: PNG (libpng) and JPEG (libjpeg-turbo) decoded to 8-bit gray or RGB, and folders
// laid out as one sub-folder per class (torchvision's ImageFolder layout).
#pragma once

#include "features/preprocess.h"
#include "core/types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fednode {

// Largest decoded image accepted (width * height), so a hostile header cannot make us allocate
// gigabytes: 64 megapixels.
constexpr int64_t kMaxImagePixels = int64_t(64) << 20;

// Decoded images held at once by all threads together: decoding takes a share of this many
// pixels from the header, before any pixel buffer exists, and gives it back when the Image is
// destroyed; a decoder waits for its share. So one image at the pixel limit (about 1.2 GB while it
// is decoded and resized) decodes alone, and small images in parallel, whatever --threads says.
constexpr int64_t kMaxPixelsInFlight = kMaxImagePixels;
// The pixels decoded images hold now (for tests).
int64_t pixels_in_flight();

// Decodes a PNG or JPEG file (recognised by its signature, not its name) into 1 channel for
// grayscale files and 3 (RGB) otherwise, as PIL's convert("L" or "RGB") does: alpha is dropped
// without compositing, 16-bit samples keep their high byte, palettes and CMYK become RGB (CMYK by
// PIL's formula). Throws InputError naming the file and the problem.
Image read_image(const std::string& path);
Image decode_image(const std::vector<uint8_t>& bytes, const std::string& where);

struct ImageFolder {
  std::string root;
  std::vector<std::string> class_names;  // sorted; the label of class_names[i] is i
  std::vector<std::string> files;        // paths relative to root, "class/name.png", "class/sub/x.jpg"
  Labels labels;
  // Files inside class folders that are not .png, .jpg or .jpeg, relative to root, sorted: not
  // images to fednode, and reported so that nothing is left out unsaid.
  std::vector<std::string> ignored;
};

// Lists the files ending in .png, .jpg or .jpeg (any case) in root/<class>/ and in its
// sub-folders, at any depth; hidden entries are skipped. Classes are the sub-folders of root
// sorted by name; within a class, files come in torchvision's ImageFolder order (folders sorted
// by path, files by name within each).
// With limit >= 0, at most `limit` files are kept, taken round-robin over the classes so that a
// small subset still covers every class; the kept files stay in class-then-name order.
// Throws InputError when root is not a folder, has no class folders, or a class has no image.
ImageFolder scan_image_folder(const std::string& root, int64_t limit = -1);

// Images to classify: a folder with image files directly inside lists every image in it and its
// sub-folders, unlabelled (no class_names, no labels), in scan_image_folder's order; a folder of
// class sub-folders is scan_image_folder(root), labelled by folder.
ImageFolder scan_images_to_classify(const std::string& root);

}  // namespace fednode
