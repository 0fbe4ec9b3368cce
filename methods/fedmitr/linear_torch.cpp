// Part of libfednode_torch.so (core/torch_library.h): the ViT's linear layers for M models at
// once (linear_torch.h).
#include "methods/fedmitr/linear_torch.h"

#include <ATen/Parallel.h>
#include <cblas.h>

#include <algorithm>

namespace fednode {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The blocks' sizes are constants, never derived from the thread count, so that the same sums
// are formed whatever the machine. 128 rows of a 64-wide layer are about a million
// multiply-adds a block: the shared loop's overhead is lost in them.
constexpr int64_t kRows = 128;
constexpr int64_t kOutputs = 32;

int64_t blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }

// Runs `work(model, first, count)` over every model's [0, n) in blocks of `block`, shared among
// LibTorch's threads.
template <typename Work>
void each_block(int64_t M, int64_t n, int64_t block, const Work& work) {
  const int64_t per_model = blocks(n, block);
  at::parallel_for(0, M * per_model, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t m = t / per_model, first = (t % per_model) * block;
      work(m, first, std::min(block, n - first));
    }
  });
}

class ModelsLinear : public torch::autograd::Function<ModelsLinear> {
 public:
  // x [M, R, in] contiguous; W [M, out, in] and b [M, out], each model's contiguous.
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& W,
                               const torch::Tensor& b) {
    const int64_t M = W.size(0), out = W.size(1), in = W.size(2), R = x.size(1);
    torch::Tensor y = torch::empty({M, R, out}, x.options());
    const float* xp = x.data_ptr<float>();
    const float* Wp = W.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int64_t W_step = W.stride(0), b_step = b.stride(0);
    each_block(M, R, kRows, [&](int64_t m, int64_t first, int64_t rows) {
      float* to = yp + (m * R + first) * out;
      // The bias first, then the product added to it (beta 1): what bmm and a separate add give.
      for (int64_t r = 0; r < rows; ++r) std::copy_n(bp + m * b_step, out, to + r * out);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(out),
                  static_cast<int>(in), 1.0f, xp + (m * R + first) * in, static_cast<int>(in), Wp + m * W_step,
                  static_cast<int>(in), 1.0f, to, static_cast<int>(out));
    });
    ctx->save_for_backward({x, W});
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& W = saved[1];
    const int64_t M = W.size(0), out = W.size(1), in = W.size(2), R = x.size(1);
    const torch::Tensor gy = grads[0].contiguous();
    const float* gp = gy.data_ptr<float>();
    const float* xp = x.data_ptr<float>();
    const float* Wp = W.data_ptr<float>();
    const int64_t W_step = W.stride(0);
    torch::Tensor dx, dW, db;
    if (ctx->needs_input_grad(0)) {
      dx = torch::empty({M, R, in}, x.options());
      float* dp = dx.data_ptr<float>();
      each_block(M, R, kRows, [&](int64_t m, int64_t first, int64_t rows) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(in),
                    static_cast<int>(out), 1.0f, gp + (m * R + first) * out, static_cast<int>(out), Wp + m * W_step,
                    static_cast<int>(in), 0.0f, dp + (m * R + first) * in, static_cast<int>(in));
      });
    }
    if (ctx->needs_input_grad(1) || ctx->needs_input_grad(2)) {
      dW = torch::empty({M, out, in}, x.options());
      db = torch::empty({M, out}, x.options());
      float* dWp = dW.data_ptr<float>();
      float* dbp = db.data_ptr<float>();
      // Blocks of outputs: each sums over all R rows, in the same order whatever the thread count.
      each_block(M, out, kOutputs, [&](int64_t m, int64_t first, int64_t outputs) {
        const float* g = gp + m * R * out + first;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(outputs), static_cast<int>(in),
                    static_cast<int>(R), 1.0f, g, static_cast<int>(out), xp + m * R * in, static_cast<int>(in), 0.0f,
                    dWp + (m * out + first) * in, static_cast<int>(in));
        float* sums = dbp + m * out + first;
        std::fill_n(sums, outputs, 0.0f);
        for (int64_t r = 0; r < R; ++r)
          for (int64_t o = 0; o < outputs; ++o) sums[o] += g[r * out + o];
      });
    }
    return {dx, dW, db};
  }
};

}  // namespace

torch::Tensor models_linear(const torch::Tensor& x, const torch::Tensor& W, const torch::Tensor& b) {
  const int64_t M = W.size(0), out = W.size(1), in = W.size(2);
  if (W.dim() != 3 || b.dim() != 2 || b.size(0) != M || b.size(1) != out || x.size(0) != M || x.size(-1) != in ||
      x.scalar_type() != torch::kFloat32 || W.scalar_type() != torch::kFloat32 || b.scalar_type() != torch::kFloat32)
    throw std::logic_error("models_linear: x [M, ..., in], W [M, out, in] and b [M, out], float32");
  // Each model's weights and bias are read as one contiguous block.
  const torch::Tensor W_rows = W.stride(2) == 1 && W.stride(1) == in ? W : W.contiguous();
  const torch::Tensor b_rows = b.stride(1) == 1 ? b : b.contiguous();
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = out;
  return ModelsLinear::apply(x.reshape({M, -1, in}).contiguous(), W_rows, b_rows)[0].view(sizes);
}

}  // namespace fednode
