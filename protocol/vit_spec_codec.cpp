// A ViT's spec inside a head message (docs/protocol.md, 6.4): FedMITR's own codec
// (methods/fedmitr/model_codec.h) over protocol/'s MessagePack, until heads have codecs of their own.
#include "methods/fedmitr/model_codec.h"
#include "protocol/payload_parts.h"
#include "protocol/wire_body_msgpack.h"

namespace fednode::wire {

void pack_vit_spec(Packer& pk, const VitSpec& spec) {
  std::string unused;  // a spec holds no tensor
  TensorJobs none;
  MsgpackBodyWriter w(pk, unused, DType::F32, none);
  fednode::write_vit_spec(w, spec);
}

VitSpec read_vit_spec(const msgpack::object& o, const std::string& path, int classes) {
  MsgpackBodyValue v(o, path);
  return fednode::read_vit_spec(v, classes);
}

}  // namespace fednode::wire
