#include "core/log.h"

#include "core/types.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace fednode {

const char* to_string(LogLevel level) {
  switch (level) {
    case LogLevel::Error: return "error";
    case LogLevel::Warning: return "warning";
    case LogLevel::Info: return "info";
    case LogLevel::Debug: return "debug";
  }
  return "?";
}

std::optional<LogLevel> parse_log_level(std::string_view text) {
  std::string word(text);
  std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
  if (word == "error") return LogLevel::Error;
  if (word == "warning" || word == "warn") return LogLevel::Warning;
  if (word == "info") return LogLevel::Info;
  if (word == "debug") return LogLevel::Debug;
  return std::nullopt;
}

LogLevel log_level_from_environment() {
  const char* value = std::getenv("FEDNODE_LOG_LEVEL");
  if (!value || !*value) return LogLevel::Info;
  if (const auto level = parse_log_level(value)) return *level;
  std::string shown(value);
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  for (char& c : shown)
    if (c < 0x20 || c > 0x7e) c = '?';
  throw InputError("FEDNODE_LOG_LEVEL is '" + shown + "'; expected error, warning, info or debug");
}

}  // namespace fednode
