// What `fednode predict` writes: the predictions as CSV or JSON, the accuracy summary, and the
// HTML page of per-class accuracy and the confusion matrix (docs/cli.md, "fednode predict").
#pragma once

#include "node/prediction.h"

#include <string>

namespace fednode::cli {

// item,label,class,probability (then label_2,class_2,probability_2... up to `top`), and
// true_label,true_class when the data are labelled, logit_0..logit_{C-1} with `logits`; fields
// quoted as RFC 4180 says.
std::string predictions_csv(const Predictions& p, const HeadCard& card, int top, bool logits);
// {"head": ..., "data": ..., "predictions": [{item, top: [{label, class, probability}], true_label, logits}],
//  "accuracy", "per_class", "confusion"} (the last three with labels); `head_file` names the head.
std::string predictions_json(const Predictions& p, const Evaluation& e, const Classifier& c, const std::string& head_file,
                             int top, bool logits);
// "accuracy 0.8125 (1625 of 2000)", per-class lines and the confusion matrix, for people.
std::string summary_text(const Evaluation& e, const HeadCard& card);
// DIR/index.html, self-contained: the accuracy, a bar per class, the confusion matrix as a heat
// table; every number carries its exact value in data-value, as `fednode report`'s page does.
void write_prediction_html(const std::string& dir, const Predictions& p, const Evaluation& e, const Classifier& c,
                           const std::string& head_file);

}  // namespace fednode::cli
