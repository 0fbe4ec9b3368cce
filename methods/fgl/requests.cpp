#include "methods/fgl/requests.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace fednode {

PromptShard own_prompts(const Features& local, NodeId node, const std::vector<std::string>& names,
                        const FglOptions& options) {
  PromptShard shard;
  shard.owner = node;
  const std::vector<int64_t> counts = local.class_counts();
  for (size_t c = 0; c < counts.size(); ++c) {
    if (counts[c] == 0) continue;
    if (c >= names.size() || names[c].empty())
      throw InputError("fgl: node " + std::to_string(node) + " holds class " + std::to_string(c) +
                       " but has no name for it: give --class-names (the data names " + std::to_string(names.size()) +
                       " classes)");
    ClassPrompts p;
    p.label = static_cast<int>(c);
    p.count = counts[c];
    p.name = names[c];
    p.prompt = options.prompt;
    for (size_t at = p.prompt.find("{name}"); at != std::string::npos; at = p.prompt.find("{name}", at + p.name.size()))
      p.prompt.replace(at, 6, p.name);
    p.negative_prompt = options.negative_prompt;
    shard.classes.push_back(std::move(p));
  }
  return shard;
}

std::vector<GenerationRequest> synthesis_requests(const std::vector<const PromptShard*>& shards,
                                                  const FglOptions& options) {
  // Per class: the class-level requests by their text, and the captions, each weighted by the
  // samples it stands for.
  using Text = std::tuple<std::string, std::string, std::string>;  // name, prompt, negative prompt
  struct ClassPlan {
    std::map<Text, int64_t> class_level;
    std::vector<std::pair<Text, std::string>> captions;
    int64_t samples = 0;
  };
  std::map<int, ClassPlan> plans;
  for (const PromptShard* shard : shards)
    for (const ClassPrompts& c : shard->classes) {
      ClassPlan& plan = plans[c.label];
      const Text text{c.name, c.prompt, c.negative_prompt};
      plan.class_level[text] += c.count - static_cast<int64_t>(c.captions.size());
      for (const std::string& caption : c.captions) plan.captions.emplace_back(text, caption);
      plan.samples += c.count;
    }
  std::vector<GenerationRequest> out;
  for (auto& [label, plan] : plans) {
    double wanted = std::round(static_cast<double>(plan.samples) * options.images_per_sample);
    if (options.max_images_per_class > 0) wanted = std::min(wanted, static_cast<double>(options.max_images_per_class));
    const double scale = wanted / static_cast<double>(plan.samples);
    // Largest remainders keep the class's total exactly `wanted` after rounding each part.
    struct Part {
      GenerationRequest request;
      double exact;
    };
    std::vector<Part> parts;
    for (const auto& [text, samples] : plan.class_level)
      if (samples > 0) {
        Part p;
        p.request.label = label;
        std::tie(p.request.name, p.request.prompt, p.request.negative_prompt) = text;
        p.exact = static_cast<double>(samples) * scale;
        parts.push_back(std::move(p));
      }
    std::sort(plan.captions.begin(), plan.captions.end());
    for (const auto& [text, caption] : plan.captions) {
      Part p;
      p.request.label = label;
      std::tie(p.request.name, p.request.prompt, p.request.negative_prompt) = text;
      p.request.caption = caption;
      p.exact = scale;
      parts.push_back(std::move(p));
    }
    int64_t given = 0;
    for (Part& p : parts) {
      p.request.count = static_cast<int64_t>(std::floor(p.exact));
      given += p.request.count;
    }
    std::vector<size_t> by_remainder(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) by_remainder[i] = i;
    std::stable_sort(by_remainder.begin(), by_remainder.end(), [&](size_t a, size_t b) {
      return parts[a].exact - std::floor(parts[a].exact) > parts[b].exact - std::floor(parts[b].exact);
    });
    for (size_t i = 0; given < static_cast<int64_t>(wanted) && i < by_remainder.size(); ++i, ++given)
      ++parts[by_remainder[i]].request.count;
    for (Part& p : parts)
      if (p.request.count > 0) out.push_back(std::move(p.request));
  }
  return out;
}

}  // namespace fednode
