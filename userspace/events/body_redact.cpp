#include "events/body_redact.h"

#include <cctype>

namespace flightrec::events {
namespace {

bool space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Lower case, without '_' and '-': the one spelling of a key.
std::string folded(std::string_view key) {
  std::string out;
  for (char c : key)
    if (c != '_' && c != '-') out += char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Members whose string values carry JSON streamed in pieces, one event each.
bool streams_json(const std::string& key) { return key == "partial_json" || key == "arguments"; }

char unescaped(char c) {  // the character a one-letter escape stands for
  switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'b': return '\b';
    case 'f': return '\f';
    default: return c;  // '"', '\\', '/'
  }
}

}  // namespace

bool BodyRedactor::idle() const {
  return masking_ == Mask::None && !in_string_ && !after_string_ && !expect_value_ && !stream_value_ &&
         (!carried_ || carried_->idle());
}

std::string masked_json_text(std::string text, std::vector<std::string>& names) {
  BodyRedactor redactor;
  for (char& c : text) c = redactor.next(c, names);
  return text;
}

bool secret_json_key(std::string_view key) {
  static const char* const keys[] = {"apikey",       "xapikey",         "accesstoken",     "idtoken",
                                     "refreshtoken", "authtoken",       "sessiontoken",    "authorization",
                                     "password",     "passwd",          "clientsecret",    "secret",
                                     "privatekey",   "privatetoken",    "secretaccesskey", "awssecretaccesskey"};
  std::string k = folded(key);
  for (const char* s : keys)
    if (k == s) return true;
  return false;
}

void BodyRedactor::start_value(std::vector<std::string>& names) {
  masked_ = 0;
  escape_ = false;
  hex_left_ = 0;
  names.push_back("body:" + key_);
}

// Inside a secret value: every byte masked but the one that ends it.
char BodyRedactor::mask(char c, std::vector<std::string>& names) {
  if (masked_ >= kMaskMax) {  // not a credential's length: the rest is read as any string is
    names.push_back("body:" + key_ + " (longer than " + std::to_string(kMaskMax) + " bytes)");
    bool string = masking_ == Mask::String;
    masking_ = Mask::None;
    if (!string) return next(c, names);
    in_string_ = true;
    hex_left_ = 0;
    str_.clear();
    reading_ = nullptr;
    return in_string(c, names);
  }
  if (static_cast<unsigned char>(c) < 0x20) {  // no JSON string holds one: this was none
    masking_ = Mask::None;
    escape_ = false;
    return next(c, names);
  }
  if (masking_ == Mask::Number) {
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
      ++masked_;
      return '*';
    }
    masking_ = Mask::None;
    return next(c, names);
  }
  // Inside a string (depth 1) an escape sequence is kept whole: the outer
  // string keeps the escapes of its own, and a masked one would end it
  // or break it. At the top, escapes are masked as any byte.
  char hidden = depth_ ? c : '*';
  if (hex_left_ > 0) {
    --hex_left_;
    return hidden;
  }
  if (escape_) {
    escape_ = false;
    if (c == 'u') hex_left_ = 4;
    return hidden;
  }
  if (c == '\\') {
    escape_ = true;
    return hidden;
  }
  if (c == '"') {
    masking_ = Mask::None;
    return c;
  }
  ++masked_;
  return '*';
}

// A byte of a string that is not masked: kept, unless the JSON inside the
// string masks the character it stands for.
char BodyRedactor::in_string(char c, std::vector<std::string>& names) {
  int ch = -1;  // the character c completes, if any
  bool escape_byte = escape_ || hex_left_ > 0;
  if (hex_left_ > 0) {
    int v = std::isxdigit(static_cast<unsigned char>(c)) ? (std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c | 0x20) - 'a' + 10) : -1;
    if (v < 0) hex_left_ = 0;  // not an escape: nothing decoded
    else {
      hex_ = hex_ * 16 + unsigned(v);
      if (--hex_left_ == 0 && hex_ < 0x80) ch = int(hex_);
    }
  } else if (escape_) {
    escape_ = false;
    if (c == 'u') hex_left_ = 4, hex_ = 0;
    else ch = static_cast<unsigned char>(unescaped(c));
  } else if (c == '\\') {
    escape_ = true;
    escape_byte = true;
  } else if (c == '"') {
    in_string_ = false;
    after_string_ = true;
    key_ = str_;
    return c;
  } else {
    ch = static_cast<unsigned char>(c);
  }
  if (ch < 0) return c;
  if (str_.size() < 64) str_ += char(std::tolower(ch));
  if (!reading_) return c;
  char out = reading_->next(char(ch), names);
  return out == '*' && !escape_byte ? '*' : c;  // an escape's bytes stay: the string stays one
}

char BodyRedactor::next(char c, std::vector<std::string>& names) {
  if (masking_ != Mask::None) return mask(c, names);
  if (in_string_) return in_string(c, names);
  if (expect_value_) {
    if (space(c)) return c;
    expect_value_ = false;
    if (c == '"') {
      masking_ = Mask::String;
      start_value(names);
      return c;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-') {
      masking_ = Mask::Number;
      start_value(names);
      return mask(c, names);
    }
  }
  if (after_string_) {
    if (space(c)) return c;
    after_string_ = false;
    if (c == ':' && secret_json_key(key_)) {
      expect_value_ = true;
      return c;
    }
    if (c == ':') {
      stream_value_ = streams_json(key_);
      return c;
    }
  }
  if (space(c)) return c;
  bool carried = stream_value_;
  stream_value_ = false;
  if (c == '"') {
    in_string_ = true;
    escape_ = false;
    hex_left_ = 0;
    str_.clear();
    reading_ = nullptr;
    if (depth_ == 0) {
      // A value of a streamed member goes on from the last one's state;
      // any other string is read on its own.
      std::unique_ptr<BodyRedactor>& r = carried ? carried_ : inner_;
      if (!r) r.reset(new BodyRedactor(1));
      else if (!carried) *r = BodyRedactor(1);
      reading_ = r.get();
    }
  }
  return c;
}

}  // namespace flightrec::events
