#include "methods/dp/min_count.h"

#include <string>

namespace fednode {
namespace {

std::vector<int64_t> class_counts(const Features& f) {
  std::vector<int64_t> counts(static_cast<size_t>(std::max(f.num_classes, 0)), 0);
  for (int y : f.y)
    if (y >= 0 && y < f.num_classes) ++counts[static_cast<size_t>(y)];
  return counts;
}

}  // namespace

std::optional<Features> withhold_small_classes(const Features& local, int min_count, std::vector<int>* withheld) {
  if (withheld) withheld->clear();
  if (min_count <= 1) return std::nullopt;
  const std::vector<int64_t> counts = class_counts(local);
  std::vector<bool> keep(counts.size(), true);
  bool any = false;
  for (size_t c = 0; c < counts.size(); ++c)
    if (counts[c] > 0 && counts[c] < min_count) {
      keep[c] = false;
      any = true;
      if (withheld) withheld->push_back(static_cast<int>(c));
    }
  if (!any) return std::nullopt;
  std::vector<int64_t> rows;
  for (size_t i = 0; i < local.y.size(); ++i)
    if (keep[static_cast<size_t>(local.y[i])]) rows.push_back(static_cast<int64_t>(i));
  return local.subset(rows);
}

std::vector<PrivacyRelease> withheld_releases(const Features& local, int min_count) {
  std::vector<PrivacyRelease> out;
  if (min_count <= 1) return out;
  const std::vector<int64_t> counts = class_counts(local);
  for (size_t c = 0; c < counts.size(); ++c)
    if (counts[c] > 0 && counts[c] < min_count) {
      PrivacyRelease r;
      r.what = "class " + std::to_string(c);
      r.mechanism = "withheld";
      r.classes = {static_cast<int>(c)};
      r.note = std::to_string(counts[c]) + " samples, fewer than the policy's " + std::to_string(min_count);
      out.push_back(std::move(r));
    }
  return out;
}

}  // namespace fednode
