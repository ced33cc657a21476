#pragma once
// The plan compiler: what a user asked of a session (capture settings, a
// policy and its command-line overrides) checked and turned, in one place
// and before anything is created, into what the kernel is given (ring size,
// TLS capture, the path tries, the egress allowlist, whether BPF-LSM must
// load) and what the session's genesis entry says. `run`, `watch` and a
// resident service call it; what depends on a sandbox that exists only
// later (its work directory, its Landlock plan) the Confinement adds.
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "policy/policy.h"
#include "probe/capture.h"
#include "recorder/recorder.h"

namespace flightrec::session {

// Input the user gave in a form the plan refuses: the CLI's usage errors.
struct PlanError : Error {
  using Error::Error;
};

// What every session is asked, as given (the CLI's shared options).
struct Settings {
  size_t ring_bytes = 8u << 20;          // run's default; mapped twice, so ~16 MB of the recorder's RSS
  bool entry_times = true;               // attach sys_enter too (probe::CaptureOptions::entry_times)
  std::string on_loss = "backpressure";  // backpressure (or its old name freeze) | continue | kill
  uint64_t checkpoint_entries = 1000;
  uint64_t checkpoint_ms = 1000;
  std::vector<std::string> deny_paths;   // BPF-LSM only
  std::vector<std::string> allow_exec;   // BPF-LSM only; sessions without a sandbox
  bool tls = true;
  bool tls_redact = true;
  bool redact = true;                    // credentials in argv (recorder::SessionMeta::redact)
  bool agent_turns = true;               // llm_call and tool_call entries (session/llm_calls.h)
  size_t tls_chunk = 16384;
  size_t tls_cap = 262144;
  std::vector<std::string> tls_redact_headers;  // beyond the default list
  bool verbose = false;
};

// The policy a `run` asked for and what its command line changes in it.
struct PolicyChoice {
  std::string name = "agent";            // shipped name or YAML file
  std::vector<std::string> allow;        // --allow HOST:PORT
  std::vector<std::string> limits;       // --limit KEY=VALUE
  bool shadow = false;
  std::vector<std::string> env;          // --env NAME or NAME=VALUE
};

struct Plan {
  probe::CaptureOptions capture;    // everything but the session's cgroup fds
  recorder::SessionMeta meta;       // everything known before the session starts
  std::string on_loss;              // backpressure | continue | kill
  std::optional<policy::Policy> policy;  // run only
  bool sandboxed = false;           // the policy builds a sandbox (confines, enforces)
};

// Checks the settings (PlanError names the option at fault; Error when
// this kernel cannot enforce what was asked) and derives the plan of a
// session without a policy (watch).
Plan compile(Settings settings);
// The same for `run`: loads the policy and applies its overrides.
Plan compile(Settings settings, const PolicyChoice& choice);

}  // namespace flightrec::session
