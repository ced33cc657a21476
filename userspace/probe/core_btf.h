#pragma once
// The kernel's BTF cut down to what the BPF object's CO-RE relocations can
// match. libbpf looks for each relocated type by name through every type
// of the BTF it relocates against: ~127k types in a 6.18 kernel, ~1.4 ms
// per relocated type on our VMs, ~40 ms of every session's start. Handed
// this cut instead (btf_custom_path), it finds the same candidates among a
// few hundred types. libbpf still reads the whole kernel BTF for attach
// targets; only relocations see the cut.
//
// What the cut keeps, so that every relocation resolves as it would against
// the whole BTF:
// - every kernel type whose name (without a "___flavour" suffix) is the
//   name of a relocation's root type: libbpf's candidates;
// - everything those types hold by value (members, array elements, the
//   types behind typedefs and modifiers), byte for byte: a relocation's
//   access path only runs through these, and libbpf compares the field it
//   ends on by kind and, for enums, by name;
// - behind a pointer, a struct or union that is no root type becomes an
//   empty one of the same kind, name and size: libbpf takes any two
//   pointers as compatible and never looks behind them for a field, and
//   for a type relocation compares structs and unions by kind alone.
// An object with a relocation whose result is a kernel type id
// (bpf_core_type_id_kernel) is refused: that id would be the cut's. So is
// a kernel whose modules may hold a type the relocations want and the
// kernel's own BTF lacks (libbpf looks in the modules only then).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace flightrec::probe {

// Raw BTF (as in /sys/kernel/btf/vmlinux) holding the types of `kernel`
// that the CO-RE relocations of `object` (a BPF ELF object with .BTF and
// .BTF.ext) can resolve against. Empty, with `why` set, when either input
// is malformed or the object cannot be relocated against a cut; callers
// then let libbpf use the whole BTF. `missing` (if given) gets the root
// names `kernel` has no type of the wanted kind for: libbpf, given the
// whole BTF, would look for those in the modules' BTF, which a cut hides.
std::vector<uint8_t> cut_kernel_btf(const uint8_t* object, size_t object_size, const uint8_t* kernel,
                                    size_t kernel_size, std::string* why,
                                    std::vector<std::string>* missing = nullptr);

// The cut of the running kernel's BTF for `object`, in a memfd that libbpf
// opens by its /proc/self/fd path; -1 with `why` set when it was not made.
int kernel_btf_cut_fd(const uint8_t* object, size_t object_size, std::string* why);

}  // namespace flightrec::probe
