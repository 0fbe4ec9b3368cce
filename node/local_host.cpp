#include "node/local_host.h"

#include "features/images.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace fs = std::filesystem;

namespace fednode {
namespace {

// The program's exit, polled rather than waited on, so that a node asked to stop does not first
// wait for a generator that may run for hours.
ProgramExit wait_for(pid_t pid, const std::atomic<bool>* stop) {
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw InputError("lost the program: " + std::string(std::strerror(errno)));
    if (stop && stop->load()) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, &status, 0);
      throw Interrupted();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFSIGNALED(status)) return {true, WTERMSIG(status)};
  return {false, WEXITSTATUS(status)};
}

class LocalWorkFolder final : public WorkFolder {
 public:
  explicit LocalWorkFolder(fs::path root) : root_(std::move(root)) {}
  ~LocalWorkFolder() override {
    std::error_code ignored;
    if (!kept_) fs::remove_all(root_, ignored);
  }

  std::string path() const override { return root_.string(); }

  void write_file(const std::string& name, const std::string& bytes) override {
    std::ofstream out(root_ / name, std::ios::binary);
    out << bytes;
    if (!out.flush()) throw InputError("cannot write " + (root_ / name).string());
  }

  void make_folder(const std::string& name) override { fs::create_directory(root_ / name); }

  ProgramExit run(const std::string& command, const std::string& arg0, const std::vector<std::string>& args,
                  const std::string& log, const std::atomic<bool>* stop) override {
    const std::string log_path = (root_ / log).string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    std::vector<std::string> words = {"/bin/sh", "-c", command + " \"$@\"", arg0};
    for (const std::string& a : args) words.push_back((root_ / a).string());
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int spawned = posix_spawn(&pid, "/bin/sh", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) throw InputError("cannot start /bin/sh: " + std::string(std::strerror(spawned)));
    return wait_for(pid, stop);
  }

  std::vector<std::string> files_in(const std::string& name) const override {
    std::vector<std::string> files;
    std::error_code ec;
    if (!fs::is_directory(root_ / name, ec)) return files;
    for (const auto& entry : fs::directory_iterator(root_ / name))
      if (entry.is_regular_file()) files.push_back((fs::path(name) / entry.path().filename()).string());
    std::sort(files.begin(), files.end());
    return files;
  }

  ImageBatch read_image(const std::string& name) const override {
    const std::string file = (root_ / name).string();
    const Image image = fednode::read_image(file);  // InputError names the file
    if (image.width != image.height)
      throw InputError(file + ": " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                       ", images as pixel features must be square");
    ImageBatch out;
    out.size = image.width;
    out.channels = image.channels;
    const int S = out.size, C = out.channels;
    out.pixels.resize(1, int64_t{C} * S * S);
    // Interleaved 8-bit pixels to planar values in [0, 1], as the federation's pixel features.
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < S * S; ++p)
        out.pixels(0, c * S * S + p) = static_cast<float>(image.pixels[static_cast<size_t>(p * C + c)]) / 255.0f;
    return out;
  }

  std::vector<std::string> last_lines(const std::string& name, int count) const override {
    std::ifstream in(root_ / name);
    std::deque<std::string> lines;
    for (std::string line; std::getline(in, line);) {
      lines.push_back(line.substr(0, 300));
      if (static_cast<int>(lines.size()) > count) lines.pop_front();
    }
    return {lines.begin(), lines.end()};
  }

  void keep() override { kept_ = true; }

 private:
  fs::path root_;
  bool kept_ = false;
};

class LocalHost final : public Host {
 public:
  std::string read_file(const std::string& path, const std::string& role) const override {
    require_regular_file(path, role);
    std::ifstream in(path, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (!in.good() && !in.eof()) throw InputError(path + ": cannot read the " + role);
    return bytes.str();
  }

  std::unique_ptr<WorkFolder> work_folder(const std::string& prefix) const override {
    std::error_code ec;
    const fs::path tmp = fs::temp_directory_path(ec);
    if (ec) throw InputError("no folder for temporary files: " + ec.message() + " (TMPDIR)");
    std::string dir = (tmp / (prefix + "XXXXXX")).string();
    if (!::mkdtemp(dir.data()))
      throw InputError("cannot create a folder in " + tmp.string() + ": " + std::strerror(errno));
    return std::make_unique<LocalWorkFolder>(dir);
  }
};

}  // namespace

std::shared_ptr<const Host> local_host() {
  static const std::shared_ptr<const Host> host = std::make_shared<LocalHost>();
  return host;
}

}  // namespace fednode
