#include "features/command_generator.h"

#include "core/json_writer.h"
#include "core/rng.h"
#include "features/images.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace fs = std::filesystem;

namespace fednode {
namespace {

// The last lines of the command's log, for an error message.
std::string log_tail(const fs::path& log) {
  std::ifstream in(log);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line.substr(0, 300));
    if (lines.size() > 8) lines.pop_front();
  }
  if (lines.empty()) return " (its log " + log.string() + " is empty)";
  std::string s = "; the end of its log " + log.string() + ":";
  for (const std::string& line : lines) s += "\n    " + line;
  return s;
}

class CommandGenerator final : public Generator {
 public:
  explicit CommandGenerator(std::string command) : command_(std::move(command)) {}

  std::string describe() const override { return "the generator command '" + command_ + "'"; }

  ImageBatch generate(const std::vector<GenerationRequest>& requests, uint64_t seed,
                           const std::atomic<bool>* stop) const override {
    std::string dir = (fs::temp_directory_path() / "fednode-generate-XXXXXX").string();
    if (!::mkdtemp(dir.data())) throw InputError("generator: cannot create a folder in " + fs::temp_directory_path().string());
    const fs::path work(dir), prompts = work / "prompts.jsonl", images = work / "images", log = work / "log.txt";
    try {
      write_prompts(prompts, requests, seed);
      fs::create_directory(images);
      run(prompts, images, log, stop);
      ImageBatch out = read_images(images, requests, log);
      fs::remove_all(work);
      return out;
    } catch (const Interrupted&) {
      fs::remove_all(work);
      throw;
    }
  }

 private:
  static void write_prompts(const fs::path& path, const std::vector<GenerationRequest>& requests, uint64_t seed) {
    std::ofstream out(path);
    for (size_t i = 0; i < requests.size(); ++i) {
      const GenerationRequest& r = requests[i];
      out << "{\"index\": " << i << ", \"label\": " << r.label << ", \"name\": " << json_quoted(r.name)
          << ", \"prompt\": " << json_quoted(r.prompt) << ", \"negative_prompt\": " << json_quoted(r.negative_prompt);
      if (!r.caption.empty()) out << ", \"caption\": " << json_quoted(r.caption);
      out << ", \"count\": " << r.count
          << ", \"seed\": " << derive_seed(seed, {static_cast<uint64_t>(Purpose::Synthesis), i}) << "}\n";
    }
    if (!out.flush()) throw InputError("generator: cannot write " + path.string());
  }

  void run(const fs::path& prompts, const fs::path& images, const fs::path& log, const std::atomic<bool>* stop) const {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const std::string script = command_ + " \"$@\"";
    std::vector<std::string> args = {"/bin/sh", "-c", script, "fednode-generator", prompts.string(), images.string()};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int spawned = posix_spawn(&pid, "/bin/sh", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) throw InputError("generator: cannot start /bin/sh: " + std::string(std::strerror(spawned)));
    int status = 0;
    // Polled rather than waited on, so that a node asked to stop does not first wait for a
    // generator that may run for hours.
    for (;;) {
      const pid_t done = ::waitpid(pid, &status, WNOHANG);
      if (done == pid) break;
      if (done < 0 && errno != EINTR) throw InputError("generator: lost the command: " + std::string(std::strerror(errno)));
      if (stop && stop->load()) {
        ::kill(pid, SIGTERM);
        ::waitpid(pid, &status, 0);
        throw Interrupted();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (WIFSIGNALED(status))
      throw InputError(describe() + " was killed by signal " + std::to_string(WTERMSIG(status)) + log_tail(log));
    if (WEXITSTATUS(status) != 0)
      throw InputError(describe() + " exited with status " + std::to_string(WEXITSTATUS(status)) + log_tail(log));
  }

  ImageBatch read_images(const fs::path& images, const std::vector<GenerationRequest>& requests,
                              const fs::path& log) const {
    ImageBatch out;
    int64_t total = 0;
    for (const GenerationRequest& r : requests) total += r.count;
    int64_t row = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const fs::path folder = images / std::to_string(i);
      const std::string what = describe() + ", request " + std::to_string(i) + " (" + requests[i].name + ")";
      std::vector<fs::path> files;
      if (fs::is_directory(folder))
        for (const auto& entry : fs::directory_iterator(folder))
          if (entry.is_regular_file()) files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      if (static_cast<int64_t>(files.size()) != requests[i].count)
        throw InputError(what + ": wrote " + std::to_string(files.size()) + " files into " + folder.string() +
                         ", expected " + std::to_string(requests[i].count) + log_tail(log));
      for (const fs::path& file : files) {
        const Image image = read_image(file.string());  // InputError names the file
        if (image.width != image.height)
          throw InputError(file.string() + ": " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                           ", the generator's images must be square");
        if (row == 0) {
          out.size = image.width;
          out.channels = image.channels;
          out.pixels.resize(total, int64_t{out.channels} * out.size * out.size);
        } else if (image.width != out.size || image.channels != out.channels) {
          throw InputError(file.string() + ": " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                           " with " + std::to_string(image.channels) + " channels, where the first image has " +
                           std::to_string(out.size) + "x" + std::to_string(out.size) + " with " +
                           std::to_string(out.channels));
        }
        // Interleaved 8-bit pixels to planar values in [0, 1], as the federation's pixel features.
        const int S = out.size, C = out.channels;
        for (int c = 0; c < C; ++c)
          for (int p = 0; p < S * S; ++p)
            out.pixels(row, c * S * S + p) = static_cast<float>(image.pixels[static_cast<size_t>(p * C + c)]) / 255.0f;
        out.labels.push_back(requests[i].label);
        ++row;
      }
    }
    if (total == 0) out.pixels.resize(0, 0);
    return out;
  }

  std::string command_;
};

}  // namespace

std::shared_ptr<const Generator> make_command_generator(const std::string& command) {
  if (command.find_first_not_of(" \t") == std::string::npos) throw InputError("--generator-command: empty");
  return std::make_shared<CommandGenerator>(command);
}

}  // namespace fednode
