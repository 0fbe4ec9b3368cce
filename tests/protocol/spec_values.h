// Small messages written field by field as docs/protocol.md describes them.
#pragma once

#include "value.h"

namespace fednode::test {

// docs/protocol.md, "FedTC prototypes": two classes' worth, dim 2, 3 classes.
inline Value prototypes_value() {
  return Map{{"method", "fedtc"},
             {"contributors", Array{2, 3}},
             {"backbone", "clip"},
             {"dim", 2},
             {"classes", 3},
             {"body", Map{{"classes", Array{Map{{"label", 0},
                                                {"count", 4},
                                                {"prototypes", tensor("f32", Array{2, 2}, "dense",
                                                                      f32_bytes({1, 2, 3, 4}))}},
                                            Map{{"label", 2},
                                                {"count", 1},
                                                {"prototypes", tensor("f32", Array{1, 2}, "dense",
                                                                      f32_bytes({5, 6}))}}}}}}};
}

// docs/protocol.md, "FedMITR models": the smallest ViT (4x4 images, patch 2, dim 2, one block of
// one head, MLP 2, 2 classes: 76 parameters), sent by node 4.
inline std::vector<float> model_parameters() {
  std::vector<float> p(76);
  for (size_t i = 0; i < p.size(); ++i) p[i] = 0.01f * static_cast<float>(i) - 0.3f;
  return p;
}
inline Value models_value() {
  return Map{{"method", "fedmitr"},
             {"contributors", Array{4}},
             {"backbone", "pixels"},
             {"dim", 16},
             {"classes", 2},
             {"body", Map{{"models", Array{Map{{"owner", 4},
                                               {"count", 30},
                                               {"spec", Map{{"image_size", 4},
                                                            {"channels", 1},
                                                            {"patch", 2},
                                                            {"dim", 2},
                                                            {"depth", 1},
                                                            {"heads", 1},
                                                            {"mlp_dim", 2}}},
                                               {"parameters", tensor("f32", Array{76}, "dense",
                                                                     f32_bytes(model_parameters()))}}}}}}};
}

// docs/protocol.md, "FGL": the prompts of node 3, two classes, one with captions.
inline Value prompts_value() {
  return Map{{"method", "fgl"},
             {"contributors", Array{3}},
             {"backbone", "pixels"},
             {"dim", 784},
             {"classes", 10},
             {"body", Map{{"shards", Array{Map{{"owner", 3},
                                               {"classes", Array{Map{{"label", 1},
                                                                     {"count", 40},
                                                                     {"name", "Trouser"},
                                                                     {"prompt", "Trouser, real world images, high resolution"},
                                                                     {"negative_prompt", "low quality, low resolution"}},
                                                                 Map{{"label", 7},
                                                                     {"count", 2},
                                                                     {"name", "Sneaker"},
                                                                     {"prompt", "Sneaker, real world images"},
                                                                     {"negative_prompt", ""},
                                                                     {"captions", Array{"a white sneaker, side view"}}}}}}}}}}};
}

// docs/protocol.md, "FedCGS statistics".
inline Value stats_value() {
  return Map{{"method", "fedcgs"},
             {"contributors", Array{1}},
             {"backbone", "pixels"},
             {"dim", 2},
             {"classes", 2},
             {"body", Map{{"A", tensor("f64", Array{2, 2}, "dense", f64_bytes({1, 2, 3, 4}))},
                          {"N", Array{3, 4}},
                          {"B", tensor("f64", Array{2, 2}, "upper", f64_bytes({5, 6, 7}))}}}};
}

// docs/protocol.md, "FedPFT mixtures": one class, K = 2, diagonal.
inline Value gmm_value(const char* covariance = "diag") {
  Value covs = std::string(covariance) == "full"
                   ? tensor("f32", Array{2, 2, 2}, "upper", f32_bytes({1, 0, 1, 2, 0, 2}))
                   : tensor("f32", Array{2, 2}, "dense", f32_bytes({1, 1, 2, 2}));
  return Map{{"method", "fedpft"},
             {"contributors", Array{5}},
             {"backbone", "resnet"},
             {"dim", 2},
             {"classes", 2},
             {"body", Map{{"classes", Array{Map{{"label", 1},
                                                {"count", 30},
                                                {"covariance", covariance},
                                                {"weights", tensor("f32", Array{2}, "dense", f32_bytes({0.25f, 0.75f}))},
                                                {"means", tensor("f32", Array{2, 2}, "dense", f32_bytes({0, 1, 2, 3}))},
                                                {"covariances", covs}}}}}}};
}

// gmm_value() with a within-class covariance sketch (FedPFT's shared correlation).
inline Value gmm_sketch_value(uint64_t residuals, Value variances, Value factor) {
  Value v = gmm_value();
  std::get<Map>(v["body"].v)
      .emplace_back("within_class", Map{{"residuals", residuals}, {"variances", std::move(variances)},
                                        {"factor", std::move(factor)}});
  return v;
}
inline Value gmm_sketch_value() {
  return gmm_sketch_value(30, tensor("f32", Array{2}, "dense", f32_bytes({1, 2})),
                          tensor("f32", Array{1, 2}, "dense", f32_bytes({0.5f, -0.5f})));
}

}  // namespace fednode::test
