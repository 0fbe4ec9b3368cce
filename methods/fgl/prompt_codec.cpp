#include "methods/fgl/prompt_codec.h"

#include <string_view>

namespace fednode {
namespace {

// Prompt text goes to a generator as a JSON string and to a command's input file: it must be
// UTF-8 without control characters, so that no peer can break a line of that file or a log.
void check_text(std::string_view s, const std::string& at, bool may_be_empty) {
  if (s.empty() && !may_be_empty) wire_fail(ProtocolErrorCode::InvalidValue, at + ": empty");
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      if (b < 0x20 || b == 0x7f)
        wire_fail(ProtocolErrorCode::InvalidValue, at + ": control character at byte " + std::to_string(i));
      ++i;
      continue;
    }
    const int extra = (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : (b & 0xF8) == 0xF0 ? 3 : -1;
    uint32_t code = extra == 1 ? b & 0x1F : extra == 2 ? b & 0x0F : b & 0x07;
    if (extra < 0 || i + static_cast<size_t>(extra) >= s.size())
      wire_fail(ProtocolErrorCode::InvalidValue, at + ": not UTF-8 at byte " + std::to_string(i));
    for (int j = 1; j <= extra; ++j) {
      const auto c = static_cast<unsigned char>(s[i + static_cast<size_t>(j)]);
      if ((c & 0xC0) != 0x80) wire_fail(ProtocolErrorCode::InvalidValue, at + ": not UTF-8 at byte " + std::to_string(i));
      code = (code << 6) | (c & 0x3F);
    }
    const uint32_t least = extra == 1 ? 0x80 : extra == 2 ? 0x800 : 0x10000;
    if (code < least || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF) || (code >= 0x80 && code < 0xA0))
      wire_fail(ProtocolErrorCode::InvalidValue, at + ": not UTF-8 text at byte " + std::to_string(i));
    i += static_cast<size_t>(extra) + 1;
  }
}

void write_class(BodyWriter& w, const ClassPrompts& c) {
  w.map(c.captions.empty() ? 5 : 6);
  w.text("label");
  w.uint(static_cast<uint32_t>(c.label));
  w.text("count");
  w.uint(static_cast<uint64_t>(c.count));
  w.text("name");
  w.text(c.name);
  w.text("prompt");
  w.text(c.prompt);
  w.text("negative_prompt");
  w.text(c.negative_prompt);
  if (c.captions.empty()) return;
  w.text("captions");
  w.array(static_cast<uint32_t>(c.captions.size()));
  for (const std::string& caption : c.captions) w.text(caption);
}

// Strings are bounded by max_string_bytes while parsing; captions by the class's samples before
// any is kept.
ClassPrompts read_class(BodyValue& m, int previous, const Knowledge& k, uint64_t& samples, const Limits& limits) {
  ClassPrompts c;
  std::tie(c.label, c.count) = read_class_header(m, previous, k.num_classes, samples, limits);
  c.name = m.at("name")->text();
  c.prompt = m.at("prompt")->text();
  c.negative_prompt = m.at("negative_prompt")->text();
  if (const auto captions = m.find("captions")) {
    const uint32_t n = captions->items();
    if (n > static_cast<uint64_t>(c.count))
      wire_fail(ProtocolErrorCode::InvalidValue, m.path("captions") + ": " + std::to_string(n) + " captions for " +
                                                     std::to_string(c.count) + " samples");
    c.captions.reserve(n);
    for (uint32_t i = 0; i < n; ++i) c.captions.push_back(captions->item(i)->text());
  }
  m.finish();
  return c;
}

}  // namespace

void PromptCodec::write(const Knowledge& k, BodyWriter& w) const {
  const auto& p = body_of<PromptKnowledge>(k.payload);
  w.map(1);
  w.text("shards");
  w.array(static_cast<uint32_t>(p.shards.size()));
  for (const PromptShard& shard : p.shards) {
    w.map(2);
    w.text("owner");
    w.uint(shard.owner);
    w.text("classes");
    w.array(static_cast<uint32_t>(shard.classes.size()));
    for (const ClassPrompts& c : shard.classes) write_class(w, c);
  }
}

KnowledgePayload PromptCodec::read(BodyValue& body, const Knowledge& k, BodyReader& r) const {
  const auto list = read_one_per_contributor(body, "shards", "shard", k);
  const uint32_t n = list->items();
  PromptKnowledge p;
  p.shards.reserve(n);
  uint64_t samples = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const auto entry = list->item(i);
    PromptShard shard;
    shard.owner = read_owner(*entry);
    const auto classes = read_class_list(*entry, "classes", k.num_classes);
    entry->finish();
    const uint32_t m = classes->items();
    shard.classes.reserve(m);
    int previous = -1;
    for (uint32_t j = 0; j < m; ++j) {
      shard.classes.push_back(read_class(*classes->item(j), previous, k, samples, r.limits()));
      previous = shard.classes.back().label;
    }
    p.shards.push_back(std::move(shard));
  }
  body.finish();
  return p;
}

void PromptCodec::check(const Knowledge& k, const std::string& where, bool /*check_values: no numbers*/) const {
  const auto& p = body_of<PromptKnowledge>(k.payload);
  check_one_per_contributor(p.shards, k, where + ".body.shards", "shard");
  for (size_t i = 0; i < p.shards.size(); ++i) {
    const PromptShard& shard = p.shards[i];
    const std::string at = where + ".body.shards[" + std::to_string(i) + "]";
    if (shard.classes.empty()) wire_fail(ProtocolErrorCode::InvalidValue, at + ".classes: empty");
    int previous = -1;
    for (size_t j = 0; j < shard.classes.size(); ++j) {
      const ClassPrompts& c = shard.classes[j];
      const std::string cat = at + ".classes[" + std::to_string(j) + "]";
      check_class_entry(c.label, c.count, previous, k.num_classes, cat);
      previous = c.label;
      check_text(c.name, cat + ".name", false);
      check_text(c.prompt, cat + ".prompt", false);
      check_text(c.negative_prompt, cat + ".negative_prompt", true);
      if (static_cast<int64_t>(c.captions.size()) > c.count)
        wire_fail(ProtocolErrorCode::InvalidValue, cat + ".captions: " + std::to_string(c.captions.size()) +
                                                       " captions for " + std::to_string(c.count) + " samples");
      for (size_t n = 0; n < c.captions.size(); ++n)
        check_text(c.captions[n], cat + ".captions[" + std::to_string(n) + "]", false);
    }
  }
}

void PromptCodec::bound(const Knowledge& k, const Limits& limits, const std::string& where, uint64_t& samples) const {
  for (const auto& shard : body_of<PromptKnowledge>(k.payload).shards)
    for (const auto& c : shard.classes) {
      add_samples(samples, static_cast<uint64_t>(std::max<int64_t>(c.count, 0)), where + ".body.shards.classes.count",
                  limits);
      for (const std::string* text : {&c.name, &c.prompt, &c.negative_prompt})
        check_limit(text->size(), limits.max_string_bytes, where + ".body.shards.classes", "max_string_bytes");
      for (const std::string& caption : c.captions)
        check_limit(caption.size(), limits.max_string_bytes, where + ".body.shards.classes.captions", "max_string_bytes");
    }
}

size_t PromptCodec::entries(const Knowledge& k) const {
  size_t n = 0;
  for (const auto& shard : body_of<PromptKnowledge>(k.payload).shards)
    for (const auto& c : shard.classes) n += 1 + c.captions.size() / 32;
  return n;
}

}  // namespace fednode
