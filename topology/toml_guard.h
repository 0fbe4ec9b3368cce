// What topology files are screened for before toml++ sees them.
//
// toml++ 3.3.0 (Debian bookworm) asks whether a non-ASCII character is whitespace through a
// generated table with holes: for most code points from U+00A0 to U+FEFF it reaches
// __builtin_unreachable, which is undefined behaviour (found by fuzz/fuzz_topology under
// UBSan: "k\u02DEte]"). It asks outside strings and comments, and in a multi-line basic string
// after a backslash. TOML allows no non-ASCII character outside strings and comments, so
// refusing it there costs no valid file; the one valid place left (a character right after a
// line-ending backslash's trimmed whitespace) is refused with advice to write it as an escape.
#pragma once

#include <string>
#include <string_view>

namespace fednode::topo {

// Throws InputError naming source:line:column for a byte toml++ 3.3.0 cannot safely be given.
void check_toml_text(std::string_view text, const std::string& source);

}  // namespace fednode::topo
