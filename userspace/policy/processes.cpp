#include "policy/processes.h"

namespace flightrec::policy {
namespace {

constexpr size_t kMaxNames = 256;

// A base name, or one with a trailing * (nothing else is special).
bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 255 || name == "*" || name == "." || name == "..") return false;
  size_t star = name.find('*');
  return name.find('/') == std::string::npos && name.find('\0') == std::string::npos &&
         (star == std::string::npos || star == name.size() - 1);
}

std::vector<std::string> names(const YamlReader<PolicyError>& r, const YAML::Node& n, const std::string& key) {
  if (!n.IsSequence()) r.fail(n, key, "must be a list of programs' base names");
  if (n.size() > kMaxNames) r.fail(n, key, "more than " + std::to_string(kMaxNames) + " programs");
  std::vector<std::string> out;
  for (const auto& item : n) {
    out.push_back(r.str(item, key));
    if (!valid_name(out.back()))
      r.fail(item, key, "'" + out.back() + "' is not a program's base name (no '/'; a '*' only at its end: python3*)");
  }
  return out;
}

}  // namespace

void parse_processes(const YamlReader<PolicyError>& r, const YAML::Node& n, Policy& p) {
  r.only_keys(n, "processes", {"watched", "expected_parents"});
  if (n["watched"]) p.processes.watched = names(r, n["watched"], "processes.watched");
  if (n["expected_parents"]) p.processes.expected_parents = names(r, n["expected_parents"], "processes.expected_parents");
  if (!p.processes.watched.empty() && !n["expected_parents"] && p.processes.expected_parents.empty())
    r.fail(n, "processes", "watched needs expected_parents (the programs that may start them)");
}

bool program_named(const std::vector<std::string>& names, std::string_view program) {
  size_t slash = program.rfind('/');
  std::string_view base = slash == std::string_view::npos ? program : program.substr(slash + 1);
  for (const auto& name : names) {
    if (name.back() == '*' ? base.starts_with(std::string_view(name).substr(0, name.size() - 1)) : base == name)
      return true;
  }
  return false;
}

}  // namespace flightrec::policy
