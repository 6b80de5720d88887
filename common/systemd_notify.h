// The service manager's readiness protocol (sd_notify(3)) without libsystemd: one datagram
// such as "READY=1" or "STOPPING=1" sent to the unix socket named by $NOTIFY_SOCKET, which
// systemd sets for services with Type=notify (deploy/systemd/). Outside such a service the
// variable is unset and nothing happens.
#pragma once

#include <string_view>

namespace llm {

// Longest state text sent; longer ones are dropped (systemd's own messages are a few bytes).
inline constexpr size_t kMaxNotifyBytes = 4096;

// Sends `state` ("READY=1", "STOPPING=1", "STATUS=...") to $NOTIFY_SOCKET: a file system path
// ("/run/systemd/notify") or an abstract socket name ("@name"). Best effort: does nothing when
// the variable is unset or empty, names no usable socket (another form, too long a name), the
// state is empty or longer than kMaxNotifyBytes, or the send fails. Never throws, never raises
// SIGPIPE, leaves errno as it was; safe from any thread.
void NotifySystemd(std::string_view state);

// The same to an explicit socket name (the value $NOTIFY_SOCKET would have); true when the
// datagram was sent. For tests.
bool SendNotifyDatagram(std::string_view socket_name, std::string_view state);

}  // namespace llm
