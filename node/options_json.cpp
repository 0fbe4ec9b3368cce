#include "node/options_json.h"

#include "methods/method_options.h"
#include "methods/registry.h"

namespace fednode {

void write_method_options(JsonWriter& w, const MethodOptions& o) {
  method_named(o.method).write_options(w, o);
  // Only when set, so that records of runs before the policy existed still match.
  if (o.min_class_count > 0) w.key("min_class_count").value(o.min_class_count);
  if (o.secure_aggregation != SecureAggregation::Off) w.key("secure_aggregation").value(to_string(o.secure_aggregation));
}

void write_linear_head_options(JsonWriter& w, const LinearTrainOptions& h) {
  w.key("linear_head").begin_object();
  write_learning_rate(w, h.lr, h.choice);
  w.key("epochs").value(h.epochs);
  w.key("batch_size").value(h.batch_size);
  w.key("weight_decay").value(h.weight_decay);
  w.key("standardize").value(h.standardize);
  w.key("min_steps").value(h.min_steps);
  w.end_object();
}

}  // namespace fednode
