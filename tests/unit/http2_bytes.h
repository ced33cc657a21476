#pragma once
// Bytes of HTTP/2 for the tests that read it (the redactor, the agent's
// turns): hex written out, and frames (RFC 9113 4.1) made by hand.
#include <cstdint>
#include <string>

inline std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

inline std::string frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload) {
  std::string f;
  f += char(payload.size() >> 16);
  f += char(payload.size() >> 8);
  f += char(payload.size());
  f += char(type);
  f += char(flags);
  f += char(stream >> 24);
  f += char(stream >> 16);
  f += char(stream >> 8);
  f += char(stream);
  return f + payload;
}
