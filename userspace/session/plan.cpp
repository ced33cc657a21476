#include "session/plan.h"

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "common/text.h"
#include "probe/features.h"
#include "session/confinement.h"
#include "session/loss_policy.h"
#include "session/path_rules.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::session {
namespace {

constexpr size_t kMaxPathRules = 64;

// Matched byte for byte against the kernel's path, which has no "//", "."
// or "..": a rule must be written that way. Trailing slashes go.
void check_path_rules(std::vector<std::string>& paths, const char* option) {
  if (paths.size() > kMaxPathRules)
    throw PlanError("at most " + std::to_string(kMaxPathRules) + " " + option + " rules");
  for (auto& p : paths) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    bool plain = p.find("//") == std::string::npos && p.find("/./") == std::string::npos &&
                 p.find("/../") == std::string::npos && !p.ends_with("/.") && !p.ends_with("/..");
    if (p.empty() || p[0] != '/' || !plain || p.size() >= FR_PATH_RULE_MAX || !is_valid_utf8(p))
      throw PlanError(std::string(option) + " takes an absolute UTF-8 path without '.', '..' or '//', " +
                      "shorter than " + std::to_string(FR_PATH_RULE_MAX) + " bytes: '" + p + "'");
  }
}

// An HTTP field name (RFC 9110 token), in lower case as it is compared.
std::string header_name(std::string name) {
  static const std::string token = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz";
  for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (name.empty() || name.size() > 64 || name.find_first_not_of(token) != std::string::npos)
    throw PlanError("--tls-redact-header takes a header name like X-Api-Key, not '" + name + "'");
  return name;
}

// The policy's egress allowlist as the cgroup programs read it.
std::vector<fr_egress_rule> egress_rules(const policy::Policy& policy) {
  std::vector<fr_egress_rule> out;
  for (const auto& ep : policy.allow) {
    fr_egress_rule r{};
    std::memcpy(r.addr, ep.addr, sizeof(r.addr));
    r.family = uint32_t(ep.family);
    r.prefix = ep.prefix;
    r.port = ep.port;
    out.push_back(r);
  }
  return out;
}

}  // namespace

Plan compile(Settings s) {
  if (!probe::valid_ring_size(s.ring_bytes)) throw PlanError("--ring-size must be a power of two from 64K to 1G");
  if (s.on_loss != "backpressure" && s.on_loss != "freeze" && s.on_loss != "continue" && s.on_loss != "kill")
    throw PlanError("--on-loss must be backpressure, continue or kill");
  if (s.checkpoint_entries == 0) throw PlanError("--checkpoint-entries must be at least 1");
  check_path_rules(s.deny_paths, "--deny-path");
  check_path_rules(s.allow_exec, "--allow-exec");
  if (s.tls_chunk < 1 || s.tls_chunk > FR_TLS_CHUNK_MAX) throw PlanError("--tls-chunk must be from 1 to 16K");
  if (s.tls_cap < s.tls_chunk || s.tls_cap / s.tls_chunk > FR_TLS_CHUNKS_MAX)
    throw PlanError("--tls-cap must be from --tls-chunk to 16 times it");
  // Last, as it asks the kernel: without BPF-LSM nothing would enforce them.
  bool path_rules = !s.deny_paths.empty() || !s.allow_exec.empty();
  if (path_rules && !probe::bpf_lsm_available())
    throw Error("this kernel refuses BPF-LSM programs, so --deny-path and --allow-exec cannot be enforced; "
                "flightrec will not run unconfined (boot with lsm=...,bpf)");

  Plan plan;
  plan.on_loss = s.on_loss;
  probe::CaptureOptions& c = plan.capture;
  c.ring_bytes = s.ring_bytes;
  c.entry_times = s.entry_times;
  // The kernel wakes the watchdog there, so the pause comes before the ring fills.
  if (s.on_loss == "backpressure" || s.on_loss == "freeze") c.highwater_bytes = size_t(double(s.ring_bytes) * kFreezeAbove);
  c.verbose = s.verbose;
  c.tls = s.tls;
  c.tls_chunk = s.tls_chunk;
  c.tls_cap = s.tls_cap;
  add_path_rules(c.hidden, s.deny_paths, "/");
  add_path_rules(c.exec, s.allow_exec, "/");
  c.require_lsm = path_rules;  // nothing else enforces them

  recorder::SessionMeta& m = plan.meta;
  m.ring_bytes = s.ring_bytes;
  m.on_loss = s.on_loss;
  m.checkpoint_entries = s.checkpoint_entries;
  m.checkpoint_ms = s.checkpoint_ms;
  m.tls = s.tls;
  m.tls_redact = s.tls_redact;
  m.redact = s.redact;
  m.agent_turns = s.tls && s.agent_turns;
  for (const auto& given : s.tls_redact_headers) {
    auto name = header_name(given);
    if (std::find(m.tls_redact_headers.begin(), m.tls_redact_headers.end(), name) == m.tls_redact_headers.end())
      m.tls_redact_headers.push_back(name);
  }
  m.tls_chunk = s.tls_chunk;
  m.tls_cap = s.tls_cap;
  return plan;
}

Plan compile(Settings settings, const PolicyChoice& choice) {
  policy::Policy policy;
  try {
    policy = policy::load(choice.name);
    for (const auto& a : choice.allow) policy::add_allowed(policy, a);
    for (const auto& l : choice.limits) policy::override_limit(policy, l);
    for (const auto& e : choice.env) policy::override_env(policy, e);
  } catch (const policy::PolicyError& e) {
    throw PlanError(e.what());
  }
  if (choice.shadow) policy.mode = policy::Mode::Shadow;
  bool sandboxed = sandboxes(policy);
  if (sandboxed && !settings.allow_exec.empty())
    throw PlanError("--allow-exec is for sessions without a sandbox: policy " + policy.name +
                    " says what its sandbox may execute (filesystem.exec)");
  // Without the entry trace a call the filter stopped looks like one that
  // failed, and an agent that stacks a filter of its own chooses what such
  // a call returns: no inference could tell them apart.
  if (sandboxed && policy.seccomp.enabled && !settings.entry_times)
    throw PlanError("--entry-times off cannot record a sandbox with a seccomp filter (policy " + policy.name +
                    "): without the entry trace, a call the filter stopped cannot be told from one that failed");
  Plan plan = compile(std::move(settings));
  plan.sandboxed = sandboxed;
  if (sandboxed && policy.network == policy::Network::Allowlist) plan.capture.egress = egress_rules(policy);
  plan.meta.redact_prefixes = policy.redact;
  plan.policy = std::move(policy);
  return plan;
}

}  // namespace flightrec::session
