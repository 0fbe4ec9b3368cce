// The release policy users of federated statistics expect (NVFlare's min-count cleanser): a class
// a node holds fewer than M samples of is not released at all, neither in the knowledge it sends
// nor in a head it sends, and the node's ledger lists it as withheld. This is not differential
// privacy (that a class is missing says its count is below M); it keeps a handful of samples from
// being summarised on their own, and composes with DP.
#pragma once

#include "core/types.h"
#include "methods/dp/accounting.h"

#include <optional>
#include <vector>

namespace fednode {

// `local` without the rows of classes with 0 < count < min_count; nullopt when no class is
// withheld (nothing is copied then). `withheld`, when not null, receives those classes.
std::optional<Features> withhold_small_classes(const Features& local, int min_count,
                                               std::vector<int>* withheld = nullptr);

// One "withheld" ledger entry per such class.
std::vector<PrivacyRelease> withheld_releases(const Features& local, int min_count);

}  // namespace fednode
