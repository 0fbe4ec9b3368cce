#include "node/peer_finder.h"

#include <algorithm>
#include <cstdio>

namespace fednode {
namespace {

// Hosts×reasons said at most: a LAN of forgers must not grow the set (or the log) without end.
constexpr size_t kMaxSaid = 256;

}  // namespace

PeerFinder::PeerFinder(std::map<NodeId, std::array<uint8_t, 32>> keys, NodeId self, std::set<NodeId> sought,
                       RunTag run, Say say, Namer name, Timing timing)
    : keys_(std::move(keys)),
      self_(self),
      sought_(std::move(sought)),
      run_(run),
      say_(std::move(say)),
      name_(std::move(name)),
      timing_(timing) {}

void PeerFinder::ignore(const std::string& host, const std::string& reason, const std::string& detail) {
  ++ignored_[reason];
  if (said_.size() >= kMaxSaid || !said_.emplace(host, reason).second) return;
  say_.warn("discovery: ignored a beacon from " + host + ": " + detail + " (said once per sender)");
}

void PeerFinder::hear(const HeardBeacon& heard, Clock::time_point now) {
  if (!heard.beacon) return ignore(heard.host, "not a beacon", "not a fednode beacon (" + heard.malformed + ")");
  const Beacon& b = *heard.beacon;
  if (b.run != run_) return ignore(heard.host, "another run", "a beacon of another run");
  const auto key = keys_.find(b.node);
  if (key == keys_.end())
    return ignore(heard.host, "node not in the topology",
                  "node " + std::to_string(b.node) + " is not in the topology");
  if (key->second != b.key)
    return ignore(heard.host, "key not the node's",
                  "it names " + name_(b.node) + " with a key that is not " + name_(b.node) + "'s in the topology");
  if (b.node == self_ || !sought_.count(b.node)) return;  // our own, or a peer we do not dial
  Search& s = searches_[b.node];
  const std::string address = "tcp://" + heard.host + ":" + std::to_string(b.port);
  auto it = std::find_if(s.candidates.begin(), s.candidates.end(),
                         [&](const Candidate& c) { return c.address == address; });
  if (it != s.candidates.end()) {
    it->heard = now;
    return;
  }
  if (s.candidates.size() >= kMaxCandidates) {
    // The one heard longest ago makes room, never the one being dialled.
    auto oldest = s.candidates.end();
    for (auto c = s.candidates.begin(); c != s.candidates.end(); ++c)
      if (c->address != s.current && (oldest == s.candidates.end() || c->heard < oldest->heard)) oldest = c;
    s.candidates.erase(oldest);
  }
  s.candidates.push_back({address, now});
}

PeerFinder::Candidate* PeerFinder::next_candidate(Search& s, Clock::time_point now) {
  Candidate* best = nullptr;
  for (Candidate& c : s.candidates)
    if (c.address != s.current && now - c.heard <= timing_.fresh && (!best || c.tried < best->tried)) best = &c;
  return best;
}

std::string PeerFinder::address_for(NodeId peer, bool proven, Clock::time_point now) {
  auto found = searches_.find(peer);
  if (found == searches_.end()) return "";
  Search& s = found->second;
  const std::string who = name_(peer);
  if (proven && !s.current.empty()) {
    s.since = now;
    if (!s.proven)
      say_("discovery: " + who + " at " + s.current + " proved its key (CurveZMQ handshake); using it");
    s.proven = true;
    return s.current;
  }
  if (!s.current.empty() && now - s.since < timing_.trial) return s.current;
  Candidate* next = next_candidate(s, now);
  if (!next) return s.current;
  if (s.current.empty()) {
    say_("discovery: " + who + " may be at " + next->address + " (a beacon); dialling it, trusted once the " +
         "CurveZMQ handshake proves its key");
  } else {
    char trial[32];
    std::snprintf(trial, sizeof trial, "%.1f", static_cast<double>(timing_.trial.count()) / 1000.0);
    say_.warn("discovery: " + s.current + " has not proved " + who + "'s key for " + trial + " s; trying " +
              next->address + " (a beacon)");
  }
  s.current = next->address;
  s.since = now;
  s.proven = false;
  next->tried = now;
  return s.current;
}

}  // namespace fednode
