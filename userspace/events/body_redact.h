#pragma once
// Credentials inside message bodies, over HTTP/1.x and HTTP/2 alike: JSON
// members named as one ("refresh_token": "..."), their string values
// masked in place as the bytes stream by.
#include <string>
#include <string_view>
#include <vector>

namespace flightrec::events {

// Whether a JSON body member (lower case) holds a credential: a narrower
// list than a query's ("key" or "token" alone name other things in a
// model's tool calls).
bool secret_json_key(std::string_view key);

// JSON members of a body that name a credential ("refresh_token": "..."),
// their string values masked in place, each byte a '*' (a scanner of the
// stream cannot know a value's length before its end), so a body's
// Content-Length and chunk sizes still hold. A value split across calls is
// masked all the same.
class BodyRedactor {
 public:
  char next(char c, std::vector<std::string>& names);  // the byte to keep in c's place
  void reset() { *this = BodyRedactor(); }

 private:
  bool in_string_ = false, escape_ = false, after_string_ = false, expect_value_ = false, masking_ = false;
  std::string str_, key_;  // the string being read (lower case, bounded), the last one read
};

}  // namespace flightrec::events
