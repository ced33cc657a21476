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
  auto parsed = VerifierKey::parse_file(vkey + "\n");
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
  c.origin = "flightrec/host/0123456789abcdef0123456789abcdef";
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

TEST_CASE("key files: the line, or the line and one newline; keys of small order refused (docs/FORMAT.md 3.3)") {
  std::string vkey = fixed_key("flightrec-test").verifier().vkey();
  CHECK(VerifierKey::parse_file(vkey));
  CHECK(VerifierKey::parse_file(vkey + "\n"));
  for (const std::string& bad : {vkey + "\r\n", vkey + "\n\n", vkey + " ", " " + vkey, "\xEF\xBB\xBF" + vkey,
                                 vkey + "\nsecond line\n", vkey + std::string(1, '\0')})
    CHECK_FALSE(VerifierKey::parse_file(bad));
  CHECK_FALSE(VerifierKey::parse(vkey + "\n"));  // a key inside a record: exactly the line
  // The hash in uppercase hex is another spelling: refused.
  std::string upper = vkey;
  for (size_t i = upper.find('+') + 1; upper[i] != '+'; ++i) upper[i] = char(std::toupper(upper[i]));
  if (upper != vkey) CHECK_FALSE(VerifierKey::parse(upper));
  // Points of small order and non-canonical encodings, each with a key
  // hash that matches: a trivial signature would verify with them.
  auto with_point = [](std::string point) {
    return "weak+" + hex_encode(note_key_hash("weak", point)) + "+" + base64_encode("\x01" + point);
  };
  std::string identity(32, '\0');
  identity[0] = 1;
  std::string order8 = *hex_decode("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05");
  std::string y_is_p = *hex_decode("edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f");
  for (const std::string& point : {identity, std::string(32, '\0'), order8, y_is_p})
    CHECK_FALSE(VerifierKey::parse(with_point(point)));
  std::string signed_identity = identity;
  signed_identity[31] = char(0x80);  // the sign bit is not part of y
  CHECK_FALSE(VerifierKey::parse(with_point(signed_identity)));
  CHECK(VerifierKey::parse(with_point(*hex_decode(kPublic))));  // RFC 8032's test key is fine
}

TEST_CASE("checkpoint notes: one form, signed or not (docs/FORMAT.md 3.1, 3.2)") {
  SigningKey key = fixed_key("flightrec-test");
  Checkpoint c;
  c.origin = "flightrec/host/0123456789abcdef0123456789abcdef";
  c.size = 3;
  c.root = sha256("root");
  c.chain = sha256("chain");
  std::string text = c.body(), why;
  REQUIRE(parse_note(text, &why));
  REQUIRE(parse_checkpoint(text, &why));
  // Controls and DEL are refused in unsigned notes as in signed ones.
  for (char bad : {'\t', '\r', '\0', '\x1b', '\x7f'}) {
    std::string t = text;
    t.insert(t.size() - 1, 1, bad);
    CHECK_FALSE(parse_note(t, &why));
    CHECK_FALSE(parse_note(t + "\n" + sign_checkpoint(c, &key).substr(text.size() + 1), &why));
  }
  CHECK_FALSE(parse_note(text + "\n", &why));  // an empty line, then no signature line
  std::string note = sign_checkpoint(c, &key);
  CHECK_FALSE(parse_note(note + "\n", &why));  // an empty line among the signature lines
  std::string nameless = note;
  nameless.replace(nameless.find("flightrec-test "), 15, "fl+ght ");  // '+' is no key-name byte
  CHECK_FALSE(parse_note(nameless, &why));
  // The chain line: the fourth, once, lowercase.
  std::string root_line = base64_encode(as_bytes(c.root));
  std::string head = c.origin + "\n3\n" + root_line + "\n";
  std::string chain = "chain " + to_hex(*c.chain) + "\n";
  CHECK(parse_checkpoint(head + chain + "ext line\n", &why));
  CHECK_FALSE(parse_checkpoint(head + "ext line\n" + chain, &why));
  CHECK_FALSE(parse_checkpoint(head + chain + chain, &why));
  CHECK_FALSE(parse_checkpoint(head + chain + "chainx\n", &why));
  std::string upper_chain = chain;
  for (char& ch : upper_chain) ch = char(std::toupper(ch));
  CHECK_FALSE(parse_checkpoint(head + "chain " + upper_chain.substr(6), &why));
  // Sizes 1 .. 2^63-1; origins flightrec/HOST/32 hex.
  CHECK_FALSE(parse_checkpoint(c.origin + "\n0\n" + root_line + "\n" + chain, &why));
  CHECK_FALSE(parse_checkpoint(c.origin + "\n9223372036854775808\n" + root_line + "\n" + chain, &why));
  CHECK(parse_checkpoint(c.origin + "\n9223372036854775807\n" + root_line + "\n" + chain, &why));
  for (const char* origin : {"origin", "flightrec//0123456789abcdef0123456789abcdef", "flightrec/h st/0123456789abcdef0123456789abcdef",
                             "flightrec/host/0123456789ABCDEF0123456789abcdef", "flightrec/host/0123456789abcdef"})
    CHECK_FALSE(parse_checkpoint(std::string(origin) + "\n3\n" + root_line + "\n" + chain, &why));
}
