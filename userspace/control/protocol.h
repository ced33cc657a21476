#pragma once
// flightrecd's control protocol: every message as a struct, with its JSON
// in one place (protocol.cpp). A message is one JSON object on one line.
//
// On the control socket (control/server.h), one request per connection:
//   {"request":"status"}                      -> DaemonStatus
//   {"request":"session", SessionRequest}     -> SessionAnswer + the session's
//                                                ring and drop counters (SCM_RIGHTS);
//                                                the daemon holds the connection
//   {"request":"forward","session":N}          -> ForwardAnswer; the connection then
//                                                carries the run's entries (ship/forward.h)
// On a held run connection, one request at a time, each answered:
//   {"request":"attach_tls","name":NAME} + fd  -> AttachTlsAnswer
//   {"request":"probes_file"} + fd             -> ProbesFileAnswer
//   {"request":"end"}                          -> EndAnswer
// Any request may be answered {"error": WHY} instead: a refusal.
//
// The daemon reads requests from root and its socket group, and the client
// reads answers from a root process: both sides check every field's type
// and bounds here, and a message that is not one of these is refused with
// the field at fault named (ProtocolError).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/error.h"
#include "probe/source.h"

namespace flightrec::control {

struct ProtocolError : Error {
  using Error::Error;
};

// Requests on the control socket.
struct StatusRequest {};
struct SessionRequest {
  std::string cgroup;       // the cgroup's path under the daemon's cgroup root
  uint64_t ring_bytes = 0;  // the session's own ring buffer
  bool tls = false;         // keep TLS plaintext
  bool entry_times = true;  // false: the calls' returns alone
};
struct ForwardRequest {
  uint32_t session = 0;  // the capture's number, from SessionAnswer
};
using Request = std::variant<StatusRequest, SessionRequest, ForwardRequest>;

// Requests on a held run connection.
struct EndRequest {};
struct AttachTlsRequest {
  std::string name;  // the file's path, as the client knows it (for messages)
};
struct ProbesFileRequest {};
using RunRequest = std::variant<EndRequest, AttachTlsRequest, ProbesFileRequest>;

// Answers.
struct SessionAnswer {
  uint32_t session = 0;
  uint64_t ring_bytes = 0;
  uint64_t program_misses = 0;  // the capture's, at the session's start
  probe::CaptureTraits traits;
  uint64_t tls_chunk = 0, tls_cap = 0;  // the capture's (CaptureOptions)
  std::vector<std::string> tls_errors;  // what attaching the system's libraries said
  std::vector<std::string> ship;        // entry types the daemon's outputs send (empty: none)
};
struct ForwardAnswer {
  bool forward = false;
};
struct EndAnswer {
  uint64_t program_misses = 0;
};
struct AttachTlsAnswer {
  std::string result;  // "" or what went wrong
  bool tls_file = false;
  uint64_t live_since_ns = 0;  // when the file's probes went live (CLOCK_MONOTONIC); 0: not probed
};
struct ProbesFileAnswer {
  bool probes = false;
};

// `flightrec status`'s answer: what the daemon records.
struct SessionStatus {
  std::string cgroup, rule, mode, record;  // mode: "full" or "lite"
  bool cgroup_gone = false, suspended = false;
  uint64_t started_real_ns = 0;
  int64_t entries = 0;
  double entries_per_second = 0;
  uint64_t lost = 0, record_bytes = 0;
};
struct RunStatus {
  std::string cgroup;
  int64_t client_pid = 0;
  uint64_t started_real_ns = 0;
  bool ended = false;
};
struct OutputStatus {
  std::string kind, name, last_error;
  uint64_t sent = 0, dropped = 0, queued = 0, spool_bytes = 0;
  bool connected = false;
};
struct DaemonStatus {
  std::string flightrecd_version, config, storage_dir;
  int64_t pid = 0;
  uint64_t started_real_ns = 0, watch_rules = 0, ring_bytes = 0;
  double ring_fill = 0;
  uint64_t lost_total = 0;
  std::vector<uint64_t> lost_per_cpu;
  uint64_t records_after_seal = 0, not_recorded = 0, storage_bytes = 0;
  bool storage_full = false;
  std::vector<SessionStatus> sessions;
  std::vector<RunStatus> runs;
  std::vector<OutputStatus> outputs;
};

// Bounds a reader holds every message to.
constexpr size_t kMaxText = 4096;       // a path, a name: in a request
constexpr size_t kMaxAnswerText = 1u << 20;  // a message in an answer (a path and a reason, a remote's error)
constexpr size_t kMaxList = 65536;      // items in a list
constexpr uint32_t kMaxSessionNumber = UINT32_MAX;

nlohmann::json to_json(const Request& r);
nlohmann::json to_json(const RunRequest& r);
nlohmann::json to_json(const SessionAnswer& a);
nlohmann::json to_json(const ForwardAnswer& a);
nlohmann::json to_json(const EndAnswer& a);
nlohmann::json to_json(const AttachTlsAnswer& a);
nlohmann::json to_json(const ProbesFileAnswer& a);
nlohmann::json to_json(const DaemonStatus& s);
nlohmann::json refusal(const std::string& why);

// Each throws ProtocolError, naming the field at fault.
Request parse_request(const nlohmann::json& j);
RunRequest parse_run_request(const nlohmann::json& j);
SessionAnswer parse_session_answer(const nlohmann::json& j);
ForwardAnswer parse_forward_answer(const nlohmann::json& j);
EndAnswer parse_end_answer(const nlohmann::json& j);
AttachTlsAnswer parse_attach_tls_answer(const nlohmann::json& j);
ProbesFileAnswer parse_probes_file_answer(const nlohmann::json& j);
DaemonStatus parse_status(const nlohmann::json& j);

// One line of the wire: the JSON with invalid UTF-8 replaced (paths are
// bytes; a message is never refused for them), then "\n".
std::string line_of(const nlohmann::json& j);

}  // namespace flightrec::control
