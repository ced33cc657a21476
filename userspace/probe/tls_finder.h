#pragma once
// Which TLS stack a file holds, and where the plaintext probes go in it:
// a library that exports its functions (OpenSSL, GnuTLS, NSS and programs
// that export one, like node), a Go program (its function table), or
// BoringSSL linked in and stripped (its error sites). Reading only: the
// capture attaches what this finds, `flightrec probe --tls` prints it.
#include <cstdint>
#include <string>
#include <vector>

namespace flightrec::probe {

// A TLS library the plaintext probes know by its exported functions: the
// functions a file must all export to be probed as it, each with its enum
// fr_tls_func, and the handshake functions, probed where exported (a
// ClientHello sent outside every probed call is a tls_uncaptured entry).
struct TlsStack {
  std::string name;
  struct Function {
    std::string name;
    uint32_t func;
    bool optional = false;
  };
  std::vector<Function> functions;
};
const std::vector<TlsStack>& tls_stacks();

// Probes of one file: where (file offset), the cookie (enum fr_tls_func,
// with FR_TLS_COOKIE_GO for Go), and the function's name for messages.
struct Uprobes {
  std::vector<uint64_t> offsets, cookies;
  std::vector<std::string> names;
  void add(uint64_t offset, uint64_t cookie, const std::string& name) {
    offsets.push_back(offset);
    cookies.push_back(cookie);
    names.push_back(name);
  }
};

struct TlsFinding {
  bool tls = false;       // the file holds a TLS stack (probed or not)
  std::string stack;      // "OpenSSL", "Go crypto/tls", "BoringSSL, linked in"...
  std::string found_by;   // "exported functions", "Go's function table", "its error sites"
  Uprobes entries, rets;  // empty where it cannot be probed
  bool uretprobes = true; // rets are uretprobes on the entries (false: uprobes at Go's RETs)
  std::string why;        // why not probed: no TLS stack known, or one that cannot be told apart
};

// fd: a regular file opened for reading (its offset is not used).
TlsFinding find_tls(int fd);

// find_tls, kept on disk for the next session (as root, for files of 16
// MiB and more, where reading costs: 0.1-0.3 s for an agent's binary), in
// kTlsFindCache, by the file's identity (inode, size, mtime, and ctime,
// which every write or chmod moves and no user can set; not the device, as
// a sandbox's overlay shows a host file on a device of its own) and this
// flightrec binary's; an entry is used only where the file has the bytes it
// names at its offsets. *cached: whether it came from there.
inline const char* const kTlsFindCache = "/var/cache/flightrec/tls";
TlsFinding find_tls_cached(int fd, bool* cached = nullptr);
// Whether find_tls_cached(fd) answers at once: a file under 16 MiB, or one
// whose finding is in the cache (a large program read the first time takes
// ~0.2-0.3 s: Codex's 300 MB).
bool tls_found_quickly(int fd);

}  // namespace flightrec::probe
