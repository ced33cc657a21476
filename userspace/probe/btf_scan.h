#pragma once
// One type id from a BTF file without parsing all of it. libbpf's parse of
// the kernel's BTF (5+ MB) copies it twice and indexes every type: ~40 ms
// of fresh-page faults on our VMs, paid once more by the skeleton's load.
// A feature probe that needs one id reads the file through a 64 KiB buffer.
#include <cstdint>
#include <optional>
#include <string>

namespace flightrec::probe {

// The id of the BTF_KIND_FUNC named `name` in the BTF file at `path`
// (default: the running kernel's). nullopt when the file is missing, is
// not native-endian BTF, holds a kind this reader does not know, is cut
// short, or has no such function: callers then fall back to libbpf.
std::optional<int> scan_btf_func_id(const std::string& name,
                                    const std::string& path = "/sys/kernel/btf/vmlinux");

// Bytes that follow a type's 12-byte header, by kind (linux/btf.h);
// nullopt for a kind these readers do not know.
std::optional<uint64_t> btf_trailing_bytes(uint32_t kind, uint32_t vlen);

}  // namespace flightrec::probe
