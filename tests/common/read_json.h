// The JSON files the tests read (a node's result.json, `fednode simulate`'s reports), parsed with
// nlohmann/json. Only reading needs a parser: what fednode writes goes through core/json_writer.h.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fednode::test {

// `text` parsed; text that does not parse is a test failure naming `what` (where it came from),
// and gives null, whose fields all read as absent.
inline nlohmann::json parse_json(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << what << " is not valid JSON: " << e.what() << "\n" << text;
    return nullptr;
  }
}

// The file at `path`, parsed; a file that is missing or does not parse is a test failure naming
// it, and gives null.
inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "cannot open " << path.string();
    return nullptr;
  }
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << path.string() << " is not valid JSON: " << e.what();
    return nullptr;
  }
}

// `key` of an object, null when `j` is not an object or has no such key (nlohmann's operator[]
// on a const object requires the key to be there).
inline const nlohmann::json& field(const nlohmann::json& j, const std::string& key) {
  static const nlohmann::json absent;
  if (!j.is_object()) return absent;
  const auto it = j.find(key);
  return it == j.end() ? absent : *it;
}

// Element `i` of an array, null when `j` is not an array or is shorter.
inline const nlohmann::json& element(const nlohmann::json& j, std::size_t i) {
  static const nlohmann::json absent;
  return j.is_array() && i < j.size() ? j[i] : absent;
}

// A string, number or integer value, `otherwise` for anything else (absent, null, another type).
inline std::string string_or(const nlohmann::json& j, const std::string& otherwise = "") {
  return j.is_string() ? j.get<std::string>() : otherwise;
}
inline double number_or(const nlohmann::json& j, double otherwise) {
  return j.is_number() ? j.get<double>() : otherwise;
}
inline long integer_or(const nlohmann::json& j, long otherwise) {
  return j.is_number_integer() ? j.get<long>() : otherwise;
}

// The integers of an array (a list of node ids); empty for anything else.
inline std::vector<long> int_list(const nlohmann::json& j) {
  std::vector<long> v;
  if (j.is_array())
    for (const auto& x : j)
      if (x.is_number_integer()) v.push_back(x.get<long>());
  return v;
}

}  // namespace fednode::test
