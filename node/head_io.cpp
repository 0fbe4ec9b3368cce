#include "node/head_io.h"

#include <fstream>

namespace fednode {

void save_head_file(const Head& head, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError("cannot open '" + path + "' for writing");
  head.save(out);
  out.flush();
  if (!out) throw InputError("failed writing head to '" + path + "'");
}

std::unique_ptr<Head> load_head_file(const std::string& path) {
  require_regular_file(path, "head file");  // opening a FIFO would block
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open head file '" + path + "'");
  auto head = Head::load(in, path);
  // A file holds exactly one head; anything after it means the file is not what it claims.
  if (in.peek() != std::char_traits<char>::eof())
    throw InputError(path + ": unexpected bytes after the head");
  return head;
}

}  // namespace fednode
