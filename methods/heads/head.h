// Head: a trained classifier on top of frozen features. Inference is plain Eigen so that
// predicting needs no LibTorch; only training (train_*.h) does.
#pragma once

#include "core/script_part.h"
#include "core/types.h"

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace fednode {

struct ClassAccuracy {
  int64_t total = 0;    // test samples of this class
  int64_t correct = 0;
  double value() const { return total ? static_cast<double>(correct) / static_cast<double>(total) : 0.0; }
};

// A head's accuracy on a test set, overall and per class, from one pass of predictions.
struct TestScore {
  double accuracy = 0;  // as Head::accuracy
  std::vector<ClassAccuracy> per_class;  // as Head::per_class_accuracy
};

class Head {
 public:
  virtual ~Head() = default;
  virtual std::string kind() const = 0;  // "linear", "lda", "adapter"
  virtual int num_classes() const = 0;
  virtual int dim() const = 0;
  // n x C class scores (logits); argmax is the prediction.
  virtual MatrixF scores(const MatrixF& X) const = 0;
  // The same computation as TorchScript: `def head(self, x: Tensor) -> Tensor` from [n, dim()]
  // float rows to [n, C] scores, over tensors named head_* (`fednode export`). Throws InputError
  // for a head that cannot be written so (a ViT from a user's script).
  virtual ScriptPart script() const = 0;
  // What the head is made of, beyond its kind, in one line for `fednode head info` (an ensemble's
  // members and what running it costs); empty when the kind says it all.
  virtual std::string composition() const { return ""; }

  Labels predict(const MatrixF& X) const;
  double accuracy(const Features& test) const;
  std::vector<ClassAccuracy> per_class_accuracy(const Features& test) const;
  // Both at the price of one: a head that runs ten ViTs per image takes seconds per test set.
  TestScore score(const Features& test) const;

  // Binary format "FNHEAD1\0", documented in docs/methods/heads.md. Streams only: methods/ does
  // no file I/O; a head in a file of its own is node/head_io.h's.
  void save(std::ostream& out) const;
  // `where` names the source in errors.
  static std::unique_ptr<Head> load(std::istream& in, const std::string& where);

 protected:
  virtual void save_body(std::ostream& out) const = 0;
};

// scores = X W^T + b. Used by the LibTorch-trained linear head and the closed-form LDA head.
class LinearHead : public Head {
 public:
  LinearHead(std::string kind, MatrixF W, VectorF b);
  std::string kind() const override { return kind_; }
  int num_classes() const override { return static_cast<int>(W_.rows()); }
  int dim() const override { return static_cast<int>(W_.cols()); }
  MatrixF scores(const MatrixF& X) const override;
  ScriptPart script() const override;
  const MatrixF& weights() const { return W_; }
  const VectorF& bias() const { return b_; }

 protected:
  void save_body(std::ostream& out) const override;

 private:
  std::string kind_;
  MatrixF W_;  // C x d
  VectorF b_;  // C
};

// FedTC's server-side adapter: FC(d,h1)-ReLU-L2norm-FC(h1,h2)-ReLU-L2norm-FC(h2,C).
class AdapterHead : public Head {
 public:
  struct Layer {
    MatrixF W;  // out x in
    VectorF b;  // out
  };
  explicit AdapterHead(std::vector<Layer> layers);  // exactly 3 layers
  std::string kind() const override { return "adapter"; }
  int num_classes() const override { return static_cast<int>(layers_.back().W.rows()); }
  int dim() const override { return static_cast<int>(layers_.front().W.cols()); }
  MatrixF scores(const MatrixF& X) const override;
  ScriptPart script() const override;
  const std::vector<Layer>& layers() const { return layers_; }

 protected:
  void save_body(std::ostream& out) const override;

 private:
  std::vector<Layer> layers_;
};

}  // namespace fednode
