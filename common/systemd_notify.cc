#include "common/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace llm {

bool SendNotifyDatagram(std::string_view socket_name, std::string_view state) {
  if (state.empty() || state.size() > kMaxNotifyBytes) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // '/' a path (sent without its NUL, as libsystemd does), '@' an abstract name (a leading NUL).
  // Anything else (a relative path, "vsock:...") is not supported.
  if (socket_name.size() < 2 || (socket_name[0] != '/' && socket_name[0] != '@')) return false;
  if (socket_name.size() > sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, socket_name.data(), socket_name.size());
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';
  const auto addr_len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_name.size());

  const int saved_errno = errno;
  bool sent = false;
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    const ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                               reinterpret_cast<const sockaddr*>(&addr), addr_len);
    sent = n == static_cast<ssize_t>(state.size());
    ::close(fd);
  }
  errno = saved_errno;
  return sent;
}

void NotifySystemd(std::string_view state) {
  const char* socket_name = std::getenv("NOTIFY_SOCKET");
  if (socket_name == nullptr || socket_name[0] == '\0') return;
  SendNotifyDatagram(socket_name, state);
}

}  // namespace llm
