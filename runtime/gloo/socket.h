// Small POSIX TCP helpers for the key-value store of process-group bootstrap (tcp_store.cpp):
// an owning file descriptor, name resolution, listening, connecting with retries, and sending /
// receiving whole byte ranges before a deadline. Every failure is an ingot::Error.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace ingot::net {

using Clock = std::chrono::steady_clock;

/// Owns a file descriptor (closed on destruction); movable, not copyable. -1 means none.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

/// "host:port", with brackets around IPv6 literals ("[::1]:29500").
std::string endpoint_name(const std::string& host, int port);

/// Checks 0 <= port <= 65535 (1..65535 unless `allow_zero`); ingot::Error(kInvalidArgument)
/// naming `what` and the value otherwise.
void check_port(int port, bool allow_zero, const char* what);

/// A listening TCP socket bound to the first address of `host` that binds, on `port` (0: the
/// OS picks a free port). SO_REUSEADDR is set. Errors: kInvalidArgument when `host` does not
/// resolve; kFailedPrecondition naming the address and the OS error when nothing binds.
Fd listen_tcp(const std::string& host, int port);

/// The local port a bound socket listens on.
int local_port(const Fd& fd);

/// Connects to `host`:`port`, retrying every 10-100 ms while the connection is refused (the
/// server may not listen yet) until `deadline`. Errors: kInvalidArgument when `host` does not
/// resolve; kFailedPrecondition naming the address, `timeout_text` and the last OS error when
/// no connection was made before the deadline.
Fd connect_tcp(const std::string& host, int port, Clock::time_point deadline, const std::string& timeout_text);

/// Makes `fd` non-blocking (for the server's poll loop).
void set_nonblocking(int fd);

/// Writes all `size` bytes (blocking socket; waits with poll so `deadline` is honoured).
/// Errors: kFailedPrecondition naming `peer` on a closed connection, an OS error or the
/// deadline.
void send_all(int fd, const void* data, size_t size, Clock::time_point deadline, const std::string& peer);

/// Reads exactly `size` bytes; same errors as send_all ("closed the connection" on EOF).
void recv_all(int fd, void* data, size_t size, Clock::time_point deadline, const std::string& peer);

/// Human text of a duration in seconds, e.g. "0.5 s", "30 s".
std::string seconds_text(std::chrono::milliseconds duration);

}  // namespace ingot::net
