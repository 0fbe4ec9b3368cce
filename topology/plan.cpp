#include "topology/plan.h"

#include <sstream>

#include "topology/graph.h"

#include <algorithm>
#include <utility>

namespace fednode {

using topo::Bits;
using topo::Digraph;

const char* to_string(PlanMessage m) {
  switch (m) {
    case PlanMessage::Knowledge: return "knowledge";
    case PlanMessage::Complete: return "complete knowledge";
    case PlanMessage::Head: return "head";
  }
  return "?";
}

bool NodePlan::expects(NodeId from, PlanMessage kind) const {
  auto in = [from](const std::vector<NodeId>& v) { return std::find(v.begin(), v.end(), from) != v.end(); };
  switch (kind) {
    case PlanMessage::Knowledge: return in(wait_for) || in(late_from);
    case PlanMessage::Complete: return complete_from && *complete_from == from;
    case PlanMessage::Head: return head_from && *head_from == from;
  }
  return false;
}

std::vector<NodeId> NodePlan::recipients() const {
  std::vector<NodeId> p;
  for (const auto* v : {&forward_to, &feedback_to, &send_head_to}) p.insert(p.end(), v->begin(), v->end());
  if (complete_to) p.push_back(*complete_to);
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  return p;
}

std::vector<NodeId> NodePlan::peers() const {
  std::vector<NodeId> p;
  for (const auto* v : {&wait_for, &forward_to, &feedback_to, &send_head_to, &late_from}) p.insert(p.end(), v->begin(), v->end());
  for (const auto& o : {head_from, complete_from, complete_to})
    if (o) p.push_back(*o);
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  return p;
}

namespace {

class Planner {
 public:
  Planner(const Topology& t, const PlanOptions& options) : t_(t), options_(options), g_(topo::make_digraph(t)) {
    switch (t.federation.mode) {
      case TopologyMode::Linear:
        acyclic();
        for (size_t v = 0; v < g_.size(); ++v) {
          if (g_.in[v].empty()) start_ = v;
          if (g_.out[v].empty()) last_ = v;
        }
        break;
      case TopologyMode::Graph:
        if (options.secure_aggregation) collecting_sink();
        acyclic();
        if (options.secure_aggregation) order_second_pass();
        break;
      case TopologyMode::Ring: {
        start_ = t.federation.start ? g_.index.at(*t.federation.start) : 0;
        last_ = g_.in[start_][0];
        break;
      }
      case TopologyMode::Star: hub_ = g_.index.at(*t.federation.hub); break;
    }
  }

  NodePlan plan(NodeId id) const {
    const auto it = g_.index.find(id);
    if (it == g_.index.end()) throw InputError(t_.source + ": no node has id " + std::to_string(id));
    const size_t v = it->second;
    NodePlan p;
    p.id = id;
    p.mode = t_.federation.mode;
    p.deadline_seconds = t_.federation.deadline_seconds;
    const bool two_passes =
        p.mode == TopologyMode::Ring || (p.mode == TopologyMode::Linear && options_.secure_aggregation);
    switch (two_passes ? TopologyMode::Ring : p.mode) {
      case TopologyMode::Linear:
      case TopologyMode::Graph: {
        p.wait_for = ids(g_.in[v]);
        p.forward_to = ids(g_.out[v]);
        p.feedback_to = ids(g_.fb_out[v]);
        p.late_from = ids(g_.fb_in[v]);
        p.forward_merged = merged_[v];
        Bits expected = anc_[v];
        for (size_t s : g_.fb_in[v]) expected.unite(anc_[s]);
        // A feedback sender forwards after the waits along its longest chain of ancestors.
        for (size_t s : g_.fb_in[v])
          p.return_deadline_seconds = std::max(p.return_deadline_seconds, (depth_[s] + 1) * p.deadline_seconds);
        for (size_t u = 0; u < g_.size(); ++u)
          if (expected.test(u)) p.expected_contributors.insert(g_.ids[u]);
        // What a node forwards, merged or relayed, holds its ancestors at most.
        for (const auto* senders : {&g_.in[v], &g_.fb_in[v]})
          for (size_t s : *senders)
            for (size_t u = 0; u < g_.size(); ++u)
              if (anc_[s].test(u)) p.sources[g_.ids[s]].insert(g_.ids[u]);
        if (p.mode == TopologyMode::Graph && options_.secure_aggregation) second_pass(v, p);
        break;
      }
      case TopologyMode::Ring: {
        // First pass start -> ... -> last, each merging; then last hands the complete knowledge
        // to start, and it travels on to the node before last, each refitting its head on it.
        // A chain under secure aggregation does the same, as if its tail were linked to its start.
        const size_t next = succ(v), prev = pred(v);
        if (v != start_) {
          p.wait_for = {g_.ids[prev]};
          // The first pass: start, then each node up to the sender.
          auto& from = p.sources[g_.ids[prev]];
          for (size_t u = start_;; u = succ(u)) {
            from.insert(g_.ids[u]);
            if (u == prev) break;
          }
        }
        if (v != last_) {
          p.forward_to = {g_.ids[next]};
          p.complete_from = g_.ids[prev];
        }
        if (next != last_) p.complete_to = g_.ids[next];
        // The complete knowledge comes after every later node of the first pass has waited
        // for its predecessor.
        if (v != last_) {
          int later = 0;
          for (size_t u = next; u != start_; u = succ(u)) ++later;
          p.return_deadline_seconds = (later + 1) * p.deadline_seconds;
        }
        // Masked partial sums say nothing: only the last node can read what it holds.
        if (options_.secure_aggregation && v != last_) p.fits_head = false;
        everyone(p);
        break;
      }
      case TopologyMode::Star: {
        if (v == hub_) {
          p.wait_for = ids(g_.in[v]);
          for (size_t u = 0; u < g_.size(); ++u)
            if (u != hub_) p.send_head_to.push_back(g_.ids[u]);
          for (NodeId leaf : p.wait_for) p.sources[leaf] = {leaf};  // a leaf knows only its own data
        } else {
          p.forward_to = {g_.ids[hub_]};
          p.fits_head = false;
          p.head_from = g_.ids[hub_];
          // The hub's own wait (and the two steps of its unmasking round under secure
          // aggregation), then ours.
          p.return_deadline_seconds = (options_.secure_aggregation ? 4 : 2) * p.deadline_seconds;
        }
        everyone(p);
        break;
      }
    }
    return p;
  }

 private:
  std::vector<NodeId> ids(const std::vector<size_t>& v) const {
    std::vector<NodeId> r;
    for (size_t i : v) r.push_back(g_.ids[i]);
    return r;
  }

  // Along the first pass, around to the start after the last node.
  size_t succ(size_t v) const { return v == last_ ? start_ : g_.out[v][0]; }
  size_t pred(size_t v) const { return v == start_ ? last_ : g_.in[v][0]; }

  void everyone(NodePlan& p) const { p.expected_contributors.insert(g_.ids.begin(), g_.ids.end()); }

  // A graph under secure aggregation: the first pass runs as without it, but its pieces are
  // masked for the whole federation, so only a node that holds every member's piece reads
  // anything. That is a sink every node reaches: where the graph has several sinks, the others
  // send what they hold on to one of them (the collector: most ancestors, then the largest id),
  // over added edges that the relay analysis then treats as any other, so pieces still meet
  // nested or disjoint. The total the collector reads travels to every other node in
  // topological order, as a ring's complete knowledge does. Runs before acyclic().
  void collecting_sink() {
    for (size_t v = 0; v < g_.size(); ++v)
      if (!g_.fb_out[v].empty())
        throw InputError(t_.source + ": secure aggregation on a graph brings every node the total in a second pass, "
                         "so feedback edges have nothing left to carry; node " + std::to_string(g_.ids[v]) +
                         " has one: remove `feedback = true` edges");
    std::vector<size_t> sinks;
    for (size_t v = 0; v < g_.size(); ++v)
      if (g_.out[v].empty()) sinks.push_back(v);
    const auto anc = topo::closed_ancestors(g_, topo::topological_order(g_));
    auto count = [&](size_t v) {
      size_t c = 0;
      for (size_t u = 0; u < g_.size(); ++u) c += anc[v].test(u);
      return c;
    };
    last_ = sinks.front();
    for (size_t s : sinks)
      if (count(s) >= count(last_)) last_ = s;
    for (size_t s : sinks) {
      if (s == last_) continue;
      g_.out[s].push_back(last_);
      auto& in = g_.in[last_];
      in.insert(std::upper_bound(in.begin(), in.end(), s), s);  // neighbours stay in id order
    }
  }

  // After acyclic(): the second pass, the collector's total handed on in topological order.
  void order_second_pass() {
    for (size_t v : topo::topological_order(g_))
      if (v != last_) second_pass_.push_back(v);
  }

  void second_pass(size_t v, NodePlan& p) const {
    everyone(p);
    if (v == last_) {
      p.complete_to = g_.ids[second_pass_.front()];
      return;
    }
    p.fits_head = false;  // what it holds is masked: it waits for the total
    const size_t k = std::find(second_pass_.begin(), second_pass_.end(), v) - second_pass_.begin();
    p.complete_from = g_.ids[k == 0 ? last_ : second_pass_[k - 1]];
    if (k + 1 < second_pass_.size()) p.complete_to = g_.ids[second_pass_[k + 1]];
    // The collector waits along its longest chain of ancestors, then the total comes through the
    // k nodes before this one.
    p.return_deadline_seconds = (depth_[last_] + 1 + static_cast<double>(k)) * p.deadline_seconds;
  }

  // Decides, in topological order, which nodes forward one merged piece. A merged piece stands
  // for the node and all its ancestors; two of them may meet at a node further down (directly,
  // through relays, or over a feedback edge), and if neither contains the other they overlap
  // partially and the contributor rules must leave one out. So a node merges unless an earlier
  // merging node, not its ancestor, shares an ancestor with it and reaches a node it reaches;
  // otherwise it relays. Relayed pieces are the senders' own summaries or others' merged pieces,
  // so what meets anywhere is nested or disjoint, and nothing is lost or counted twice.
  void acyclic() {
    const size_t n = g_.size();
    const auto order = topo::topological_order(g_);
    anc_ = topo::closed_ancestors(g_, order);
    depth_.assign(n, 0);
    for (size_t v : order)
      for (size_t w : g_.out[v]) depth_[w] = std::max(depth_[w], depth_[v] + 1);
    std::vector<Bits> desc(n, Bits(n)), reach(n, Bits(n));
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const size_t v = *it;
      desc[v].set(v);
      for (size_t r : g_.fb_out[v]) reach[v].set(r);
      for (size_t w : g_.out[v]) {
        desc[v].unite(desc[w]);
        reach[v].unite(desc[w]);
        reach[v].unite(reach[w]);
      }
    }
    merged_.assign(n, true);
    std::vector<size_t> merging;
    for (size_t v : order) {
      if (g_.out[v].empty() && g_.fb_out[v].empty()) continue;  // forwards nothing
      for (size_t u : merging) {
        const bool related = anc_[v].test(u) || anc_[u].test(v);
        if (!related && anc_[v].intersects(anc_[u]) && reach[v].intersects(reach[u])) {
          merged_[v] = false;
          break;
        }
      }
      if (merged_[v]) merging.push_back(v);
    }
  }

  const Topology& t_;
  PlanOptions options_;
  Digraph g_;
  std::vector<Bits> anc_;
  std::vector<int> depth_;  // ordinary edges on the longest path from a source
  std::vector<bool> merged_;
  std::vector<size_t> second_pass_;  // a graph under secure aggregation: after its sink, in order
  size_t start_ = 0, last_ = 0, hub_ = 0;
};

}  // namespace

NodePlan plan_for(const Topology& topology, NodeId id, const PlanOptions& options) {
  return Planner(topology, options).plan(id);
}

NodePlan plan_for(const Topology& topology, const std::string& id_or_name) {
  return plan_for(topology, topology.lookup(id_or_name).id);
}

std::vector<NodePlan> plan_all(const Topology& topology, const PlanOptions& options) {
  const Planner planner(topology, options);
  std::vector<NodePlan> plans;
  for (NodeId id : topology.ids()) plans.push_back(planner.plan(id));
  return plans;
}

std::string describe_plan(const Topology& topology, const NodePlan& p) {
  auto list = [&](const std::vector<NodeId>& v) {
    std::string s;
    for (NodeId id : v) s += (s.empty() ? "" : ", ") + std::to_string(id);
    return s;
  };
  std::vector<std::string> parts;
  if (!p.wait_for.empty()) parts.push_back("waits for " + list(p.wait_for));
  if (!p.forward_to.empty()) parts.push_back((p.forward_merged ? "forwards to " : "relays to ") + list(p.forward_to));
  if (!p.feedback_to.empty()) parts.push_back("feeds back to " + list(p.feedback_to));
  if (p.fits_head) parts.push_back("fits its head");
  if (!p.send_head_to.empty()) parts.push_back("sends the head to " + list(p.send_head_to));
  if (p.head_from) parts.push_back("takes the head of " + std::to_string(*p.head_from));
  if (p.complete_from) parts.push_back("refits on the complete knowledge from " + std::to_string(*p.complete_from));
  if (!p.late_from.empty()) parts.push_back("refits on feedback from " + list(p.late_from));
  if (p.complete_to) parts.push_back("passes the complete knowledge to " + std::to_string(*p.complete_to));
  parts.push_back(p.has_phase2() ? "finished after phase 2" : "finished after phase 1");
  std::string s = topology.describe(p.id) + ": ";
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? "; " : "") + parts[i];
  return s;
}

// --- PlanProgress ---

PlanProgress::PlanProgress(NodePlan plan) : plan_(std::move(plan)) {}

std::vector<std::pair<NodeId, PlanMessage>> PlanProgress::inputs(Stage s) const {
  std::vector<std::pair<NodeId, PlanMessage>> v;
  if (s == Stage::Gather) {
    for (NodeId u : plan_.wait_for) v.emplace_back(u, PlanMessage::Knowledge);
  } else if (s == Stage::Return) {
    if (plan_.head_from) v.emplace_back(*plan_.head_from, PlanMessage::Head);
    if (plan_.complete_from) v.emplace_back(*plan_.complete_from, PlanMessage::Complete);
    for (NodeId u : plan_.late_from) v.emplace_back(u, PlanMessage::Knowledge);
  }
  return v;
}

bool PlanProgress::has(NodeId from, PlanMessage kind) const {
  return std::find(arrived_.begin(), arrived_.end(), std::make_pair(from, kind)) != arrived_.end();
}

bool PlanProgress::received(NodeId from, PlanMessage kind) {
  if (!plan_.expects(from, kind)) return false;
  if (!has(from, kind)) arrived_.emplace_back(from, kind);
  return true;
}

bool PlanProgress::all_in(Stage s) const {
  for (const auto& in : inputs(s))
    if (!has(in.first, in.second) &&
        std::find(given_up_.begin(), given_up_.end(), in) == given_up_.end())
      return false;
  return true;
}

bool PlanProgress::ready_to_merge() const { return stage_ == Stage::Gather && all_in(Stage::Gather); }

void PlanProgress::merged() {
  if (stage_ != Stage::Gather) return;
  stage_ = plan_.has_phase2() ? Stage::Return : Stage::Done;
}

bool PlanProgress::ready_to_complete() const { return stage_ == Stage::Return && all_in(Stage::Return); }

void PlanProgress::completed() {
  if (stage_ == Stage::Return) stage_ = Stage::Done;
}

void PlanProgress::deadline_passed() {
  if (stage_ == Stage::Done) return;
  for (const auto& in : inputs(stage_))
    if (!has(in.first, in.second) && std::find(given_up_.begin(), given_up_.end(), in) == given_up_.end())
      given_up_.push_back(in);
}

std::vector<NodeId> PlanProgress::awaiting() const {
  std::vector<NodeId> v;
  if (stage_ == Stage::Done) return v;
  for (const auto& in : inputs(stage_))
    if (!has(in.first, in.second) && std::find(given_up_.begin(), given_up_.end(), in) == given_up_.end())
      v.push_back(in.first);
  return v;
}

std::vector<NodeId> PlanProgress::missing() const {
  std::vector<NodeId> v;
  for (const auto& in : given_up_)
    if (!has(in.first, in.second)) v.push_back(in.first);
  std::sort(v.begin(), v.end());
  return v;
}

std::string deadline_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

}  // namespace fednode
