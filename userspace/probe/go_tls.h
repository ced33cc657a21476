#pragma once
// Go programs' crypto/tls plaintext functions, for uprobes. Found through
// the program's own function table (.gopclntab, which Go keeps even in
// stripped binaries), with the file offsets of each function's RET
// instructions: Go moves goroutine stacks, so returns are probed there
// rather than by uretprobes (bpf/tls.bpf.c).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flightrec::probe {

struct GoTlsFunction {
  std::string name;           // "crypto/tls.(*Conn).Write"
  uint32_t func = 0;          // enum fr_tls_func
  uint64_t entry = 0;         // file offset
  std::vector<uint64_t> rets;  // file offsets of its RET instructions (none for a handshake)
};

// RETs probed per function at most: a function with more is refused (and
// with it the program), whatever its table says.
constexpr size_t kGoRetsMax = 64;

// nullopt: `fd` is no Go program for x86-64. A Go program whose TLS cannot
// be probed gives an empty list and says why in *why (built before Go 1.18,
// or without crypto/tls). fd: a regular file opened for reading.
std::optional<std::vector<GoTlsFunction>> go_tls_functions(int fd, std::string* why);

}  // namespace flightrec::probe
