// Ed25519 against RFC 8032's first test vector, and the C2SP signed-note
// and checkpoint formats.
#include <doctest/doctest.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "common/text.h"
#include "ledger/checkpoint.h"
#include "ledger/keys.h"

using namespace flightrec;
using namespace flightrec::ledger;

namespace {

// RFC 8032 section 7.1, TEST 1.
const char* kSecret = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const char* kPublic = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
const char* kSigEmpty =
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f"
    "0595bbe24655141438e7a100b";

SigningKey fixed_key(const std::string& name) {
  auto secret = *hex_decode(kSecret);
  EVP_PKEY* k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr,
                                             reinterpret_cast<const unsigned char*>(secret.data()),
                                             secret.size());
  REQUIRE(k);
  BIO* bio = BIO_new(BIO_s_mem());
  REQUIRE(PEM_write_bio_PrivateKey(bio, k, nullptr, nullptr, 0, nullptr, nullptr) == 1);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string pem(data, size_t(len));
  BIO_free(bio);
  EVP_PKEY_free(k);
  return SigningKey::from_pem(name, pem);
}

}  // namespace

TEST_CASE("Ed25519 signing matches RFC 8032 test 1") {
  SigningKey key = fixed_key("rfc8032");
  CHECK(hex_encode(key.sign("")) == kSigEmpty);
  CHECK(key.verifier().verify("", *hex_decode(kSigEmpty)));
  CHECK_FALSE(key.verifier().verify("x", *hex_decode(kSigEmpty)));
  std::string vkey = key.verifier().vkey();
  CHECK(vkey.rfind("rfc8032+", 0) == 0);
  size_t second_plus = vkey.find('+', vkey.find('+') + 1);  // base64 may hold '+' too
  CHECK(vkey.substr(second_plus + 1) == base64_encode("\x01" + *hex_decode(kPublic)));
}

TEST_CASE("verifier keys round-trip and reject tampering") {
  SigningKey key = fixed_key("flightrec-test");
  std::string vkey = key.verifier().vkey();
  auto parsed = VerifierKey::parse(vkey + "\n");
  REQUIRE(parsed);
  CHECK(parsed->vkey() == vkey);
  std::string wrong_hash = vkey;
  wrong_hash[vkey.find('+') + 1] = wrong_hash[vkey.find('+') + 1] == '0' ? '1' : '0';
  CHECK_FALSE(VerifierKey::parse(wrong_hash));
  CHECK_FALSE(VerifierKey::parse("no plus signs"));
  CHECK_FALSE(VerifierKey::parse("a b+00000000+AQ=="));
}

TEST_CASE("a checkpoint note signs, parses and verifies; any change breaks it") {
  SigningKey key = fixed_key("flightrec-test");
  Checkpoint c;
  c.origin = "flightrec/host/abc";
  c.size = 812;
  c.root = sha256("root");
  c.chain = sha256("chain");
  std::string note = sign_checkpoint(c, &key);
  // Text, blank line, one em-dash signature line.
  CHECK(note.find(c.origin + "\n812\n" + base64_encode(as_bytes(c.root)) + "\nchain " + to_hex(*c.chain) +
                  "\n\n\xe2\x80\x94 flightrec-test ") == 0);
  std::string why;
  auto n = parse_note(note, &why);
  REQUIRE(n);
  CHECK(check_signature(*n, key.verifier()).empty());
  auto back = parse_checkpoint(n->text, &why);
  REQUIRE(back);
  CHECK(back->origin == c.origin);
  CHECK(back->size == 812);
  CHECK(back->root == c.root);
  CHECK(back->chain == c.chain);

  std::string forged = note;
  forged.replace(forged.find("\n812\n"), 5, "\n813\n");
  auto f = parse_note(forged, &why);
  REQUIRE(f);
  CHECK(check_signature(*f, key.verifier()).find("does not verify") != std::string::npos);
  auto other = SigningKey::generate("other");
  CHECK(check_signature(*n, other.verifier()).find("not signed by the expected key") != std::string::npos);

  CHECK_FALSE(parse_checkpoint("origin\n01\nAAAA\n", &why));
  CHECK_FALSE(parse_checkpoint("origin\n-1\n" + base64_encode(as_bytes(c.root)) + "\n", &why));
  CHECK_FALSE(parse_note("text without newline", &why));
  // A last line without its newline is read as a line, not forever (the
  // fuzzer found the loop: a bundle's checkpoint could hang verify).
  CHECK_FALSE(parse_checkpoint("origin\n812", &why));
  std::string body = n->text;
  body.pop_back();  // its final newline: read as before (the signature covers the exact bytes)
  auto unended = parse_checkpoint(body, &why);
  REQUIRE(unended);
  CHECK(unended->size == 812);
}
