#include "node/head_io.h"

#include "core/digest.h"
#include "core/json_writer.h"
#include "core/version.h"
#include "node/durable_file.h"

#include <cstring>
#include <limits>
#include <sstream>

namespace fednode {
namespace {

constexpr char kMagic2[8] = {'F', 'N', 'H', 'E', 'A', 'D', '2', '\0'};
constexpr char kMagic1[8] = {'F', 'N', 'H', 'E', 'A', 'D', '1', '\0'};
constexpr size_t kChecksumHex = 64;
// A card is a few hundred bytes plus the class names; anything near these is not a card.
constexpr uint64_t kMaxCardBytes = uint64_t{16} << 20;
constexpr uint64_t kMaxCardEntries = uint64_t{1} << 20;
constexpr uint64_t kMaxKeyBytes = 64;
constexpr uint64_t kMaxValueBytes = uint64_t{64} << 10;
// Heads hold at most 2^28 float32 values (head_format.h): a file larger than this is not a head.
constexpr uint64_t kMaxHeadFileBytes = (uint64_t{1} << 30) + kMaxCardBytes + 4096;

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void put_string(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

// Reads the card's fields from its bytes, each length checked against what is left.
class CardReader {
 public:
  CardReader(const std::string& bytes, size_t begin, size_t end, std::string where)
      : bytes_(bytes), at_(begin), end_(end), where_(std::move(where)) {}
  uint64_t u64(const char* what) {
    if (end_ - at_ < 8) throw InputError(where_ + ": the card ends inside " + what);
    uint64_t v;
    std::memcpy(&v, bytes_.data() + at_, 8);
    at_ += 8;
    return v;
  }
  std::string string(uint64_t max, const char* what) {
    const uint64_t n = u64(what);
    if (n > max) throw InputError(where_ + ": " + what + " of " + std::to_string(n) + " bytes (at most " + std::to_string(max) + ")");
    if (end_ - at_ < n) throw InputError(where_ + ": the card ends inside " + what);
    std::string s = bytes_.substr(at_, static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    return s;
  }
  bool done() const { return at_ == end_; }

 private:
  const std::string& bytes_;
  size_t at_, end_;
  std::string where_;
};

int64_t parse_count(const std::string& text, const std::string& where, int64_t max) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    throw InputError(where + " is '" + text + "', not a number");
  const int64_t v = std::stoll(text);
  if (v > max) throw InputError(where + " is " + text + " (at most " + std::to_string(max) + ")");
  return v;
}

Contributors parse_contributors(const std::string& text, const std::string& where) {
  std::vector<NodeId> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    ids.push_back(static_cast<NodeId>(parse_count(item, where + " (an id)", std::numeric_limits<NodeId>::max())));
  return Contributors(ids.begin(), ids.end());
}

std::string join_ids(const Contributors& c) {
  std::string s;
  for (NodeId id : c) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

void check_card_fits(const Head& head, const HeadCard& card, const std::string& where) {
  if (card.recipe.reads_images()) card.recipe.preprocessing.validate(where + " (preprocessing)");
  if (!card.class_names.empty() && static_cast<int>(card.class_names.size()) != head.num_classes())
    throw InputError(where + ": " + std::to_string(card.class_names.size()) + " class names for a head of " +
                     std::to_string(head.num_classes()) + " classes");
  const int64_t width = card.recipe.feature_dim();
  if (width > 0 && width != head.dim())
    throw InputError(where + ": the head reads " + std::to_string(head.dim()) + " features, but its recipe (" +
                     card.recipe.describe() + ") gives " + std::to_string(width));
}

// The card of a version-2 file, bytes [begin, end) of `bytes`, with the kind, class count and
// input width it claims for the head (checked against the head by the caller).
HeadCard parse_card(const std::string& bytes, size_t begin, size_t end, const std::string& where, std::string* kind_out,
                    int64_t* classes_out, int64_t* input_dim_out) {
  CardReader r(bytes, begin, end, where);
  const uint64_t entries = r.u64("the entry count");
  if (entries > kMaxCardEntries) throw InputError(where + ": " + std::to_string(entries) + " card entries");
  std::string preprocessing, features = "features";
  std::string& kind = *kind_out;
  int64_t& classes = *classes_out;
  int64_t& input_dim = *input_dim_out;
  HeadCard card;
  card.recipe.backbone_fingerprint = "unknown";
  std::string fingerprint;
  for (uint64_t i = 0; i < entries; ++i) {
    const std::string key = r.string(kMaxKeyBytes, "a key");
    const std::string value = r.string(kMaxValueBytes, "a value");
    const std::string at = where + ": card entry '" + key + "'";
    if (key == "kind") kind = value;
    else if (key == "classes") classes = parse_count(value, at, int64_t{1} << 28);
    else if (key == "input_dim") input_dim = parse_count(value, at, int64_t{1} << 28);
    else if (key == "class_name") {
      if (classes >= 0 && static_cast<int64_t>(card.class_names.size()) >= classes)
        throw InputError(at + ": more class names than the " + std::to_string(classes) + " classes");
      card.class_names.push_back(value);
    } else if (key == "method") card.method = value;
    else if (key == "run") card.run = value;
    else if (key == "node") card.node = value;
    else if (key == "personal") {
      if (value != "true" && value != "false") throw InputError(at + " is '" + value + "', not true or false");
      card.personal = value == "true";
    } else if (key == "contributors") card.contributors = parse_contributors(value, at);
    else if (key == "features") features = value;
    else if (key == "fingerprint") fingerprint = value;
    else if (key == "backbone_fingerprint") card.recipe.backbone_fingerprint = value;
    else if (key == "backbone_file") card.recipe.backbone = value;
    else if (key == "preprocessing") preprocessing = value;
    else if (key == "expansion_dim") card.recipe.expansion.dim = static_cast<int>(parse_count(value, at, kMaxExpansionDim));
    else if (key == "expansion_seed") card.recipe.expansion.seed = static_cast<uint64_t>(parse_count(value, at, std::numeric_limits<int64_t>::max()));
    else if (key == "written_by") card.written_by = value;
    // Other keys are a later version's additions: the checksum vouches for them, this reader does not need them.
  }
  if (!r.done()) throw InputError(where + ": bytes left in the card after its " + std::to_string(entries) + " entries");
  card.recipe.source = parse_recipe_source(features, where + ": card entry 'features'");
  if (card.recipe.reads_images()) {
    if (preprocessing.empty()) throw InputError(where + ": a head reading " + features + " needs its preprocessing");
    card.recipe.preprocessing = Preprocessing::parse(preprocessing, where + " (preprocessing)");
  }
  if (card.recipe.source == FeatureRecipe::Source::Backbone && card.recipe.backbone.empty())
    throw InputError(where + ": a head reading a backbone's features names no backbone file");
  if (fingerprint != card.recipe.fingerprint())
    throw InputError(where + ": fingerprint '" + fingerprint + "' is not the one its backbone and expansion give ('" +
                     card.recipe.fingerprint() + "')");
  return card;
}

}  // namespace

std::string HeadCard::class_name(int label) const {
  if (label >= 0 && static_cast<size_t>(label) < class_names.size()) return class_names[static_cast<size_t>(label)];
  return std::to_string(label);
}

std::string head_file_bytes(const Head& head, const HeadCard& card) {
  check_card_fits(head, card, "head file");
  // Entries in a fixed order; a list is its key repeated (class_name), so that every value is one
  // string and a reader in any language needs only "u64 length, bytes".
  std::vector<std::pair<std::string, std::string>> e;
  e.emplace_back("kind", head.kind());
  e.emplace_back("classes", std::to_string(head.num_classes()));
  e.emplace_back("input_dim", std::to_string(head.dim()));
  for (const auto& name : card.class_names) e.emplace_back("class_name", name);
  e.emplace_back("method", card.method);
  e.emplace_back("run", card.run);
  e.emplace_back("node", card.node);
  e.emplace_back("personal", card.personal ? "true" : "false");
  e.emplace_back("contributors", join_ids(card.contributors));
  e.emplace_back("features", to_string(card.recipe.source));
  e.emplace_back("fingerprint", card.recipe.fingerprint());
  e.emplace_back("backbone_fingerprint", card.recipe.backbone_fingerprint);
  if (card.recipe.source == FeatureRecipe::Source::Backbone) e.emplace_back("backbone_file", card.recipe.backbone);
  if (card.recipe.reads_images()) e.emplace_back("preprocessing", card.recipe.preprocessing.to_text());
  e.emplace_back("expansion_dim", std::to_string(card.recipe.expansion.dim));
  e.emplace_back("expansion_seed", std::to_string(card.recipe.expansion.seed));
  e.emplace_back("written_by", card.written_by.empty() ? std::string("fednode ") + fednode_version() : card.written_by);

  std::string body;
  put_u64(body, e.size());
  for (const auto& [key, value] : e) {
    if (value.size() > kMaxValueBytes)
      throw InputError("head file: the value of '" + key + "' is longer than " + std::to_string(kMaxValueBytes) + " bytes");
    put_string(body, key);
    put_string(body, value);
  }
  std::ostringstream head_bytes;
  head.save(head_bytes);

  std::string out(kMagic2, sizeof kMagic2);
  put_u64(out, body.size());
  out += body;
  out += head_bytes.str();
  out += sha256_hex(out);
  return out;
}

void save_head_file(const Head& head, const HeadCard& card, const std::string& path) {
  write_file_durably(path, head_file_bytes(head, card));
}

HeadFile parse_head_file(const std::string& bytes, const std::string& where) {
  HeadFile file;
  if (bytes.size() < 8 || (std::memcmp(bytes.data(), kMagic2, 8) != 0 && std::memcmp(bytes.data(), kMagic1, 8) != 0))
    throw InputError(where + ": not a fednode head file (it does not start with FNHEAD1 or FNHEAD2)");
  if (std::memcmp(bytes.data(), kMagic1, 8) == 0) {
    // Version 1: the head alone; nothing says what it reads.
    std::istringstream in(bytes);
    std::shared_ptr<Head> head = Head::load(in, where);
    if (in.peek() != std::char_traits<char>::eof()) throw InputError(where + ": unexpected bytes after the head");
    file.version = 1;
    file.head = std::move(head);
    file.card.recipe.backbone_fingerprint = "unknown";
    return file;
  }
  if (bytes.size() < 16 + kChecksumHex) throw InputError(where + ": truncated head file (" + std::to_string(bytes.size()) + " bytes)");
  const size_t content = bytes.size() - kChecksumHex;
  // The checksum first: a flipped bit anywhere is named as damage, not as whatever it turned into.
  if (sha256_hex(bytes.substr(0, content)) != bytes.substr(content))
    throw InputError(where + ": checksum mismatch: the head file is damaged or truncated");
  uint64_t card_bytes;
  std::memcpy(&card_bytes, bytes.data() + 8, 8);
  if (card_bytes > kMaxCardBytes || card_bytes > content - 16)
    throw InputError(where + ": a card of " + std::to_string(card_bytes) + " bytes does not fit the file");

  int64_t classes = -1, input_dim = -1;
  std::string kind;
  file.card = parse_card(bytes, 16, 16 + static_cast<size_t>(card_bytes), where, &kind, &classes, &input_dim);
  HeadCard& card = file.card;

  std::istringstream in(bytes.substr(16 + static_cast<size_t>(card_bytes), content - 16 - static_cast<size_t>(card_bytes)));
  std::shared_ptr<Head> head = Head::load(in, where);
  if (in.peek() != std::char_traits<char>::eof()) throw InputError(where + ": unexpected bytes after the head");
  if (head->kind() != kind) throw InputError(where + ": the card says kind '" + kind + "', the head is '" + head->kind() + "'");
  if (classes != head->num_classes() || input_dim != head->dim())
    throw InputError(where + ": the card says " + std::to_string(classes) + " classes of " + std::to_string(input_dim) +
                     " features, the head has " + std::to_string(head->num_classes()) + " of " + std::to_string(head->dim()));
  if (!card.class_names.empty() && static_cast<int64_t>(card.class_names.size()) != classes)
    throw InputError(where + ": " + std::to_string(card.class_names.size()) + " class names for " + std::to_string(classes) + " classes");
  check_card_fits(*head, card, where);
  file.version = 2;
  file.head = std::move(head);
  return file;
}

HeadFile read_head_file(const std::string& path) {
  require_regular_file(path, "head file");  // opening a FIFO would block
  return parse_head_file(read_file_bounded(path, kMaxHeadFileBytes), path);
}

std::unique_ptr<Head> load_head_file(const std::string& path) {
  // A copy through the file's bytes: callers of this one own their head.
  const HeadFile file = read_head_file(path);
  std::ostringstream out;
  file.head->save(out);
  std::istringstream in(out.str());
  return Head::load(in, path);
}

std::string head_info_text(const HeadFile& f) {
  const HeadCard& c = f.card;
  std::ostringstream s;
  s << "head file version " << f.version << "\n";
  s << "kind: " << f.head->kind() << (c.personal ? " (personal head)" : "") << "\n";
  if (const std::string made_of = f.head->composition(); !made_of.empty()) s << "made of: " << made_of << "\n";
  s << "classes: " << f.head->num_classes();
  if (!c.class_names.empty()) {
    s << " (";
    for (size_t i = 0; i < c.class_names.size(); ++i) s << (i ? ", " : "") << c.class_names[i];
    s << ")";
  }
  s << "\ninput: " << f.head->dim() << " features, " << (f.version == 1 ? "recipe not recorded (version 1 file)" : c.recipe.describe()) << "\n";
  if (c.recipe.reads_images()) {
    const Preprocessing& p = c.recipe.preprocessing;
    s << "image: " << p.input_size << " x " << p.input_size << " x " << p.channels;
    if (!p.mean.empty()) {
      s << ", mean";
      for (float m : p.mean) s << " " << m;
      s << ", std";
      for (float v : p.std) s << " " << v;
    }
    s << "\n";
  }
  if (c.recipe.source == FeatureRecipe::Source::Backbone) s << "backbone file: " << c.recipe.backbone << "\n";
  if (f.version >= 2) s << "fingerprint: " << c.recipe.fingerprint() << "\n";
  if (!c.method.empty()) s << "method: " << c.method << "\n";
  if (!c.run.empty()) s << "run: " << c.run << "\n";
  if (!c.node.empty()) s << "node: " << c.node << "\n";
  if (c.contributors.size()) s << "contributors: " << join_ids(c.contributors) << "\n";
  if (!c.written_by.empty()) s << "written by: " << c.written_by << "\n";
  return s.str();
}

std::string head_info_json(const HeadFile& f) {
  const HeadCard& c = f.card;
  std::ostringstream s;
  JsonWriter w(s);
  w.begin_object();
  w.key("version").value(static_cast<int64_t>(f.version));
  w.key("kind").value(f.head->kind());
  if (const std::string made_of = f.head->composition(); !made_of.empty()) w.key("made_of").value(made_of);
  w.key("personal").value(c.personal);
  w.key("classes").value(static_cast<int64_t>(f.head->num_classes()));
  w.key("class_names").begin_array();
  for (int i = 0; i < f.head->num_classes(); ++i) w.value(c.class_name(i));
  w.end_array();
  w.key("input_dim").value(static_cast<int64_t>(f.head->dim()));
  w.key("features").value(to_string(c.recipe.source));
  w.key("fingerprint").value(f.version >= 2 ? c.recipe.fingerprint() : std::string("unknown"));
  w.key("backbone_fingerprint").value(c.recipe.backbone_fingerprint);
  if (c.recipe.source == FeatureRecipe::Source::Backbone) w.key("backbone_file").value(c.recipe.backbone);
  if (c.recipe.reads_images()) {
    const Preprocessing& p = c.recipe.preprocessing;
    w.key("input_size").value(static_cast<int64_t>(p.input_size));
    w.key("channels").value(static_cast<int64_t>(p.channels));
    w.key("preprocessing").value(p.to_text());
  }
  w.key("expansion_dim").value(static_cast<int64_t>(c.recipe.expansion.dim));
  w.key("expansion_seed").value(static_cast<int64_t>(c.recipe.expansion.seed));
  w.key("method").value(c.method);
  w.key("run").value(c.run);
  w.key("node").value(c.node);
  w.key("contributors").begin_array();
  for (NodeId id : c.contributors) w.value(static_cast<int64_t>(id));
  w.end_array();
  w.key("written_by").value(c.written_by);
  w.end_object();
  s << "\n";
  return s.str();
}

}  // namespace fednode
