#pragma once
// Policy replay (seed 003): what another policy would have denied in a
// recorded session, entry by entry, next to what the recorded policy did.
// The new policy judges every kernel entry as shadow mode would; the
// recorded policy's decisions are the session's own violation entries.
// It judges what the session did: what the agent would have done after a
// different answer cannot be known from the record.
#include <cstdint>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policy/judge.h"
#include "policy/policy.h"

namespace flightrec::inspect {

// The policy a session ran under, from its genesis entry: the policy's
// bytes, its `extends:` chain as recorded (policy_bases; older records:
// this flightrec's shipped policies) and the overrides its command line
// gave (recorded_overrides). Throws policy::PolicyError.
policy::Policy recorded_policy(const nlohmann::json& genesis);
// Whether the kernel enforced exactly `p` in that session: enforce mode,
// the same bytes, the same overrides, the same extends chain byte for byte.
bool enforced_under(const nlohmann::json& genesis, const policy::Policy& p);
// The genesis entry's "override: ..." lines of `sandbox`, without the prefix.
std::vector<std::string> recorded_overrides(const nlohmann::json& genesis);

// A recorded entry as the judge reads it (the decoder's Entry), rebuilt
// from its JSON; `entry` must outlive the result (keys are views into it).
events::Entry entry_from_json(const nlohmann::json& entry);

class Replay {
 public:
  // `policy` is judged in shadow mode (its rules predict each decision),
  // unless `enforced_here`: the session was enforced under this very policy
  // (the same bytes and overrides), so the kernel's answers in the record
  // are its decisions, as the live judge read them (a Landlock EACCES on a
  // path reached through a symlink, which the rules alone cannot see).
  // `work_dir` is the session's.
  Replay(policy::Policy policy, const std::string& work_dir, bool enforced_here = false);
  void add(const nlohmann::json& entry);  // every entry of the session, in order

  nlohmann::json to_json(size_t limit) const;  // at most `limit` entries listed per list
  std::string to_text(size_t limit) const;

 private:
  struct Decision {
    std::string rule, level, action, detail;
  };
  // Rows kept per list; past it only counted (a hostile session cannot fill memory).
  static constexpr size_t kMaxRows = 200000;

  policy::Policy policy_;
  policy::Judge judge_;
  int64_t session_ = 0, entries_ = 0, not_replayed_ = 0, dropped_rows_ = 0;
  std::string recorded_name_, recorded_sha256_;
  bool enforced_here_ = false;
  bool in_setup_ = false;            // a sandbox's set-up, before the command's exec
  std::set<int64_t> setup_pids_;     // flightrec's processes in it
  int64_t setup_entries_ = 0;
  std::map<int64_t, Decision> by_new_, by_recorded_;  // seq of the judged entry ->
  std::map<int64_t, std::string> lines_;              // seq -> its entry, one line
};

}  // namespace flightrec::inspect
