// flightrec run: options, then a session (session/run.h).
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/session_options.h"
#include "session/plan.h"
#include "session/run.h"

namespace flightrec::cli {
namespace {

const char* kRunUsage =
    "usage: flightrec run --db FILE [--policy NAME|FILE] [OPTIONS] -- COMMAND [ARGS...]\n\n"
    "Runs COMMAND confined as the policy says (default: the shipped policy 'agent':\n"
    "namespaces, an overlay root, Landlock, seccomp, limits, an egress allowlist) and\n"
    "records every syscall, exec, fork, exit and connect of it and its descendants,\n"
    "every denial with the rule behind it, and the files it changed, into FILE\n"
    "(SQLite; created if missing, appended to if it is a flightrec record), sealed by\n"
    "a hash chain and Merkle tree checkpoints (signed with --key). Shipped policies:\n"
    "agent, strict, observe (no confinement); see policies/README.md.\n\n"
    "Exits with COMMAND's exit code (128+N if killed by signal N); 124 if the policy\n"
    "ended the session (circuit breaker or on_violation: kill); 125 if flightrec\n"
    "itself or the sandbox failed, 126 if COMMAND cannot be executed, 127 if it is\n"
    "not found, 2 for usage errors. Processes COMMAND leaves behind are killed when\n"
    "it exits. Needs root.\n\n"
    "When flightrecd runs (its socket answers), the session is handed to it: its\n"
    "programs are loaded already, so the command starts without the load. The record\n"
    "is this process's, the same as without the daemon. Sessions that need programs\n"
    "of their own (an egress allowlist, runtime grants, BPF-LSM path rules, entry\n"
    "times or TLS sizes the daemon lacks) load them here; --daemon require says why.";

}  // namespace

int cmd_run(const Args& all) {
  // Everything after the first "--" is the command, untouched.
  Args args, command;
  bool in_command = false;
  for (const auto& a : all) {
    if (!in_command && a == "--") in_command = true;
    else (in_command ? command : args).push_back(a);
  }

  po::options_description desc("options");
  SessionOptions so;
  std::string policy_name = "agent";
  std::vector<std::string> allow, limit, env;
  std::string grant_socket, daemon_mode = "auto", daemon_socket = "/run/flightrec/flightrecd.sock";
  desc.add_options()("help,h", "show this help")
      ("policy", po::value(&policy_name)->value_name("NAME|FILE"),
       "confinement policy: agent (default), strict, observe, or a YAML file")
      ("shadow", po::bool_switch(), "block nothing; record what the policy would deny (would-deny entries)")
      ("allow", po::value(&allow)->value_name("HOST:PORT"),
       "add to the policy's egress allowlist (NAME:PORT, *.DOMAIN:PORT, CIDR:PORT, ADDR:*); a name's "
       "addresses are those the session's resolver answers it with, for their TTL; repeatable")
      ("env", po::value(&env)->value_name("NAME[=VALUE]"),
       "pass the host's variable NAME into the sandbox (even one whose name looks like a secret: its "
       "value is never recorded), or set NAME to VALUE; repeatable (policy env: section)")
      ("limit", po::value(&limit)->value_name("KEY=VALUE"),
       "override one of the policy's limits: memory, pids, cpu, wall_time, cpu_time, file_size, "
       "open_files, disk (e.g. --limit wall_time=10m); repeatable")
      ("grants", po::value(&grant_socket)->value_name("SOCKET"),
       "where the grant socket listens when the policy asks (ask:): calls it asks about wait "
       "there for a grant from the session's owner (default: /run/flightrec/grants/SESSION.sock; "
       "see docs/POLICIES.md, Runtime grants)")
      ("daemon", po::value(&daemon_mode)->value_name("MODE"),
       "auto (default): hand the session to flightrecd when it answers and serves what the "
       "session needs, else load the programs here; off: always here; require: fail, saying "
       "why, if flightrecd cannot take it")
      ("daemon-socket", po::value(&daemon_socket)->value_name("PATH"),
       "flightrecd's control socket (default: /run/flightrec/flightrecd.sock)");
  so.add_to(desc);
  po::variables_map vm;
  if (!parse_options(args, desc, kRunUsage, vm)) return 0;
  if (command.empty())
    throw UsageError("missing command: flightrec run --db FILE -- COMMAND [ARGS...]");
  if (daemon_mode != "auto" && daemon_mode != "off" && daemon_mode != "require")
    throw UsageError("--daemon must be auto, off or require");
  if (daemon_socket.empty() || daemon_socket[0] != '/') throw UsageError("--daemon-socket needs an absolute path");
  session::PolicyChoice choice{policy_name, allow, limit, vm["shadow"].as<bool>(), env};
  session::Plan plan;
  try {
    plan = session::compile(so.settings(), choice);
  } catch (const session::PlanError& e) {
    throw UsageError(e.what());
  }
  session::RunTarget target;
  target.db = so.db;
  target.key_dir = so.key_dir;
  target.command = command;
  target.grant_socket = grant_socket;
  if (daemon_mode != "off") target.daemon_socket = daemon_socket;
  target.require_daemon = daemon_mode == "require";
  return session::run(std::move(plan), target);
}

}  // namespace flightrec::cli
