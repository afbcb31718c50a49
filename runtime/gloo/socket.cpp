#include "socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "ingot/runtime/error.h"

namespace ingot::net {

namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// getaddrinfo for a TCP endpoint; kInvalidArgument naming the host when it does not resolve.
AddrInfoPtr resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* result = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("cannot resolve host '{}': {}", host, gai_strerror(rc)),
                "use an IP address (e.g. 127.0.0.1) or a resolvable host name");
  }
  return AddrInfoPtr(result);
}

// Milliseconds left until `deadline` for poll(2), at least 0.
int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

// Waits until `fd` is ready for `events` or the deadline passes; false on timeout.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true;  // let the following send/recv report the error
  }
}

// One non-blocking connect attempt to `ai`, bounded by the deadline; returns the connected
// socket or an invalid Fd with `err` set to the OS error.
Fd try_connect(const addrinfo* ai, Clock::time_point deadline, int& err) {
  Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
  if (!fd.valid()) {
    err = errno;
    return Fd();
  }
  set_nonblocking(fd.get());
  if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      err = errno;
      return Fd();
    }
    if (!wait_ready(fd.get(), POLLOUT, deadline)) {
      err = ETIMEDOUT;
      return Fd();
    }
    socklen_t len = sizeof(err);
    err = 0;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return Fd();
  }
  int flags = ::fcntl(fd.get(), F_GETFL, 0);
  ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

Error io_error(const std::string& peer, const char* what, int err) {
  return Error(ErrorCode::kFailedPrecondition, fmt::format("{} {}: {}", what, peer, std::strerror(err)),
               "check that the peer process is alive and reachable");
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string endpoint_name(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

void check_port(int port, bool allow_zero, const char* what) {
  if (port < (allow_zero ? 0 : 1) || port > 65535) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: port {} is outside [{}, 65535]", what, port, allow_zero ? 0 : 1));
  }
}

Fd listen_tcp(const std::string& host, int port) {
  AddrInfoPtr list = resolve(host, port, /*passive=*/true);
  int last_err = 0;
  for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd.get(), 128) == 0) {
      return fd;
    }
    last_err = errno;
  }
  throw Error(ErrorCode::kFailedPrecondition,
              fmt::format("cannot listen on {}: {}", endpoint_name(host, port), std::strerror(last_err)),
              "pick a free port (MASTER_PORT) and an address of this machine (MASTER_ADDR)");
}

int local_port(const Fd& fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

Fd connect_tcp(const std::string& host, int port, Clock::time_point deadline, const std::string& timeout_text) {
  AddrInfoPtr list = resolve(host, port, /*passive=*/false);
  auto pause = std::chrono::milliseconds(10);
  int err = ECONNREFUSED;
  while (true) {
    for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
      Fd fd = try_connect(ai, deadline, err);
      if (fd.valid()) return fd;
    }
    if (Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
  throw Error(ErrorCode::kFailedPrecondition,
              fmt::format("could not connect to {} within {} (last error: {})", endpoint_name(host, port), timeout_text,
                          std::strerror(err)),
              "start the rank-0 process (which serves the store) and check MASTER_ADDR / "
              "MASTER_PORT; raise the timeout if ranks start far apart");
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void send_all(int fd, const void* data, size_t size, Clock::time_point deadline, const std::string& peer) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    if (!wait_ready(fd, POLLOUT, deadline)) throw io_error(peer, "timed out sending to", ETIMEDOUT);
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw io_error(peer, "error sending to", errno);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void recv_all(int fd, void* data, size_t size, Clock::time_point deadline, const std::string& peer) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    if (!wait_ready(fd, POLLIN, deadline)) {
      throw io_error(peer, "timed out waiting for a reply from", ETIMEDOUT);
    }
    ssize_t n = ::recv(fd, p, size, 0);
    if (n == 0) {
      throw Error(ErrorCode::kFailedPrecondition, fmt::format("{} closed the connection", peer),
                  "the rank-0 process (which serves the store) may have exited");
    }
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw io_error(peer, "error receiving from", errno);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

std::string seconds_text(std::chrono::milliseconds duration) {
  return fmt::format("{:g} s", static_cast<double>(duration.count()) / 1000.0);
}

}  // namespace ingot::net
