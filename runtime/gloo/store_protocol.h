// Wire format of the TCP key-value store (TcpStoreServer / TcpStore, tcp_store.h).
//
// Every message is a frame: an 8-byte little-endian body length, then the body:
//   u8 code | i64 timeout_ms | u32 count | count x (u64 length | bytes)
// all integers little-endian. Requests carry a StoreOp code, replies a StoreStatus code (and
// timeout_ms 0). Requests and their strings:
//   kHello [magic]        -> kOk [magic]         (first request of every connection)
//   kSet   [key, value]   -> kOk []
//   kGet   [key]          -> kOk [value] | kTimeout [key]        (waits up to timeout_ms)
//   kWait  [key...]       -> kOk []      | kTimeout [missing...] (waits up to timeout_ms)
// A malformed request gets kBadRequest [reason] and the connection is closed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ingot::store_protocol {

enum class Op : uint8_t { kHello = 1, kSet = 2, kGet = 3, kWait = 4 };
enum class Status : uint8_t { kOk = 0, kTimeout = 1, kBadRequest = 2 };

/// Protocol name and version, exchanged by kHello.
inline constexpr std::string_view kMagic = "ingot-tcp-store/1";
/// Size of the frame header (the body length).
inline constexpr size_t kHeaderBytes = 8;
/// Largest accepted body: 1 GiB of value plus room for the key and the fields.
inline constexpr uint64_t kMaxBodyBytes = (uint64_t{1} << 30) + (uint64_t{1} << 20);

/// A decoded request or reply body.
struct Message {
  uint8_t code = 0;
  int64_t timeout_ms = 0;
  std::vector<std::string> strings;
};

/// The whole frame (header and body) of `message`.
std::string encode_frame(const Message& message);
/// The body length stored in a frame header (kHeaderBytes bytes at `header`).
uint64_t decode_header(const char* header);
/// Decodes a body; false when it is malformed (truncated, trailing bytes, bad lengths).
bool decode_body(std::string_view body, Message& out);

}  // namespace ingot::store_protocol
