#pragma once
// uprobe_multi links (Linux 6.6+): one link puts a program on many offsets
// of a file, and removing it waits for the kernel once for all of them
// instead of once per probe (~0.1 s each, which made back-to-back sessions
// with TLS capture wait on each other for up to 2 s). libbpf 1.1 predates
// the API, so the link is made with the bpf() syscall itself.
#include <cstdint>
#include <string>
#include <vector>

namespace flightrec::probe {

// BPF_TRACE_UPROBE_MULTI (include/uapi/linux/bpf.h): the expected attach
// type a program must be loaded with to be attached this way. Whether the
// kernel has it: probe::uprobe_multi_available() (probe/features.h).
constexpr int kTraceUprobeMulti = 48;

// Attaches prog_fd (loaded with kTraceUprobeMulti) at `offsets` of the file
// `path` names (resolved by the kernel, following symlinks; /proc/self/fd/N
// works), one cookie per offset; `ret`: return probes. Returns the link's
// fd, or -errno.
int attach_uprobe_multi(int prog_fd, const std::string& path, const std::vector<uint64_t>& offsets,
                        const std::vector<uint64_t>& cookies, bool ret);

}  // namespace flightrec::probe
