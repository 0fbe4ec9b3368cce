// edge_app: an application that embeds one fednode node (docs/embedding.md).
//
//   edge_app TOPOLOGY ID fashion-mnist [TRAIN_LIMIT TEST_LIMIT] [--classify DIR]
//   edge_app TOPOLOGY ID npy TRAIN_X.npy TRAIN_Y.npy [TEST_X.npy TEST_Y.npy]
//
// With --classify DIR (Fashion-MNIST: a folder of held-out images, one sub-folder per class named
// by its number or name), the app classifies them with its node's head whenever a head is ready
// (the first, and every refitted one) and prints the accuracy: what the federation learnt, used.
//
// It joins the federation described by TOPOLOGY (a file from `fednode topology`) as node ID,
// with its keys and state directory as the file names them. The other nodes may be `fednode run`
// processes or other applications.
//
// An application decides in code where its data comes from; this one reads its own (above) and
// takes its method options from the topology's [federation.options] and [node.options], as
// every `fednode run` node of the file does (fednode::method_options_for). An application that
// wants the file's [federation.data] too calls fednode::node_config, as `fednode run` does.
#include "crypto/key_files.h"
#include "features/extract.h"
#include "features/idx.h"
#include "features/npy.h"
#include "features/partition.h"
#include "node/classifier.h"
#include "node/node.h"
#include "node/node_config.h"
#include "node/prediction.h"
#include "topology/topology.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

std::string text(const fednode::Contributors& c) {
  std::string s = "{";
  for (fednode::NodeId id : c) s += (s.size() > 1 ? "," : "") + std::to_string(id);
  return s + "}";
}

int64_t count(const char* arg, const char* what) {
  size_t used = 0;
  int64_t n = -1;
  try {
    n = std::stoll(arg, &used);
  } catch (const std::exception&) {
  }
  if (n < 0 || used != std::string(arg).size())
    throw std::invalid_argument(std::string(what) + " must be a count, got '" + arg + "'");
  return n;
}

int usage() {
  std::cerr << "usage: edge_app TOPOLOGY ID fashion-mnist [TRAIN_LIMIT TEST_LIMIT] [--classify DIR]\n"
               "       edge_app TOPOLOGY ID npy TRAIN_X.npy TRAIN_Y.npy [TEST_X.npy TEST_Y.npy]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string classify_dir;  // --classify DIR, last on the command line
  if (argc >= 6 && std::string(argv[argc - 2]) == "--classify") {
    classify_dir = argv[argc - 1];
    argc -= 2;
  }
  if (argc < 4) return usage();
  const std::string source = argv[3];
  if (!((source == "fashion-mnist" && (argc == 4 || argc == 6)) ||
        (source == "npy" && (argc == 6 || argc == 8))))
    return usage();

  // load_topology validates the file and reads every node's public key from its key_dir.
  fednode::NodeConfig config;
  config.topology = fednode::load_topology(argv[1]);
  config.id = config.topology.lookup(argv[2]).id;
  config.run_name = fednode::run_name(config.topology);  // every node derives the same run id
  config.method = fednode::method_options_for(config.topology, config.id);

  // The whole dataset, then this node's share of it: the iid partition drawn from the
  // federation's seed, as every `fednode run` node of a file with partition=iid draws it.
  fednode::Features train, test;
  if (source == "fashion-mnist") {
    const int64_t train_limit = argc == 6 ? count(argv[4], "TRAIN_LIMIT") : -1;  // -1: all
    const int64_t test_limit = argc == 6 ? count(argv[5], "TEST_LIMIT") : -1;
    const std::string dir = fednode::default_fashion_mnist_dir();
    train = fednode::load_fashion_mnist(dir, "train", train_limit);
    test = fednode::load_fashion_mnist(dir, "test", test_limit);
  } else {
    train = fednode::load_npy_dataset(argv[4], argv[5]);
    if (argc == 8) test = fednode::load_npy_dataset(argv[6], argv[7]);
  }
  train.num_classes = test.num_classes = std::max(train.num_classes, test.num_classes);
  fednode::PartitionOptions split;
  split.nodes = static_cast<int>(config.topology.nodes.size());
  split.seed = config.topology.federation.seed;
  const fednode::Partition parts = fednode::make_partition(train.y, train.num_classes, split);
  config.local = train.subset(parts.at(static_cast<size_t>(config.topology.partition_index(config.id))));
  if (test.size() > 0) config.test = std::move(test);
  // Pixels need no backbone; features from a backbone would carry its fingerprint here, and
  // every node must give the same one. The recipe says how an image becomes these features, so
  // that the node's head files (and the classifier below) can read new images.
  config.backbone_fingerprint = "pixels";
  if (source == "fashion-mnist") {
    config.recipe = fednode::fashion_mnist_pixel_recipe({});
    config.class_names = fednode::fashion_mnist_class_names();
  } else if (!classify_dir.empty()) {
    throw std::invalid_argument("--classify reads images: it goes with fashion-mnist pixels, not .npy features");
  }

  // Callbacks run on the thread that calls step(), between turns of the event loop.
  const std::string tag = "[edge " + std::to_string(config.id) + "] ";
  config.callbacks.progress = [tag](const std::string& line) { std::cout << tag << line << std::endl; };
  config.callbacks.knowledge = [tag](fednode::NodeId from, const fednode::Knowledge& k) {
    std::cout << tag << "knowledge from node " << from << ": " << k.method_name() << ", contributors "
              << text(k.contributors) << std::endl;
  };
  // The node has written its head file (with its card) when this runs: the classifier reads it.
  const std::string state_dir = config.topology.state_dir_of(config.id);
  config.callbacks.head = [tag, state_dir, classify_dir](const fednode::Head& head, const fednode::Contributors& c) {
    std::cout << tag << "head ready: " << head.kind() << ", " << head.num_classes()
              << " classes, trained on " << text(c) << std::endl;
    if (classify_dir.empty()) return;
    const fednode::Classifier classifier = fednode::Classifier::from_state_dir(state_dir);
    const fednode::Predictions p = fednode::predict_image_folder(classifier, classify_dir, false);
    const fednode::Evaluation e = fednode::evaluate(p, head.num_classes());
    std::cout << tag << "classified " << p.items.size() << " images of " << classify_dir << ": accuracy "
              << e.accuracy() << " (" << e.correct << " of " << e.total << "), first: " << p.items[0] << " is "
              << classifier.card().class_name(p.classification.labels[0]) << std::endl;
  };
  std::cout << tag << "holds " << config.local.size() << " samples" << std::endl;

  const std::string key_dir = config.topology.key_dir_of(config.id);
  if (key_dir.empty()) throw std::invalid_argument(config.topology.describe(config.id) + " has no key_dir in " + argv[1]);
  fednode::Node node(std::move(config), fednode::load_identity(key_dir));

  // The application's own loop: step() handles what arrived within its budget and does what is
  // due, so the app can do other work between steps. A signal only sets a flag; the loop turns
  // it into request_stop(), and the node stops cleanly on its next step.
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  while (!node.step(std::chrono::milliseconds(100)))
    if (g_stop) node.request_stop();

  const fednode::NodeResult& r = node.result();
  std::cout << tag << "status " << fednode::to_string(r.status) << ", accuracy "
            << (r.accuracy >= 0 ? std::to_string(r.accuracy) : "none") << ", contributors "
            << text(r.contributors) << ", result in " << node.state_dir() << "/result.json" << std::endl;
  if (r.status == fednode::NodeStatus::Finished) return 0;
  if (r.status == fednode::NodeStatus::Stopped) return 130;
  return r.refused_by.empty() && r.discarded_from.empty() ? 3 : 4;  // as `fednode run` (docs/cli.md)
} catch (const std::exception& e) {
  std::cerr << "edge_app: " << e.what() << std::endl;
  return 1;
}
