#include "node/result_book.h"

#include "methods/fedcgs/personalize.h"
#include "node/node_result.h"

namespace fednode {

ResultBook::ResultBook(NodeId id, int64_t samples, Contributors expected_contributors) {
  result_.id = id;
  result_.samples = samples;
  result_.expected_contributors = std::move(expected_contributors);
}

void ResultBook::count_sent(const SendTally& pumped) {
  sent_.bytes += pumped.bytes;
  for (const auto& [to, bytes] : pumped.bytes_to) sent_.bytes_to[to] += bytes;
  sent_.messages += pumped.messages;
  sent_.resends += pumped.resends;
}

void ResultBook::sync(const InboxTally& in, const Machine& machine, bool finished) {
  NodeResult& r = result_;
  r.bytes_sent = sent_.bytes + in.bytes_answered;
  r.links = in.links;
  for (const auto& [to, bytes] : sent_.bytes_to) r.links[to].sent += bytes;
  r.bytes_received = in.bytes_received;
  r.messages_sent = sent_.messages;
  r.messages_received = in.messages_received;
  r.resends = sent_.resends;
  r.frames_rejected = in.frames_rejected;
  r.frames_rejected_by = in.rejected_by;
  r.duplicates = in.duplicates;
  r.streams_abandoned = in.streams_abandoned;
  if (finished) return;  // score() filtered `missing`
  const MachineOutcome& o = machine.outcome();
  r.contributors = o.contributors;
  r.missing = o.missing;
  r.discarded_from = o.discarded_from;
  r.seconds_waiting = o.seconds_waiting;
  r.seconds_merge = o.seconds_merge;
  r.seconds_head = o.seconds_head;
}

void ResultBook::score(const Machine& machine, NodeStatus status, const std::optional<Features>& test) {
  finished_as_ = status;
  score_result(result_, machine.outcome(), machine.never_delivered(), status, test);
}

void ResultBook::personalize(const Machine& machine, const Features& local, const std::optional<Features>& test,
                             StateStore& store, const Say& say) {
  NodeResult& r = result_;
  r.personal_head.reset();
  if (!r.head) return;
  try {
    r.personal_head = machine.personal_head();
  } catch (const InputError& e) {
    say.warn(std::string("no personal head: ") + e.what());
    return;
  }
  if (!r.personal_head) return;
  store.save_personal_head(*r.personal_head);
  if (!test) return;
  r.personal_accuracy = r.personal_head->accuracy(*test);
  r.personal_per_class = r.personal_head->per_class_accuracy(*test);
  std::vector<int64_t> counts(static_cast<size_t>(local.num_classes), 0);
  for (int y : local.y) ++counts[static_cast<size_t>(y)];
  r.accuracy_in_own_proportions = accuracy_in_proportion(r.per_class, counts);
  r.personal_accuracy_in_own_proportions = accuracy_in_proportion(r.personal_per_class, counts);
}

}  // namespace fednode
