// What a star leaf holds of its hub's head (docs/topologies.md, "star"), and the leaf's rules for
// it: a head that leaves out the leaf's own data (its hub gave up on it) is worth waiting a
// deadline for the hub's refit with that data, unless the hub refused the data, when no refit will
// come; and a head that comes after the leaf fitted its own is taken only if it covers as much.
#pragma once

#include "node/machine_event.h"

#include <optional>

namespace fednode {

class HubHead {
 public:
  // `self`: the leaf; `has_data`: it holds data of its own; `deadline`: how long a refit is waited for.
  HubHead(NodeId self, bool has_data, double deadline) : self_(self), has_data_(has_data), deadline_(deadline) {}

  // An offer arrived at `now`; true when it replaces one held (the hub's refit).
  bool take(HeadOffer offer, double now);
  // The hub refused this leaf's knowledge.
  void hub_refused() { refused_ = true; }
  const HeadOffer* held() const { return offer_ ? &*offer_ : nullptr; }
  // Holds a head covering at least `contributors`.
  bool covers(const Contributors& contributors) const;
  // The head held leaves out the data this leaf holds.
  bool leaves_out_own_data() const { return offer_ && has_data_ && !offer_->contributors.count(self_); }
  // Whether the leaf waits at `now` for a refit that covers its own data; `first` is set the
  // first time it says so, for the leaf to say why it waits.
  bool awaits_refit(double now, bool& first);
  void release() { offer_.reset(); }

 private:
  NodeId self_;
  bool has_data_;
  double deadline_;
  std::optional<HeadOffer> offer_;
  double arrived_ = 0;
  bool refused_ = false;
  bool said_waiting_ = false;
};

}  // namespace fednode
