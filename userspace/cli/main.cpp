// flightrec: the flight recorder for AI agents.
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "common/error.h"

namespace {

const char* kUsage = R"(flightrec - records what a command does at the kernel boundary, tamper-evidently

usage: flightrec COMMAND [OPTIONS]

commands:
  run      run a command in its own cgroup and record everything it does
  watch    record what the processes of existing cgroups do (e.g. a pod)
  query    print recorded entries, filtered (JSON Lines with --json)
  summary  each session at a glance: programs, files, hosts, violations, loss
  agent    an agent's session turn by turn: model calls, tool calls, what each did
  replay   what another policy would have denied in a recorded session
  policy   show a policy with its extends: chain resolved, or check one
  changes  what a session changed in its work directory, as a diff
  apply    write a session's kept changes to its work directory, refusing conflicts
  report   one session as a self-contained HTML page for reviewers
  verify   check a record or bundle: hashes, chain, Merkle roots, signatures
  export   write one session as a signed bundle (JSON or JSON Lines)
  prove    print an RFC 9162 inclusion or consistency proof
  verify-proof  check such a proof with the public key alone
  checkpoint  print a session's latest signed checkpoint, to keep elsewhere
  keygen   create the Ed25519 key that signs checkpoints
  probe    show which kernel features load on this machine
  gc       remove what killed sessions left: processes, cgroups, tmpfs, sockets
  status   what a running flightrecd records: sessions, rates, loss, disk use
  collect  pull hosts' shipped logs from NATS JetStream and verify each

'flightrec COMMAND --help' explains each command.)";

}  // namespace

int main(int argc, char** argv) {
  using namespace flightrec::cli;
  if (argc < 2) {
    std::cerr << kUsage << "\n";
    return 2;
  }
  std::string command = argv[1];
  Args args(argv + 2, argv + argc);
  try {
    if (command == "run") return cmd_run(args);
    if (command == "watch") return cmd_watch(args);
    if (command == "query") return cmd_query(args);
    if (command == "summary") return cmd_summary(args);
    if (command == "replay") return cmd_replay(args);
    if (command == "policy") return cmd_policy(args);
    if (command == "report") return cmd_report(args);
    if (command == "verify") return cmd_verify(args);
    if (command == "probe") return cmd_probe(args);
    if (command == "keygen") return cmd_keygen(args);
    if (command == "export") return cmd_export(args);
    if (command == "prove") return cmd_prove(args);
    if (command == "verify-proof") return cmd_verify_proof(args);
    if (command == "checkpoint") return cmd_checkpoint(args);
    if (command == "status") return cmd_status(args);
    if (command == "collect") return cmd_collect(args);
    if (command == "changes") return cmd_changes(args);
    if (command == "gc") return cmd_gc(args);
    if (command == "agent") return cmd_agent(args);
    if (command == "apply") return cmd_apply(args);
    if (command == "--help" || command == "-h" || command == "help") {
      std::cout << kUsage << "\n";
      return 0;
    }
    if (command == "--version") {
      std::cout << "flightrec " << FLIGHTREC_VERSION << "\n";
      return 0;
    }
    std::cerr << "flightrec: unknown command '" << command << "' (see flightrec --help)\n";
    return 2;
  } catch (const UsageError& e) {
    std::cerr << "flightrec " << command << ": " << e.what() << " (see flightrec " << command
              << " --help)\n";
    return 2;
  } catch (const flightrec::Error& e) {
    std::cerr << "flightrec: " << e.what() << "\n";
    return command == "run" ? 125 : 1;
  } catch (const std::exception& e) {
    std::cerr << "flightrec: internal error: " << e.what() << "\n";
    return command == "run" ? 125 : 1;
  }
}
