// A cache of extracted features on disk, so that running the same backbone over the same data
// twice costs a file read instead of minutes of inference.
//
// An entry is the folder <root>/features/<key>/ holding X.npy, y.npy and meta.txt, where key is
// the SHA-256 of the backbone fingerprint and the dataset identity (path, split, subset, file
// sizes and modification times). meta.txt records both, the shape and the SHA-256 of each .npy
// file; an entry whose files do not match it is reported as damaged and recomputed.
#pragma once

#include "core/types.h"

#include <optional>
#include <string>

namespace fednode {

struct CacheKey {
  std::string fingerprint;       // backbone_fingerprint()
  std::string dataset_identity;  // any text that changes whenever the input images may have
  std::string description;       // one line for humans, e.g. "fashion-mnist train, first 1000"
  std::string digest() const;
};

class FeatureCache {
 public:
  explicit FeatureCache(std::string root);
  const std::string& root() const { return root_; }
  std::string entry_path(const CacheKey& key) const;

  // The cached features, or nullopt when there is no usable entry. When an entry exists but is
  // damaged or does not match the key, `problem` (if given) says why.
  std::optional<Features> load(const CacheKey& key, std::string* problem = nullptr) const;
  // Writes the entry atomically (a temporary folder renamed into place), replacing any old one.
  // Throws InputError when the cache folder cannot be written.
  void store(const CacheKey& key, const Features& features) const;

 private:
  std::string root_;
};

// $XDG_CACHE_HOME/fednode, else $HOME/.cache/fednode; "" when neither variable is set.
std::string default_cache_dir();

}  // namespace fednode
