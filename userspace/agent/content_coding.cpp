#include "agent/content_coding.h"

#include <brotli/decode.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace flightrec::agent {
namespace {

std::optional<std::string> inflate_body(std::string_view in, int window_bits, size_t max, std::string* why) {
  z_stream z{};
  if (inflateInit2(&z, window_bits) != Z_OK) {
    *why = "zlib could not start";
    return std::nullopt;
  }
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  int rc = Z_OK;
  char buf[65536];
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
    if (out.size() > max) rc = Z_MEM_ERROR;
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // cut short
  }
  inflateEnd(&z);
  if (out.size() > max) *why = "it decodes to more than " + std::to_string(max >> 20) + " MiB";
  else if (rc != Z_STREAM_END) *why = "its compressed data is damaged or cut";
  if (rc != Z_STREAM_END) return std::nullopt;
  return out;
}

std::optional<std::string> brotli_body(std::string_view in, size_t max, std::string* why) {
  BrotliDecoderState* s = BrotliDecoderCreateInstance(nullptr, nullptr, nullptr);
  if (!s) return std::nullopt;
  std::string out;
  size_t avail_in = in.size();
  const uint8_t* next_in = reinterpret_cast<const uint8_t*>(in.data());
  BrotliDecoderResult rc = BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT;
  uint8_t buf[65536];
  while (rc == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT && out.size() <= max) {
    size_t avail_out = sizeof(buf);
    uint8_t* next_out = buf;
    rc = BrotliDecoderDecompressStream(s, &avail_in, &next_in, &avail_out, &next_out, nullptr);
    out.append(reinterpret_cast<char*>(buf), sizeof(buf) - avail_out);
  }
  BrotliDecoderDestroyInstance(s);
  if (out.size() > max) *why = "it decodes to more than " + std::to_string(max >> 20) + " MiB";
  else if (rc != BROTLI_DECODER_RESULT_SUCCESS) *why = "its compressed data is damaged or cut";
  if (out.size() > max || rc != BROTLI_DECODER_RESULT_SUCCESS) return std::nullopt;
  return out;
}

std::optional<std::string> zstd_body(std::string_view in, size_t max, std::string* why) {
  ZSTD_DStream* d = ZSTD_createDStream();
  if (!d) return std::nullopt;
  ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, 27);  // 128 MiB windows at most
  std::string out;
  ZSTD_inBuffer src{in.data(), in.size(), 0};
  std::vector<char> buf(ZSTD_DStreamOutSize());
  size_t rc = 1;
  bool ended = false;
  while (out.size() <= max) {
    ZSTD_outBuffer dst{buf.data(), buf.size(), 0};
    rc = ZSTD_decompressStream(d, &dst, &src);
    if (ZSTD_isError(rc)) break;
    out.append(buf.data(), dst.pos);
    if (rc == 0) ended = true;
    if (src.pos == src.size && dst.pos < dst.size) break;  // all read, all flushed
  }
  ZSTD_freeDStream(d);
  if (out.size() > max) *why = "it decodes to more than " + std::to_string(max >> 20) + " MiB";
  else if (ZSTD_isError(rc) || !ended) *why = "its compressed data is damaged or cut";
  if (out.size() > max || ZSTD_isError(rc) || !ended) return std::nullopt;
  return out;
}

}  // namespace

std::optional<std::string> decode_content(std::string_view encoding, std::string_view body, size_t max, std::string* why) {
  std::vector<std::string> codings;
  std::string word;
  for (char c : std::string(encoding) + ",") {
    if (c == ',') {
      if (!word.empty()) codings.push_back(word);
      word.clear();
    } else if (c != ' ' && c != '\t') {
      word += char(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  std::optional<std::string> out = std::string(body);
  for (auto it = codings.rbegin(); it != codings.rend() && out; ++it) {
    const std::string& c = *it;
    if (c == "identity") continue;
    if (c == "gzip" || c == "x-gzip") out = inflate_body(*out, 15 + 16, max, why);
    else if (c == "deflate") {
      std::string ignored;
      auto zlib = inflate_body(*out, 15, max, &ignored);  // RFC 9110: zlib's format, though some send it raw
      out = zlib ? zlib : inflate_body(*out, -15, max, why);
    } else if (c == "br") out = brotli_body(*out, max, why);
    else if (c == "zstd") out = zstd_body(*out, max, why);
    else {
      *why = "its content coding " + c + " is not one flightrec reads";
      return std::nullopt;
    }
    if (!out && why->empty()) *why = "its " + c + " data cannot be decoded";
  }
  return out;
}

std::string body_of(const HttpMessage& m, std::string* why) {
  std::string encoding = m.header("content-encoding");
  if (encoding.empty()) return m.body;
  if (!m.problem.empty()) {  // compressed bytes with a hole or cut: nothing to decode
    *why = "its " + encoding + " body is not whole";
    return "";
  }
  std::string reason;
  auto out = decode_content(encoding, m.body, Http1Stream::kMaxBody, &reason);
  if (!out) *why = "its " + encoding + " body cannot be read: " + reason;
  return out.value_or("");
}

}  // namespace flightrec::agent
