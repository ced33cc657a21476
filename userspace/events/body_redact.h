#pragma once
// Credentials inside message bodies, over HTTP/1.x and HTTP/2 alike: JSON
// members named as one ("refresh_token": "..."), their values masked in
// place as the bytes stream by.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace flightrec::events {

// Whether a JSON body member holds a credential: a narrower list than a
// query's ("key" or "token" alone name other things in a model's tool
// calls). Case, '_' and '-' aside: "api_key", "apiKey" and "API-KEY" alike.
bool secret_json_key(std::string_view key);

// JSON members of a body that name a credential ("refresh_token": "...",
// "pin": 1234), their values masked in place, each byte a '*' (a scanner
// of the stream cannot know a value's length before its end), so a body's
// Content-Length and chunk sizes still hold. A value split across calls is
// masked all the same. Keys are read with their escapes ("pass\u0077ord").
// JSON inside a string value is read too, one level deep: a tool call's
// "arguments" ("{\"api_key\": \"...\"}"), and the pieces of one streamed
// over many events ("partial_json", "arguments"). Of a value masked inside
// a string, escape sequences stay as they are, so the string stays one.
// A value is masked for at most kMaskMax bytes, and up to a control byte
// (which no JSON string holds): a body cannot hide what follows behind a
// key it names (the name says "(longer than 8192 bytes)").
class BodyRedactor {
 public:
  static constexpr size_t kMaskMax = 8192;
  BodyRedactor() = default;
  BodyRedactor(BodyRedactor&&) = default;
  BodyRedactor& operator=(BodyRedactor&&) = default;
  char next(char c, std::vector<std::string>& names);  // the byte to keep in c's place
  void reset() { *this = BodyRedactor(); }
  // Between members: forgetting it now loses nothing (no value, key or
  // string under way, here or carried over to the next event).
  bool idle() const;

 private:
  explicit BodyRedactor(int depth) : depth_(depth) {}
  char in_string(char c, std::vector<std::string>& names);
  void start_value(std::vector<std::string>& names);
  char mask(char c, std::vector<std::string>& names);
  enum class Mask { None, String, Number };
  int depth_ = 0;
  bool in_string_ = false, escape_ = false, after_string_ = false, expect_value_ = false;
  bool stream_value_ = false;  // the next value is a streamed member's (after its ':')
  Mask masking_ = Mask::None;
  size_t masked_ = 0;  // bytes of this value masked so far
  int hex_left_ = 0;   // hex digits of a \u escape still to come
  unsigned hex_ = 0;
  std::string str_, key_;  // the string being read (decoded, lower case, bounded), the last one read
  // JSON inside this one's strings (depth 0 only): each string's own, and
  // the one carried from string to string of a streamed member.
  std::unique_ptr<BodyRedactor> inner_, carried_;
  BodyRedactor* reading_ = nullptr;  // which of them reads the current string
};

// A whole JSON text (a tool call's decoded input) through a BodyRedactor:
// the text as the record keeps it; the names masked added to names.
std::string masked_json_text(std::string text, std::vector<std::string>& names);

}  // namespace flightrec::events
