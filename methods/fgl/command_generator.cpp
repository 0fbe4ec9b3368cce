#include "methods/fgl/command_generator.h"

#include "core/json_writer.h"
#include "core/rng.h"

#include <sstream>

namespace fednode {
namespace {

constexpr const char* kPrompts = "prompts.jsonl";
constexpr const char* kImages = "images";
constexpr const char* kLog = "log.txt";

class CommandGenerator final : public Generator {
 public:
  CommandGenerator(std::string command, std::shared_ptr<const Host> host)
      : command_(std::move(command)), host_(std::move(host)) {}

  std::string describe() const override { return "the generator command '" + command_ + "'"; }

  ImageBatch generate(const std::vector<GenerationRequest>& requests, uint64_t seed,
                      const std::atomic<bool>* stop) const override {
    std::unique_ptr<WorkFolder> work = host_->work_folder("fednode-generate-");
    try {
      work->write_file(kPrompts, prompts(requests, seed));
      work->make_folder(kImages);
      run(*work, stop);
      return read_images(*work, requests);
    } catch (const InputError&) {
      work->keep();
      throw;
    }
  }

 private:
  static std::string prompts(const std::vector<GenerationRequest>& requests, uint64_t seed) {
    std::ostringstream out;
    for (size_t i = 0; i < requests.size(); ++i) {
      const GenerationRequest& r = requests[i];
      out << "{\"index\": " << i << ", \"label\": " << r.label << ", \"name\": " << json_quoted(r.name)
          << ", \"prompt\": " << json_quoted(r.prompt) << ", \"negative_prompt\": " << json_quoted(r.negative_prompt);
      if (!r.caption.empty()) out << ", \"caption\": " << json_quoted(r.caption);
      out << ", \"count\": " << r.count
          << ", \"seed\": " << derive_seed(seed, {static_cast<uint64_t>(Purpose::Synthesis), i}) << "}\n";
    }
    return out.str();
  }

  // The last lines of the command's log, for an error message.
  static std::string log_tail(const WorkFolder& work) {
    const std::string log = work.path() + "/" + kLog;
    const std::vector<std::string> lines = work.last_lines(kLog, 8);
    if (lines.empty()) return " (its log " + log + " is empty)";
    std::string s = "; the end of its log " + log + ":";
    for (const std::string& line : lines) s += "\n    " + line;
    return s;
  }

  void run(WorkFolder& work, const std::atomic<bool>* stop) const {
    const ProgramExit exit = work.run(command_, "fednode-generator", {kPrompts, kImages}, kLog, stop);
    if (exit.killed) throw InputError(describe() + " was killed by signal " + std::to_string(exit.code) + log_tail(work));
    if (exit.code != 0) throw InputError(describe() + " exited with status " + std::to_string(exit.code) + log_tail(work));
  }

  // Appends `image` (one row) to `out` as row `row` of `total`, checking it against the first.
  static void place(ImageBatch& out, const ImageBatch& image, int64_t row, int64_t total, const std::string& file) {
    const std::string size = std::to_string(image.size);
    if (row == 0) {
      out.size = image.size;
      out.channels = image.channels;
      out.pixels.resize(total, image.pixels.cols());
    } else if (image.size != out.size || image.channels != out.channels) {
      throw InputError(file + ": " + size + "x" + size + " with " + std::to_string(image.channels) +
                       " channels, where the first image has " + std::to_string(out.size) + "x" +
                       std::to_string(out.size) + " with " + std::to_string(out.channels));
    }
    out.pixels.row(row) = image.pixels.row(0);
  }

  ImageBatch read_images(const WorkFolder& work, const std::vector<GenerationRequest>& requests) const {
    ImageBatch out;
    int64_t total = 0;
    for (const GenerationRequest& r : requests) total += r.count;
    int64_t row = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const std::string folder = std::string(kImages) + "/" + std::to_string(i);
      const std::vector<std::string> files = work.files_in(folder);
      if (static_cast<int64_t>(files.size()) != requests[i].count)
        throw InputError(describe() + ", request " + std::to_string(i) + " (" + requests[i].name + "): wrote " +
                         std::to_string(files.size()) + " files into " + work.path() + "/" + folder + ", expected " +
                         std::to_string(requests[i].count) + log_tail(work));
      for (const std::string& file : files) {
        place(out, work.read_image(file), row++, total, work.path() + "/" + file);
        out.labels.push_back(requests[i].label);
      }
    }
    if (total == 0) out.pixels.resize(0, 0);
    return out;
  }

  std::string command_;
  std::shared_ptr<const Host> host_;
};

}  // namespace

std::shared_ptr<const Generator> make_command_generator(const std::string& command, std::shared_ptr<const Host> host) {
  if (command.find_first_not_of(" \t") == std::string::npos) throw InputError("--generator-command: empty");
  return std::make_shared<CommandGenerator>(command, std::move(host));
}

}  // namespace fednode
