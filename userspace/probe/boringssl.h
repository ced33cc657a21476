#pragma once
// BoringSSL linked into a program and stripped (Bun, and so Claude Code):
// SSL_write, SSL_read and SSL_do_handshake found without symbols, by what
// the library's own error reporting leaves in the code. Every
// OPENSSL_PUT_ERROR(SSL, reason) is a call ERR_put_error(ERR_LIB_SSL, 0,
// reason, "…/ssl/ssl_lib.cc", line): the file name is a string in the
// program, its address is loaded into the fourth argument's register, and
// the reason beside it is a constant of the public API (ssl.h), stable
// across versions. Each function is known by the reasons it reports:
//   SSL_write:        UNINITIALIZED and BAD_LENGTH (only SSL_write reports
//                     a negative length), with SHOULD_NOT_HAVE_BEEN_CALLED
//   SSL_read:         SHOULD_NOT_HAVE_BEEN_CALLED only (SSL_peek inlined),
//                     calling the function that reports UNINITIALIZED and
//                     SSL_HANDSHAKE_FAILURE (ssl_read_impl), or holding it
//   SSL_do_handshake: CONNECTION_TYPE_NOT_SET only
// A function is its bytes between two 16-byte-aligned INT3 paddings
// (clang and lld's layout), read whole by a disassembler that must land on
// every error site: a wrong boundary is refused, never probed. x86-64 only.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flightrec::probe {

struct StaticTlsFunction {
  std::string name;    // "SSL_write"
  uint32_t func = 0;   // enum fr_tls_func
  uint64_t entry = 0;  // file offset
};

// nullopt: `fd` holds no BoringSSL (no ssl_lib.cc error sites). A program
// that holds one whose functions cannot all be told apart gives an empty
// list and says why in *why (what was found, what was missing).
// fd: a regular file opened for reading.
std::optional<std::vector<StaticTlsFunction>> boringssl_functions(int fd, std::string* why);

// The AEAD of aws-lc or BoringSSL linked in and stripped (rustls on
// aws-lc-rs, as in Codex): a TLS library whose own functions are not
// found seals and opens each record through these, found by the reasons
// of cipher/aead.c's OPENSSL_PUT_ERROR(CIPHER, ...) sites:
//   EVP_AEAD_CTX_seal:         TOO_LARGE, BUFFER_TOO_SMALL, OUTPUT_ALIASES_INPUT
//   EVP_AEAD_CTX_seal_scatter: OUTPUT_ALIASES_INPUT, INVALID_OPERATION
//   EVP_AEAD_CTX_open:         OUTPUT_ALIASES_INPUT, BAD_DECRYPT, BUFFER_TOO_SMALL
//                              (and CTRL_NOT_IMPLEMENTED, open_gather inlined)
//   EVP_AEAD_CTX_open_gather:  OUTPUT_ALIASES_INPUT, CTRL_NOT_IMPLEMENTED
// Each found once is probed; a seal and an open are both needed, else the
// list is empty and *why says what was found. nullopt: no such sites.
std::optional<std::vector<StaticTlsFunction>> aead_functions(int fd, std::string* why);

}  // namespace flightrec::probe
