// Labelled Gaussian blobs for method tests: class c has mean `scale` at coordinate c mod d and
// deviation 0.3 * scale elsewhere; `skip_class` (if >= 0) is held by no row.
#pragma once

#include "core/rng.h"
#include "core/types.h"

namespace fednode::test {

inline Features labelled_blobs(int n, int d, int classes, uint64_t seed, double scale = 1.0, int skip_class = -1) {
  Rng rng = Rng::stream(seed, Purpose::Generic, 0, 0);
  Features f;
  f.num_classes = classes;
  f.X.resize(n, d);
  f.y.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    int c;
    do c = static_cast<int>(rng.below(static_cast<uint64_t>(classes)));
    while (c == skip_class);
    f.y[static_cast<size_t>(i)] = c;
    for (int j = 0; j < d; ++j)
      f.X(i, j) = static_cast<float>(scale * (0.3 * rng.normal() + (j == c % d ? 1.0 : 0.0)));
  }
  return f;
}

}  // namespace fednode::test
