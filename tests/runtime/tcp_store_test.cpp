// TcpStoreServer / TcpStore: the key-value store of process-group bootstrap, on loopback.
#include "ingot/runtime/tcp_store.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "test_util.h"

namespace ingot {
namespace {

using namespace std::chrono_literals;
using testing::expect_error;
using Clock = std::chrono::steady_clock;

// A port that was free a moment ago (bound to 127.0.0.1:0, read back, closed).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(TcpStore, SetGetWaitRoundTrip) {
  TcpStoreServer server("127.0.0.1", 0);
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(server.host(), "127.0.0.1");
  TcpStore client("127.0.0.1", server.port(), 5s);
  EXPECT_EQ(client.address(), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(client.timeout(), 5s);
  client.set("a", "1");
  EXPECT_EQ(client.get("a"), "1");
  client.set("a", "two");  // overwrite
  EXPECT_EQ(client.get("a"), "two");
  std::string binary("\0\x01\xff zero", 8);
  std::string big(1 << 20, 'q');
  big[12345] = '\0';
  client.set("bin", binary);
  client.set("big", big);
  EXPECT_EQ(client.get("bin"), binary);
  EXPECT_EQ(client.get("big"), big);
  client.set("", "empty key");
  EXPECT_EQ(client.get(""), "empty key");
  client.wait({"a", "bin", "big", ""});
  client.wait({});
  // A second client sees the first one's keys.
  TcpStore other("127.0.0.1", server.port(), 5s);
  EXPECT_EQ(other.get("a"), "two");
}

TEST(TcpStore, WaitAndGetBlockUntilAnotherClientSets) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStore waiter("127.0.0.1", server.port(), 5s);
  std::atomic<bool> set_done{false};
  std::thread setter([&] {
    TcpStore client("127.0.0.1", server.port(), 5s);
    std::this_thread::sleep_for(100ms);
    set_done = true;
    client.set("x", "late");
    std::this_thread::sleep_for(50ms);
    client.set("y", "later");
  });
  auto start = Clock::now();
  EXPECT_EQ(waiter.get("x"), "late");
  EXPECT_TRUE(set_done.load());
  waiter.wait({"x", "y"});
  EXPECT_EQ(waiter.get("y"), "later");
  EXPECT_LT(Clock::now() - start, 3s);
  setter.join();
}

TEST(TcpStore, TimeoutsAreErrorsNamingAddressKeyAndTimeout) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStore client("127.0.0.1", server.port(), 200ms);
  std::string address = "127.0.0.1:" + std::to_string(server.port());
  auto start = Clock::now();
  expect_error([&] { client.get("missing"); }, ErrorCode::kFailedPrecondition, {address, "'missing'", "0.2 s"});
  client.set("here", "1");
  expect_error([&] { client.wait({"here", "gone1", "gone2"}, 100ms); }, ErrorCode::kFailedPrecondition,
               {address, "'gone1', 'gone2'", "0.1 s"});
  EXPECT_LT(Clock::now() - start, 2s);
  // The connection stays usable after a timeout.
  EXPECT_EQ(client.get("here"), "1");
}

TEST(TcpStore, ConnectingWithoutServerTimesOut) {
  int port = free_port();
  auto start = Clock::now();
  expect_error([&] { TcpStore("127.0.0.1", port, 300ms); }, ErrorCode::kFailedPrecondition,
               {"127.0.0.1:" + std::to_string(port), "0.3 s"});
  auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, 250ms);
  EXPECT_LT(elapsed, 3s);
}

TEST(TcpStore, ClientWaitsForAServerThatStartsLater) {
  int port = free_port();
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(150ms);
    server = std::make_unique<TcpStoreServer>("127.0.0.1", port);
  });
  TcpStore client("127.0.0.1", port, 5s);
  starter.join();
  client.set("k", "v");
  EXPECT_EQ(client.get("k"), "v");
}

TEST(TcpStore, ServerClosingIsAnErrorForClients) {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  TcpStore client("127.0.0.1", server->port(), 5s);
  server.reset();
  expect_error([&] { client.get("k"); }, ErrorCode::kFailedPrecondition, {"closed the connection"});
}

TEST(TcpStore, BadArgumentsAndBusyPort) {
  expect_error([] { TcpStoreServer("127.0.0.1", 70000); }, ErrorCode::kInvalidArgument, {"70000"});
  expect_error([] { TcpStore("127.0.0.1", 0, 1s); }, ErrorCode::kInvalidArgument, {"port 0"});
  expect_error([] { TcpStore("127.0.0.1", 80, 0ms); }, ErrorCode::kInvalidArgument, {"timeout 0 ms"});
  expect_error([] { TcpStore("no-such-host.invalid", 29500, 1s); }, ErrorCode::kInvalidArgument,
               {"no-such-host.invalid"});
  TcpStoreServer server("127.0.0.1", 0);
  std::string address = "127.0.0.1:" + std::to_string(server.port());
  expect_error([&] { TcpStoreServer("127.0.0.1", server.port()); }, ErrorCode::kFailedPrecondition,
               {"cannot listen on", address});
}

TEST(TcpStore, PeerThatIsNotAStoreFailsTheHandshake) {
  // A listener that answers every connection with bytes that are not the store protocol.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  std::thread impostor([listener] {
    int fd = ::accept(listener, nullptr, nullptr);
    std::string reply(64, 'x');
    EXPECT_EQ(::write(fd, reply.data(), reply.size()), 64);
    std::this_thread::sleep_for(200ms);
    ::close(fd);
  });
  expect_error([&] { TcpStore("127.0.0.1", port, 2s); }, ErrorCode::kFailedPrecondition,
               {"handshake", "127.0.0.1:" + std::to_string(port)});
  impostor.join();
  ::close(listener);
}

}  // namespace
}  // namespace ingot
