// Files that must survive a crash whole or not at all: written to a temporary name, flushed to
// disk, renamed over the target, and the directory flushed, so that after a power cut or kill -9
// the path holds either the old bytes or the new ones, never a torn mix.
#pragma once

#include <cstdint>
#include <string>

namespace fednode {

// Throws InputError naming `path` on any failure (then no temporary is left behind).
void write_file_durably(const std::string& path, const std::string& bytes);
// The same without flushing to disk: for files rewritten every second for people and monitors
// to read (status.json, metrics), where a reader must see the old or the new text, never half, but
// a crash may lose the last version.
void replace_file_at_once(const std::string& path, const std::string& bytes);
// The whole file; InputError naming `path` if it cannot be read or exceeds `max_bytes`.
std::string read_file_bounded(const std::string& path, uint64_t max_bytes);

}  // namespace fednode
