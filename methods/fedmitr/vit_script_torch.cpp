// Part of libfednode_torch.so (core/torch_library.h): a user's TorchScript ViT (vit.h,
// load_vit_script), loaded once per process by its file's SHA-256 and run over flat parameters,
// so that training, inversion and distillation treat it as they treat the built-in ViT.
#include "methods/fedmitr/vit_script_torch.h"
#include "core/types.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fednode {
namespace {

// A user's TorchScript ViT (vit.h, load_vit_script), as loaded: the module with its file's
// parameters, and the names its parameters are set by, in the flat order.
struct ScriptedVit {
  torch::jit::Module module;  // never run: the runs borrow clones of it
  std::vector<std::string> names;
  VitSpec spec;
  // Clones no run holds now. A clone is made once per run that happens at the same time, not
  // per call: cloning copies every parameter and mints new class types in the module's
  // compilation unit, which would grow with every step of a training or an inversion.
  mutable std::mutex idle_mutex;
  mutable std::vector<torch::jit::Module> idle;
};

// A clone of a script for one run, handed back to its idle list after.
class BorrowedClone {
 public:
  explicit BorrowedClone(const ScriptedVit& vit) : vit_(vit) {
    {
      std::lock_guard<std::mutex> lock(vit.idle_mutex);
      if (!vit.idle.empty()) {
        module_ = std::move(vit.idle.back());
        vit.idle.pop_back();
        return;
      }
    }
    module_ = vit.module.clone();
  }
  ~BorrowedClone() {
    std::lock_guard<std::mutex> lock(vit_.idle_mutex);
    vit_.idle.push_back(std::move(module_));
  }
  BorrowedClone(const BorrowedClone&) = delete;
  BorrowedClone& operator=(const BorrowedClone&) = delete;
  torch::jit::Module& module() { return module_; }

 private:
  const ScriptedVit& vit_;
  torch::jit::Module module_;
};

std::mutex scripts_mutex;
std::map<std::string, std::shared_ptr<const ScriptedVit>>& scripts() {  // by the file's SHA-256
  static std::map<std::string, std::shared_ptr<const ScriptedVit>> table;
  return table;
}

std::shared_ptr<const ScriptedVit> script_for(const std::string& digest) {
  std::lock_guard<std::mutex> lock(scripts_mutex);
  const auto it = scripts().find(digest);
  if (it == scripts().end())
    throw InputError("ViT: this model runs the TorchScript ViT " + digest.substr(0, 16) +
                     "..., which this process has not loaded (--vit-script FILE)");
  return it->second;
}

// `flat` [P] into the parameters of `module` (a clone), as views, so that gradients reach it.
// Every parameter is set before each forward, so what a clone held from its last run (views of
// parameters that may be gone) is never read.
void set_parameters(torch::jit::Module& module, const ScriptedVit& vit, const torch::Tensor& flat) {
  int64_t at = 0;
  for (const std::string& name : vit.names) {
    torch::jit::Module owner = module;
    size_t start = 0, dot = 0;
    while ((dot = name.find('.', start)) != std::string::npos) {
      owner = owner.attr(name.substr(start, dot - start)).toModule();
      start = dot + 1;
    }
    const std::string leaf = name.substr(start);
    const torch::Tensor current = owner.attr(leaf).toTensor();
    owner.setattr(leaf, flat.narrow(0, at, current.numel()).view(current.sizes()));
    at += current.numel();
  }
}

}  // namespace

// The models run one by one through one borrowed clone, its parameters set from each row of
// `flats` in turn (the graph of an earlier model keeps the tensors it used).
Graph run_script(const VitSpec& s, const torch::Tensor& flats, const torch::Tensor& images, const torch::Tensor& keep,
                 Stopped stopped) {
  const std::shared_ptr<const ScriptedVit> vit = script_for(s.script);
  const int64_t M = flats.size(0), B = images.size(0), T = s.tokens();
  const torch::Tensor x = images.view({B, s.channels, s.image_size, s.image_size});
  const torch::Tensor k = keep.defined() ? keep : torch::ones({B, T}, torch::kBool);
  std::vector<torch::Tensor> logits, tokens, attention;
  BorrowedClone clone(*vit);
  for (int64_t m = 0; m < M; ++m) {
    set_parameters(clone.module(), *vit, flats.select(0, m));
    const auto out = clone.module().forward({x, k}).toTuple();
    logits.push_back(out->elements().at(0).toTensor());
    tokens.push_back(out->elements().at(1).toTensor());
    attention.push_back(out->elements().at(2).toTensor());
  }
  Graph g;
  g.logits = torch::stack(logits);
  if (!(stopped == Stopped::Dropped && keep.defined())) g.token_logits = torch::stack(tokens);
  g.cls_attention = torch::stack(attention);
  return g;
}

namespace {

int64_t int_attribute(const torch::jit::Module& m, const char* name, const std::string& path) {
  if (!m.hasattr(name))
    throw InputError(path + ": the ViT script has no attribute '" + name + "' (see scripts/export_vit.py)");
  const c10::IValue v = m.attr(name);
  if (!v.isInt()) throw InputError(path + ": the ViT script's attribute '" + name + "' is not an int");
  const int64_t n = v.toInt();
  if (n < 0 || n > (int64_t{1} << 30)) throw InputError(path + ": the ViT script's " + name + " is " + std::to_string(n));
  return n;
}

std::string first_line(const char* what) {
  const std::string s(what);
  return s.substr(0, s.find('\n'));
}

}  // namespace

void load_script(const std::string& path, const std::string& digest, VitSpec* out) {
  {
    std::lock_guard<std::mutex> lock(scripts_mutex);
    if (const auto it = scripts().find(digest); it != scripts().end()) {
      *out = it->second->spec;  // the same bytes, loaded before
      return;
    }
  }
  auto vit = std::make_shared<ScriptedVit>();
  try {
    vit->module = torch::jit::load(path, torch::kCPU);
  } catch (const c10::Error& e) {
    throw InputError(path + ": not a TorchScript file this LibTorch loads (" + first_line(e.what()) + ")");
  }
  vit->module.eval();
  VitSpec s;
  s.image_size = static_cast<int>(int_attribute(vit->module, "image_size", path));
  s.channels = static_cast<int>(int_attribute(vit->module, "channels", path));
  s.patch = static_cast<int>(int_attribute(vit->module, "patch", path));
  s.classes = static_cast<int>(int_attribute(vit->module, "classes", path));
  s.dim = s.depth = s.heads = s.mlp_dim = 0;
  s.script = digest;
  for (const auto& p : vit->module.named_parameters(/*recurse=*/true)) {
    if (p.value.scalar_type() != torch::kFloat32)
      throw InputError(path + ": the ViT script's parameter " + p.name + " is not float32");
    vit->names.push_back(p.name);
    s.script_parameters += p.value.numel();
  }
  s.validate(path);
  // A probe: two images, the second with one patch stopped; the shapes must be the interface's.
  const int64_t T = s.tokens();
  torch::Tensor keep = torch::ones({2, T}, torch::kBool);
  keep[1][0] = false;
  std::vector<torch::Tensor> outputs;
  try {
    torch::NoGradGuard no_grad;
    const auto out = vit->module.forward({torch::full({2, s.channels, s.image_size, s.image_size}, 0.5), keep});
    if (!out.isTuple() || out.toTuple()->elements().size() != 3)
      throw InputError(path + ": the ViT script's forward must return (logits, token_logits, cls_attention)");
    for (const c10::IValue& v : out.toTuple()->elements()) outputs.push_back(v.toTensor());
  } catch (const c10::Error& e) {
    throw InputError(path + ": the ViT script's forward(images [2, " + std::to_string(s.channels) + ", " +
                     std::to_string(s.image_size) + ", " + std::to_string(s.image_size) + "], keep [2, " +
                     std::to_string(T) + "]) failed (" + first_line(e.what()) + ")");
  }
  const std::vector<std::vector<int64_t>> want = {{2, s.classes}, {2, T, s.classes}, {2, T}};
  const char* names[] = {"logits", "token_logits", "cls_attention"};
  for (size_t i = 0; i < 3; ++i)
    if (outputs[i].sizes().vec() != want[i] || outputs[i].scalar_type() != torch::kFloat32)
      throw InputError(path + ": the ViT script's " + names[i] + " came back " + c10::str(outputs[i].sizes()) + " " +
                       std::string(c10::toString(outputs[i].scalar_type())) + ", expected float " + c10::str(c10::IntArrayRef(want[i])));
  vit->spec = s;
  std::lock_guard<std::mutex> lock(scripts_mutex);
  scripts()[digest] = std::move(vit);
  *out = s;
}

void script_start(const std::string& digest, std::vector<float>* out) {
  const std::shared_ptr<const ScriptedVit> vit = script_for(digest);
  out->clear();
  for (const auto& p : vit->module.named_parameters(/*recurse=*/true)) {
    const torch::Tensor t = p.value.detach().contiguous();
    out->insert(out->end(), t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  }
}

}  // namespace fednode
