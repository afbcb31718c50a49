// TcpStoreServer: one thread serving the key-value store with poll(2). All state below (the
// map, the connections) is touched only by that thread; the owner talks to it through an
// eventfd that asks it to stop.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ingot/runtime/error.h"
#include "ingot/runtime/tcp_store.h"
#include "socket.h"
#include "store_protocol.h"

namespace ingot {

namespace sp = store_protocol;
using net::Clock;

namespace {

// A get or wait that is waiting for its keys.
struct Pending {
  sp::Op op;
  std::vector<std::string> keys;
  Clock::time_point deadline;
};

struct Connection {
  net::Fd fd;
  std::string in;        // received bytes not yet parsed
  std::string out;       // encoded replies not yet sent
  bool greeted = false;  // the kHello handshake was done
  bool closing = false;  // close once `out` is flushed (after a bad request)
  bool dead = false;     // the peer closed or errored: drop now
  std::optional<Pending> pending;
};

using Map = std::unordered_map<std::string, std::string>;

void reply(Connection& c, sp::Status status, std::vector<std::string> strings = {}) {
  sp::Message m;
  m.code = static_cast<uint8_t>(status);
  m.strings = std::move(strings);
  c.out += sp::encode_frame(m);
}

void reject(Connection& c, const std::string& reason) {
  reply(c, sp::Status::kBadRequest, {reason});
  c.closing = true;
}

// Handles one decoded request: answers it, or parks it as c.pending.
void handle(Connection& c, const sp::Message& m, Map& map) {
  auto op = static_cast<sp::Op>(m.code);
  if (!c.greeted) {
    if (op != sp::Op::kHello || m.strings.size() != 1 || m.strings[0] != sp::kMagic) {
      return reject(c, fmt::format("expected the {} handshake", sp::kMagic));
    }
    c.greeted = true;
    return reply(c, sp::Status::kOk, {std::string(sp::kMagic)});
  }
  if (op == sp::Op::kSet && m.strings.size() == 2) {
    map[m.strings[0]] = m.strings[1];
    return reply(c, sp::Status::kOk);
  }
  if ((op == sp::Op::kGet && m.strings.size() == 1) || op == sp::Op::kWait) {
    auto timeout = std::chrono::milliseconds(std::max<int64_t>(m.timeout_ms, 0));
    c.pending = Pending{op, m.strings, Clock::now() + timeout};
    return;
  }
  reject(c, fmt::format("unknown request code {} with {} strings", m.code, m.strings.size()));
}

// Parses and handles complete frames until one is parked or the input runs out.
void parse_requests(Connection& c, Map& map) {
  while (!c.pending && !c.closing && c.in.size() >= sp::kHeaderBytes) {
    uint64_t length = sp::decode_header(c.in.data());
    if (length > sp::kMaxBodyBytes) return reject(c, fmt::format("frame of {} bytes", length));
    if (c.in.size() - sp::kHeaderBytes < length) return;
    sp::Message m;
    bool ok = sp::decode_body(std::string_view(c.in).substr(sp::kHeaderBytes, length), m);
    c.in.erase(0, sp::kHeaderBytes + length);
    if (!ok) return reject(c, "malformed frame");
    handle(c, m, map);
  }
}

// Answers c.pending when its keys are all set or its deadline passed.
void answer_pending(Connection& c, const Map& map, Clock::time_point now) {
  if (!c.pending) return;
  std::vector<std::string> missing;
  for (const std::string& key : c.pending->keys) {
    if (map.find(key) == map.end()) missing.push_back(key);
  }
  if (missing.empty()) {
    if (c.pending->op == sp::Op::kGet) {
      reply(c, sp::Status::kOk, {map.at(c.pending->keys[0])});
    } else {
      reply(c, sp::Status::kOk);
    }
  } else if (now >= c.pending->deadline) {
    reply(c, sp::Status::kTimeout, std::move(missing));
  } else {
    return;
  }
  c.pending.reset();
}

void read_available(Connection& c) {
  char buf[64 * 1024];
  while (true) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), 0);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;  // EOF or error
    return;
  }
}

void write_available(Connection& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;
    return;
  }
  if (c.closing) c.dead = true;
}

// Handles every complete request and answers every pending one that can be answered, until
// nothing changes (a set from one client may release another client's wait, and an answered
// request lets its client's queued requests through).
void process_all(std::vector<std::unique_ptr<Connection>>& conns, Map& map) {
  bool progress = true;
  while (progress) {
    progress = false;
    Clock::time_point now = Clock::now();
    for (auto& c : conns) {
      size_t before = c->in.size();
      parse_requests(*c, map);
      progress |= c->in.size() != before;
      bool had_pending = c->pending.has_value();
      answer_pending(*c, map, now);
      progress |= had_pending && !c->pending;
    }
  }
}

// Milliseconds until the earliest pending deadline (rounded up), or -1 when none.
int poll_timeout_ms(const std::vector<std::unique_ptr<Connection>>& conns) {
  std::optional<Clock::time_point> earliest;
  for (const auto& c : conns) {
    if (c->pending && (!earliest || c->pending->deadline < *earliest)) {
      earliest = c->pending->deadline;
    }
  }
  if (!earliest) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*earliest - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

}  // namespace

struct TcpStoreServer::Impl {
  std::string host;
  int port = 0;
  net::Fd listener;
  net::Fd wake;  // eventfd: written by the destructor to stop the thread
  std::thread thread;

  void serve();
  void accept_all(std::vector<std::unique_ptr<Connection>>& conns);
};

void TcpStoreServer::Impl::accept_all(std::vector<std::unique_ptr<Connection>>& conns) {
  while (true) {
    int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN (no more) or a transient error: poll again
    auto c = std::make_unique<Connection>();
    c->fd = net::Fd(fd);
    conns.push_back(std::move(c));
  }
}

void TcpStoreServer::Impl::serve() {
  Map map;
  std::vector<std::unique_ptr<Connection>> conns;
  std::vector<pollfd> fds;
  while (true) {
    fds.assign({{wake.get(), POLLIN, 0}, {listener.get(), POLLIN, 0}});
    for (const auto& c : conns) {
      fds.push_back({c->fd.get(), static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
    }
    int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms(conns));
    if (rc < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;
    for (size_t i = 0; i < conns.size(); ++i) {
      if (fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) read_available(*conns[i]);
    }
    if (fds[1].revents & POLLIN) accept_all(conns);
    process_all(conns, map);
    for (auto& c : conns) {
      if (!c->dead) write_available(*c);
    }
    std::erase_if(conns, [](const auto& c) { return c->dead; });
  }
}

TcpStoreServer::TcpStoreServer(const std::string& host, int port) : impl_(std::make_unique<Impl>()) {
  net::check_port(port, /*allow_zero=*/true, "TcpStoreServer");
  impl_->host = host;
  impl_->listener = net::listen_tcp(host, port);
  impl_->port = net::local_port(impl_->listener);
  net::set_nonblocking(impl_->listener.get());
  impl_->wake = net::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl_->wake.valid()) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("TcpStoreServer: eventfd failed: {}", std::strerror(errno)));
  }
  impl_->thread = std::thread([impl = impl_.get()] { impl->serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  uint64_t one = 1;
  ssize_t written = ::write(impl_->wake.get(), &one, sizeof(one));
  (void)written;  // a full eventfd counter still wakes the thread
  impl_->thread.join();
}

int TcpStoreServer::port() const { return impl_->port; }

const std::string& TcpStoreServer::host() const { return impl_->host; }

}  // namespace ingot
