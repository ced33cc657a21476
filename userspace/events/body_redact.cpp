#include "events/body_redact.h"

#include <cctype>

namespace flightrec::events {

bool secret_json_key(std::string_view key) {
  static const char* const keys[] = {"api_key",       "apikey",        "api-key",      "x-api-key",     "access_token",
                                     "id_token",      "refresh_token", "auth_token",   "session_token", "authorization",
                                     "password",      "passwd",        "client_secret", "secret",       "private_key",
                                     "private_token", "secret_access_key", "aws_secret_access_key"};
  for (const char* k : keys)
    if (key == k) return true;
  return false;
}

char BodyRedactor::next(char c, std::vector<std::string>& names) {
  auto space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; };
  if (masking_) {  // inside a secret string value: every byte but the closing quote masked
    if (escape_) escape_ = false;
    else if (c == '\\') escape_ = true;
    else if (c == '"') {
      masking_ = false;
      return c;
    }
    return '*';
  }
  if (in_string_) {
    if (escape_) escape_ = false;
    else if (c == '\\') escape_ = true;
    else if (c == '"') {
      in_string_ = false;
      after_string_ = true;
      key_ = str_;
      return c;
    }
    if (str_.size() < 64) str_ += char(std::tolower(static_cast<unsigned char>(c)));
    return c;
  }
  if (expect_value_) {
    if (space(c)) return c;
    expect_value_ = false;
    if (c == '"') {
      masking_ = true;
      names.push_back("body:" + key_);
      return c;
    }
  }
  if (after_string_) {
    if (space(c)) return c;
    after_string_ = false;
    if (c == ':' && secret_json_key(key_)) {
      expect_value_ = true;
      return c;
    }
  }
  if (c == '"') {
    in_string_ = true;
    str_.clear();
  }
  return c;
}

}  // namespace flightrec::events
