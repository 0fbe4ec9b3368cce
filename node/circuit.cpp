#include "node/circuit.h"

namespace fednode {

std::string circuit_id(NodeId from, NodeId to) {
  std::string id = "FN";
  for (NodeId v : {from, to})
    for (int shift = 24; shift >= 0; shift -= 8) id += static_cast<char>((v >> shift) & 0xFF);
  return id;
}

std::optional<std::pair<NodeId, NodeId>> parse_circuit_id(std::string_view id) {
  if (id.size() != 10 || id.substr(0, 2) != "FN") return std::nullopt;
  const auto word = [&](size_t at) {
    NodeId v = 0;
    for (size_t k = 0; k < 4; ++k) v = (v << 8) | static_cast<unsigned char>(id[at + k]);
    return v;
  };
  return std::make_pair(word(2), word(6));
}

}  // namespace fednode
