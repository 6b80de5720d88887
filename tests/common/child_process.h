// Test harness shared by the coordinator and integration tests: a child process (the real
// `worker` / `router` binaries) with its output in a log file, killed on destruction (RAII),
// and a free loopback port to hand it.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace llm::testing {

// A loopback port nobody listens on right now (bind to port 0, read it back, close), and not
// one this process was given before: a server started with the last one may not have bound
// it yet, and the kernel can hand the same number out again (a router once got its worker's).
inline int FreeLoopbackPort() {
  static std::mutex mu;
  static std::set<int> given;
  std::lock_guard<std::mutex> lock(mu);
  for (int attempt = 0; attempt < 64; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    int port = 0;
    if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    if (fd >= 0) close(fd);
    if (port != 0 && given.insert(port).second) return port;
  }
  return 0;
}

// A child process with its output (stdout and stderr) in a log file; SIGTERM, a bounded wait,
// then SIGKILL on destruction. The log file is removed unless the test failed.
class ChildProcess {
 public:
  // Starts `argv` (argv[0] is the binary's path) with its log in the temp directory, named
  // after `name`. `env` entries ("NAME=value") are added to the child's environment; a bare
  // "NAME" removes it.
  ChildProcess(std::vector<std::string> argv, const std::string& name,
               std::vector<std::string> env = {}) {
    log_ = (std::filesystem::temp_directory_path() /
            (name + "_" + std::to_string(getpid()) + "_" + std::to_string(counter_++) + ".log"))
               .string();
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      FILE* f = std::fopen(log_.c_str(), "w");
      if (f != nullptr) {
        dup2(fileno(f), 1);
        dup2(fileno(f), 2);
      }
      for (auto& e : env) {
        if (e.find('=') == std::string::npos) {
          unsetenv(e.c_str());
        } else {
          putenv(e.data());
        }
      }
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~ChildProcess() {
    Stop(SIGTERM, 10.0);
    std::error_code ec;
    if (!::testing::Test::HasFailure()) std::filesystem::remove(log_, ec);  // kept on failure
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Sends `sig` (unless the child already exited), waits up to `timeout_s`, then SIGKILL.
  // Returns the exit status (as from waitpid).
  int Stop(int sig, double timeout_s) {
    if (pid_ <= 0) return status_;
    if (!Exited()) {
      kill(pid_, sig);
      if (!WaitExit(timeout_s)) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status_, 0);
        exited_ = true;
      }
    }
    return status_;
  }
  // True once the child has exited (and was reaped); its status is then in exit_status().
  bool Exited() {
    if (!exited_ && pid_ > 0 && waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
    return exited_;
  }
  // Polls Exited() until it holds (true) or `timeout_s` passes (false).
  bool WaitExit(double timeout_s) {
    const auto end = Deadline(timeout_s);
    while (!Exited()) {
      if (std::chrono::steady_clock::now() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  std::optional<int> exit_status() const {
    return exited_ ? std::optional<int>(status_) : std::nullopt;
  }
  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }

  // The log so far; only its last `max_chars` characters when it is longer.
  std::string Log(size_t max_chars = std::string::npos) const {
    std::ifstream f(log_);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    return s.size() > max_chars ? s.substr(s.size() - max_chars) : s;
  }
  pid_t pid() const { return pid_; }

  static std::chrono::steady_clock::time_point Deadline(double s) {
    return std::chrono::steady_clock::now() +
           std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  }

 private:
  static inline int counter_ = 0;
  pid_t pid_ = -1;
  int status_ = 0;
  bool exited_ = false;
  std::string log_;
};

}  // namespace llm::testing
