// A node set up (Node::Impl, node/node_impl.h): its member, transport, state store, outbox and
// inbox, what its state directory holds, its peers, and its hellos.
#include "node/node_impl.h"

#include "crypto/noise_key.h"
#include "crypto/run_id.h"
#include "node/configuration_record.h"
#include "node/node_config.h"
#include "node/secure_stream.h"
#include "topology/reach.h"

#include <set>

namespace fednode {

Node::Impl::Impl(NodeConfig c, Identity identity)
    : config(std::move(c)),
      plan(plan_for(config.topology, config.id, plan_options(config.method))),
      curve_keys(config.topology.hop_encryption() == HopEncryption::Curve ? std::make_shared<const CurveKeyPair>(identity)
                                                                            : nullptr),
      noise_key(derive_noise_key(identity, derive_run_id(config.run_name))),
      masks(member_masks(config.topology, plan, config.method, identity, config.id, peer_keys(config.topology),
                         derive_run_id(config.run_name))),
      channel(std::move(identity), config.id, derive_run_id(config.run_name), peer_keys(config.topology), config.limits),
      book(config.id, config.local.size(), plan.expected_contributors),
      result(book.result()) {}

void Node::Impl::start(const std::atomic<bool>* stop) {
  check_node_config(config, plan);
  start_member_of(stop);
  open_transport();
  const auto& topo = config.topology;
  store = std::make_unique<StateStore>(config.state_dir.empty() ? topo.state_dir_of(config.id) : config.state_dir,
                                       channel.run(), config.limits.max_message_bytes + 4096);
  store->describe_heads(head_card(config));
  files = std::make_unique<StandingFiles>(store->path("status.json"), config.metrics_path, sink());
  open_outbox();
  check_configuration(*store, config);
  inbox = std::make_unique<Inbox>(
      channel, *store, *transport, *outbox, *member.admission, sink(), [this](NodeId id) { return who(id); },
      Pacing{config.receive_window.value_or(static_cast<size_t>(topo.federation.receive_window)),
             config.receive_clearance, std::chrono::milliseconds(static_cast<int64_t>(ack_deadline() * 500))});
  closing = std::make_unique<Closing>(*inbox, ack_deadline(), sink(), [this](NodeId id) { return who(id); });
  restore();
  add_peers();
  // Its earlier process may have been killed between recording an ack and sending the receipt,
  // and a receiver that waits for that receipt hears nothing else from a sender with nothing
  // left to resend it (a star's hub whose heads were all acknowledged).
  if (result.restarts > 0) inbox->receipts_again(outbox->recorded_acks());
  if (!store->has_marker("hello")) {
    for (NodeId peer : plan.recipients()) queue(peer, MessageType::Hello, 0, Payload(hello_of(config)), 0);
    store->set_marker("hello");
  }
  say(describe_plan(topo, plan));
}

void Node::Impl::start_member_of(const std::atomic<bool>* stop) {
  method = make_method(config.method);
  MemberInputs in = member_inputs(config, plan, *method, noise_key, std::move(masks));
  in.say = sink();
  Member assembled = assemble_member(std::move(in));
  MachineConfig& m = assembled.machine;
  m.ctx.stop = stop;
  result.privacy = std::move(assembled.privacy);
  encode.precision = transfer_precision(config.method);
  if (config.callbacks.progress || config.callbacks.log) m.ctx.progress = [this](const std::string& line) { say(line); };
  if (config.callbacks.knowledge)
    m.on_knowledge = [this](NodeId from, const Knowledge& k) { call_back([&] { config.callbacks.knowledge(from, k); }); };
  member = start_member(std::move(assembled));
  machine = member.machine.get();
}

void Node::Impl::open_transport() {
  TransportOptions t = transport_options(config, curve_keys);
  if (curve_keys)
    say("hops: CurveZMQ, admitting the " + std::to_string(t.curve.peers.size()) + " keys of " + config.topology.source);
  else if (config.topology.beyond_loopback())
    warn("hops: plain TCP beyond loopback (hop_encryption = \"none\"): any client that reaches this node's port "
         "can make it hold memory until the connection closes (docs/security.md, \"Memory a stranger can pin\")");
  if (!t.log && (config.callbacks.progress || config.callbacks.log)) t.log = [this](const std::string& line) { warn(line); };
  const auto& me = config.topology.node(config.id);
  // Without an address or bind, any free port: discovery's beacons tell the peers which.
  const std::string bind = !me.bind.empty() ? me.bind : !me.address.empty() ? me.address : "tcp://*:*";
  transport = std::make_unique<Transport>(config.id, bind, t);
}

void Node::Impl::open_outbox() {
  outbox = std::make_unique<Outbox>(
      *store, *transport,
      OutboxTiming{config.retry_initial, config.resend_after, std::min(10.0, config.topology.federation.deadline_seconds)},
      sink(), [this](NodeId id) { return who(id); }, config.id, config.limits.max_message_bytes,
      [this](const OutboxEntry& e, std::string payload) -> Outbox::Handover {
        const auto cipher = inbox->stream_cipher(e.to);
        if (cipher && payload.size() >= kStreamFromBytes)
          return channel.seal_stream(e.to, e.msg_id, e.type, std::move(payload), *cipher, kDefaultStreamChunk);
        return channel.seal_encoded(e.to, e.msg_id, e.type, payload);
      });
}

namespace {

PeerRoute peer_route(const PeerReach& way) {
  PeerRoute route;
  if (way.way == PeerReach::Way::Answer) {
    route.kind = PeerRoute::Kind::Answer;
    return route;
  }
  route.kind = PeerRoute::Kind::Relay;
  for (const TopologyRelay* relay : way.relays) {
    RelayPoint point;
    point.name = relay->name;
    point.address = relay->address;
    if (relay->public_key) {
      PublicKey key;
      key.bytes = *relay->public_key;
      point.key = key;
    }
    route.relays.push_back(point);
  }
  return route;
}

std::string describe_reach(const PeerReach& way, const std::string& peer) {
  if (way.way == PeerReach::Way::Answer) return peer + " accepts no connections: it dials this node, which answers on that connection";
  std::string others;
  for (size_t i = 1; i < way.relays.size(); ++i) others += (i > 1 ? ", '" : "'") + way.relays[i]->name + "'";
  return "reaching " + peer + " through relay '" + way.relays.front()->name + "' at " + way.relays.front()->address +
         (others.empty() ? "" : " (then " + others + ")");
}

}  // namespace

void Node::Impl::add_peers() {
  const auto& topo = config.topology;
  std::set<NodeId> sought;
  for (NodeId peer : plan.peers()) {
    const PeerReach way = reach(topo, config.id, peer);
    if (way.way != PeerReach::Way::Dial) {
      transport->add_peer(peer, peer_route(way));
      say(describe_reach(way, who(peer)));
      continue;
    }
    transport->add_peer(peer, topo.node(peer).address);
    if (topo.node(peer).address.empty()) {
      sought.insert(peer);
      continue;
    }
    const std::string problem = Transport::resolution_problem(topo.node(peer).address);
    if (!problem.empty())
      warn("the address of " + who(peer) + " (" + topo.node(peer).address + "): " + problem +
           "; retrying in the background, but check the topology file or the name service");
  }
  // Beacons go out from now on, so peers can find this node while it still loads or fits.
  if (config.discover)
    discovery = std::make_unique<Discovery>(topo, config.id, channel.run(), transport->bound_port(), std::move(sought),
                                            config.discovery_interfaces, sink(), [this](NodeId id) { return who(id); });
}

void Node::Impl::restore() {
  const auto entries = store->outbox();
  auto stored = store->received();
  result.restarts = store->count_start();
  if (result.restarts > 0)
    say("continuing from the state directory " + store->dir() + " (" + std::to_string(stored.size()) +
        " messages received, " + std::to_string(entries.size()) + " queued to send)");
  const bool phase1 = store->has_marker("phase1"), phase2 = store->has_marker("phase2");
  if (!phase1) store->drop_outgoing(1);  // redone from the inputs, deterministically
  if (!phase2) store->drop_outgoing(2);
  const auto kept = store->outbox();
  // What the phases done before the restart queued, counted as the whole run's: a phase is
  // redone only after its frames were dropped, so nothing is counted twice.
  for (const auto& e : kept) result.knowledge_bytes_sent += e.counted_bytes;
  outbox->restore(kept);
  for (NodeId peer : outbox->refusers()) machine->peer_refused(peer);
  apply(inbox->restore(std::move(stored), now()));
  std::shared_ptr<const Head> head;
  Contributors contributors;
  if (phase1 || phase2) {
    head = store->load_head(&contributors);
    for (NodeId c : contributors)
      if (!config.topology.find(c))
        throw InputError("state directory '" + store->dir() + "': its head names contributor " + std::to_string(c) +
                         ", which is not in " + config.topology.source + "; remove the directory to start over");
  }
  machine->restart(phase1, phase2, std::move(head), contributors, now());
  sync_result();
}

}  // namespace fednode
