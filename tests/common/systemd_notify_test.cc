// The sd_notify protocol of common/systemd_notify.h against real unix datagram sockets: the
// datagram arrives at a path or an abstract socket named by NOTIFY_SOCKET; unset, empty, bad
// and oversized cases send nothing and do not crash.
#include "common/systemd_notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace llm {
namespace {

// A bound unix datagram socket: at a path (in a fresh temporary folder) or abstract.
class Listener {
 public:
  // `name`: "/path" or "@abstract" (the NOTIFY_SOCKET spelling).
  explicit Listener(const std::string& name, int type = SOCK_DGRAM) : name_(name) {
    fd_ = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), name.size());
    if (name[0] == '@') addr.sun_path[0] = '\0';
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    bound_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0;
    if (bound_ && type == SOCK_STREAM) bound_ = ::listen(fd_, 1) == 0;
  }
  ~Listener() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool bound() const { return bound_; }
  // The next datagram, if one is queued (a unix datagram is queued before sendto returns).
  std::optional<std::string> Receive() {
    std::string buf(2 * kMaxNotifyBytes, '\0');
    const ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0) return std::nullopt;
    buf.resize(static_cast<size_t>(n));
    return buf;
  }

 private:
  std::string name_;
  int fd_ = -1;
  bool bound_ = false;
};

class SystemdNotify : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* old = std::getenv("NOTIFY_SOCKET")) saved_ = old;
    char tmpl[] = "/tmp/llm-notify-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr) << std::strerror(errno);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (saved_) {
      ::setenv("NOTIFY_SOCKET", saved_->c_str(), 1);
    } else {
      ::unsetenv("NOTIFY_SOCKET");
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
  std::optional<std::string> saved_;
};

TEST_F(SystemdNotify, SendsTheStateToAPathSocket) {
  const std::string path = Path("notify.sock");
  Listener listener(path);
  ASSERT_TRUE(listener.bound()) << path;
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  NotifySystemd("READY=1");
  EXPECT_EQ(listener.Receive(), std::optional<std::string>("READY=1"));
  NotifySystemd("STOPPING=1");
  EXPECT_EQ(listener.Receive(), std::optional<std::string>("STOPPING=1"));
  EXPECT_EQ(listener.Receive(), std::nullopt);  // one datagram per call
}

TEST_F(SystemdNotify, SendsTheStateToAnAbstractSocket) {
  const std::string name = "@llmserve-notify-test-" + std::to_string(::getpid());
  Listener listener(name);
  ASSERT_TRUE(listener.bound()) << name;
  ::setenv("NOTIFY_SOCKET", name.c_str(), 1);
  NotifySystemd("READY=1");
  EXPECT_EQ(listener.Receive(), std::optional<std::string>("READY=1"));
}

TEST_F(SystemdNotify, UnsetOrEmptyVariableSendsNothing) {
  const std::string path = Path("notify.sock");
  Listener listener(path);
  ASSERT_TRUE(listener.bound());
  ::unsetenv("NOTIFY_SOCKET");
  NotifySystemd("READY=1");
  ::setenv("NOTIFY_SOCKET", "", 1);
  NotifySystemd("READY=1");
  EXPECT_EQ(listener.Receive(), std::nullopt);
}

TEST_F(SystemdNotify, BadSocketNamesAreIgnoredWithoutCrashing) {
  const std::string regular = Path("not-a-socket");
  std::ofstream(regular) << "x";
  const std::string stream = Path("stream.sock");
  Listener stream_listener(stream, SOCK_STREAM);  // the wrong socket type
  ASSERT_TRUE(stream_listener.bound());
  const std::string too_long = "/" + std::string(sizeof(sockaddr_un{}.sun_path), 'x');
  for (const std::string& name :
       {Path("missing/notify.sock"), regular, stream, std::string("relative/notify.sock"),
        std::string("vsock:2:1234"), std::string("@"), std::string("/"), too_long}) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(SendNotifyDatagram(name, "READY=1"));
    ::setenv("NOTIFY_SOCKET", name.c_str(), 1);
    errno = 1234;
    NotifySystemd("READY=1");
    EXPECT_EQ(errno, 1234);  // errno is left alone
  }
}

TEST_F(SystemdNotify, StateLengthIsBounded) {
  const std::string path = Path("notify.sock");
  Listener listener(path);
  ASSERT_TRUE(listener.bound());
  EXPECT_FALSE(SendNotifyDatagram(path, ""));
  EXPECT_FALSE(SendNotifyDatagram(path, std::string(kMaxNotifyBytes + 1, 'a')));
  EXPECT_EQ(listener.Receive(), std::nullopt);
  const std::string longest = "STATUS=" + std::string(kMaxNotifyBytes - 7, 'a');
  EXPECT_TRUE(SendNotifyDatagram(path, longest));
  EXPECT_EQ(listener.Receive(), std::optional<std::string>(longest));
}

}  // namespace
}  // namespace llm
