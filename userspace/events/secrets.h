#pragma once
// Credentials in command lines, redacted before an entry is sealed (as TLS
// credential headers are): tokens with a known shape (sk-..., ghp_...,
// AKIA..., xox?-..., glpat-..., AIza..., npm_..., hf_...), what follows
// "Bearer"/"Basic"/"Token", the value of an option or key that names a
// secret (--password=X, --token X, api_key=X), a URL's password
// (scheme://user:PASS@host), private-key blocks, and tokens after the
// prefixes a policy adds. Linear in the text: a hostile argv of 1 MiB
// costs one pass, never a regex's backtracking.
#include <string>
#include <vector>

namespace flightrec::events {

class SecretScrubber {
 public:
  explicit SecretScrubber(std::vector<std::string> extra_prefixes = {});
  // Replaces each credential in `text` (argv joined by NULs, or any text)
  // with [REDACTED]; returns what was found, one name per kind, in order
  // of first appearance ("bearer", "sk-", "--password", "url password"...).
  std::vector<std::string> scrub(std::string& text) const;

 private:
  struct Prefix {
    std::string text;
    size_t min_token;  // characters after the prefix that make it a token
  };
  std::vector<Prefix> prefixes_;
};

}  // namespace flightrec::events
