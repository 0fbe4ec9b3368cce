// Outputs are written when a command ends, which can be many minutes (an extraction, a seed
// sweep) after the command line was read: a path that cannot be written is refused up front.
#pragma once

#include <string>

namespace fednode {
class Args;
}

namespace fednode::cli {

// The file option `name` (without "--") names, checked as check_output_path does; "" when it is
// not given. UsageError when it is given empty.
std::string output_path_option(const Args& a, const std::string& name);

// InputError naming `option` and `path` if `path` is a directory, if the file's directory does not
// exist or is not writable, or if `path` is a device or pipe that cannot be written.
void check_output_path(const std::string& option, const std::string& path);

// Whether `path` names something other than a regular file (after symlinks), such as /dev/stdout
// or a named pipe: such a target is written in place, never replaced by a rename.
bool is_stream_output(const std::string& path);

// `bytes` into the file at `path` (created or truncated); InputError naming it when it cannot be
// written whole.
void write_output_file(const std::string& path, const std::string& bytes);

}  // namespace fednode::cli
