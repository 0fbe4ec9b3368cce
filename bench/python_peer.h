// A Python reference process that loads its model and data once, says "ready", and then answers
// one line per request line, so that Python and fednode runs can alternate one by one: on a
// shared machine, whatever load comes and goes then hits both sides alike.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace fednode::bench {

class PythonPeer {
 public:
  // argv[0] is the interpreter's path (execv: no PATH search).
  explicit PythonPeer(const std::vector<std::string>& argv) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      dup2(to_child[0], STDIN_FILENO);
      dup2(from_child[1], STDOUT_FILENO);
      close(to_child[0]);
      close(to_child[1]);
      close(from_child[0]);
      close(from_child[1]);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    in_ = fdopen(to_child[1], "w");
    out_ = fdopen(from_child[0], "r");
    if (read_line() != "ready") throw std::runtime_error("the Python reference did not start");
  }
  PythonPeer(const PythonPeer&) = delete;
  PythonPeer& operator=(const PythonPeer&) = delete;
  ~PythonPeer() {
    if (in_) fclose(in_);  // end of input: the peer's request loop ends
    if (out_) fclose(out_);
    int status = 0;
    if (pid_ > 0) waitpid(pid_, &status, 0);
  }

  // Sends one request line and returns the answer line ("" if the peer died).
  std::string request(const std::string& line) {
    std::fputs((line + "\n").c_str(), in_);
    std::fflush(in_);
    return read_line();
  }

  // Sends a request whose answer is "seconds S" (the references' timed runs) and returns S.
  double request_seconds(const std::string& line) {
    const std::string answer = request(line);
    if (answer.rfind("seconds ", 0) != 0)
      throw std::runtime_error("the Python reference answered '" + answer + "' to '" + line + "'");
    return std::stod(answer.substr(8));
  }

 private:
  std::string read_line() {
    char buf[1024];
    if (!std::fgets(buf, sizeof buf, out_)) return "";
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

}  // namespace fednode::bench
