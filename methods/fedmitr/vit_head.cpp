#include "methods/fedmitr/vit_head.h"

#include "methods/heads/head_format.h"

#include <algorithm>
#include <istream>
#include <ostream>

namespace fednode {

VitHead::VitHead(VitModel model) : model_(std::move(model)) {
  model_.spec.validate("ViT head");
  if (static_cast<int64_t>(model_.parameters.size()) != model_.spec.parameter_count())
    throw InputError("ViT head: " + std::to_string(model_.parameters.size()) + " parameters for a spec of " +
                     std::to_string(model_.spec.parameter_count()));
}

MatrixF VitHead::scores(const MatrixF& X) const {
  // In blocks, so that scoring a test set holds one block's attention maps, not all of them.
  constexpr Eigen::Index kBlock = 1024;
  MatrixF out(X.rows(), num_classes());
  for (Eigen::Index first = 0; first < X.rows(); first += kBlock) {
    const Eigen::Index n = std::min(kBlock, X.rows() - first);
    out.middleRows(first, n) = vit_forward(model_, X.middleRows(first, n)).logits;
  }
  return out;
}

void VitHead::save_body(std::ostream& out) const {
  const VitSpec& s = model_.spec;
  for (int v : {s.image_size, s.channels, s.patch, s.dim, s.depth, s.heads, s.mlp_dim, s.classes})
    head_format::write_u64(out, static_cast<uint64_t>(v));
  if (s.scripted()) {  // dim 0 says so: which TorchScript ViT, and its parameter count
    head_format::write_string(out, s.script);
    head_format::write_u64(out, static_cast<uint64_t>(s.script_parameters));
  }
  head_format::write_matrix(out, Eigen::Map<const MatrixF>(model_.parameters.data(), 1,
                                                           static_cast<Eigen::Index>(model_.parameters.size())));
}

std::unique_ptr<Head> load_vit_head(std::istream& in, const std::string& where) {
  VitModel m;
  for (int* v : {&m.spec.image_size, &m.spec.channels, &m.spec.patch, &m.spec.dim, &m.spec.depth, &m.spec.heads,
                 &m.spec.mlp_dim, &m.spec.classes}) {
    const uint64_t read = head_format::read_u64(in, where);
    if (read > (uint64_t{1} << 30)) throw InputError(where + ": implausible ViT spec value " + std::to_string(read));
    *v = static_cast<int>(read);
  }
  if (m.spec.dim == 0) {  // a user's TorchScript ViT, which this process must have loaded to run it
    m.spec.script = head_format::read_string(in, where);
    const uint64_t n = head_format::read_u64(in, where);
    if (n > static_cast<uint64_t>(kMaxVitParameters)) throw InputError(where + ": implausible ViT parameter count " + std::to_string(n));
    m.spec.script_parameters = static_cast<int64_t>(n);
  }
  m.spec.validate(where + ": ViT spec");
  const MatrixF p = head_format::read_matrix(in, where);
  if (p.rows() != 1 || p.cols() != m.spec.parameter_count())
    throw InputError(where + ": " + std::to_string(p.size()) + " ViT parameters for a spec of " +
                     std::to_string(m.spec.parameter_count()));
  m.parameters.assign(p.data(), p.data() + p.size());
  return std::make_unique<VitHead>(std::move(m));
}

}  // namespace fednode
