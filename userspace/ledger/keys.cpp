#include "ledger/keys.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstring>

#include "common/error.h"
#include "common/system.h"
#include "common/text.h"
#include "ledger/hash.h"

namespace flightrec::ledger {

void PkeyDeleter::operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }

namespace {

std::string raw_public(EVP_PKEY* k) {
  std::string out(32, '\0');
  size_t len = out.size();
  if (EVP_PKEY_get_raw_public_key(k, reinterpret_cast<unsigned char*>(out.data()), &len) != 1 ||
      len != 32)
    throw Error("cannot read the Ed25519 public key");
  return out;
}

// Whether a 32-byte Ed25519 public key is one no signature from it proves
// anything: a non-canonical encoding (y >= p) or a point of small order
// (the 8-torsion: y in {0, 1, -1} or the two order-8 y values), for which
// a trivial signature verifies on every message (libsodium refuses these;
// OpenSSL does not). The sign bit (bit 255) is not part of y.
bool weak_public_key(std::string_view key) {
  static const unsigned char kSmallOrderY[][32] = {
      {0},                                                                              // 0: order 4
      {1},                                                                              // 1: the identity
      {0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},  // p-1: order 2
      {0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
       0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},  // order 8
      {0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
       0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},  // order 8
  };
  if (key.size() != 32) return true;
  unsigned char y[32];
  std::memcpy(y, key.data(), 32);
  y[31] &= 0x7f;
  for (const auto& weak : kSmallOrderY)
    if (std::memcmp(y, weak, 32) == 0) return true;
  // y >= p = 2^255 - 19 (little-endian): 0x7f, then 30 bytes of 0xff, then >= 0xed.
  if (y[31] != 0x7f || y[0] < 0xed) return false;
  for (int i = 1; i < 31; ++i)
    if (y[i] != 0xff) return false;
  return true;
}

}  // namespace

std::string note_key_hash(std::string_view name, std::string_view public_key) {
  std::string buf(name);
  buf += '\n';
  buf += '\x01';
  buf += public_key;
  Hash h = sha256(buf);
  return std::string(reinterpret_cast<const char*>(h.data()), 4);
}

bool valid_key_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name)
    if (c <= ' ' || c > '~' || c == '+') return false;
  return true;
}

VerifierKey::VerifierKey(std::string name, std::string public_key)
    : name_(std::move(name)), public_key_(std::move(public_key)) {
  hash_ = note_key_hash(name_, public_key_);
  if (weak_public_key(public_key_)) throw Error("the Ed25519 public key is of small order or not canonical");
  pkey_.reset(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                          reinterpret_cast<const unsigned char*>(public_key_.data()),
                                          public_key_.size()),
              EVP_PKEY_free);
  if (!pkey_) throw Error("invalid Ed25519 public key");
}

std::optional<VerifierKey> VerifierKey::parse_file(std::string_view text) {
  if (text.ends_with('\n')) text.remove_suffix(1);
  return parse(text);
}

std::optional<VerifierKey> VerifierKey::parse(std::string_view text) {
  size_t p1 = text.find('+');
  size_t p2 = p1 == std::string_view::npos ? p1 : text.find('+', p1 + 1);
  if (p2 == std::string_view::npos) return std::nullopt;
  std::string_view name = text.substr(0, p1), hash_hex = text.substr(p1 + 1, p2 - p1 - 1);
  auto key = base64_decode(text.substr(p2 + 1));
  auto hash = hex_decode(hash_hex);
  if (!valid_key_name(name) || !key || key->size() != 33 || (*key)[0] != '\x01' || !hash ||
      hash->size() != 4 || hash_hex.find_first_not_of("0123456789abcdef") != std::string_view::npos)
    return std::nullopt;
  try {
    VerifierKey v(std::string(name), key->substr(1));
    if (v.key_hash() != *hash) return std::nullopt;
    return v;
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string VerifierKey::key_id_hex() const { return hex_encode(hash_); }

std::string VerifierKey::vkey() const {
  return name_ + "+" + key_id_hex() + "+" + base64_encode("\x01" + public_key_);
}

bool VerifierKey::verify(std::string_view message, std::string_view signature) const {
  if (signature.size() != 64) return false;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, pkey_.get()) == 1 &&
            EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                             signature.size(),
                             reinterpret_cast<const unsigned char*>(message.data()),
                             message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

SigningKey::SigningKey(Pkey key, VerifierKey verifier)
    : key_(key.release(), EVP_PKEY_free), verifier_(std::move(verifier)) {}

SigningKey SigningKey::generate(std::string name) {
  if (!valid_key_name(name)) throw Error("invalid key name '" + name + "' (no spaces or '+')");
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
  EVP_PKEY* raw = nullptr;
  bool ok = ctx && EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_keygen(ctx, &raw) == 1;
  EVP_PKEY_CTX_free(ctx);
  if (!ok) throw Error("cannot generate an Ed25519 key (OpenSSL)");
  Pkey key(raw);
  std::string pub = raw_public(key.get());
  return SigningKey(std::move(key), VerifierKey(std::move(name), pub));
}

SigningKey SigningKey::from_pem(std::string name, std::string_view pem) {
  if (!valid_key_name(name)) throw Error("invalid key name '" + name + "'");
  BIO* bio = BIO_new_mem_buf(pem.data(), int(pem.size()));
  EVP_PKEY* raw = bio ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(bio);
  if (!raw) throw Error("not a PEM private key");
  Pkey key(raw);
  if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) throw Error("the private key is not Ed25519");
  std::string pub = raw_public(key.get());
  return SigningKey(std::move(key), VerifierKey(std::move(name), pub));
}

SigningKey SigningKey::load_dir(const std::string& dir) {
  std::string pub_text = read_file(dir + "/flightrec.pub");
  auto vkey = VerifierKey::parse_file(pub_text);
  if (!vkey) throw Error(dir + "/flightrec.pub is not a signed-note verifier key");
  SigningKey key = from_pem(vkey->name(), read_file(dir + "/flightrec.key"));
  if (key.verifier().vkey() != vkey->vkey())
    throw Error(dir + "/flightrec.key and flightrec.pub do not belong together");
  return key;
}

std::string SigningKey::private_pem() const {
  BIO* bio = BIO_new(BIO_s_mem());
  std::string out;
  if (bio && PEM_write_bio_PrivateKey(bio, key_.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1) {
    char* data = nullptr;
    long len = BIO_get_mem_data(bio, &data);
    out.assign(data, size_t(len));
  }
  BIO_free(bio);
  if (out.empty()) throw Error("cannot encode the private key");
  return out;
}

std::string SigningKey::sign(std::string_view message) const {
  std::string sig(64, '\0');
  size_t len = sig.size();
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx && EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key_.get()) == 1 &&
            EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                           reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok || len != 64) throw Error("Ed25519 signing failed (OpenSSL)");
  return sig;
}

}  // namespace flightrec::ledger
