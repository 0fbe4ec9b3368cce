#include "methods/fedmitr/vit_head.h"

#include "methods/heads/head_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
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
    out.middleRows(first, n) = vit_class_scores(model_, X.middleRows(first, n)).logits;
  }
  return out;
}

std::vector<std::vector<int64_t>> vit_tensor_shapes(const VitSpec& s) {
  const int64_t D = s.dim, T = s.tokens(), M = s.mlp_dim;
  std::vector<std::vector<int64_t>> shapes = {{D, int64_t{s.channels} * s.patch * s.patch}, {D}, {1, D}, {T + 1, D}};
  for (int b = 0; b < s.depth; ++b)
    for (std::vector<int64_t> shape :
         std::vector<std::vector<int64_t>>{{D}, {D}, {3 * D, D}, {3 * D}, {D, D}, {D}, {D}, {D}, {M, D}, {M}, {D, M}, {D}})
      shapes.push_back(shape);
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{D}, {D}, {s.classes, D}, {s.classes}})
    shapes.push_back(shape);
  return shapes;
}

std::string vit_forward_lines(const VitSpec& s, const std::string& prefix, bool masked) {
  const int64_t D = s.dim, C = s.channels, P = s.patch, g = s.grid(), T = s.tokens(), H = s.heads, dh = D / H;
  // The same arithmetic as vit_torch.cpp's run() for one model, unrolled over the blocks
  // (TorchScript reads attributes by name only).
  const auto n = [](int64_t v) { return std::to_string(v); };
  const auto t = [&prefix](int i) { return "self." + prefix + std::to_string(i); };
  char scale[32];
  std::snprintf(scale, sizeof scale, "%.17g", std::sqrt(static_cast<double>(dh)));
  std::string c = "    B = x.size(0)\n"
                  "    patches = x.reshape([B, " + n(C) + ", " + n(g) + ", " + n(P) + ", " + n(g) + ", " + n(P) +
                  "]).permute([0, 2, 4, 1, 3, 5]).reshape([B, " + n(T) + ", " + n(C * P * P) + "])\n"
                  "    tokens = torch.linear(patches, " + t(0) + ", " + t(1) + ") + " + t(3) + "[1:]\n"
                  "    cls = (" + t(2) + " + " + t(3) + "[0:1]).unsqueeze(0).expand([B, 1, " + n(D) + "])\n"
                  "    h = torch.cat([cls, tokens], 1)\n";
  if (masked)  // a stopped patch is no key for any query: -inf before the softmax
    c += "    keys = torch.cat([torch.ones_like(keep[:, 0:1]), keep], 1)\n"
         "    bias = torch.zeros([B, 1, 1, " + n(T + 1) + "]).masked_fill(torch.logical_not(keys.reshape([B, 1, 1, " +
         n(T + 1) + "])), float('-inf'))\n"
         "    attention = torch.zeros([0])\n";
  for (int b = 0; b < s.depth; ++b) {
    const int k = 4 + 12 * b;
    c += "    y = torch.layer_norm(h, [" + n(D) + "], " + t(k) + ", " + t(k + 1) + ", 1e-6)\n"
         "    qkv = torch.linear(y, " + t(k + 2) + ", " + t(k + 3) + ").reshape([B, " + n(T + 1) + ", 3, " + n(H) + ", " +
         n(dh) + "]).permute([2, 0, 3, 1, 4])\n"
         "    attention = torch.softmax(torch.matmul(qkv[0], qkv[1].transpose(-2, -1)) / " + scale +
         (masked ? " + bias" : "") + ", -1)\n"
         "    mixed = torch.matmul(attention, qkv[2]).transpose(1, 2).reshape([B, " + n(T + 1) + ", " + n(D) + "])\n"
         "    h = h + torch.linear(mixed, " + t(k + 4) + ", " + t(k + 5) + ")\n"
         "    z = torch.layer_norm(h, [" + n(D) + "], " + t(k + 6) + ", " + t(k + 7) + ", 1e-6)\n"
         "    h = h + torch.linear(torch.gelu(torch.linear(z, " + t(k + 8) + ", " + t(k + 9) + ")), " + t(k + 10) + ", " +
         t(k + 11) + ")\n";
  }
  const int last = 4 + 12 * s.depth;
  c += "    h = torch.layer_norm(h, [" + n(D) + "], " + t(last) + ", " + t(last + 1) + ", 1e-6)\n";
  return c;
}

ScriptPart vit_script_part(const VitModel& model, const std::string& function, const std::string& prefix) {
  const VitSpec& s = model.spec;
  if (s.scripted())
    throw InputError("a ViT from a user's TorchScript file (--vit-script " + s.script.substr(0, 12) +
                     ") is not written into an export; load that script with the head's parameters instead");
  const int last = 4 + 12 * s.depth;
  ScriptPart p;
  p.code = "def " + function + "(self, x: Tensor) -> Tensor:\n" + vit_forward_lines(s, prefix, false) +
           "    return torch.linear(h.select(1, 0), self." + prefix + std::to_string(last + 2) + ", self." + prefix +
           std::to_string(last + 3) + ")\n";
  p.tensors = split_flat(prefix, model.parameters, vit_tensor_shapes(s));
  return p;
}

ScriptPart VitHead::script() const { return vit_script_part(model_, "head", "head_p"); }

void VitHead::save_body(std::ostream& out) const { write_vit_model(out, model_); }

void write_vit_model(std::ostream& out, const VitModel& model) {
  const VitSpec& s = model.spec;
  for (int v : {s.image_size, s.channels, s.patch, s.dim, s.depth, s.heads, s.mlp_dim, s.classes})
    head_format::write_u64(out, static_cast<uint64_t>(v));
  if (s.scripted()) {  // dim 0 says so: which TorchScript ViT, and its parameter count
    head_format::write_string(out, s.script);
    head_format::write_u64(out, static_cast<uint64_t>(s.script_parameters));
  }
  head_format::write_matrix(out, Eigen::Map<const MatrixF>(model.parameters.data(), 1,
                                                           static_cast<Eigen::Index>(model.parameters.size())));
}

VitModel read_vit_model(std::istream& in, const std::string& where) {
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
  return m;
}

std::unique_ptr<Head> load_vit_head(std::istream& in, const std::string& where) {
  return std::make_unique<VitHead>(read_vit_model(in, where));
}

}  // namespace fednode
