#pragma once
// Turns one ring-buffer record (bytes from the kernel, checked as if
// hostile) into an Entry. A record that does not parse becomes a
// "malformed" entry: nothing is dropped silently.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "events/entry.h"

namespace flightrec::events {

class SecretScrubber;
class HostNames;

class TlsStreams;

struct DecodeContext {
  int64_t real_minus_mono_ns = 0;  // added to CLOCK_MONOTONIC for wall-clock time
  TlsStreams* tls = nullptr;       // connection state for TLS records
  const SecretScrubber* secrets = nullptr;  // credentials redacted from argv; null: kept
  // Names of addresses, for connects ("host"): the session resolver's, or
  // those the session's DNS answers told (dns_answer entries note them); null: none.
  HostNames* names = nullptr;
};

Entry decode_record(const void* data, size_t size, const DecodeContext& ctx);
// The same into `out`, emptied first: an entry kept across records keeps
// its field array (a ~1.8 KB allocation and free per record otherwise).
void decode_record(const void* data, size_t size, const DecodeContext& ctx, Entry& out);

// A command line (the NUL-separated block an exec's argv is) as exec
// entries carry it: credentials redacted (ctx.secrets; "redacted" names
// their kinds), then "argv", or "argv_b64" when a byte is not UTF-8.
void set_argv(Entry& e, std::string_view block, const DecodeContext& ctx);

// "ENOENT" for 2; empty for numbers with no name.
std::string errno_name(int64_t err);

}  // namespace flightrec::events
