// What a method may ask of the program that runs it. methods/ opens no files and runs no programs
// itself (docs/architecture.md, "Layers"), yet a method's options may name a file (FGL's generator)
// or a user's command (FGL's external generator): the driver hands the method a Host
// (node/local_host.h) that does those for it, so that the method's folder holds all of its logic
// and none of the process's plumbing.
#pragma once

#include "core/image_batch.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace fednode {

// How a program run in a work folder ended.
struct ProgramExit {
  bool killed = false;  // by a signal, whose number is `code`
  int code = 0;         // the exit status otherwise
};

// A fresh, private folder for running a program over files. Removed when the object goes, unless
// keep() was called: a failed run's folder stays for its user to read.
class WorkFolder {
 public:
  virtual ~WorkFolder() = default;
  virtual std::string path() const = 0;
  // Names are relative to the folder. Throws InputError naming the file.
  virtual void write_file(const std::string& name, const std::string& bytes) = 0;
  virtual void make_folder(const std::string& name) = 0;
  // Runs /bin/sh -c 'COMMAND "$@"' ARG0 ARGS..., where ARGS are `args` as paths inside the folder,
  // with no standard input and its standard output and error into the file `log`. Throws
  // Interrupted, having ended the program, when `stop` fires first, and InputError when it cannot
  // be started.
  virtual ProgramExit run(const std::string& command, const std::string& arg0, const std::vector<std::string>& args,
                          const std::string& log, const std::atomic<bool>* stop) = 0;
  // The regular files directly inside the folder `name`, as names relative to this folder, sorted;
  // none when it does not exist.
  virtual std::vector<std::string> files_in(const std::string& name) const = 0;
  // A PNG or JPEG file decoded to one row of pixel features (8-bit samples over 255, channel by
  // channel); no label. Throws InputError naming the file.
  virtual ImageBatch read_image(const std::string& name) const = 0;
  // The last `count` lines of a text file, each cut at 300 characters; none for a missing file.
  virtual std::vector<std::string> last_lines(const std::string& name, int count) const = 0;
  virtual void keep() = 0;
};

class Host {
 public:
  virtual ~Host() = default;
  // A regular file's bytes. Throws InputError naming the file as `role` ("generator").
  virtual std::string read_file(const std::string& path, const std::string& role) const = 0;
  // A new work folder whose name begins with `prefix`, where the user keeps temporary files
  // (TMPDIR). Throws InputError when none can be made.
  virtual std::unique_ptr<WorkFolder> work_folder(const std::string& prefix) const = 0;
};

}  // namespace fednode
