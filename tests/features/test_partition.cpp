#include "features/partition.h"

#include "../common/expect_error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace fednode;
using fednode::test::expect_input_error;

namespace {

// n samples, classes 0..C-1 with unequal sizes (class c has weight c + 1).
Labels make_labels(int64_t n, int classes) {
  Labels y;
  int total_weight = classes * (classes + 1) / 2;
  for (int c = 0; c < classes; ++c)
    for (int64_t i = 0; i < n * (c + 1) / total_weight; ++i) y.push_back(c);
  while (static_cast<int64_t>(y.size()) < n) y.push_back(classes - 1);
  // Interleave so rows of a class are not contiguous.
  Labels shuffled(y.size());
  for (size_t i = 0; i < y.size(); ++i) shuffled[(i * 7919) % y.size()] = y[i];
  return shuffled;
}

PartitionOptions opts(PartitionScheme s, int nodes, uint64_t seed = 1) {
  PartitionOptions o;
  o.scheme = s;
  o.nodes = nodes;
  o.seed = seed;
  return o;
}

void expect_exact_cover(const Partition& p, size_t n) {
  std::vector<int> seen(n, 0);
  for (const auto& part : p) {
    EXPECT_TRUE(std::is_sorted(part.begin(), part.end()));
    for (int64_t r : part) {
      ASSERT_GE(r, 0);
      ASSERT_LT(static_cast<size_t>(r), n);
      ++seen[static_cast<size_t>(r)];
    }
  }
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "row " << i;
}

std::set<int> classes_of(const std::vector<int64_t>& counts_row) {
  std::set<int> out;
  for (size_t c = 0; c < counts_row.size(); ++c)
    if (counts_row[c] > 0) out.insert(static_cast<int>(c));
  return out;
}

const PartitionScheme kAll[] = {PartitionScheme::Iid, PartitionScheme::Dirichlet,
                                PartitionScheme::Shards, PartitionScheme::Labels};

}  // namespace

TEST(Partition, ParseAndName) {
  for (PartitionScheme s : kAll) EXPECT_EQ(parse_partition_scheme(to_string(s)), s);
  expect_input_error([] { parse_partition_scheme("IID"); }, {"unknown partition scheme 'IID'"});
  expect_input_error([] { parse_partition_scheme(""); }, {"iid, dirichlet, shards, labels or dominant"});
  EXPECT_EQ(parse_partition_scheme("dominant"), PartitionScheme::Dominant);
}

TEST(Partition, EverySchemeCoversEachSampleOnceAndIsDeterministic) {
  const Labels y = make_labels(1000, 10);
  for (PartitionScheme s : kAll) {
    SCOPED_TRACE(to_string(s));
    const auto o = opts(s, 5, 42);
    const Partition a = make_partition(y, 10, o);
    ASSERT_EQ(a.size(), 5u);
    expect_exact_cover(a, y.size());
    for (const auto& part : a) EXPECT_FALSE(part.empty());
    EXPECT_EQ(make_partition(y, 10, o), a);
    // The labels scheme with 10 classes over 5 nodes may repeat under another seed only
    // by chance; the others reshuffle rows. Try a few seeds to make this robust.
    bool differs = false;
    for (uint64_t seed = 43; seed < 48 && !differs; ++seed)
      differs = make_partition(y, 10, opts(s, 5, seed)) != a;
    EXPECT_TRUE(differs);
  }
}

// FedCGS's personalised split: equal sizes, the uniform share spread over every class, the rest
// over each node's dominant classes; no row twice; the same under the same seed.
TEST(Partition, DominantGivesEqualSizesAUniformShareAndDominantClasses) {
  Labels y;
  for (int c = 0; c < 10; ++c)
    for (int i = 0; i < 300; ++i) y.push_back(c);
  PartitionOptions o = opts(PartitionScheme::Dominant, 5, 3);
  o.classes_per_node = 2;
  o.uniform_share = 0.2;
  const Partition p = make_partition(y, 10, o);
  ASSERT_EQ(p.size(), 5u);
  std::set<int64_t> rows;
  for (const auto& part : p) rows.insert(part.begin(), part.end());
  size_t total = 0;
  for (const auto& part : p) total += part.size();
  EXPECT_EQ(rows.size(), total) << "no row twice";
  const auto counts = partition_counts(p, y, 10);
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(p[k].size(), 600u) << "3000 rows over 5 nodes";
    int dominant = 0;
    for (int c = 0; c < 10; ++c) {
      EXPECT_GE(counts[k][static_cast<size_t>(c)], 12) << "120 uniform rows spread over 10 classes";
      dominant += counts[k][static_cast<size_t>(c)] >= 12 + 240;
    }
    EXPECT_EQ(dominant, 2) << "480 rows over 2 dominant classes";
  }
  EXPECT_EQ(make_partition(y, 10, o), p);
  o.uniform_share = 1.5;
  expect_input_error([&] { make_partition(y, 10, o); }, {"uniform share"});
}

TEST(Partition, IidIsBalanced) {
  const Labels y = make_labels(103, 4);
  const Partition p = make_partition(y, 4, opts(PartitionScheme::Iid, 10));
  for (size_t k = 0; k < p.size(); ++k) EXPECT_EQ(p[k].size(), k < 3 ? 11u : 10u);
  // One node holds everything.
  const Partition one = make_partition(y, 4, opts(PartitionScheme::Iid, 1));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].size(), 103u);
}

TEST(Partition, IidShuffleIsUniform) {
  // Fisher-Yates drawing below(i - 1) instead of below(i) never leaves an element in place:
  // with two samples and two nodes row 0 would always go to node 1.
  int row0_at_node0 = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Partition p = make_partition({0, 1}, 2, opts(PartitionScheme::Iid, 2, seed));
    row0_at_node0 += p[0][0] == 0;
  }
  EXPECT_GT(row0_at_node0, 60);
  EXPECT_LT(row0_at_node0, 140);
}

TEST(Partition, DirichletHonoursMinSamplesAndSkews) {
  const Labels y = make_labels(2000, 10);
  auto o = opts(PartitionScheme::Dirichlet, 10, 7);
  o.dirichlet_alpha = 0.1;
  o.min_samples = 50;
  const Partition p = make_partition(y, 10, o);
  expect_exact_cover(p, y.size());
  for (const auto& part : p) EXPECT_GE(part.size(), 50u);
  // Small alpha concentrates each node on few classes: the largest class share per node is
  // far above the 10% an iid split would give.
  const auto counts = partition_counts(p, y, 10);
  double mean_top_share = 0;
  for (const auto& row : counts) {
    int64_t total = 0, top = 0;
    for (int64_t c : row) total += c, top = std::max(top, c);
    mean_top_share += static_cast<double>(top) / static_cast<double>(total) / 10.0;
  }
  EXPECT_GT(mean_top_share, 0.4);

  // Large alpha approaches iid.
  o.dirichlet_alpha = 1000;
  const auto near_iid = partition_counts(make_partition(y, 10, o), y, 10);
  for (const auto& row : near_iid) {
    int64_t total = 0;
    for (int64_t c : row) total += c;
    EXPECT_NEAR(static_cast<double>(total), 200.0, 60.0);
  }
}

TEST(Partition, DirichletAcceptsNodesHoldingExactlyMinSamples) {
  PartitionOptions o = opts(PartitionScheme::Dirichlet, 2);
  o.min_samples = 2;
  o.dirichlet_alpha = 100.0;
  const Partition p = make_partition({0, 0, 1, 1}, 2, o);
  EXPECT_EQ(p[0].size(), 2u);
  EXPECT_EQ(p[1].size(), 2u);
}

TEST(Partition, DirichletTinyAlphaStillWorks) {
  const Labels y = make_labels(500, 10);
  auto o = opts(PartitionScheme::Dirichlet, 5, 3);
  o.dirichlet_alpha = 0.001;
  o.min_samples = 1;
  const Partition p = make_partition(y, 10, o);
  expect_exact_cover(p, y.size());
  for (const auto& part : p) EXPECT_GE(part.size(), 1u);
}

TEST(Partition, DirichletUnsatisfiableIsExplained) {
  // Two classes, tiny alpha: each class lands almost wholly on one node, so with 8 nodes and a
  // minimum of 40 of 400 samples the draw practically never succeeds.
  Labels y(400);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int32_t>(i % 2);
  auto o = opts(PartitionScheme::Dirichlet, 8, 5);
  o.dirichlet_alpha = 0.01;
  o.min_samples = 40;
  expect_input_error([&] { make_partition(y, 2, o); },
                     {"after 1000 draws", "min_samples=40", "alpha=0.01"});
  o.min_samples = 51;  // 8 * 51 > 400: impossible, said at once
  expect_input_error([&] { make_partition(y, 2, o); }, {"min_samples=51", "need 408"});
}

TEST(Partition, ShardsGiveExactlySClassesAndCoverClasses) {
  const Labels y = make_labels(3000, 10);
  for (int s : {1, 2, 3}) {
    SCOPED_TRACE(s);
    auto o = opts(PartitionScheme::Shards, 10, 11);
    o.classes_per_node = s;
    const Partition p = make_partition(y, 10, o);
    expect_exact_cover(p, y.size());
    const auto counts = partition_counts(p, y, 10);
    std::set<int> used;
    for (const auto& row : counts) {
      const auto cls = classes_of(row);
      EXPECT_EQ(cls.size(), static_cast<size_t>(s));
      used.insert(cls.begin(), cls.end());
    }
    EXPECT_EQ(used.size(), 10u);
    // A class shared by several nodes is split evenly among them.
    for (int c = 0; c < 10; ++c) {
      int64_t lo = INT64_MAX, hi = 0;
      for (const auto& row : counts)
        if (row[c] > 0) lo = std::min(lo, row[c]), hi = std::max(hi, row[c]);
      EXPECT_LE(hi - lo, 1) << "class " << c;
    }
  }
}

TEST(Partition, ShardsWithFewSlotsLeaveClassesOut) {
  const Labels y = make_labels(600, 10);
  auto o = opts(PartitionScheme::Shards, 3, 2);
  o.classes_per_node = 2;  // 6 slots for 10 classes: 6 distinct classes, rows of the rest unused
  const Partition p = make_partition(y, 10, o);
  const auto counts = partition_counts(p, y, 10);
  std::set<int> used;
  for (const auto& row : counts) {
    const auto cls = classes_of(row);
    EXPECT_EQ(cls.size(), 2u);
    used.insert(cls.begin(), cls.end());
  }
  EXPECT_EQ(used.size(), 6u);
  size_t held = 0;
  for (const auto& part : p) held += part.size();
  size_t expected = 0;
  for (int32_t label : y) expected += used.count(label);
  EXPECT_EQ(held, expected);
}

TEST(Partition, LabelsAreDisjointAndComplete) {
  const Labels y = make_labels(1000, 10);
  const Partition p = make_partition(y, 10, opts(PartitionScheme::Labels, 4, 9));
  expect_exact_cover(p, y.size());
  const auto counts = partition_counts(p, y, 10);
  std::set<int> seen;
  for (const auto& row : counts) {
    const auto cls = classes_of(row);
    EXPECT_GE(cls.size(), 2u);
    EXPECT_LE(cls.size(), 3u);
    for (int c : cls) EXPECT_TRUE(seen.insert(c).second) << "class " << c << " on two nodes";
  }
  EXPECT_EQ(seen.size(), 10u);
  expect_input_error([&] { make_partition(y, 10, opts(PartitionScheme::Labels, 11)); },
                     {"11 nodes", "only 10 occur"});
}

TEST(Partition, RejectsBadOptions) {
  const Labels y = make_labels(50, 5);
  expect_input_error([&] { make_partition(y, 5, opts(PartitionScheme::Iid, 0)); }, {"nodes must be at least 1"});
  expect_input_error([&] { make_partition(y, 5, opts(PartitionScheme::Iid, 51)); },
                     {"51 nodes", "only 50 samples"});
  auto o = opts(PartitionScheme::Dirichlet, 2);
  o.dirichlet_alpha = 0;
  expect_input_error([&] { make_partition(y, 5, o); }, {"alpha must be a positive"});
  o.dirichlet_alpha = -1;
  expect_input_error([&] { make_partition(y, 5, o); }, {"alpha"});
  o.dirichlet_alpha = std::numeric_limits<double>::quiet_NaN();
  expect_input_error([&] { make_partition(y, 5, o); }, {"alpha"});
  o.dirichlet_alpha = 0.5;
  o.min_samples = -1;
  expect_input_error([&] { make_partition(y, 5, o); }, {"min_samples"});
  auto s = opts(PartitionScheme::Shards, 2);
  s.classes_per_node = 0;
  expect_input_error([&] { make_partition(y, 5, s); }, {"classes_per_node must be in [1, 5]"});
  s.classes_per_node = 6;
  expect_input_error([&] { make_partition(y, 5, s); }, {"classes_per_node"});
  Labels missing = y;  // class 4 absent: only 4 classes can be handed out
  for (auto& v : missing) v = v == 4 ? 0 : v;
  s.classes_per_node = 5;
  expect_input_error([&] { make_partition(missing, 5, s); }, {"only 4 classes occur"});
  Labels bad = y;
  bad[3] = 5;
  expect_input_error([&] { make_partition(bad, 5, opts(PartitionScheme::Iid, 2)); },
                     {"label 5 at row 3"});
  expect_input_error([&] { make_partition(y, 0, opts(PartitionScheme::Iid, 2)); }, {"classes"});
  // A class too small for the nodes sharing it.
  Labels tiny = {0, 0, 0, 0, 0, 0, 1};
  auto t = opts(PartitionScheme::Shards, 4);
  t.classes_per_node = 2;
  expect_input_error([&] { make_partition(tiny, 2, t); }, {"class 1 has 1 samples but 4 nodes"});
}

TEST(Partition, CountsAndSummary) {
  const Labels y = {0, 1, 1, 2, 2, 2};
  const Partition p = {{0, 1}, {2, 3, 4, 5}};
  const auto counts = partition_counts(p, y, 3);
  EXPECT_EQ(counts, (std::vector<std::vector<int64_t>>{{1, 1, 0}, {0, 1, 3}}));
  const std::string table = format_partition_summary(counts);
  // Header, two nodes, totals.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 4);
  std::istringstream lines(table);
  std::string header, n0, n1, total;
  std::getline(lines, header);
  std::getline(lines, n0);
  std::getline(lines, n1);
  std::getline(lines, total);
  EXPECT_NE(header.find("samples"), std::string::npos);
  EXPECT_NE(header.find("c2"), std::string::npos);
  auto fields = [](const std::string& line) {
    std::istringstream is(line);
    std::vector<std::string> out;
    for (std::string f; is >> f;)
      if (f != "|") out.push_back(f);
    return out;
  };
  EXPECT_EQ(fields(n0), (std::vector<std::string>{"0", "2", "2", "1", "1", "0"}));
  EXPECT_EQ(fields(n1), (std::vector<std::string>{"1", "4", "2", "0", "1", "3"}));
  EXPECT_EQ(fields(total), (std::vector<std::string>{"total", "6", "3", "1", "2", "3"}));
  // All lines equally wide.
  EXPECT_EQ(header.size(), n0.size());
  EXPECT_EQ(total.size(), n1.size());

  expect_input_error([&] { partition_counts({{0, 9}}, y, 3); }, {"node 0 holds row 9"});
}

TEST(Partition, SummaryOfRealPartitionAddsUp) {
  const Labels y = make_labels(500, 10);
  auto o = opts(PartitionScheme::Dirichlet, 4, 123);
  o.min_samples = 5;
  const auto counts = partition_counts(make_partition(y, 10, o), y, 10);
  int64_t sum = 0;
  for (const auto& row : counts)
    for (int64_t c : row) sum += c;
  EXPECT_EQ(sum, 500);
  const std::string table = format_partition_summary(counts);
  EXPECT_NE(table.find("total"), std::string::npos);
  EXPECT_NE(table.find(" 500"), std::string::npos);
}
