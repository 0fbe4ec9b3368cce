// Nodes of one federation run as fednode::Node objects in the test's own process, as an
// embedding application runs them (real sockets, real sealing): the test decides when each one
// steps. Data: the first 1000 Fashion-MNIST training images split as `fednode run` splits them,
// and the first 200 test images.
#pragma once

#include "federation.h"

#include "features/idx.h"
#include "features/partition.h"
#include "node/node.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace fednode::testing_network {

struct InProcessFederation {
  Federation f;
  Features train, test;
  Partition parts;

  InProcessFederation(const std::string& suite, TopologyMode mode, int nodes, int base_port, double deadline_seconds) {
    f = make_federation(test_dir(suite), mode, nodes, "fedcgs", base_port, {}, {{"dataset", "fashion-mnist"}});
    set_deadline(f, deadline_seconds);
    train = load_fashion_mnist(default_fashion_mnist_dir(), "train", 1000);
    test = load_fashion_mnist(default_fashion_mnist_dir(), "test", 200);
    train.num_classes = test.num_classes = std::max(train.num_classes, test.num_classes);
    PartitionOptions split;
    split.nodes = nodes;
    split.seed = f.topology.federation.seed;
    parts = make_partition(train.y, train.num_classes, split);
  }

  // What `fednode run` would give node `id`, with quick resends.
  NodeConfig config(NodeId id) const {
    NodeConfig c;
    c.topology = f.topology;
    c.id = id;
    c.run_name = run_name(f.topology);
    c.method.method = "fedcgs";
    c.local = train.subset(parts.at(static_cast<size_t>(f.topology.partition_index(id))));
    c.test = test;
    c.retry_initial = c.resend_after = std::chrono::milliseconds(20);
    return c;
  }
  Identity identity(NodeId id) const { return load_identity(f.topology.key_dir_of(id)); }
};

}  // namespace fednode::testing_network
