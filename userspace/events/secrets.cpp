#include "events/secrets.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace flightrec::events {
namespace {

constexpr std::string_view kRedacted = "[REDACTED]";

bool token_char(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || c == '-' || c == '.' || c == '~' || c == '+' || c == '/' || c == '=';
}
bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
// A value ends at a separator of arguments, of shell words or of URL parts.
bool value_char(char c) { return c != '\0' && c != ' ' && c != '\t' && c != '\n' && c != '&' && c != ';' && c != '"' && c != '\''; }

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y)); });
}

// Names of options and keys whose value is a secret (compared without
// leading dashes, case-insensitively, '-' and '_' alike).
bool secret_key(std::string_view key) {
  while (!key.empty() && (key.front() == '-' || key.front() == '_')) key.remove_prefix(1);
  std::string k;
  for (char c : key) k += c == '-' ? '_' : char(std::tolower(static_cast<unsigned char>(c)));
  static const char* const names[] = {"password", "passwd", "pass", "token", "secret", "api_key", "apikey", "access_key",
                                      "secret_key", "client_secret", "auth_token", "access_token", "private_key",
                                      "passphrase", "refresh_token", "aws_secret_access_key", "pwd", "authtoken",
                                      "accountkey", "cookie", "x_api_key", "sas_token", "sig", "authorization",
                                      "proxy_authorization"};
  for (const char* n : names)
    if (k == n || (k.size() > std::string_view(n).size() + 1 && k.ends_with(std::string("_") + n))) return true;
  return false;
}

struct Finder {
  std::string& text;
  std::vector<std::string>& kinds;
  void found(const std::string& kind) {
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  }
  // Replaces [from, to) and returns where scanning goes on.
  size_t redact(size_t from, size_t to, const std::string& kind) {
    found(kind);
    text.replace(from, to - from, kRedacted);
    return from + kRedacted.size();
  }
};

}  // namespace

SecretScrubber::SecretScrubber(std::vector<std::string> extra) {
  for (const char* p : {"sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xoxb-", "xoxp-",
                        "xoxa-", "xoxr-", "xoxs-", "xapp-", "AKIA", "ASIA", "AIza", "sk_live_", "rk_live_", "npm_",
                        "hf_", "pypi-", "dop_v1_", "SG.", "ya29.", "eyJ"})
    prefixes_.push_back({p, 16});
  for (auto& p : extra) prefixes_.push_back({std::move(p), 8});
}

std::vector<std::string> SecretScrubber::scrub(std::string& text) const {
  std::vector<std::string> kinds;
  Finder f{text, kinds};
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    bool boundary = i == 0 || !word_char(text[i - 1]);
    // Private key blocks: everything up to the END line.
    if (c == '-' && text.compare(i, 11, "-----BEGIN ") == 0) {
      size_t head_end = text.find("-----", i + 11);
      if (head_end != std::string::npos && std::string_view(text).substr(i, head_end - i).find("PRIVATE KEY") != std::string_view::npos) {
        size_t body = head_end + 5, end = text.find("-----END", body);
        if (end == std::string::npos) end = text.size();
        i = f.redact(body, end, "private key");
        continue;
      }
    }
    // Known token shapes.
    if (boundary) {
      bool matched = false;
      for (const auto& p : prefixes_) {
        if (text.compare(i, p.text.size(), p.text) != 0) continue;
        size_t end = i + p.text.size();
        while (end < text.size() && token_char(text[end])) ++end;
        if (end - i - p.text.size() < p.min_token) continue;
        i = f.redact(i + p.text.size(), end, p.text);
        matched = true;
        break;
      }
      if (matched) continue;
      // Bearer/Basic/Token: the credential after the scheme.
      for (std::string_view scheme : {"bearer", "basic", "token"}) {
        size_t n = scheme.size();
        if (i + n < text.size() && iequal(std::string_view(text).substr(i, n), scheme) &&
            (text[i + n] == ' ' || text[i + n] == '\0')) {
          size_t start = i + n + 1, end = start;
          while (end < text.size() && token_char(text[end])) ++end;
          if (end - start >= 8) {
            i = f.redact(start, end, std::string(scheme));
            matched = true;
          }
          break;
        }
      }
      if (matched) continue;
    }
    // KEY=VALUE and --option=VALUE where the key names a secret.
    if (c == '=' && i > 0) {
      size_t k = i;
      while (k > 0 && (word_char(text[k - 1]) || text[k - 1] == '-')) --k;
      if (k < i && secret_key(std::string_view(text).substr(k, i - k))) {
        size_t end = i + 1;
        while (end < text.size() && value_char(text[end])) ++end;
        if (end > i + 1) {
          std::string kind = text.substr(k, i - k);
          i = f.redact(i + 1, end, kind);
          continue;
        }
      }
    }
    // "X-Api-Key: VALUE" (a header given on a command line).
    if (c == ':' && i > 0 && i + 1 < text.size() && text[i + 1] == ' ') {
      size_t k = i;
      while (k > 0 && (word_char(text[k - 1]) || text[k - 1] == '-')) --k;
      if (k < i && secret_key(std::string_view(text).substr(k, i - k))) {
        size_t start = i + 2, end = start;
        for (std::string_view scheme : {"bearer ", "basic ", "token "})  // the scheme stays readable
          if (start + scheme.size() < text.size() && iequal(std::string_view(text).substr(start, scheme.size()), scheme))
            start += scheme.size();
        end = start;
        while (end < text.size() && text[end] != '\0' && text[end] != '\n') ++end;
        if (end > start) {
          i = f.redact(start, end, text.substr(k, i - k));
          continue;
        }
      }
    }
    // "-u USER:PASSWORD" (curl, wget --user): the part after the colon.
    if (c == '\0' && i >= 2) {
      size_t k = text.rfind('\0', i - 1);
      k = k == std::string::npos ? 0 : k + 1;
      std::string_view arg = std::string_view(text).substr(k, i - k);
      size_t end = text.find('\0', i + 1);
      if (end == std::string::npos) end = text.size();
      size_t colon = text.find(':', i + 1);
      if ((arg == "-u" || arg == "--user" || arg == "--proxy-user") && colon < end && colon + 1 < end) {
        i = f.redact(colon + 1, end, std::string(arg));
        continue;
      }
    }
    // "--password VALUE": an argument that is only a secret option's name
    // is followed by its value in the next argument.
    if (c == '\0' && i > 0) {
      size_t k = text.rfind('\0', i - 1);
      k = k == std::string::npos ? 0 : k + 1;
      std::string_view arg = std::string_view(text).substr(k, i - k);
      if (arg.starts_with("--") && secret_key(arg)) {
        size_t end = text.find('\0', i + 1);
        if (end == std::string::npos) end = text.size();
        if (end > i + 1) {
          i = f.redact(i + 1, end, std::string(arg));
          continue;
        }
      }
    }
    // scheme://user:PASSWORD@host
    if (c == ':' && text.compare(i, 3, "://") == 0) {
      size_t start = i + 3, end = start, colon = std::string::npos;
      while (end < text.size() && value_char(text[end]) && text[end] != '/' && text[end] != '@') {
        if (text[end] == ':' && colon == std::string::npos) colon = end;
        ++end;
      }
      if (end < text.size() && text[end] == '@' && colon != std::string::npos && end > colon + 1) {
        i = f.redact(colon + 1, end, "url password");
        continue;
      }
      i = start;
      continue;
    }
    ++i;
  }
  return kinds;
}

}  // namespace flightrec::events
