// Contributors: whose data a piece of knowledge or a head holds, as a set of node ids.
//
// Copies share one sorted array, and a copy is a reference count: in a star every leaf's head,
// plan and outcome name all the nodes, and the hub hands each leaf the head's set. As std::set
// (48 bytes a node) a simulated star of 2 000 nodes held 1.9 GB of such copies, growing with
// the square of the nodes. A change to a shared set copies it first (copy on write); a set is
// not to be changed by two threads at once, as any container.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

namespace fednode {

using NodeId = uint32_t;

class Contributors {
 public:
  using value_type = NodeId;
  using const_iterator = std::vector<NodeId>::const_iterator;
  using iterator = const_iterator;

  Contributors() = default;
  Contributors(std::initializer_list<NodeId> ids) : Contributors(ids.begin(), ids.end()) {}
  template <class It>
  Contributors(It first, It last) {
    insert(first, last);
  }

  const_iterator begin() const { return ids().begin(); }
  const_iterator end() const { return ids().end(); }
  std::vector<NodeId>::const_reverse_iterator rbegin() const { return ids().rbegin(); }
  std::vector<NodeId>::const_reverse_iterator rend() const { return ids().rend(); }
  size_t size() const { return ids_ ? ids_->size() : 0; }
  bool empty() const { return size() == 0; }
  size_t count(NodeId id) const { return std::binary_search(begin(), end(), id) ? 1 : 0; }
  const_iterator find(NodeId id) const {
    const auto it = std::lower_bound(begin(), end(), id);
    return it != end() && *it == id ? it : end();
  }

  // As std::set: the position of `id`, and whether it was added.
  std::pair<const_iterator, bool> insert(NodeId id) {
    const auto at = std::lower_bound(begin(), end(), id);
    if (at != end() && *at == id) return {at, false};
    const auto offset = at - begin();
    std::vector<NodeId>& v = own();
    v.insert(v.begin() + offset, id);
    return {v.begin() + offset, true};
  }
  // As std::set, the hint unused: appending in ascending order is cheap anyway.
  const_iterator insert(const_iterator, NodeId id) { return insert(id).first; }
  // Adds every id in [first, last), in any order, in one merge.
  template <class It>
  void insert(It first, It last) {
    std::vector<NodeId> add(first, last);
    if (add.empty()) return;
    if (!std::is_sorted(add.begin(), add.end())) std::sort(add.begin(), add.end());
    add.erase(std::unique(add.begin(), add.end()), add.end());
    if (std::includes(begin(), end(), add.begin(), add.end())) return;  // shares on, unchanged
    std::vector<NodeId> merged;
    merged.reserve(size() + add.size());
    std::set_union(begin(), end(), add.begin(), add.end(), std::back_inserter(merged));
    ids_ = std::make_shared<std::vector<NodeId>>(std::move(merged));
  }
  size_t erase(NodeId id) {
    const auto at = std::lower_bound(begin(), end(), id);
    if (at == end() || *at != id) return 0;
    const auto offset = at - begin();
    std::vector<NodeId>& v = own();
    v.erase(v.begin() + offset);
    return 1;
  }
  void clear() { ids_.reset(); }

  friend bool operator==(const Contributors& a, const Contributors& b) {
    return a.ids_ == b.ids_ || (a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin()));
  }
  friend bool operator!=(const Contributors& a, const Contributors& b) { return !(a == b); }
  // Lexicographic, as std::set orders sets.
  friend bool operator<(const Contributors& a, const Contributors& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  const std::vector<NodeId>& ids() const {
    static const std::vector<NodeId> kNone;
    return ids_ ? *ids_ : kNone;
  }
  // The array, this set's own: copied first if another set shares it.
  std::vector<NodeId>& own() {
    if (!ids_) ids_ = std::make_shared<std::vector<NodeId>>();
    else if (ids_.use_count() > 1) ids_ = std::make_shared<std::vector<NodeId>>(*ids_);
    return *ids_;
  }

  std::shared_ptr<std::vector<NodeId>> ids_;  // sorted, no repeats; null when empty
};

}  // namespace fednode
