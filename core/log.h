// Levels of the lines a node and the commands write for people (FEDNODE_LOG_LEVEL, docs/cli.md),
// and the one callable every part of the node writes them through. A line is said at the level of
// what it reports: a deadline missed or a forged beacon is a warning, a peer's hello information,
// the choice of a stream cipher a detail (debug). Info is the default; errors that end a command
// are not log lines but its exception, always printed.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace fednode {

enum class LogLevel { Error = 0, Warning = 1, Info = 2, Debug = 3 };

const char* to_string(LogLevel level);
// "error", "warning" (or "warn"), "info", "debug", any case; nullopt for anything else.
std::optional<LogLevel> parse_log_level(std::string_view text);
// FEDNODE_LOG_LEVEL, or Info when it is unset or empty. Throws InputError naming the variable
// and the accepted words when it holds anything else.
LogLevel log_level_from_environment();

// Where lines go: a sink that takes (level, line). Called as say(line) it says information;
// say.warn and say.debug say the other levels. Empty: lines go nowhere.
class Say {
 public:
  using Sink = std::function<void(LogLevel, const std::string&)>;
  Say() = default;
  // From a function of (level, line), or of the line alone (every level to it: tests, simple
  // embedders). Implicit, so that such a lambda converts; an empty function says nothing.
  template <class F, std::enable_if_t<!std::is_same_v<std::decay_t<F>, Say> &&
                                          std::is_invocable_v<F&, LogLevel, const std::string&>,
                                      int> = 0>
  Say(F f) {  // NOLINT(google-explicit-constructor)
    if (is_set(f)) sink_ = std::move(f);
  }
  template <class F, std::enable_if_t<!std::is_same_v<std::decay_t<F>, Say> &&
                                          std::is_invocable_v<F&, const std::string&> &&
                                          !std::is_invocable_v<F&, LogLevel, const std::string&>,
                                      int> = 0>
  Say(F f) {  // NOLINT(google-explicit-constructor)
    if (is_set(f)) sink_ = [f = std::move(f)](LogLevel, const std::string& line) { f(line); };
  }

  void operator()(const std::string& line) const { write(LogLevel::Info, line); }
  void warn(const std::string& line) const { write(LogLevel::Warning, line); }
  void debug(const std::string& line) const { write(LogLevel::Debug, line); }
  void write(LogLevel level, const std::string& line) const {
    if (sink_) sink_(level, line);
  }
  explicit operator bool() const { return static_cast<bool>(sink_); }

 private:
  template <class F>
  static bool is_set(const F& f) {
    if constexpr (std::is_constructible_v<bool, const F&>) return static_cast<bool>(f);
    return true;
  }
  Sink sink_;
};

}  // namespace fednode
