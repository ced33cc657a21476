#pragma once
// Ed25519 keys for signed notes (C2SP signed-note): a named signing key,
// and the verifier key text "<name>+<key hash hex>+<base64(0x01||public key)>"
// that Go's golang.org/x/mod/sumdb/note and other signed-note tools read.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

typedef struct evp_pkey_st EVP_PKEY;

namespace flightrec::ledger {

struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const;
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyDeleter>;

// The 4-byte key hash: SHA-256(name || 0x0A || 0x01 || public key)[0:4].
std::string note_key_hash(std::string_view name, std::string_view public_key);
// Key names: non-empty, printable ASCII without spaces or '+'.
bool valid_key_name(std::string_view name);

class VerifierKey {
 public:
  // The key line exactly (no whitespace around it); nullopt if malformed,
  // or if the key is of small order or not canonical (no signature by it
  // would prove anything).
  static std::optional<VerifierKey> parse(std::string_view vkey);
  // A key file: the line, or the line and one newline (docs/FORMAT.md §3.3).
  static std::optional<VerifierKey> parse_file(std::string_view text);
  VerifierKey(std::string name, std::string public_key);

  const std::string& name() const { return name_; }
  const std::string& key_hash() const { return hash_; }  // 4 raw bytes
  std::string key_id_hex() const;
  std::string vkey() const;
  bool verify(std::string_view message, std::string_view signature) const;

 private:
  std::string name_, public_key_, hash_;
  std::shared_ptr<EVP_PKEY> pkey_;
};

class SigningKey {
 public:
  static SigningKey generate(std::string name);                          // throws Error
  // The private key from PEM (PKCS#8), named. Throws Error.
  static SigningKey from_pem(std::string name, std::string_view pem);
  // DIR/flightrec.key + DIR/flightrec.pub as keygen writes them. Throws Error.
  static SigningKey load_dir(const std::string& dir);

  const VerifierKey& verifier() const { return verifier_; }
  std::string private_pem() const;
  std::string sign(std::string_view message) const;  // 64 bytes

 private:
  SigningKey(Pkey key, VerifierKey verifier);
  std::shared_ptr<EVP_PKEY> key_;
  VerifierKey verifier_;
};

}  // namespace flightrec::ledger
