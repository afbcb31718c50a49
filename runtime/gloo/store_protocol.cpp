#include "store_protocol.h"

namespace ingot::store_protocol {

namespace {

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// Reads a `bytes`-byte little-endian integer at `pos`, advancing it; false when truncated.
bool get_le(std::string_view in, size_t& pos, int bytes, uint64_t& value) {
  if (in.size() - pos < static_cast<size_t>(bytes)) return false;
  value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[pos + i])) << (8 * i);
  }
  pos += static_cast<size_t>(bytes);
  return true;
}

}  // namespace

std::string encode_frame(const Message& message) {
  std::string body;
  body.push_back(static_cast<char>(message.code));
  put_le(body, static_cast<uint64_t>(message.timeout_ms), 8);
  put_le(body, message.strings.size(), 4);
  for (const std::string& s : message.strings) {
    put_le(body, s.size(), 8);
    body += s;
  }
  std::string frame;
  frame.reserve(kHeaderBytes + body.size());
  put_le(frame, body.size(), 8);
  frame += body;
  return frame;
}

uint64_t decode_header(const char* header) {
  std::string_view view(header, kHeaderBytes);
  size_t pos = 0;
  uint64_t length = 0;
  get_le(view, pos, 8, length);
  return length;
}

bool decode_body(std::string_view body, Message& out) {
  size_t pos = 0;
  uint64_t code = 0, timeout = 0, count = 0;
  if (!get_le(body, pos, 1, code) || !get_le(body, pos, 8, timeout) || !get_le(body, pos, 4, count)) {
    return false;
  }
  out.code = static_cast<uint8_t>(code);
  out.timeout_ms = static_cast<int64_t>(timeout);
  out.strings.clear();
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t length = 0;
    if (!get_le(body, pos, 8, length) || length > body.size() - pos) return false;
    out.strings.emplace_back(body.substr(pos, length));
    pos += length;
  }
  return pos == body.size();
}

}  // namespace ingot::store_protocol
