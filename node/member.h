// One member of a federation, as both drivers build it: the networked node (node/node.cpp) and the
// simulator (node/simulator.cpp) make every node's machine configuration here, with its method
// context, DP noise key, secure-aggregation masks with the unmasking round they compose, and the
// privacy ledger of what it will release, so that the two cannot drift apart. A driver adds only
// what is its own: callbacks, progress lines, the stop flag.
#pragma once

#include "crypto/keys.h"
#include "crypto/run_id.h"
#include "node/admission.h"
#include "node/machine.h"
#include "node/privacy_ledger.h"
#include "node/secure_aggregation.h"
#include "node/unmasking_round.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fednode {

// Secure aggregation's part of a member: its group and seeds (none when it is off). Made from the
// node's identity, which the networked node hands on to its channel right after.
struct MemberMasks {
  std::optional<MaskPlan> plan;
  MaskSecrets secrets;
};
// Throws InputError as mask_plan does.
MemberMasks member_masks(const Topology& topology, const NodePlan& plan, const MethodOptions& method, const Identity& me,
                         NodeId me_id, const std::map<NodeId, PublicKey>& keys, const RunId& run);

struct MemberInputs {
  const Topology* topology = nullptr;  // outlives the machine
  NodePlan plan;
  const Method* method = nullptr;      // outlives the machine
  const MethodOptions* options = nullptr;
  const Features* local = nullptr;     // outlives the machine
  uint64_t seed = 0;                   // the federation's
  std::string backbone_fingerprint;
  int num_classes = 0, dim = 0;
  std::vector<std::string> class_names;
  std::shared_ptr<const ImageEncoder> image_encoder;
  SecretKey32 noise_key;
  MemberMasks masks;
  Say say;  // the member's lines: its machine's and its capabilities'
};

struct Member {
  MachineConfig machine;
  PrivacyLedger privacy;  // what the member will release of its own data
  // Secure aggregation's unmasking round, also machine.gate; null where the node takes part in none.
  std::shared_ptr<UnmaskingRound> unmasking;
};

// Opens what the method's options name (FGL's generator) for the method's context: files are the
// drivers' to open, never the machine's. Throws InputError as the files do.
Member assemble_member(MemberInputs in);

// How `method` sends knowledge: FedPFT's float16 transfer, or float32.
Precision transfer_precision(const MethodOptions& method);

// A member at work: its machine, and the admission in front of it that hands each message taken
// to the machine or to the capability it is for.
struct RunningMember {
  std::shared_ptr<UnmaskingRound> unmasking;
  std::unique_ptr<Machine> machine;
  std::unique_ptr<Admission> admission;
};
// Starts the machine of an assembled member, once the driver added its callbacks to it.
RunningMember start_member(Member member);

}  // namespace fednode
