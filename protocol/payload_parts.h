// Internal to protocol/: the pieces payload.cpp assembles, one file per payload family.
#pragma once

#include "protocol/codec.h"
#include "protocol/msgpack_io.h"
#include "protocol/tensor.h"

#include <string>

namespace fednode::wire {

void pack_contributors(Packer& pk, const Contributors& c);
// What knowledge and heads both say of where they come from, as four entries of their map:
// contributors, backbone, dim, classes (docs/protocol.md, sections 5.2 and 5.3).
void pack_origin(Packer& pk, const Contributors& contributors, const std::string& backbone, int dim, int classes);
// Non-empty, strictly increasing 32-bit ids, at most limits.max_contributors.
Contributors read_contributors(const msgpack::object& o, const std::string& path, const Limits& limits);
// An unsigned integer in [1, limit], for dimensions and class counts.
int read_count(const msgpack::object& o, const std::string& path, uint64_t limit, const char* limit_name);
std::string read_string(const msgpack::object& o, const std::string& path);

// With `deferred`, the tensors' values are left for deferred->run() or run_through(): `out` has
// its full size and structure, and `k` and `out` must stay where they are until the jobs ran.
void pack_knowledge(Packer& pk, std::string& out, const Knowledge& k, const EncodeOptions& options,
                    TensorJobs* deferred = nullptr);
Knowledge read_knowledge(const msgpack::object& o, const Limits& limits);

void pack_head(Packer& pk, std::string& out, const HeadMessage& h);
HeadMessage read_head(const msgpack::object& o, const Limits& limits);

}  // namespace fednode::wire
