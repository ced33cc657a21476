#pragma once
// Turns one ring-buffer record (bytes from the kernel, checked as if
// hostile) into an Entry. A record that does not parse becomes a
// "malformed" entry: nothing is dropped silently.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "events/entry.h"

namespace flightrec::events {

class TlsStreams;

// Whether the session's seccomp filter stops this call with this return
// value (it decides on the number and the registers alone).
using SeccompStops = std::function<bool(uint32_t nr, const std::vector<int64_t>& args, int64_t ret)>;

struct DecodeContext {
  int64_t real_minus_mono_ns = 0;  // added to CLOCK_MONOTONIC for wall-clock time
  TlsStreams* tls = nullptr;       // connection state for TLS records
  // Calls read at sys_exit alone carry no kernel mark for a seccomp stop:
  // a failed one this says the filter stopped is "blocked" all the same.
  SeccompStops seccomp_stops;
};

Entry decode_record(const void* data, size_t size, const DecodeContext& ctx);

// "ENOENT" for 2; empty for numbers with no name.
std::string errno_name(int64_t err);

}  // namespace flightrec::events
