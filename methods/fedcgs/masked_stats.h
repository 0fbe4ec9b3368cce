// FedCGS statistics under secure aggregation (docs/privacy.md, "Secure aggregation"): encoding
// the parts to mask into the fixed-point ring, summing masked pieces, and reading a sum whose
// masks have cancelled. The masks themselves come from crypto/ (the node adds them); nothing here
// knows a key.
#pragma once

#include "methods/knowledge.h"

#include <string>

namespace fednode {

// `plain` with the parts to mask moved into the ring (no masks yet): all of A, N and B, or with
// `counts_only` N alone. Throws InputError naming `where` for a value beyond the ring's range.
StatsKnowledge encode_for_masking(const StatsKnowledge& plain, const Contributors& group, bool counts_only,
                                  const std::string& where);

// Adds a node's masks (NodeContext::masking) to every masked part, each its own mask stream:
// A is stream 0, N 1, B 2.
void add_masks(MaskedStats& m, const AddMasks& add);

// A star's masked sum after the unmasking round (NodeContext::unmasking): when `contributors`
// hold exactly the round's survivors of its group, their leftover masks are removed and the sum
// counts as the survivors' group, which unmask() then reads. Otherwise nothing changes (and
// unmask() says whose pieces are missing).
void recover(MaskedStats& sum, const Contributors& contributors, const Unmasking& unmasking);

// into.masked += piece.masked (entry by entry, modulo 2^128); the plain parts are not touched.
// Throws InputError naming `where` for another group, mode or shape.
void add_masked(MaskedStats& into, const MaskedStats& piece, const std::string& where);

// Whether masks of `m` have cancelled in a sum whose contributors are `contributors`.
bool unmaskable(const MaskedStats& m, const Contributors& contributors);

// The statistics a masked sum stands for: its plain parts plus its masked parts read back.
// Throws InputError naming `where` and the members missing when `contributors` do not cover the
// group, or when a decoded value is not a statistic (a count beyond 2^53).
StatsKnowledge unmask(const StatsKnowledge& sum, const Contributors& contributors, const std::string& where);

}  // namespace fednode
