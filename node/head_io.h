// A head in a file of its own. methods/ does no file I/O, so opening the file lives here, beside
// the state directory that writes one (as faiss keeps index_io apart from its indexes); the
// format is Head's own (methods/heads/head.h, docs/methods/heads.md).
#pragma once

#include "methods/heads/head.h"

#include <memory>
#include <string>

namespace fednode {

// Writes `head` to `path`, replacing what was there; throws InputError when it cannot.
void save_head_file(const Head& head, const std::string& path);

// The one head `path` holds. Throws InputError for what Head::load rejects, for a path that is
// not a regular file, and for bytes after the head: a file holds exactly one head.
std::unique_ptr<Head> load_head_file(const std::string& path);

}  // namespace fednode
