// Test harness for the coordinator: starts the real `worker` binary as a child process on a
// free loopback port, waits (bounded) for its Health, and kills it on destruction (RAII).
#pragma once

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "proto/llm.grpc.pb.h"
#include "proto/llm.pb.h"

namespace llm::testing {

namespace pb = ::llm::v1;

inline std::string SharedPath(const std::string& rel) {
  return (std::filesystem::path(LLM_SHARED_DIR) / rel).string();
}

// Skips the test (never passes it) when shared data is missing.
#define LLM_REQUIRE_SHARED(rel)                                                        \
  do {                                                                                 \
    if (!std::filesystem::exists(::llm::testing::SharedPath(rel)))                     \
      GTEST_SKIP() << "missing shared test data: " << ::llm::testing::SharedPath(rel); \
  } while (0)

// A loopback port nobody listens on right now (bind to port 0, read it back, close).
inline int FreeLoopbackPort() {
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
  return port;
}

inline std::chrono::system_clock::time_point In(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

class WorkerProcess {
 public:
  // Starts `worker --section.key value ...` with its output in a log file. `env` entries
  // ("NAME=value") are added to the child's environment; a bare "NAME" removes it.
  explicit WorkerProcess(std::vector<std::string> flags, std::vector<std::string> env = {}) {
    port_ = FreeLoopbackPort();
    log_path_ =
        (std::filesystem::temp_directory_path() /
         ("coordinator_test_" + std::to_string(getpid()) + "_" + std::to_string(port_) + ".log"))
            .string();
    std::vector<std::string> argv_s = {LLM_WORKER_BIN, "--coordinator.host", "127.0.0.1",
                                       "--coordinator.port", std::to_string(port_)};
    argv_s.insert(argv_s.end(), flags.begin(), flags.end());
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      FILE* log = std::fopen(log_path_.c_str(), "w");
      if (log != nullptr) {
        dup2(fileno(log), 1);
        dup2(fileno(log), 2);
      }
      for (auto& e : env) {
        if (e.find('=') == std::string::npos) {
          unsetenv(e.c_str());
        } else {
          putenv(e.data());
        }
      }
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }

  ~WorkerProcess() {
    if (pid_ > 0 && !exit_status_) {
      kill(pid_, SIGTERM);
      if (!WaitExit(10.0)) {
        kill(pid_, SIGKILL);
        int status = 0;
        waitpid(pid_, &status, 0);
      }
    }
    std::error_code ec;
    if (!::testing::Test::HasFailure()) std::filesystem::remove(log_path_, ec);
  }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Waits until the port accepts connections, then until Health answers (true), or until the
  // child exits / the time is up (false). The gRPC channel is made once the port is open, so
  // it never starts in reconnect backoff.
  bool WaitHealthy(double timeout_s = 60.0) {
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    while (!PortOpen()) {
      if (Exited() || std::chrono::steady_clock::now() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!channel_) {
      channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                     grpc::InsecureChannelCredentials());
      admin_ = pb::Admin::NewStub(channel_);
      generation_ = pb::Generation::NewStub(channel_);
    }
    while (std::chrono::steady_clock::now() < end) {
      if (Exited()) return false;
      grpc::ClientContext ctx;
      ctx.set_deadline(In(2.0));
      ctx.set_wait_for_ready(true);
      pb::HealthResponse r;
      if (admin_->Health(&ctx, pb::HealthRequest(), &r).ok()) return true;
    }
    return false;
  }

  // True once the child has exited; its status is then in exit_status().
  bool Exited() {
    if (exit_status_) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) exit_status_ = status;
    return exit_status_.has_value();
  }
  bool WaitExit(double timeout_s) {
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    while (!Exited()) {
      if (std::chrono::steady_clock::now() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  std::optional<int> exit_status() const { return exit_status_; }
  void Signal(int sig) { kill(pid_, sig); }

  // CPU seconds (user + system) the child has used so far.
  double CpuSeconds() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string f;
    double ticks = 0;
    for (int i = 3; i <= 15 && fields >> f; ++i) {
      if (i == 14 || i == 15) ticks += std::stod(f);  // utime, stime
    }
    return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

  bool PortOpen() const {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    const bool open = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (fd >= 0) close(fd);
    return open;
  }

  std::string Log() const {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  int port() const { return port_; }
  // The stubs exist once WaitHealthy() returned true.
  pb::Admin::Stub& admin() { return *admin_; }
  pb::Generation::Stub& generation() { return *generation_; }

 private:
  int port_ = 0;
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
  std::string log_path_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Admin::Stub> admin_;
  std::unique_ptr<pb::Generation::Stub> generation_;
};

}  // namespace llm::testing
