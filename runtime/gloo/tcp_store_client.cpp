// TcpStore: a blocking client of TcpStoreServer (one request/reply exchange at a time).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ingot/runtime/error.h"
#include "ingot/runtime/tcp_store.h"
#include "socket.h"
#include "store_protocol.h"

namespace ingot {

namespace sp = store_protocol;
using net::Clock;

namespace {

// How long a client waits for a reply beyond the request's own timeout (the server answers a
// parked request at its deadline; this covers scheduling and transfer delays).
constexpr std::chrono::milliseconds kReplyGrace{2000};

// Quoted, comma-separated keys, at most 8 of them ("'a', 'b', ... (12 keys)").
std::string key_list(const std::vector<std::string>& keys) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < keys.size() && i < 8; ++i) shown.push_back("'" + keys[i] + "'");
  std::string text = fmt::format("{}", fmt::join(shown, ", "));
  if (keys.size() > shown.size()) text += fmt::format(", ... ({} keys)", keys.size());
  return text;
}

}  // namespace

struct TcpStore::Impl {
  std::string address;
  std::chrono::milliseconds timeout{0};
  net::Fd fd;

  // Sends `request` and returns the reply, waiting up to `wait` plus the grace period.
  sp::Message exchange(const sp::Message& request, std::chrono::milliseconds wait);
  void handshake();
  Error timeout_error(const std::string& what, const std::vector<std::string>& missing,
                      std::chrono::milliseconds wait) const;
};

sp::Message TcpStore::Impl::exchange(const sp::Message& request, std::chrono::milliseconds wait) {
  Clock::time_point deadline = Clock::now() + wait + kReplyGrace;
  std::string frame = sp::encode_frame(request);
  std::string peer = "the store at " + address;
  net::send_all(fd.get(), frame.data(), frame.size(), deadline, peer);
  char header[sp::kHeaderBytes];
  net::recv_all(fd.get(), header, sizeof(header), deadline, peer);
  uint64_t length = sp::decode_header(header);
  if (length > sp::kMaxBodyBytes) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("TcpStore: {} sent a frame of {} bytes", peer, length),
                "MASTER_ADDR:MASTER_PORT may point at a service that is not an ingot store");
  }
  std::string body(length, '\0');
  net::recv_all(fd.get(), body.data(), body.size(), deadline, peer);
  sp::Message reply;
  if (!sp::decode_body(body, reply)) {
    throw Error(ErrorCode::kFailedPrecondition, fmt::format("TcpStore: malformed reply from {}", peer));
  }
  if (reply.code == static_cast<uint8_t>(sp::Status::kBadRequest)) {
    throw Error(ErrorCode::kInternal, fmt::format("TcpStore: {} rejected a request: {}", peer,
                                                  reply.strings.empty() ? "" : reply.strings[0]));
  }
  return reply;
}

void TcpStore::Impl::handshake() {
  sp::Message hello;
  hello.code = static_cast<uint8_t>(sp::Op::kHello);
  hello.strings = {std::string(sp::kMagic)};
  try {
    sp::Message reply = exchange(hello, timeout);
    if (reply.code == static_cast<uint8_t>(sp::Status::kOk) && reply.strings.size() == 1 &&
        reply.strings[0] == sp::kMagic) {
      return;
    }
  } catch (const Error& e) {
    throw Error(ErrorCode::kFailedPrecondition,
                fmt::format("TcpStore: handshake with {} failed: {}", address, e.message()),
                "MASTER_ADDR:MASTER_PORT must be the address served by rank 0's TcpStoreServer");
  }
  throw Error(ErrorCode::kFailedPrecondition, fmt::format("TcpStore: {} does not speak {}", address, sp::kMagic),
              "MASTER_ADDR:MASTER_PORT must be the address served by rank 0's TcpStoreServer");
}

Error TcpStore::Impl::timeout_error(const std::string& what, const std::vector<std::string>& missing,
                                    std::chrono::milliseconds wait) const {
  return Error(
      ErrorCode::kFailedPrecondition,
      fmt::format("TcpStore {}: {} {} not set within {}", address, what, key_list(missing), net::seconds_text(wait)),
      "a rank may have failed to start or exited early; check every rank's output, "
      "or raise the timeout if ranks start far apart");
}

TcpStore::TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  net::check_port(port, /*allow_zero=*/false, "TcpStore");
  if (timeout.count() <= 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("TcpStore: timeout {} ms must be positive", timeout.count()));
  }
  impl_->address = net::endpoint_name(host, port);
  impl_->timeout = timeout;
  impl_->fd = net::connect_tcp(host, port, Clock::now() + timeout, net::seconds_text(timeout));
  impl_->handshake();
}

TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, const std::string& value) {
  if (key.size() + value.size() > (uint64_t{1} << 30)) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("TcpStore::set: key and value of {} bytes exceed the 1 GiB limit", key.size() + value.size()));
  }
  sp::Message m;
  m.code = static_cast<uint8_t>(sp::Op::kSet);
  m.strings = {key, value};
  impl_->exchange(m, impl_->timeout);
}

std::string TcpStore::get(const std::string& key) { return get(key, impl_->timeout); }

std::string TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  sp::Message m;
  m.code = static_cast<uint8_t>(sp::Op::kGet);
  m.timeout_ms = timeout.count();
  m.strings = {key};
  sp::Message reply = impl_->exchange(m, timeout);
  if (reply.code == static_cast<uint8_t>(sp::Status::kOk) && reply.strings.size() == 1) {
    return reply.strings[0];
  }
  throw impl_->timeout_error("key", {key}, timeout);
}

void TcpStore::wait(const std::vector<std::string>& keys) { wait(keys, impl_->timeout); }

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  sp::Message m;
  m.code = static_cast<uint8_t>(sp::Op::kWait);
  m.timeout_ms = timeout.count();
  m.strings = keys;
  sp::Message reply = impl_->exchange(m, timeout);
  if (reply.code == static_cast<uint8_t>(sp::Status::kOk)) return;
  throw impl_->timeout_error(reply.strings.size() == 1 ? "key" : "keys", reply.strings, timeout);
}

std::chrono::milliseconds TcpStore::timeout() const { return impl_->timeout; }

const std::string& TcpStore::address() const { return impl_->address; }

}  // namespace ingot
