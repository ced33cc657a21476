#pragma once
// Entries for people: one line each, decoded (like `ausearch -i` or
// Falco's output), never raw JSON. Every byte a recorded process chose
// (paths, comms, argv, TLS metadata) is escaped, so it cannot rewrite or
// hide other lines of a terminal.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace flightrec::inspect {

// "2026-12-01 23:06:12.345" in local time (TZ), from nanoseconds since the epoch.
std::string format_wall_time(int64_t ns);

// What the entry says, without the members every entry has.
std::string describe(const nlohmann::json& entry);

// TIME SESSION:SEQ PID COMM TYPE WHAT — the whole line escaped.
std::string entry_line(int64_t session, int64_t seq, const nlohmann::json& entry);

}  // namespace flightrec::inspect
