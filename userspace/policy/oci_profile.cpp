// OCI / Docker seccomp profiles (the JSON Docker's default.json and
// Podman's seccomp.json use), read the way Docker reads them: includes and
// excludes by architecture, capability and minimum kernel; names this
// libseccomp does not know are skipped; several checks of one argument
// index mean "any of them" (separate rules), of different indexes "all".
#include <sys/utsname.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "policy/policy.h"

#include "events/syscall_table.h"

namespace flightrec::policy {
namespace {

using nlohmann::json;

Action action_of(const std::string& s, const std::string& where) {
  if (s == "SCMP_ACT_ALLOW" || s == "SCMP_ACT_LOG") return Action::Allow;
  if (s == "SCMP_ACT_ERRNO") return Action::Errno;
  if (s == "SCMP_ACT_KILL" || s == "SCMP_ACT_KILL_PROCESS" || s == "SCMP_ACT_KILL_THREAD" || s == "SCMP_ACT_TRAP")
    return Action::Kill;
  throw PolicyError(where + ": action " + s + " is not supported (allow, log, errno, kill, trap)");
}

ArgCheck::Op op_of(const std::string& s, const std::string& where) {
  static const std::pair<const char*, ArgCheck::Op> ops[] = {
      {"SCMP_CMP_EQ", ArgCheck::Op::Eq}, {"SCMP_CMP_NE", ArgCheck::Op::Ne}, {"SCMP_CMP_LT", ArgCheck::Op::Lt},
      {"SCMP_CMP_LE", ArgCheck::Op::Le}, {"SCMP_CMP_GT", ArgCheck::Op::Gt}, {"SCMP_CMP_GE", ArgCheck::Op::Ge},
      {"SCMP_CMP_MASKED_EQ", ArgCheck::Op::MaskedEq}};
  for (const auto& [name, op] : ops)
    if (s == name) return op;
  throw PolicyError(where + ": unknown comparison " + s);
}

bool is_x86_64(const std::string& arch) {
  return arch == "amd64" || arch == "x86_64" || arch == "SCMP_ARCH_X86_64";
}

// "5.8" -> 5008 (major*1000+minor)
int kernel_version_code(const std::string& v) {
  int major = 0, minor = 0;
  sscanf(v.c_str(), "%d.%d", &major, &minor);
  return major * 1000 + minor;
}

int running_kernel_code() {
  utsname u{};
  uname(&u);
  return kernel_version_code(u.release);
}

bool applies(const json& call, const std::vector<std::string>& caps) {
  auto has_cap = [&](const std::string& c) { return std::find(caps.begin(), caps.end(), c) != caps.end(); };
  if (call.contains("includes") && call["includes"].is_object()) {
    const auto& inc = call["includes"];
    if (inc.contains("arches") && !inc["arches"].empty()) {
      bool any = false;
      for (const auto& a : inc["arches"]) any = any || is_x86_64(a.get<std::string>());
      if (!any) return false;
    }
    if (inc.contains("caps"))
      for (const auto& c : inc["caps"])
        if (!has_cap(c.get<std::string>())) return false;
    if (inc.contains("minKernel") && inc["minKernel"].is_string() &&
        running_kernel_code() < kernel_version_code(inc["minKernel"].get<std::string>()))
      return false;
  }
  if (call.contains("excludes") && call["excludes"].is_object()) {
    const auto& exc = call["excludes"];
    if (exc.contains("arches"))
      for (const auto& a : exc["arches"])
        if (is_x86_64(a.get<std::string>())) return false;
    if (exc.contains("caps"))
      for (const auto& c : exc["caps"])
        if (has_cap(c.get<std::string>())) return false;
  }
  return true;
}

}  // namespace

Seccomp parse_oci_profile(const std::string& text, const std::string& source,
                          const std::vector<std::string>& kept_caps) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw PolicyError(source + ": not valid JSON: " + e.what());
  }
  Seccomp s;
  s.enabled = true;
  s.profile = source;
  try {
    if (!doc.is_object() || !doc.contains("defaultAction"))
      throw PolicyError(source + ": not a seccomp profile (no defaultAction)");
    s.default_action = action_of(doc["defaultAction"].get<std::string>(), source + ": defaultAction");
    s.default_errno = doc.value("defaultErrnoRet", 1);
    if (doc.contains("syscalls")) {
      size_t i = 0;
      for (const auto& call : doc["syscalls"]) {
        std::string where = source + ": syscalls[" + std::to_string(i) + "]";
        std::string id = "oci.syscalls[" + std::to_string(i++) + "]";
        if (!applies(call, kept_caps)) continue;
        SyscallRule base;
        base.action = action_of(call.at("action").get<std::string>(), where);
        base.errno_value = call.value("errnoRet", s.default_errno);
        std::vector<std::string> names;
        if (call.contains("names")) names = call["names"].get<std::vector<std::string>>();
        if (call.contains("name")) names.push_back(call["name"].get<std::string>());
        for (const auto& n : names) {
          auto nr = events::syscall_number(n);
          if (!nr) continue;  // unknown here, as Docker does
          base.names.push_back(n);
          base.numbers.push_back(int(*nr));
        }
        if (base.numbers.empty()) continue;
        base.id = id;
        std::vector<ArgCheck> checks;
        if (call.contains("args") && call["args"].is_array())
          for (const auto& a : call["args"]) {
            ArgCheck c;
            c.index = a.at("index").get<unsigned>();
            if (c.index > 5) throw PolicyError(where + ": argument index " + std::to_string(c.index) + " > 5");
            c.op = op_of(a.at("op").get<std::string>(), where);
            c.value = a.at("value").get<uint64_t>();
            c.value_two = a.value("valueTwo", uint64_t(0));
            checks.push_back(c);
          }
        bool one_index = !checks.empty() && std::all_of(checks.begin(), checks.end(), [&](const ArgCheck& c) {
          return c.index == checks.front().index;
        });
        if (one_index && checks.size() > 1) {
          for (const auto& c : checks) {
            SyscallRule r = base;
            r.args = {c};
            s.rules.push_back(r);
          }
        } else {
          base.args = checks;
          s.rules.push_back(base);
        }
      }
    }
  } catch (const json::exception& e) {
    throw PolicyError(source + ": malformed profile: " + e.what());
  }
  return s;
}

}  // namespace flightrec::policy
