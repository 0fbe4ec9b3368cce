// Generated topologies and the example files: they load, validate and mean what they say.
#include "helpers.h"
#include "topology/builders.h"
#include "topology/plan.h"

#include <fstream>
#include <sstream>

namespace fednode {
namespace {

using test::key_hex;
using Ids = std::vector<NodeId>;

std::map<NodeId, std::string> keys(int n) {
  std::map<NodeId, std::string> m;
  for (int i = 0; i < n; ++i) m[static_cast<NodeId>(i)] = key_hex(static_cast<uint64_t>(i));
  return m;
}

TopologyBuildOptions options(TopologyMode mode, int n) {
  TopologyBuildOptions o;
  o.mode = mode;
  o.nodes = n;
  o.host = "10.1.2.3";
  o.base_port = 9100;
  o.method = "fedpft";
  o.seed = 5;
  o.options = {{"components", "3"}};
  o.data = {{"dataset", "fashion-mnist"}};
  o.public_key = keys_from_map(keys(n));
  return o;
}

TEST(TopologyBuilders, EachModeBuildsWhatItsNameSays) {
  const Topology chain = build_topology(options(TopologyMode::Linear, 5));
  EXPECT_EQ(chain.nodes.size(), 5u);
  EXPECT_EQ(chain.node(3).address, "tcp://10.1.2.3:9103");
  EXPECT_EQ(chain.node(3).name, "n3");
  EXPECT_EQ(chain.node(3).state_dir, "state/n3");
  EXPECT_EQ(chain.edges.size(), 4u);
  EXPECT_EQ(plan_for(chain, 4).expected_contributors, (Contributors{0, 1, 2, 3, 4}));

  const Topology ring = build_topology(options(TopologyMode::Ring, 4));
  EXPECT_EQ(ring.edges.size(), 4u);
  EXPECT_EQ(ring.federation.start, NodeId{0});
  EXPECT_EQ(plan_for(ring, 3).complete_to, NodeId{0});

  const Topology star = build_topology(options(TopologyMode::Star, 9));
  EXPECT_EQ(star.federation.hub, NodeId{0});
  EXPECT_EQ(plan_for(star, 0).send_head_to, (Ids{1, 2, 3, 4, 5, 6, 7, 8}));

  const Topology diamond = build_topology(options(TopologyMode::Graph, 4));
  EXPECT_EQ(plan_for(diamond, 3).wait_for, (Ids{1, 2}));
  EXPECT_EQ(plan_for(diamond, 0).forward_to, (Ids{1, 2}));

  const Topology single = build_topology(options(TopologyMode::Linear, 1));
  EXPECT_TRUE(single.edges.empty());
}

TEST(TopologyBuilders, RandomGraphsAreSeededConnectedDags) {
  auto edges_of = [](const Topology& t) {
    std::vector<std::pair<NodeId, NodeId>> e;
    for (const auto& x : t.edges) e.push_back({x.from, x.to});
    return e;
  };
  auto o = options(TopologyMode::Graph, 9);
  const Topology a = build_topology(o), b = build_topology(o);
  EXPECT_EQ(edges_of(a), edges_of(b));
  o.seed = 6;
  EXPECT_NE(edges_of(build_topology(o)), edges_of(a));
  EXPECT_GE(a.edges.size(), 8u);
  for (const auto& p : plan_all(a))
    if (p.id != 0) {
      EXPECT_FALSE(p.wait_for.empty()) << p.id;  // every node hears from an earlier one
    }
}

TEST(TopologyBuilders, FilesLoadBackEqual) {
  test::TempDir dir;
  for (auto mode : {TopologyMode::Linear, TopologyMode::Ring, TopologyMode::Star, TopologyMode::Graph}) {
    auto o = options(mode, 6);
    o.base_dir = dir.str();
    const Topology t = build_topology(o);
    const std::string path = dir / (std::string(to_string(mode)) + ".toml");
    save_topology(t, path);
    const Topology back = load_topology(path);
    EXPECT_EQ(to_toml(back), to_toml(t));
    const auto p1 = plan_all(t), p2 = plan_all(back);
    ASSERT_EQ(p1.size(), p2.size());
    for (size_t i = 0; i < p1.size(); ++i) {
      EXPECT_EQ(p1[i].wait_for, p2[i].wait_for);
      EXPECT_EQ(p1[i].forward_to, p2[i].forward_to);
      EXPECT_EQ(p1[i].expected_contributors, p2[i].expected_contributors);
    }
    EXPECT_EQ(back.options_for(2).at("components"), "3");
  }
}

TEST(TopologyBuilders, KeysComeFromTheProviderOrFromKeyDirectories) {
  test::TempDir dir;
  auto o = options(TopologyMode::Star, 3);
  o.base_dir = dir.str();
  o.key_root = "keys";
  o.public_key = nullptr;
  // No keys anywhere: the topology builds, but writing it needs an explicit keyless request.
  const Topology keyless = build_topology(o);
  EXPECT_EQ(keyless.node(1).key_dir, "keys/n1");
  EXPECT_FALSE(keyless.node(1).public_key);
  EXPECT_THROW(save_topology(keyless, dir / "t.toml"), InputError);
  save_topology(keyless, dir / "t.toml", true);
  LoadOptions no_keys;
  no_keys.require_keys = false;
  EXPECT_NO_THROW(load_topology(dir / "t.toml", no_keys));

  // A provider that writes each node's key into its directory, as `fednode topology` will with
  // crypto/'s key generation; the file then names directories only.
  std::vector<std::string> seen_dirs;
  o.public_key = [&](const TopologyNode& n, const std::string& key_dir) {
    seen_dirs.push_back(key_dir);
    std::filesystem::create_directories(key_dir);
    std::ofstream(key_dir + "/node.pub") << key_hex(100 + n.id) << "\n";
    return std::string();
  };
  const Topology with_dirs = build_topology(o);
  EXPECT_EQ(seen_dirs, (std::vector<std::string>{dir / "keys/n0", dir / "keys/n1", dir / "keys/n2"}));
  save_topology(with_dirs, dir / "t.toml");
  const Topology back = load_topology(dir / "t.toml");
  EXPECT_EQ(public_key_hex(*back.node(2).public_key), key_hex(102));
  EXPECT_TRUE(back.node(2).public_key_text.empty());
}

TEST(TopologyBuilders, RejectsImpossibleRequests) {
  auto expect = [](TopologyBuildOptions o, const std::string& fragment) {
    test::expect_input_error([&] { build_topology(o); }, {fragment});
  };
  expect(options(TopologyMode::Linear, 0), "a linear topology needs 1 to 16384 nodes, got 0");
  expect(options(TopologyMode::Star, 16385), "a star topology needs 1 to 16384 nodes, got 16385");
  expect(options(TopologyMode::Graph, 2000), "needs 1 to 1024 nodes");
  expect(options(TopologyMode::Ring, 1), "a ring topology needs at least 2 nodes");
  expect(options(TopologyMode::Star, 1), "a star topology needs at least 2 nodes");
  auto o = options(TopologyMode::Linear, 10);
  o.base_port = 65530;
  expect(o, "ports 65530 to 65539 do not fit in 1..65535");
  o = options(TopologyMode::Linear, 2);
  o.host = "bad host";
  expect(o, "the host contains ' '");
  o = options(TopologyMode::Linear, 2);
  o.public_key = keys_from_map({{0, key_hex(0)}, {1, "zz"}});
  expect(o, "node 1 (n1): public_key is malformed");
  o = options(TopologyMode::Linear, 2);
  o.host = "::1";
  EXPECT_EQ(build_topology(o).node(1).address, "tcp://[::1]:9101");
}

// examples/topologies: valid as shipped (their keys come from key directories made by
// `fednode keygen`), and complete once those directories exist.
TEST(TopologyExamples, LoadAndMeanWhatTheySay) {
  const std::string root = std::string(FEDNODE_SOURCE_DIR) + "/examples/topologies/";
  LoadOptions no_keys;
  no_keys.require_keys = false;
  struct Case {
    const char* file;
    TopologyMode mode;
    size_t nodes;
  };
  for (const Case& c : {Case{"chain5.toml", TopologyMode::Linear, 5}, Case{"ring4.toml", TopologyMode::Ring, 4},
                        Case{"star8.toml", TopologyMode::Star, 9}, Case{"diamond.toml", TopologyMode::Graph, 4},
                        Case{"sites5.toml", TopologyMode::Linear, 5}}) {
    SCOPED_TRACE(c.file);
    const Topology t = load_topology(root + c.file, no_keys);
    EXPECT_EQ(t.federation.mode, c.mode);
    EXPECT_EQ(t.nodes.size(), c.nodes);
    for (const auto& n : t.nodes) EXPECT_FALSE(n.key_dir.empty()) << n.id;

    // With keys in place the same file loads with keys required.
    test::TempDir dir;
    std::filesystem::copy_file(root + c.file, dir / c.file);
    for (const auto& n : t.nodes) {
      const std::string kd = dir / n.key_dir;
      std::filesystem::create_directories(kd);
      std::ofstream(kd + "/node.pub") << key_hex(n.id) << "\n";
    }
    for (const auto& r : t.relays) {
      const std::string kd = dir / r.key_dir;
      std::filesystem::create_directories(kd);
      std::ofstream(kd + "/node.pub") << key_hex(900) << "\n";
    }
    const Topology keyed = load_topology(dir / c.file);
    for (const auto& n : keyed.nodes) EXPECT_TRUE(n.public_key) << n.id;
    for (const auto& r : keyed.relays) EXPECT_TRUE(r.public_key) << r.name;
  }
  const Topology diamond = load_topology(root + "diamond.toml", no_keys);
  const auto sink = diamond.lookup("sink");
  EXPECT_EQ(plan_for(diamond, sink.id).wait_for.size(), 2u);
  EXPECT_EQ(plan_for(diamond, sink.id).expected_contributors.size(), 4u);
}

// The full example in docs/topologies.md is a valid file that says what the page says.
TEST(TopologyExamples, DocumentationExampleParses) {
  std::ifstream in(std::string(FEDNODE_SOURCE_DIR) + "/docs/topologies.md");
  ASSERT_TRUE(in);
  std::stringstream page;
  page << in.rdbuf();
  const std::string text = page.str();
  const size_t begin = text.find("```toml\n");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = text.find("```", begin + 8);
  LoadOptions no_keys;
  no_keys.require_keys = false;
  const Topology t = parse_topology(text.substr(begin + 8, end - begin - 8), "docs/topologies.md", ".", no_keys);
  EXPECT_EQ(t.federation.mode, TopologyMode::Graph);
  EXPECT_EQ(run_name(t), "diamond-2024-06-01");
  EXPECT_TRUE(t.lookup("left").public_key);
  EXPECT_EQ(t.options_for(1).at("shrinkage"), "0.1");
  EXPECT_EQ(t.data_for(2).at("train-features"), "right/features.npy");
  // Its own files replace the shared dataset; the shared limits still apply.
  EXPECT_EQ(t.data_for(2).count("dataset"), 0u);
  EXPECT_EQ(t.data_for(2).at("train-limit"), "12000");
  EXPECT_EQ(t.data_for(1).at("dataset"), "fashion-mnist");
  const auto p = plan_for(t, "sink");
  EXPECT_EQ(p.wait_for, (Ids{1, 2}));
  EXPECT_EQ(p.expected_contributors, (Contributors{0, 1, 2, 3}));
}

}  // namespace
}  // namespace fednode
