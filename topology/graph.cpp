#include "topology/graph.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace fednode::topo {

Digraph make_digraph(const Topology& topology) {
  Digraph g;
  g.ids = topology.ids();
  for (size_t i = 0; i < g.ids.size(); ++i) g.index[g.ids[i]] = i;
  const size_t n = g.ids.size();
  g.out.assign(n, {});
  g.in.assign(n, {});
  g.fb_out.assign(n, {});
  g.fb_in.assign(n, {});
  for (const auto& e : topology.edges) {
    const size_t a = g.index.at(e.from), b = g.index.at(e.to);
    (e.feedback ? g.fb_out : g.out)[a].push_back(b);
    (e.feedback ? g.fb_in : g.in)[b].push_back(a);
    g.line[{a, b}] = e.line;
  }
  for (auto* lists : {&g.out, &g.in, &g.fb_out, &g.fb_in})
    for (auto& l : *lists) std::sort(l.begin(), l.end());
  return g;
}

std::vector<size_t> find_cycle(const Digraph& g) {
  const size_t n = g.size();
  enum : char { White, Grey, Black };
  std::vector<char> colour(n, White);
  std::vector<size_t> parent(n, n);
  std::vector<size_t> found;
  // Iterative depth-first search: a chain of a thousand nodes must not exhaust the stack.
  for (size_t root = 0; root < n && found.empty(); ++root) {
    if (colour[root] != White) continue;
    std::vector<std::pair<size_t, size_t>> stack{{root, 0}};
    colour[root] = Grey;
    while (!stack.empty() && found.empty()) {
      auto& [u, next] = stack.back();
      if (next == g.out[u].size()) {
        colour[u] = Black;
        stack.pop_back();
        continue;
      }
      const size_t v = g.out[u][next++];
      if (colour[v] == Grey) {
        for (size_t w = u; w != v; w = parent[w]) found.push_back(w);
        found.push_back(v);
        std::reverse(found.begin(), found.end());
      } else if (colour[v] == White) {
        colour[v] = Grey;
        parent[v] = u;
        stack.push_back({v, 0});
      }
    }
  }
  if (!found.empty())
    std::rotate(found.begin(), std::min_element(found.begin(), found.end()), found.end());
  return found;
}

std::vector<size_t> topological_order(const Digraph& g, std::vector<size_t>* stuck) {
  const size_t n = g.size();
  std::vector<size_t> pending(n);
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t v = 0; v < n; ++v) {
    pending[v] = g.in[v].size();
    if (pending[v] == 0) ready.push(v);
  }
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t u = ready.top();
    ready.pop();
    order.push_back(u);
    for (size_t v : g.out[u])
      if (--pending[v] == 0) ready.push(v);
  }
  if (stuck) {
    stuck->clear();
    for (size_t v = 0; v < n; ++v)
      if (pending[v] > 0) stuck->push_back(v);
  }
  return order;
}

std::vector<Bits> closed_ancestors(const Digraph& g, const std::vector<size_t>& order) {
  std::vector<Bits> anc(g.size(), Bits(g.size()));
  for (size_t v : order) {
    anc[v].set(v);
    for (size_t u : g.in[v]) anc[v].unite(anc[u]);
  }
  return anc;
}

std::vector<std::vector<size_t>> weak_components(const Digraph& g) {
  const size_t n = g.size();
  std::vector<size_t> comp(n, n);
  std::vector<std::vector<size_t>> result;
  for (size_t root = 0; root < n; ++root) {
    if (comp[root] != n) continue;
    const size_t c = result.size();
    result.emplace_back();
    std::vector<size_t> todo{root};
    comp[root] = c;
    while (!todo.empty()) {
      const size_t u = todo.back();
      todo.pop_back();
      result[c].push_back(u);
      for (const auto* lists : {&g.out, &g.in, &g.fb_out, &g.fb_in})
        for (size_t v : (*lists)[u])
          if (comp[v] == n) {
            comp[v] = c;
            todo.push_back(v);
          }
    }
    std::sort(result[c].begin(), result[c].end());
  }
  return result;
}

}  // namespace fednode::topo
