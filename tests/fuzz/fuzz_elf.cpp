// Programs and libraries as flightrec's TLS finders read them (probe/
// elf_symbols.h, go_tls.h, boringssl.h) and BTF as btf_scan reads it: an
// agent can write any file and run it, and flightrec then reads it to find
// where to probe. The bytes are handed over in a memfd, as a file would be.
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "fuzz_input.h"
#include "probe/boringssl.h"
#include "probe/btf_scan.h"
#include "probe/elf_symbols.h"
#include "probe/go_tls.h"

using namespace flightrec::probe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  uint8_t which = in.byte();
  int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
  if (fd < 0) return 0;
  for (std::string_view rest = in.rest; !rest.empty();) {
    ssize_t n = write(fd, rest.data(), rest.size());
    if (n <= 0) break;
    rest.remove_prefix(size_t(n));
  }
  std::string why;
  switch (which % 5) {
    case 0: function_offsets(fd, {"SSL_write", "SSL_read", "SSL_write_ex", "gnutls_record_send", "PR_Write"}); break;
    case 1: go_tls_functions(fd, &why); break;
    case 2: boringssl_functions(fd, &why); break;
    case 3: aead_functions(fd, &why); break;
    default: scan_btf_func_id("bpf_lsm_file_open", "/proc/self/fd/" + std::to_string(fd)); break;
  }
  close(fd);
  return 0;
}
