// Every method, once (docs/architecture.md, "Adding a method"): a method is its folder plus one
// descriptor in method_registry(). Code outside a method's folder asks the registry instead of
// testing the method's name, so a new method touches its folder, registry.cpp and MethodOptions.
#pragma once

#include "core/options.h"
#include "methods/host.h"
#include "methods/method.h"
#include "methods/wire_body.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fednode {

class JsonWriter;

// Which alternative of KnowledgePayload a method sends (Knowledge::method_name asks by it): one of
// the kinds methods share, or its own (MethodKnowledge, which names its method itself).
enum class KnowledgeKind { Gmm = 0, Stats = 1, Prototypes = 2, Own = 3 };

// What a method measures beside the common baselines of a simulation (the centralised linear and
// LDA heads, each node's linear head on its own data): named test accuracies for the run, as the
// method's paper compares, and each node's local-only accuracy where the method has a better
// local-only reference than a linear head (FedMITR: the node's own ViT).
struct MethodBaseline {
  std::string name;
  double accuracy = -1;
  double seconds = 0;  // what computing it took, shared work (the clients' models) not included
};
struct MethodBaselines {
  std::vector<MethodBaseline> run;
  std::vector<double> local_only;              // per node, or empty
  std::vector<MethodBaseline> shared_seconds;  // work the baselines share, by name (accuracy unused)
};
using BaselineFunction = std::function<MethodBaselines(
    const Features& all, const std::vector<Features>& local, const Features& test, const MethodOptions& options,
    uint64_t seed, const std::function<void(const std::string&)>& progress)>;

struct MethodDescriptor {
  std::string name;        // on the command line, in topology files, hellos and knowledge
  KnowledgeKind knowledge = KnowledgeKind::Gmm;
  // How its knowledge travels (methods/wire_body.h), from its own folder: protocol/ has no code
  // for any kind.
  std::shared_ptr<const KnowledgeCodec> codec;
  // The heads only this method trains (FedMITR's ViT, FGL's CNN) in a head message; null when its
  // heads are methods/heads' (linear, LDA, adapter).
  std::shared_ptr<const HeadCodec> head_codec;
  // Options only this method reads (command-line and [federation.options] names): given with
  // another method they are refused rather than silently ignored. `flags` take no value.
  std::vector<std::string> options, flags;
  // Those of `options` whose values are files (a generator, a TorchScript ViT): a topology file
  // names them relative to itself, as it names its data (docs/topologies.md).
  std::vector<std::string> path_options;
  // Reads those options from `args` into `options`, defaults where not given; throws UsageError
  // naming a bad value or a combination that would be ignored.
  std::function<void(const Args& args, MethodOptions& options)> parse_options;
  // Its part of `--help`, defaults taken from its options struct so that they cannot drift.
  std::function<std::string()> help;
  std::function<std::unique_ptr<Method>(const MethodOptions&)> make;
  // What its options name that must be opened before it runs (FGL's generator), through `host`
  // since methods/ opens no files; once per process, shared by every member. Empty: nothing.
  std::function<std::shared_ptr<const MethodResource>(const MethodOptions&, std::shared_ptr<const Host> host)>
      open_resource;
  // Whether its knowledge travels as float16 tensors (FedPFT's 16-bit transfer) or float32.
  std::function<bool(const MethodOptions&)> half_precision;
  // What decides its head beyond its own options, for a node's configuration record: whether it
  // trains the linear head (whose options then count), and the head's seed.
  bool trains_linear_head = false;
  std::function<uint64_t(const MethodOptions&)> head_seed;
  // Writes the key `name` and the object of its options as a run used them (docs/report.md).
  std::function<void(JsonWriter&, const MethodOptions&)> write_options;
  // Its own baselines in `simulate` (empty: none beyond the common ones).
  BaselineFunction baselines;
};

const std::vector<MethodDescriptor>& method_registry();
// Null for a name no method has.
const MethodDescriptor* find_method(std::string_view name);
// Throws InputError naming the methods there are.
const MethodDescriptor& method_named(std::string_view name);
// The method whose knowledge `kind` is.
const MethodDescriptor& method_sending(KnowledgeKind kind);
// "fedpft, fedcgs or fedtc", for messages.
std::string method_names();
// The codec of heads of `kind` (methods/heads' or a method's); null for a kind none writes.
const HeadCodec* head_codec_for(std::string_view kind);
// "linear, lda, adapter, vit or cnn", for messages.
std::string head_kind_names();

}  // namespace fednode
