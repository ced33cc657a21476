// flightrec replay: what another policy would have denied in a recorded
// session (the shadow -> replay -> enforce workflow, policies/README.md).
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/progress.h"
#include "inspect/replay.h"
#include "ledger/store.h"
#include "policy/policy.h"

namespace flightrec::cli {

namespace {

std::string text_of(const nlohmann::json& genesis, const char* key) {
  return genesis.contains(key) && genesis[key].is_string() ? genesis[key].get<std::string>() : std::string();
}

}  // namespace

int cmd_replay(const Args& args) {
  po::options_description desc("options");
  std::string db, policy_name = "recorded", work_dir;
  std::vector<std::string> allow, limit, env;
  int64_t session = 0;
  size_t limit_rows = 50;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record to read")(
      "session", po::value(&session)->required(), "the recorded session")(
      "policy", po::value(&policy_name)->value_name("NAME|FILE|recorded"),
      "the policy to judge it by: a shipped name (agent, strict, ...), a YAML file, or recorded (the default): the "
      "policy the session ran under, with the overrides its command line gave")(
      "allow", po::value(&allow)->value_name("HOST:PORT"), "add to the policy's egress allowlist (NAME, *.DOMAIN, ADDR or CIDR, with :PORT or :*), as run --allow does; repeatable")(
      "limit", po::value(&limit)->value_name("N|KEY=VALUE"),
      "N: entries listed per list (default 50; the counts are always complete); KEY=VALUE: a limit override as "
      "run --limit takes it (accepted so a run's command line replays as is; limits are not replayed)")(
      "env", po::value(&env)->value_name("NAME[=VALUE]"), "as run --env; repeatable")(
      "work-dir", po::value(&work_dir),
      "the session's work directory (default: the one its genesis entry names; needed for sessions recorded without a confining policy)")(
      "json", po::bool_switch(), "one JSON object");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec replay --db FILE --session N [--policy NAME|FILE|recorded] [--allow HOST:PORT]...\n"
      "                        [--limit N|KEY=VALUE]... [--work-dir DIR] [--json]\n\n"
      "Judges every entry of a recorded session by a policy, as shadow mode would,\n"
      "and sets it beside what the recorded policy did (the session's own violation\n"
      "entries): what the policy would deny that was allowed, with rule ids and\n"
      "counts, and what was denied that it would allow. By default the policy is the\n"
      "recorded one with its command-line overrides: the two lists are then empty.\n"
      "Only the session's own processes are judged (not flightrec's set-up of the\n"
      "sandbox before the command's exec). It judges what the session did; how the\n"
      "agent would have reacted to another answer is not in the record. Limits,\n"
      "packet filters and circuit breakers are not replayed.\n"
      "Exit 0 when the replay ran (whatever it found), 1 if the record cannot be read.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  std::vector<std::string> limit_overrides;
  for (const auto& l : limit) {
    if (l.find('=') != std::string::npos) {
      limit_overrides.push_back(l);
      continue;
    }
    limit_rows = size_t(parse_count(l, "--limit (a number of entries, or KEY=VALUE)"));
    if (limit_rows == 0) throw UsageError("--limit " + l + ": give a number of entries (at least 1) or KEY=VALUE");
  }
  if (vm.count("work-dir") && (work_dir.empty() || work_dir[0] != '/'))
    throw UsageError("--work-dir " + work_dir + ": give an absolute path");

  ledger::Store store(db, ledger::Store::Mode::Read);
  ledger::EntryFilter f;
  f.session = session;
  f.types = {"genesis"};
  nlohmann::json genesis;
  store.for_each_entry(f, [&](const ledger::EntryRow& e) {
    genesis = nlohmann::json::parse(e.body, nullptr, false);
    return false;
  });
  if (!genesis.is_object()) throw Error("no session " + std::to_string(session) + " in " + db);

  policy::Policy policy;
  try {
    if (policy_name == "recorded" && !genesis.contains("policy"))
      throw UsageError("session " + std::to_string(session) +
                       " does not hold its policy's text (recorded without a policy, or by an older flightrec): "
                       "give --policy NAME|FILE");
    policy = policy_name == "recorded" ? inspect::recorded_policy(genesis) : policy::load(policy_name);
    for (const auto& a : allow) policy::add_allowed(policy, a);
    for (const auto& l : limit_overrides) policy::override_limit(policy, l);
    for (const auto& e : env) policy::override_env(policy, e);
  } catch (const policy::PolicyError& e) {
    throw UsageError(e.what());
  }
  // The work directory: given, or as the genesis entry recorded it.
  if (work_dir.empty()) work_dir = text_of(genesis, "work_dir");
  if (work_dir.empty() && !policy.confine) work_dir = "/";  // judges nothing: no directory is read
  if (work_dir.empty()) {
    if (policy.filesystem.work_dir == ".")
      throw UsageError("session " + std::to_string(session) +
                       " does not say its work directory (recorded without a confining policy, or by an older "
                       "flightrec): give --work-dir");
    work_dir = policy.filesystem.work_dir;
  }

  // The kernel enforced this very policy: the same bytes, the same overrides.
  bool enforced_here = inspect::enforced_under(genesis, policy);
  inspect::Replay replay(policy, work_dir, enforced_here);
  f.types.clear();
  {
    Progress progress("replaying session " + std::to_string(session), store.stored_entries(session));
    int64_t done = 0;
    store.for_each_entry(f, [&](const ledger::EntryRow& e) {
      replay.add(nlohmann::json::parse(e.body, nullptr, false));
      progress.update(++done);
      return true;
    });
  }
  if (vm["json"].as<bool>())
    std::cout << replay.to_json(limit_rows).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else
    std::cout << replay.to_text(limit_rows);
  return 0;
}

}  // namespace flightrec::cli
