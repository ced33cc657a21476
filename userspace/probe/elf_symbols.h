#pragma once
// File offsets of exported functions in an ELF file, for uprobes: one pass
// over .dynsym instead of one per probe (libbpf 1.1 re-reads the file for
// each name, seconds for a 100 MB binary like node).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace flightrec::probe {

// name -> file offset of the defined functions among `names` (a versioned
// "SSL_write@@OPENSSL_3.0.0" counts as "SSL_write"). Empty on any error.
// fd: a regular file opened for reading (its offset is not used).
std::map<std::string, uint64_t> function_offsets(int fd, const std::vector<std::string>& names);

}  // namespace flightrec::probe
