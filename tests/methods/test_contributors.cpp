// Contributors: a set of node ids whose copies share one array (core/contributors.h).
#include "core/contributors.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace fednode {
namespace {

std::vector<NodeId> ids(const Contributors& c) { return std::vector<NodeId>(c.begin(), c.end()); }

TEST(Contributors, BehavesAsASortedSet) {
  Contributors c{5, 1, 3, 1};
  EXPECT_EQ(ids(c), (std::vector<NodeId>{1, 3, 5}));
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.count(3), 1u);
  EXPECT_EQ(c.count(4), 0u);
  EXPECT_TRUE(c.insert(4).second);
  EXPECT_FALSE(c.insert(4).second);
  const std::set<NodeId> more{9, 0, 3};
  c.insert(more.begin(), more.end());
  EXPECT_EQ(ids(c), (std::vector<NodeId>{0, 1, 3, 4, 5, 9}));
  EXPECT_EQ(c.erase(3), 1u);
  EXPECT_EQ(c.erase(3), 0u);
  EXPECT_EQ(*c.rbegin(), 9u);
  EXPECT_EQ(c.find(7), c.end());
  EXPECT_EQ(*c.find(4), 4u);
  EXPECT_TRUE(Contributors{}.empty());
  // Ordered as std::set orders sets, so that choices made by that order do not change.
  EXPECT_LT((Contributors{0, 2}), (Contributors{1}));
  EXPECT_LT((Contributors{0}), (Contributors{0, 1}));
  EXPECT_EQ((Contributors{2, 1}), (Contributors{1, 2}));
  EXPECT_NE((Contributors{1}), (Contributors{}));
}

TEST(Contributors, ACopySharesUntilOneOfThemChanges) {
  Contributors a{1, 2, 3};
  const Contributors b = a;
  EXPECT_EQ(&*a.begin(), &*b.begin()) << "a copy is a reference, not a second array";
  a.insert(7);
  EXPECT_EQ(ids(b), (std::vector<NodeId>{1, 2, 3})) << "the copy is not changed with it";
  EXPECT_EQ(ids(a), (std::vector<NodeId>{1, 2, 3, 7}));
  Contributors c = b;
  c.insert(b.begin(), b.end());  // nothing new: still shared
  EXPECT_EQ(&*c.begin(), &*b.begin());
  c.erase(1);
  EXPECT_EQ(ids(b), (std::vector<NodeId>{1, 2, 3}));
  EXPECT_EQ(ids(c), (std::vector<NodeId>{2, 3}));
}

}  // namespace
}  // namespace fednode
