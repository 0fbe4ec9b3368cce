#include "features/image_sources.h"

#include <filesystem>

namespace fednode {

ImageView IdxSource::image(int64_t i, Image&) const {
  const size_t per = static_cast<size_t>(images_.rows) * images_.cols;
  return {images_.pixels.data() + static_cast<size_t>(i) * per, images_.rows, images_.cols, 1};
}

ImageView FolderSource::image(int64_t i, Image& storage) const {
  storage = Image{};  // its pixel share first: a thread holds one at a time (features/images.h)
  try {
    storage = read_image(path(i));
  } catch (const InputError& e) {
    if (!skip_bad_) throw;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      bad_[i] = e.what();
    }
    storage = Image{};
    storage.width = storage.height = 1;
    storage.channels = channels_;
    storage.pixels.assign(static_cast<size_t>(channels_), 0);
  }
  return storage.view();
}

std::string FolderSource::path(int64_t i) const {
  return (std::filesystem::path(folder_.root) / folder_.files[static_cast<size_t>(i)]).string();
}

}  // namespace fednode
