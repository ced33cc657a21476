#pragma once
// The daemon's config file (/etc/flightrec/flightrecd.yaml): where records
// go, how they rotate and are retained, and which cgroups to watch, each
// rule with its mode, policy and key. Checked as strictly as a policy: an
// unknown or repeated key, a wrong type or a bad value is an error naming
// the file, line and key. Nothing here touches the system but the file read.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "ship/jetstream.h"
#include "ship/otlp.h"
#include "ship/syslog.h"
#include "ship/websocket.h"

namespace flightrec::daemon {

struct ConfigError : Error {
  using Error::Error;
};

struct WatchRule {
  std::string name;         // [a-z0-9_-]{1,64}, unique in the file
  std::string cgroup_glob;  // relative to the cgroup v2 root (cgroup_glob_match)
  enum class Mode { Full, Lite } mode = Mode::Full;
  std::string policy;       // a policy name or absolute path, as written; empty: none
  bool tls = false;
  std::string key_dir;      // the rule's key, else the file's `key` (may be empty)
  std::string on_loss;      // the rule's on_loss, else the file's
  int line = 0;             // of the rule in the file, for messages
};

struct Config {
  std::string source;       // the file it came from
  std::string storage_dir;
  uint64_t rotate_bytes = 0, rotate_age_ms = 0;                   // 0: never
  uint64_t retain_bytes = 0, retain_age_ms = 0, retain_count = 0; // 0: no bound
  // Below this much free space in storage_dir the disk counts as full and
  // disk_full acts: rotate (remove the oldest sealed records; suspend if
  // that is not enough), suspend (every session says so in its record and
  // leaves events out, counted, until there is room), stop (seal them all
  // and record nothing until there is room).
  uint64_t min_free_bytes = 64ull << 20;
  enum class DiskFull { Rotate, Suspend, Stop } disk_full = DiskFull::Suspend;
  std::string socket_path = "/run/flightrec/flightrecd.sock", socket_group;
  std::string metrics_listen;  // "HOST:PORT" as written; empty: no metrics
  uint64_t ring_bytes = 64 << 20;
  std::string on_loss = "continue";  // continue | kill | backpressure
  uint64_t lite_counts_ms = 60000;    // lite sessions' syscall counts are sealed this often
  std::string key_dir;
  // `flightrec run` hands its command to this daemon (root peers only),
  // and the TLS probes are loaded and attached for such runs (the
  // system's libraries, for as long as the daemon runs).
  // entry_times: runs' calls are seen at their entry too (as `run` has it
  // by default): sys_enter is attached while a run is recorded (watch
  // rules' calls are read at their return alone either way); false: only
  // runs with --entry-times off are handed over.
  bool runs_accept = true, runs_tls = true, runs_entry_times = true;
  std::vector<WatchRule> watch;
  // outputs.syslog: where every session's chosen entries are also sent
  // (docs/SHIPPING.md); each output's `line` is not kept, its name is unique.
  std::vector<ship::SyslogSettings> syslog_outputs;
  // outputs.jetstream: every entry and checkpoint, spooled on disk (its
  // spool_dir: as written, or storage.dir/spool/NAME).
  std::vector<ship::JetStreamSettings> jetstream_outputs;
  // outputs.websocket: the live stream (its token is read from token_file when the daemon starts it).
  std::vector<ship::WebSocketSettings> websocket_outputs;
  // outputs.otlp: the agents' turns as OpenTelemetry spans, to an OTLP/HTTP endpoint (docs/OTLP.md).
  std::vector<ship::OtlpSettings> otlp_outputs;

  // The first rule whose glob matches the cgroup (relative to the cgroup
  // v2 root, as cgroup_glob_match takes it), or nullptr.
  const WatchRule* match(const std::string& relpath) const;
};

// Throws ConfigError "SOURCE:LINE: KEY: problem".
Config parse_config(const std::string& text, const std::string& source);
// Reads a regular file of at most 1 MiB; throws ConfigError.
Config load_config(const std::string& path);

// Settings this flightrecd parses but does not act on yet, refused rather
// than ignored (a setting that says the daemon enforces must be one it
// acts on): why, naming the first ("" when none).
std::string unsupported_setting(const Config& config);

// parse_duration_ms's forms (500ms, 30s, 10m, 1h) and days ("30d").
std::optional<uint64_t> parse_age_ms(const std::string& s, bool* too_large = nullptr);

// Cgroup globs, matched component by component on '/'-separated paths
// relative to the cgroup v2 root ("kubepods.slice/kubepods-pod..."; one
// leading '/' is ignored, as /proc/PID/cgroup writes them). Within a
// component `*`, `?` and `[...]` match as fnmatch(3) does, backslash being
// an ordinary character (systemd's escaped names have them); a component
// that is exactly `**` matches zero or more whole components. A path with
// an empty component ("a//b", "a/") matches nothing.
bool cgroup_glob_match(std::string_view glob, std::string_view relpath);
// Whether some cgroup strictly below relpath could match: relpath's
// components match a proper prefix of the glob, or reach a `**`. Discovery
// descends into (and watches) only such directories.
bool cgroup_glob_may_match_below(std::string_view glob, std::string_view relpath);

}  // namespace flightrec::daemon
