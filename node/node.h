// fednode::Node — one networked node of a one-shot federation, to embed in an application or run
// from `fednode run`. It follows its topology's plan (topology/plan.h): waits for its inputs,
// merges them with its own features, fits its head, forwards, and finishes, talking to its peers
// over ZeroMQ (node/transport.h) with sealed, acknowledged messages (node/secure_channel.h) and
// persisting everything it must not lose in its state directory (node/state_store.h), so that a
// node killed at any point and started again with the same config continues the run.
//
//   fednode::NodeConfig config;
//   config.topology = fednode::load_topology("federation.toml");
//   config.id = 2;
//   config.method = ...;                 // MethodOptions for the topology's method
//   config.local = my_features;          // this node's training features
//   fednode::Node node(std::move(config), fednode::load_identity("keys/n2"));
//   fednode::NodeResult result = node.run();
//
// run() blocks; step() does one turn of the event loop for applications with their own loop.
// Threads: one thread drives the node (step, run, result, state_dir); request_stop() may be called
// from any thread or a signal handler. Callbacks run on the driving thread; an exception from one
// is rethrown by the step() or run() it happened in, after that step's work is done, and the node
// stays usable. Destroying the node while another thread steps it stops that thread's run first
// (docs/embedding.md).
#pragma once

#include "core/log.h"
#include "crypto/keys.h"
#include "features/feature_recipe.h"
#include "methods/method.h"
#include "node/link_bytes.h"
#include "node/privacy_ledger.h"
#include "node/transport.h"
#include "core/limits.h"
#include "topology/topology.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fednode {

struct NodeCallbacks {
  std::function<void(const std::string&)> progress;                     // human-readable lines
  // The same lines with their level (core/log.h); when set, progress is not called.
  std::function<void(LogLevel, const std::string&)> log;
  std::function<void(NodeId from, const Knowledge&)> knowledge;         // knowledge accepted
  std::function<void(const Head&, const Contributors&)> head;           // a (new) head is ready
};

struct NodeConfig {
  Topology topology;   // validated, with every node's public key (load_topology does both)
  NodeId id = 0;
  MethodOptions method;  // method.method must equal the topology's method
  Features local;        // this node's training features
  std::optional<Features> test;  // to report the head's accuracy
  std::string backbone_fingerprint = "pixels";  // must be the same at every node
  std::vector<std::string> class_names;         // label i's name, where the data names its classes
  std::shared_ptr<const ImageEncoder> image_encoder;  // images to the data's features (NodeContext)
  // How an image becomes these features, recorded in the node's head files so that predict and
  // export read new images the same way (features/feature_recipe.h). Left as it is (features of
  // an unknown recipe), the head files name backbone_fingerprint and nothing about images.
  FeatureRecipe recipe;
  std::string state_dir;   // empty: the topology's state_dir for this node
  std::string run_name;    // names the run: its id is derive_run_id(run_name); must not be empty
  Limits limits;
  TransportOptions transport;
  // Resends (node/outbox.h): a frame the peer's one-frame queue did not take is tried again
  // after 1 ms, doubling up to retry_initial. One that went out is sent again at once if its connection
  // breaks, and otherwise after resend_after without an acknowledgement (plus its transfer time
  // at 20 MB/s), then after twice as long, and so on: a connection that did not break loses
  // nothing, so a resend on it would only be a duplicate.
  std::chrono::milliseconds retry_initial{200};
  std::chrono::milliseconds resend_after{300000};
  // How long a node that has done its work still waits for the acknowledgements of its last
  // sends before it gives up on them (they are reported), and a finished node for the receipts
  // of its own acknowledgements. Empty: the topology's [federation] ack_deadline_seconds.
  std::optional<double> ack_deadline_seconds;
  // Pacing (docs/node.md): at most receive_window of the senders whose knowledge this node awaits
  // get their hello acknowledged, and so send their knowledge, at once; a cleared sender that has
  // not delivered after receive_clearance stops counting. 0: no pacing. Empty: the topology's
  // [federation] receive_window.
  std::optional<size_t> receive_window;
  std::chrono::milliseconds receive_clearance{15000};
  // Where to keep Prometheus metrics in the text format (node_exporter's textfile collector),
  // rewritten with status.json about once a second and at the end; empty: none (docs/node.md).
  std::string metrics_path;
  // Lines less important than this are not said (FEDNODE_LOG_LEVEL for `fednode run`).
  LogLevel log_level = LogLevel::Info;
  // LAN discovery (docs/lan.md, "Discovery"): beacon this node's port over UDP, and find the peers
  // whose address the topology leaves out from their beacons. Needs CurveZMQ hops
  // (hop_encryption "auto" or "curve"): a beacon is believed only once the handshake proves the
  // key the topology lists for that node. Static addresses are used as they are.
  bool discover = false;
  std::vector<std::string> discovery_interfaces;  // names; empty: every IPv4 interface that is up
  NodeCallbacks callbacks;
};

// Finished: the plan done and the head covers its expected contributors. Incomplete: a sender
// missed its deadline, a peer refused or never acknowledged a send, a piece was discarded, or the
// head covers less than the plan meant (someone was given up on along the way; docs/node.md).
enum class NodeStatus { Running, Finished, Incomplete, Stopped };
const char* to_string(NodeStatus s);

struct NodeResult {
  NodeId id = 0;
  NodeStatus status = NodeStatus::Running;
  Contributors contributors;           // whose data the node's head was trained on
  Contributors expected_contributors;  // the plan's, when nobody misses a deadline
  std::vector<NodeId> missing;         // senders given up on at a deadline
  std::vector<NodeId> unacknowledged;  // peers that never acknowledged a send
  std::vector<NodeId> refused_by;      // peers that refused a message of this node (an error reply)
  std::vector<NodeId> discarded_from;  // peers whose piece, accepted on arrival, made merging fail
  double accuracy = -1;                // < 0 without test features
  std::vector<ClassAccuracy> per_class;
  int64_t samples = 0;
  int64_t bytes_sent = 0, bytes_received = 0;          // frames, resends included
  LinkTally links;                                     // the same by peer (node/link_bytes.h)
  int64_t knowledge_bytes_sent = 0;                    // payload tensors, as `fednode simulate` counts
  int64_t messages_sent = 0, messages_received = 0, resends = 0;
  int64_t frames_rejected = 0;                         // failed the opening checks or the plan
  std::map<std::string, int64_t> frames_rejected_by;   // the same by reason (docs/node.md)
  int64_t duplicates = 0;                              // authentic repeats: acknowledged, not used
  int64_t streams_abandoned = 0;  // incoming streams dropped unfinished: replaced, stalled or left at close
  int restarts = 0;                                    // earlier runs of this node found in its state
  double seconds_total = 0, seconds_waiting = 0, seconds_merge = 0, seconds_head = 0;
  PrivacyLedger privacy;                               // what it released of its own data (node/privacy_ledger.h)
  std::shared_ptr<const Head> head;
  // Personalised FedCGS (--personalize): the node's personal head, and with test features both
  // heads' accuracy as the node would see it, each class weighted by the node's share of it
  // (methods/fedcgs/personalize.h, accuracy_in_proportion).
  std::shared_ptr<const Head> personal_head;
  double personal_accuracy = -1;
  std::vector<ClassAccuracy> personal_per_class;
  double accuracy_in_own_proportions = -1, personal_accuracy_in_own_proportions = -1;
};

class Node {
 public:
  // Binds the node's address and opens the state directory (continuing a run found there).
  // Throws InputError for a config that cannot run (unknown id, invalid topology, method
  // mismatch, inconsistent features, bad address, a state directory of another run or
  // configuration, or one another node holds).
  Node(NodeConfig config, Identity identity);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // One turn: handles what arrived within `budget`, then does whatever is due (merge, fit,
  // send, resend, deadlines). Returns true once the node is done (finished, incomplete or
  // stopped).
  bool step(std::chrono::milliseconds budget = std::chrono::milliseconds(100));
  // Steps until done; writes result.json into the state directory and returns the result.
  NodeResult run();
  // Safe in a signal handler (a lock-free atomic store). A node busy merging or fitting stops at
  // its next class or epoch (NodeContext::stop), unless it is loading data. For good: continuing
  // the run takes a new Node on the same state directory.
  void request_stop() { stop_.store(true); }

  const NodeResult& result() const;
  const std::string& state_dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stop_{false};
  std::atomic<int> driving_{0};  // threads inside step() or run()
};

// The result as JSON (schema in docs/node.md).
std::string result_json(const NodeResult& r, const Topology& topology, const std::string& run_name);

}  // namespace fednode
