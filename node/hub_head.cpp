#include "node/hub_head.h"

#include <algorithm>

namespace fednode {

bool HubHead::take(HeadOffer offer, double now) {
  const bool refreshed = offer_.has_value();
  offer_ = std::move(offer);
  arrived_ = now;
  return refreshed;
}

bool HubHead::covers(const Contributors& contributors) const {
  return offer_ && std::includes(offer_->contributors.begin(), offer_->contributors.end(), contributors.begin(),
                                 contributors.end());
}

bool HubHead::awaits_refit(double now, bool& first) {
  first = false;
  if (!leaves_out_own_data() || refused_) return false;
  const bool waiting = now - arrived_ <= deadline_;
  if (waiting && !said_waiting_) said_waiting_ = first = true;
  return waiting;
}

}  // namespace fednode
