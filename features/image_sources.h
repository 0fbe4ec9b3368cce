// The images a backbone (or a pixel recipe) runs over, as `fednode extract` and `fednode predict`
// read them: Fashion-MNIST's IDX files, and image files listed from a folder.
#pragma once

#include "features/backbone.h"
#include "features/idx.h"
#include "features/images.h"

#include <map>
#include <mutex>
#include <string>

namespace fednode {

// IDX images held in memory, one channel each.
class IdxSource : public ImageSource {
 public:
  IdxSource(IdxImages images, std::string split) : images_(std::move(images)), split_(std::move(split)) {}
  int64_t size() const override { return images_.count; }
  ImageView image(int64_t i, Image&) const override;
  std::string describe(int64_t i) const override { return "Fashion-MNIST " + split_ + " image " + std::to_string(i); }

 private:
  IdxImages images_;
  std::string split_;
};

// The files of `folder`, decoded as they are asked for. With skip_bad, a file that does not
// decode is noted and stands in as one black pixel of `channels`, whose row the caller then
// drops (bad() says which); without, its InputError ends the run.
class FolderSource : public ImageSource {
 public:
  FolderSource(const ImageFolder& folder, bool skip_bad, int channels)
      : folder_(folder), skip_bad_(skip_bad), channels_(channels) {}
  int64_t size() const override { return static_cast<int64_t>(folder_.files.size()); }
  ImageView image(int64_t i, Image& storage) const override;
  std::string describe(int64_t i) const override { return path(i); }
  // The files skipped so far, in folder order, with why.
  const std::map<int64_t, std::string>& bad() const { return bad_; }

 private:
  std::string path(int64_t i) const;
  const ImageFolder& folder_;
  const bool skip_bad_;
  const int channels_;
  mutable std::mutex mutex_;
  mutable std::map<int64_t, std::string> bad_;
};

}  // namespace fednode
