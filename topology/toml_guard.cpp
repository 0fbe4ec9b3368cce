#include "topology/toml_guard.h"

#include "core/types.h"

#include <vector>

namespace fednode::topo {
namespace {

bool non_ascii(char c) { return static_cast<unsigned char>(c) >= 0x80; }
bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
// What ends a bare value for toml++ (unicode.h, is_value_terminator), whitespace aside.
bool ends_bare_value(char c) { return blank(c) || c == ']' || c == '}' || c == ',' || c == '#'; }

// A small lexer that follows TOML's grammar only as far as needed to know, at every byte, whether
// toml++ reads it inside a string or comment. A quote opens a string only where a key or a value
// begins: elsewhere toml++ takes it as part of a bare value (and asks of every character up to the
// value's end whether it is whitespace) or refuses it.
class Guard {
 public:
  Guard(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  void run() {
    for (i_ = 0; i_ < text_.size(); ++i_) {
      const char c = text_[i_];
      if (c == '\n') {
        ++line_;
        line_start_ = i_ + 1;
      }
      switch (state_) {
        case State::Code: code(c); break;
        case State::Comment:
          if (c == '\n') state_ = State::Code, newline();
          break;
        case State::Basic:
          if (c == '\\' && i_ + 1 < text_.size() && text_[i_ + 1] != '\n') ++i_;  // toml++ judges the escape
          else if (c == '"') close_string();
          else if (c == '\n') close_string(), newline();
          break;
        case State::Literal:
          if (c == '\'') close_string();
          else if (c == '\n') close_string(), newline();
          break;
        case State::MultiBasic:
          if (c == '\\') multi_line_escape();
          else if (starts("\"\"\"")) close_multi_line('"');
          break;
        case State::MultiLiteral:
          if (starts("'''")) close_multi_line('\'');
          break;
      }
    }
  }

 private:
  enum class State { Code, Comment, Basic, Literal, MultiBasic, MultiLiteral };
  // What the grammar expects next outside strings: a key (line start, after '{', a '.' or an
  // inline table's ','), more of a key or its '=' (KeyDone), a value (after '=', '[' or an
  // array's ','), or nothing that may open a string (Other).
  enum class Expect { Key, KeyDone, Value, Other };

  void code(char c) {
    if (bare_value_) {
      if (!ends_bare_value(c)) {
        if (non_ascii(c)) fail(i_, "not valid TOML: a non-ASCII character outside a string or comment");
        return;
      }
      bare_value_ = false;
    }
    switch (c) {
      case ' ': case '\t': case '\r': return;
      case '\n': newline(); return;
      case '#': state_ = State::Comment; return;
      case '"': case '\'':
        if (expect_ == Expect::Key || expect_ == Expect::Value) open_string(c);
        return;
      case '=':
        // Only a key's '=' starts a value; toml++ reads one elsewhere as part of the value before
        // it (a date and time are one value across a space: "1979-05-27 07:32:00").
        expect_ = expect_ == Expect::KeyDone ? Expect::Value : Expect::Other;
        return;
      case '[':
        if (expect_ == Expect::Value) nesting_.push_back('a');
        else if (expect_ == Expect::Key && nesting_.empty()) nesting_.push_back('h'), expect_ = Expect::Key;
        else if (expect_ == Expect::Key && nesting_.back() == 'h') expect_ = Expect::Key;  // "[["
        return;
      case ']':
        if (!nesting_.empty() && nesting_.back() != 't') {
          // "]]" closes one header; the second bracket finds nothing open and is passed over.
          nesting_.pop_back();
        }
        expect_ = Expect::Other;
        return;
      case '{':
        if (expect_ == Expect::Value) nesting_.push_back('t'), expect_ = Expect::Key;
        return;
      case '}':
        if (!nesting_.empty() && nesting_.back() == 't') nesting_.pop_back();
        expect_ = Expect::Other;
        return;
      case ',':
        if (!nesting_.empty()) expect_ = nesting_.back() == 'a' ? Expect::Value : Expect::Key;
        return;
      case '.':
        if (expect_ == Expect::KeyDone) expect_ = Expect::Key;
        return;
      default:
        if (non_ascii(c)) fail(i_, "not valid TOML: a non-ASCII character outside a string or comment");
        if (expect_ == Expect::Value) bare_value_ = true, expect_ = Expect::Other;
        else if (expect_ == Expect::Key) expect_ = Expect::KeyDone;
    }
  }

  void newline() {
    if (nesting_.empty() || nesting_.back() != 'a') {
      nesting_.clear();  // a header or inline table does not span lines: toml++ refuses it
      expect_ = Expect::Key;
    }
  }

  void open_string(char quote) {
    key_string_ = expect_ == Expect::Key;
    const std::string_view triple = quote == '"' ? "\"\"\"" : "'''";
    if (!key_string_ && starts(triple)) {
      state_ = quote == '"' ? State::MultiBasic : State::MultiLiteral;
      i_ += 2;
    } else {
      state_ = quote == '"' ? State::Basic : State::Literal;
    }
  }

  void close_string() {
    state_ = State::Code;
    expect_ = key_string_ ? Expect::KeyDone : Expect::Other;
  }

  void close_multi_line(char quote) {
    i_ += 2;
    while (i_ + 1 < text_.size() && text_[i_ + 1] == quote) ++i_;  // up to two quotes belong to the string
    close_string();
  }

  // toml++ asks whether the character after a backslash in a multi-line basic string is
  // whitespace, and a line-ending backslash then asks it of each character it trims: the first
  // one that is not blank must be ASCII.
  void multi_line_escape() {
    size_t j = i_ + 1;
    while (j < text_.size() && blank(text_[j])) {
      if (text_[j] == '\n') {
        ++line_;
        line_start_ = j + 1;
      }
      ++j;
    }
    if (j < text_.size() && non_ascii(text_[j]))
      fail(j, "a non-ASCII character right after a backslash in a multi-line string: write it as a \\u escape "
              "(the TOML parser fednode uses mishandles it)");
    i_ = j == i_ + 1 ? j : j - 1;  // a plain escape skips the escaped character
  }

  bool starts(std::string_view token) const { return text_.substr(i_, token.size()) == token; }

  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw InputError(source_ + ":" + std::to_string(line_) + ":" + std::to_string(at - line_start_ + 1) + ": " + what);
  }

  std::string_view text_;
  const std::string& source_;
  size_t i_ = 0, line_ = 1, line_start_ = 0;
  State state_ = State::Code;
  Expect expect_ = Expect::Key;
  bool bare_value_ = false;
  bool key_string_ = false;
  std::vector<char> nesting_;  // 'a' array, 't' inline table, 'h' table header
};

}  // namespace

void check_toml_text(std::string_view text, const std::string& source) { Guard(text, source).run(); }

}  // namespace fednode::topo
