// A small key-value store served over TCP, used to bootstrap process groups across processes
// (the role of torch.distributed's TCPStore): rank 0 serves it on MASTER_ADDR:MASTER_PORT, every
// rank connects to it as a client and exchanges connection details through set / get / wait.
// connect_gloo (gloo.h) uses it for Gloo's rendezvous; it is independent of Gloo and can carry
// any bootstrap data (e.g. an NCCL unique id).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace ingot {

/// Serves a key-value store on a TCP address from its own thread until destroyed.
///
/// Keys and values are arbitrary byte strings (values up to 1 GiB). Requests from many clients
/// are served by one thread with poll(2); a get/wait that cannot be answered yet is parked until
/// the keys are set or its deadline passes. Protocol: length-prefixed little-endian frames with a
/// version handshake ("ingot-tcp-store/1"), so a client that reaches some other service fails
/// with a clear error instead of misreading bytes.
class TcpStoreServer {
 public:
  /// Binds `host`:`port` (an IPv4/IPv6 literal or a name; the first of its addresses that binds
  /// is used) and starts serving. `port` 0 lets the OS pick a free port (see port()).
  /// Errors: ingot::Error kInvalidArgument (port outside [0, 65535], host does not resolve);
  /// kFailedPrecondition naming the address and the OS error when it cannot listen (e.g. the
  /// port is in use).
  TcpStoreServer(const std::string& host, int port);
  /// Stops serving, closes every client connection and joins the serving thread.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  /// The port the server listens on (the OS-chosen one when constructed with port 0).
  int port() const;
  /// The host it was asked to bind.
  const std::string& host() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A client of a TcpStoreServer. One thread at a time per client (each call is one
/// request/reply exchange over one connection); use one client per thread.
class TcpStore {
 public:
  /// Connects to the server at `host`:`port`, retrying while the connection is refused (the
  /// server may start later) until `timeout` (> 0) has passed. `timeout` is also the default
  /// for get and wait. Errors: kInvalidArgument (port outside [1, 65535], timeout <= 0, host
  /// does not resolve); kFailedPrecondition naming the address and the timeout when no
  /// connection was made in time, or when the peer does not speak this protocol.
  TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout);
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  /// Sets `key` to `value` (overwriting), waking clients waiting for it. Key and value together
  /// at most 1 GiB (kInvalidArgument otherwise).
  void set(const std::string& key, const std::string& value);
  /// The value of `key`, waiting up to `timeout` (default: the constructor's) for it to be set.
  /// Errors: kFailedPrecondition naming the address, the key and the timeout when it is not set
  /// in time; kFailedPrecondition when the server closed the connection.
  std::string get(const std::string& key);
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  /// Returns once every key in `keys` is set; same errors as get (naming the missing keys).
  void wait(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  /// The default timeout of get and wait.
  std::chrono::milliseconds timeout() const;
  /// "host:port" of the server.
  const std::string& address() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingot
