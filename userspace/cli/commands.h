#pragma once
// Each subcommand takes its own arguments (after the subcommand name) and
// returns the process exit code. Usage errors throw UsageError (exit 2).
#include <stdexcept>
#include <string>
#include <vector>

namespace flightrec::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using Args = std::vector<std::string>;

int cmd_run(const Args& args);
int cmd_watch(const Args& args);
int cmd_query(const Args& args);
int cmd_summary(const Args& args);
int cmd_replay(const Args& args);
int cmd_policy(const Args& args);
int cmd_report(const Args& args);
int cmd_verify(const Args& args);
int cmd_probe(const Args& args);
int cmd_keygen(const Args& args);
int cmd_export(const Args& args);
int cmd_prove(const Args& args);
int cmd_verify_proof(const Args& args);
int cmd_checkpoint(const Args& args);
int cmd_status(const Args& args);
int cmd_collect(const Args& args);
int cmd_changes(const Args& args);
int cmd_apply(const Args& args);
int cmd_gc(const Args& args);
int cmd_agent(const Args& args);

}  // namespace flightrec::cli
