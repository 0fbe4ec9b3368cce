#include "node/options_json.h"

#include "methods/fedcgs/fedcgs.h"
#include "methods/fedpft/fedpft.h"
#include "methods/fedtc/fedtc.h"

namespace fednode {

void write_method_options(JsonWriter& w, const MethodOptions& o) {
  if (o.method == "fedpft") {
    const auto& p = o.fedpft;
    w.key("fedpft").begin_object();
    // What the run used: DP-FedPFT is one full Gaussian per class whatever the GMM options say.
    w.key("components").value(p.dp ? 1 : p.gmm.components);
    w.key("covariance").value(p.dp ? to_string(CovarianceType::Full) : to_string(p.gmm.covariance));
    w.key("reg_covar").value(p.gmm.reg_covar);
    w.key("tol").value(p.gmm.tol);
    w.key("max_iter").value(p.gmm.max_iter);
    w.key("n_init").value(p.gmm.n_init);
    w.key("init").value(p.gmm.init == GmmOptions::Init::KMeans ? "kmeans" : "kmeans++");
    w.key("transfer_precision").value(p.half_precision ? "float16" : "float32");
    w.key("synthetic_multiplier").value(p.synthetic_multiplier);
    w.key("sample_correlation").value(to_string(p.sample_correlation));
    if (p.sample_correlation == FedPftOptions::SampleCorrelation::Shared)
      w.key("correlation_rank").value(p.correlation_rank);
    w.key("dp").value(p.dp);
    if (p.dp) {
      w.key("dp_epsilon").value(p.dp_epsilon);
      w.key("dp_delta").value(p.dp_delta);
    }
    w.end_object();
  }
  if (o.method == "fedcgs") {
    w.key("fedcgs").begin_object();
    w.key("covariance").value(o.fedcgs.covariance == LdaCovariance::Total ? "total" : "within");
    w.key("shrinkage").value(o.fedcgs.shrinkage);
    w.end_object();
  }
  if (o.method == "fedtc") {
    const auto& t = o.fedtc;
    w.key("fedtc").begin_object();
    w.key("keep_ratio").value(t.keep_ratio);
    w.key("prototype_batch").value(t.batch_size);
    w.key("adapter").begin_object();
    w.key("hidden").array(std::vector<int>{t.head.hidden1, t.head.hidden2});
    w.key("lr").value(t.head.lr);
    w.key("momentum").value(t.head.momentum);
    w.key("epochs").value(t.head.epochs);
    w.key("batch_size").value(t.head.batch_size);
    w.key("weight_decay").value(t.head.weight_decay);
    w.key("min_steps").value(t.head.min_steps);
    w.key("scale_inputs").value(t.head.scale_inputs);
    w.end_object();
    w.end_object();
  }
}

void write_linear_head_options(JsonWriter& w, const LinearTrainOptions& h) {
  w.key("linear_head").begin_object();
  w.key("lr").value(h.lr);
  w.key("epochs").value(h.epochs);
  w.key("batch_size").value(h.batch_size);
  w.key("weight_decay").value(h.weight_decay);
  w.key("standardize").value(h.standardize);
  w.key("min_steps").value(h.min_steps);
  w.end_object();
}

}  // namespace fednode
