#include "probe/tls_finder.h"

#include <algorithm>
#include <map>

#include "flightrec/abi/events.h"
#include "probe/boringssl.h"
#include "probe/elf_symbols.h"
#include "probe/go_tls.h"

namespace flightrec::probe {

const std::vector<TlsStack>& tls_stacks() {
  // Each function's cookie is its enum fr_tls_func: the BPF side reads the
  // arguments and the return by it.
  static const std::vector<TlsStack> stacks = {
      {"OpenSSL",
       {{"SSL_read", FR_TLS_SSL_READ},
        {"SSL_write", FR_TLS_SSL_WRITE},
        {"SSL_read_ex", FR_TLS_SSL_READ_EX},
        {"SSL_write_ex", FR_TLS_SSL_WRITE_EX},
        {"SSL_connect", FR_TLS_HANDSHAKE, true},
        {"SSL_do_handshake", FR_TLS_HANDSHAKE, true}}},
      {"GnuTLS",
       {{"gnutls_record_recv", FR_TLS_GNUTLS_RECV},
        {"gnutls_record_recv_seq", FR_TLS_GNUTLS_RECV},
        {"gnutls_record_send", FR_TLS_GNUTLS_SEND},
        {"gnutls_record_send2", FR_TLS_GNUTLS_SEND},
        {"gnutls_handshake", FR_TLS_HANDSHAKE, true}}},
      // NSS: the plaintext calls are NSPR's, dispatched to the SSL layer
      // pushed on the socket (bpf/tls.bpf.c keeps only layered fds); the
      // handshake is NSS's own, in libssl3.
      {"NSPR",
       {{"PR_Read", FR_TLS_NSPR_READ},
        {"PR_Recv", FR_TLS_NSPR_READ},
        {"PR_Write", FR_TLS_NSPR_WRITE},
        {"PR_Send", FR_TLS_NSPR_WRITE}}},
      {"NSS",
       {{"SSL_ForceHandshake", FR_TLS_HANDSHAKE},
        {"SSL_ForceHandshakeWithTimeout", FR_TLS_HANDSHAKE, true}}},
  };
  return stacks;
}

TlsFinding find_tls(int fd) {
  TlsFinding out;
  // The first stack whose functions the file exports, all of them (one
  // pass over the file for every stack: most files are no TLS library).
  std::vector<std::string> names;
  for (const TlsStack& s : tls_stacks())
    for (const auto& f : s.functions) names.push_back(f.name);
  auto found = function_offsets(fd, names);
  for (const TlsStack& s : tls_stacks())
    if (std::all_of(s.functions.begin(), s.functions.end(),
                    [&](const auto& f) { return f.optional || found.count(f.name); })) {
      out.tls = true;
      out.stack = s.name;
      out.found_by = "exported functions";
      for (const auto& f : s.functions)
        if (found.count(f.name)) out.entries.add(found[f.name], f.func, f.name);
      out.rets = out.entries;  // uretprobes on the same functions
      return out;
    }
  // A Go program: its function table, which stripping keeps.
  std::string why;
  if (auto go = go_tls_functions(fd, &why)) {
    // Most Go programs make no TLS calls (built without crypto/tls, or
    // refused): said, but not as a TLS file that failed.
    out.tls = !go->empty();
    out.stack = "Go crypto/tls";
    out.found_by = "Go's function table";
    out.uretprobes = false;
    out.why = "a Go program: " + why;
    for (const auto& f : *go) {
      out.entries.add(f.entry, f.func | FR_TLS_COOKIE_GO, f.name);
      for (uint64_t at : f.rets) out.rets.add(at, f.func | FR_TLS_COOKIE_GO, f.name + " (a RET)");
    }
    return out;
  }
  // BoringSSL linked in and stripped (Bun): its error sites.
  if (auto boring = boringssl_functions(fd, &why)) {
    out.tls = true;
    out.stack = "BoringSSL, linked in";
    out.found_by = "its error sites (ssl_lib.cc)";
    out.why = why;
    for (const auto& f : *boring) out.entries.add(f.entry, f.func, f.name);
    out.rets = out.entries;
    return out;
  }
  // Below a TLS library that is not found (rustls, in Rust programs like
  // Codex): the AEAD that seals and opens its records.
  if (auto aead = aead_functions(fd, &why)) {
    out.tls = true;
    out.stack = "TLS records through a linked-in AEAD (aws-lc or BoringSSL; rustls)";
    out.found_by = "its error sites (cipher/aead.c)";
    out.why = why;
    for (const auto& f : *aead) {
      out.entries.add(f.entry, f.func, f.name);
      if (f.func == FR_TLS_AEAD_OPEN || f.func == FR_TLS_AEAD_OPEN_GATHER) out.rets.add(f.entry, f.func, f.name);
    }
    return out;
  }
  out.why = "exports no TLS library's functions";
  return out;
}

}  // namespace flightrec::probe
