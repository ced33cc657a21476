#pragma once
// A policy's processes section: who may start a shell or an interpreter.
// An exec of a program in `watched` by a process whose parent runs none of
// `expected_parents` is a violation (processes.unexpected_parent), as
// Falco's "shell spawned by an untrusted program" is: a web server or a
// database that starts `sh` has most likely been made to. Programs are
// named by their file's base name; a trailing * matches any rest
// (`python3*`). A parent the record does not know (a process outside the
// session) is not judged.
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.h"
#include "policy/yaml_reader.h"

namespace flightrec::policy {

// processes: into p.processes (watched, expected_parents).
void parse_processes(const YamlReader<PolicyError>& r, const YAML::Node& n, Policy& p);

// Whether a program (a path, or a base name) is one of `names`.
bool program_named(const std::vector<std::string>& names, std::string_view program);

}  // namespace flightrec::policy
