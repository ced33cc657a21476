// Policy files: YAML read with yaml-cpp (it keeps line numbers for every
// node, so errors can point at the line), then checked key by key.
#include "policy/policy.h"

#include "policy/judge.h"
#include "policy/network.h"
#include "policy/processes.h"
#include "policy/yaml_reader.h"
#include "events/syscall_table.h"

#include <sys/stat.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <yaml-cpp/yaml.h>

#include "common/system.h"
#include "common/text.h"

namespace flightrec::policy {
namespace {

class Reader : public YamlReader<PolicyError> {
 public:
  using YamlReader::YamlReader;

  std::vector<std::string> strings(const YAML::Node& n, const std::string& key) const {
    if (!n.IsSequence()) fail(n, key, "must be a list");
    std::vector<std::string> out;
    for (const auto& item : n) out.push_back(str(item, key));
    return out;
  }

  std::string abs_path(const YAML::Node& n, const std::string& key) const {
    std::string p = str(n, key);
    if (p.empty() || p[0] != '/') fail(n, key, "'" + p + "' must be an absolute path");
    if (p.find("/../") != std::string::npos || p.ends_with("/..") || p.find('\n') != std::string::npos)
      fail(n, key, "'" + p + "' must not contain '..'");
    // One spelling per path: rules are also matched byte for byte (BPF-LSM).
    for (size_t at; (at = p.find("//")) != std::string::npos;) p.erase(at, 1);
    for (size_t at; (at = p.find("/./")) != std::string::npos;) p.erase(at, 2);
    if (p.ends_with("/.")) p.pop_back();
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return p;
  }

  std::vector<std::string> paths(const YAML::Node& n, const std::string& key) const {
    if (!n.IsSequence()) fail(n, key, "must be a list of absolute paths");
    if (n.size() > 256) fail(n, key, "at most 256 paths");  // each is a BPF-LSM rule too
    std::vector<std::string> out;
    for (const auto& item : n) out.push_back(abs_path(item, key));
    return out;
  }

  uint64_t number(const YAML::Node& n, const std::string& key) const {
    std::string s = str(n, key);
    errno = 0;
    char* end = nullptr;
    unsigned long long v = strtoull(s.c_str(), &end, 0);
    if (s.empty() || s[0] == '-' || *end || errno) fail(n, key, "'" + s + "' is not a non-negative integer");
    return v;
  }

};

const std::map<std::string, int> kErrnos = {
    {"EPERM", EPERM}, {"EACCES", EACCES}, {"ENOSYS", ENOSYS}, {"EINVAL", EINVAL}, {"ENOENT", ENOENT}};

int syscall_number_or_fail(const Reader& r, const YAML::Node& n, const std::string& key,
                           const std::string& name) {
  // The decoder's table (the kernel's), not libseccomp's: one list of names.
  auto nr = events::syscall_number(name);
  if (!nr) r.fail(n, key, "'" + name + "' is not an x86-64 system call");
  return int(*nr);
}

ArgCheck arg_check(const Reader& r, const YAML::Node& n, const std::string& key) {
  r.only_keys(n, key, {"index", "op", "value", "mask"});
  ArgCheck a;
  if (!n["index"]) r.fail(n, key, "needs index");
  uint64_t index = r.number(n["index"], key + ".index");
  if (index > 5) r.fail(n["index"], key + ".index", "must be 0-5");
  a.index = unsigned(index);
  a.op = n["op"] ? r.choice<ArgCheck::Op>(n["op"], key + ".op",
                                           {{"eq", ArgCheck::Op::Eq},
                                            {"ne", ArgCheck::Op::Ne},
                                            {"lt", ArgCheck::Op::Lt},
                                            {"le", ArgCheck::Op::Le},
                                            {"gt", ArgCheck::Op::Gt},
                                            {"ge", ArgCheck::Op::Ge},
                                            {"masked_eq", ArgCheck::Op::MaskedEq}})
                 : ArgCheck::Op::Eq;
  if (!n["value"]) r.fail(n, key, "needs value");
  if (a.op == ArgCheck::Op::MaskedEq) {
    if (!n["mask"]) r.fail(n, key, "masked_eq needs mask");
    a.value = r.number(n["mask"], key + ".mask");
    a.value_two = r.number(n["value"], key + ".value");
  } else {
    if (n["mask"]) r.fail(n["mask"], key + ".mask", "only for op masked_eq");
    a.value = r.number(n["value"], key + ".value");
  }
  return a;
}

// A seccomp list item: "name", or {syscall: name | [names], args: [...],
// errno: ENOSYS, action: errno|kill}.
SyscallRule syscall_rule(const Reader& r, const YAML::Node& n, const std::string& key, Action action,
                         const std::string& id_prefix) {
  SyscallRule rule;
  rule.action = action;
  if (n.IsScalar()) {
    rule.names = {n.Scalar()};
  } else {
    r.only_keys(n, key, {"syscall", "args", "errno", "action", "id"});
    if (!n["syscall"]) r.fail(n, key, "needs syscall");
    rule.names = n["syscall"].IsSequence() ? r.strings(n["syscall"], key + ".syscall")
                                           : std::vector<std::string>{r.str(n["syscall"], key + ".syscall")};
    if (n["args"]) {
      if (!n["args"].IsSequence()) r.fail(n["args"], key + ".args", "must be a list");
      for (const auto& a : n["args"]) rule.args.push_back(arg_check(r, a, key + ".args"));
    }
    if (n["action"])
      rule.action = r.choice<Action>(n["action"], key + ".action",
                                     {{"allow", Action::Allow}, {"errno", Action::Errno}, {"kill", Action::Kill}});
    if (n["errno"]) rule.errno_value = r.choice<int>(n["errno"], key + ".errno", kErrnos);
    if (n["id"]) rule.id = r.str(n["id"], key + ".id");
  }
  for (const auto& name : rule.names) rule.numbers.push_back(syscall_number_or_fail(r, n, key, name));
  if (rule.id.empty()) rule.id = id_prefix + rule.names.front();
  return rule;
}

// The first matching rule decides (the judge names it), but libseccomp
// lets a rule without argument checks win over rules with them for the
// same call, whatever their order. Such a pair must not mean two things.
void check_order(const Reader& r, const YAML::Node& n, const Seccomp& s) {
  auto effect = [&](const SyscallRule& x) { return std::make_pair(x.action, x.action == Action::Errno ? x.errno_value : 0); };
  for (size_t i = 0; i < s.rules.size(); ++i)
    for (size_t j = 0; j < s.rules.size(); ++j) {
      const SyscallRule &a = s.rules[i], &b = s.rules[j];
      if (i == j || !a.args.empty() || b.args.empty() || effect(a) == effect(b)) continue;
      for (int nr : a.numbers)
        if (std::find(b.numbers.begin(), b.numbers.end(), nr) != b.numbers.end())
          r.fail(n, "seccomp", "rules " + a.id + " and " + b.id + " decide the same call differently, and " + a.id +
                                   " (no argument checks) would always win; drop one or give both argument checks");
    }
}

void parse_seccomp(const Reader& r, const YAML::Node& n, Policy& p) {
  r.only_keys(n, "seccomp", {"default", "errno", "profile", "allow", "deny", "deny_action"});
  Seccomp& s = p.seccomp;
  s.enabled = true;
  if (n["profile"]) {
    std::string path = r.str(n["profile"], "seccomp.profile");
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (4 << 20))
      r.fail(n["profile"], "seccomp.profile", "'" + path + "' is not a readable regular file of at most 4 MiB");
    auto json = try_read_file(path);
    if (!json) r.fail(n["profile"], "seccomp.profile", "cannot read '" + path + "'");
    Seccomp oci = parse_oci_profile(*json, path, p.keep_capabilities);
    s = oci;
    s.enabled = true;
  }
  if (n["default"])
    s.default_action = r.choice<Action>(n["default"], "seccomp.default",
                                        {{"allow", Action::Allow}, {"errno", Action::Errno}, {"kill", Action::Kill}});
  if (n["errno"]) s.default_errno = r.choice<int>(n["errno"], "seccomp.errno", kErrnos);
  Action deny_action = Action::Errno;
  if (n["deny_action"])
    deny_action = r.choice<Action>(n["deny_action"], "seccomp.deny_action",
                                   {{"errno", Action::Errno}, {"kill", Action::Kill}});
  // Denials first: the first matching rule is the one a denial names.
  std::vector<SyscallRule> rules;
  if (n["deny"]) {
    if (!n["deny"].IsSequence()) r.fail(n["deny"], "seccomp.deny", "must be a list");
    for (const auto& item : n["deny"]) rules.push_back(syscall_rule(r, item, "seccomp.deny", deny_action, "seccomp.deny."));
  }
  if (n["allow"]) {
    if (!n["allow"].IsSequence()) r.fail(n["allow"], "seccomp.allow", "must be a list");
    for (const auto& item : n["allow"])
      rules.push_back(syscall_rule(r, item, "seccomp.allow", Action::Allow, "seccomp.allow."));
  }
  rules.insert(rules.end(), s.rules.begin(), s.rules.end());
  s.rules = std::move(rules);
  check_order(r, n, s);
}

// ask: {write: bool, connect: bool, syscalls: [names], timeout: 10s}. An
// asked call is answered by the supervisor, so no seccomp rule may decide
// it as well.
void parse_ask(const Reader& r, const YAML::Node& n, Policy& p) {
  r.only_keys(n, "ask", {"write", "connect", "exec", "syscalls", "timeout"});
  Ask& a = p.ask;
  if (n["write"]) a.write = r.boolean(n["write"], "ask.write");
  if (n["connect"]) a.connect = r.boolean(n["connect"], "ask.connect");
  // The grant adds to the allowlist's cgroup programs: without them there is
  // nothing to add to (none: no route out; host: nothing is refused).
  if (a.connect && p.network != Network::Allowlist)
    r.fail(n["connect"], "ask.connect", "needs network.mode: allowlist (the list may be empty)");
  if (n["exec"]) a.exec = r.boolean(n["exec"], "ask.exec");
  // Without an exec list everything readable runs: there is nothing to ask.
  if (a.exec && p.filesystem.exec.empty() && !p.filesystem.exec_only_command)
    r.fail(n["exec"], "ask.exec", "needs filesystem.exec, the files that run without a grant");
  if (n["timeout"]) {
    auto ms = parse_duration_ms(r.str(n["timeout"], "ask.timeout"));
    if (!ms || *ms < 100 || *ms > 600'000) r.fail(n["timeout"], "ask.timeout", "must be a duration from 100ms to 10m");
    a.timeout_ms = *ms;
  }
  if (n["syscalls"]) {
    a.syscall_names = r.strings(n["syscalls"], "ask.syscalls");
    for (size_t i = 0; i < a.syscall_names.size(); ++i) {
      int nr = syscall_number_or_fail(r, n["syscalls"][i], "ask.syscalls", a.syscall_names[i]);
      const auto& w = write_ask_syscalls();
      if (std::find(w.begin(), w.end(), nr) != w.end())
        r.fail(n["syscalls"][i], "ask.syscalls", "'" + a.syscall_names[i] + "' is a file write: use ask.write, which "
               "grants it by directory");
      if (nr == SYS_connect)
        r.fail(n["syscalls"][i], "ask.syscalls", "'connect' is asked with ask.connect, which grants it by address and port");
      if (nr == SYS_execve || nr == SYS_execveat)
        r.fail(n["syscalls"][i], "ask.syscalls", "'" + a.syscall_names[i] + "' is asked with ask.exec, which grants it by file");
      if (std::find(a.syscalls.begin(), a.syscalls.end(), nr) != a.syscalls.end())
        r.fail(n["syscalls"][i], "ask.syscalls", "'" + a.syscall_names[i] + "' is listed twice");
      a.syscalls.push_back(nr);
    }
  }
  std::vector<int> asked = a.syscalls;
  if (a.write) asked.insert(asked.end(), write_ask_syscalls().begin(), write_ask_syscalls().end());
  if (a.connect) asked.push_back(SYS_connect);
  if (a.exec) asked.insert(asked.end(), exec_ask_syscalls().begin(), exec_ask_syscalls().end());
  for (const auto& rule : p.seccomp.rules)
    for (int nr : rule.numbers)
      if (std::find(asked.begin(), asked.end(), nr) != asked.end())
        r.fail(n, "ask", "seccomp rule " + rule.id + " decides " + rule.names.front() +
               ", which ask makes wait for a grant; drop one of the two");
  if (a.any() && p.seccomp.default_action != Action::Allow)
    r.fail(n, "ask", "needs seccomp.default: allow (an asked call is one the default would otherwise decide)");
}

void parse_limits(const Reader& r, const YAML::Node& n, Limits& l) {
  r.only_keys(n, "limits",
              {"memory", "pids", "cpu", "wall_time", "cpu_time", "file_size", "open_files", "disk", "record_size",
               "record_rate"});
  // Only the keys present change a limit (so --limit can override one).
  // parse: parse_bytes or parse_duration_ms; like: what a valid value looks like.
  auto with = [&](const char* k, uint64_t& out, auto parse, const char* like) {
    if (!n[k]) return;
    std::string key = std::string("limits.") + k;
    bool too_large = false;
    auto v = parse(r.str(n[k], key), &too_large);
    if (too_large) r.fail(n[k], key, "'" + n[k].Scalar() + "' is too large");
    if (!v || *v == 0) r.fail(n[k], key, "'" + n[k].Scalar() + "' is not " + like);
    out = *v;
  };
  auto bytes = [&](const char* k, uint64_t& out) { with(k, out, parse_bytes, "a size like 512M or 2G"); };
  auto duration = [&](const char* k, uint64_t& out) {
    with(k, out, parse_duration_ms, "a duration like 500ms, 30s, 10m or 1h");
  };
  bytes("memory", l.memory_bytes);
  bytes("file_size", l.file_size);
  bytes("disk", l.disk);
  bytes("record_size", l.record_bytes);
  duration("wall_time", l.wall_ms);
  duration("cpu_time", l.cpu_ms);
  if (n["pids"]) {
    l.pids = r.number(n["pids"], "limits.pids");
    if (l.pids == 0) r.fail(n["pids"], "limits.pids", "must be at least 1");
  }
  if (n["record_rate"]) {
    l.record_rate = r.number(n["record_rate"], "limits.record_rate");
    if (l.record_rate == 0) r.fail(n["record_rate"], "limits.record_rate", "must be at least 1 (entries per second)");
  }
  if (n["open_files"]) {
    l.open_files = r.number(n["open_files"], "limits.open_files");
    if (l.open_files == 0) r.fail(n["open_files"], "limits.open_files", "must be at least 1");
  }
  if (n["cpu"]) {
    // Cores, e.g. 0.5 or 2: as millicores, without floating point.
    std::string s = r.str(n["cpu"], "limits.cpu");
    size_t dot = s.find('.');
    std::string whole = s.substr(0, dot), frac = dot == std::string::npos ? "" : s.substr(dot + 1);
    bool ok = !whole.empty() && whole.size() <= 4 && frac.size() <= 3 &&
              whole.find_first_not_of("0123456789") == std::string::npos &&
              frac.find_first_not_of("0123456789") == std::string::npos;
    if (ok) {
      while (frac.size() < 3) frac += '0';
      l.cpu_millicores = std::stoull(whole) * 1000 + std::stoull(frac);
    }
    if (!ok || l.cpu_millicores == 0) r.fail(n["cpu"], "limits.cpu", "'" + s + "' is not a number of cores like 0.5 or 2");
  }
}

}  // namespace

namespace {

// A non-negative integer followed by one of the units (suffix, multiplier).
// *too_large: the text has that form but its value does not fit.
std::optional<uint64_t> with_unit(const std::string& s, std::initializer_list<std::pair<const char*, uint64_t>> units,
                                  bool* too_large) {
  size_t digits = s.find_first_not_of("0123456789");
  if (digits == 0 || s.empty()) return std::nullopt;
  if (digits == std::string::npos) digits = s.size();
  for (const auto& [suffix, mult] : units) {
    if (s.compare(digits, std::string::npos, suffix) != 0) continue;
    errno = 0;
    unsigned long long v = strtoull(s.substr(0, digits).c_str(), nullptr, 10);
    if (errno == ERANGE || v > UINT64_MAX / mult) {
      if (too_large) *too_large = true;
      return std::nullopt;
    }
    return v * mult;
  }
  return std::nullopt;
}

}  // namespace

Policy parse_yaml(const std::string& text, const std::string& source, const BaseResolver& resolve);
std::string read_policy_file(const std::string& path);

std::optional<uint64_t> parse_bytes(const std::string& s, bool* too_large) {
  return with_unit(s, {{"", 1}, {"K", 1ull << 10}, {"M", 1ull << 20}, {"G", 1ull << 30}, {"T", 1ull << 40}}, too_large);
}

std::optional<uint64_t> parse_duration_ms(const std::string& s, bool* too_large) {
  return with_unit(s, {{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}}, too_large);
}

namespace {

// `over` laid on `base`: mappings merged key by key, anything else (a
// value, a list) replaced.
YAML::Node merge_policy(YAML::Node base, const YAML::Node& over) {
  if (!base.IsMap() || !over.IsMap()) return YAML::Clone(over);
  for (const auto& kv : over) {
    std::string key = kv.first.Scalar();
    base[key] = base[key] && base[key].IsMap() && kv.second.IsMap() ? merge_policy(base[key], kv.second) : YAML::Clone(kv.second);
  }
  return base;
}

bool env_name_ok(const std::string& name, bool glob) {
  if (name.empty() || name.size() > 255) return false;
  for (char c : name)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || (glob && c == '*'))) return false;
  return true;
}

// fnmatch's '*' alone: names hold no other special character.
bool glob_match(std::string_view glob, std::string_view name) {
  size_t star = glob.find('*');
  if (star == std::string_view::npos) return glob == name;
  if (name.size() < star || name.substr(0, star) != glob.substr(0, star)) return false;
  for (size_t i = star; i <= name.size(); ++i)
    if (glob_match(glob.substr(star + 1), name.substr(i))) return true;
  return false;
}

}  // namespace

bool secret_env_name(const std::string& name) {
  std::string up;
  for (char c : name) up += char(toupper(static_cast<unsigned char>(c)));
  for (const char* suffix : {"_KEY", "_KEYS", "_TOKEN", "_TOKENS", "_PAT", "_AUTH", "_DSN"})
    if (up.ends_with(suffix)) return true;
  for (const char* part : {"SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "TOKEN", "CREDENTIAL", "API_KEY", "APIKEY",
                           "PRIVATE_KEY", "ACCESS_KEY", "SESSION_KEY", "COOKIE"})
    if (up.find(part) != std::string::npos) return true;
  return false;
}

std::vector<std::string> sandbox_env(const Policy& p, char** host_env, std::vector<std::string>* passed) {
  std::vector<std::string> out;
  auto is_set = [&](std::string_view name) {
    for (const auto& [k, v] : p.env.set)
      if (k == name) return true;
    return false;
  };
  for (char** e = host_env; e && *e; ++e) {
    std::string_view var(*e);
    size_t eq = var.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string name(var.substr(0, eq));
    if (is_set(name) || !env_name_ok(name, false)) continue;
    bool secret = secret_env_name(name), pass = false;
    for (const auto& g : p.env.pass)
      // A secret's name must be written out: no glob passes one.
      if (secret ? g == name : glob_match(g, name)) pass = true;
    if (!pass) continue;
    out.emplace_back(var);
    if (passed) passed->push_back(name);
  }
  for (const auto& [k, v] : p.env.set) out.push_back(k + "=" + v);
  return out;
}

namespace {

constexpr size_t kMaxBases = 8;

const std::set<std::string> kTopKeys = {"version", "name", "description", "extends", "confine", "mode", "on_violation",
                                        "filesystem", "network", "seccomp", "ask", "limits", "capabilities", "hostname",
                                        "log", "env", "redact", "nested_sandboxes", "processes"};

void read_rules(const Reader& r, const YAML::Node& root, Policy& p);

// The document laid over its `extends:` chain (each base over its own
// first). Each base, with its chain, is read as a policy of its own before
// the document is laid over it, so an error in a base names the base's
// file and line. `chain` holds the sources met so far (cycles), `bases`
// gets each base, nearest first.
YAML::Node with_bases(const Reader& r, YAML::Node root, const std::string& source, const BaseResolver& resolve,
                      std::vector<std::string>& chain, std::vector<PolicyBase>& bases) {
  if (!root["extends"]) return root;
  std::string name = r.str(root["extends"], "extends");
  PolicyBase base;
  try {
    base = resolve(name, source);
  } catch (const PolicyError& e) {
    r.fail(root["extends"], "extends", e.what());
  }
  chain.push_back(source);
  if (std::find(chain.begin(), chain.end(), base.source) != chain.end()) {
    std::string loop;
    for (const auto& c : chain) loop += c + " -> ";
    r.fail(root["extends"], "extends", "a cycle: " + loop + base.source);
  }
  if (bases.size() >= kMaxBases) r.fail(root["extends"], "extends", "more than " + std::to_string(kMaxBases) + " bases in a chain");
  if (!is_valid_utf8(base.text)) r.fail(root["extends"], "extends", base.source + " is not UTF-8 text");
  bases.push_back(base);
  Reader br(base.source);
  YAML::Node b = br.load(base.text);
  br.only_keys(b, "", kTopKeys);
  b = with_bases(br, b, base.source, resolve, chain, bases);
  Policy as_base;
  read_rules(br, b, as_base);
  return merge_policy(b, root);
}

}  // namespace

PolicyBase find_base(const std::string& name, const std::string& from) {
  if (name.find('/') == std::string::npos && !name.ends_with(".yaml") && !name.ends_with(".yml")) {
    std::string names;
    for (const auto& [shipped_name, text] : shipped()) {
      if (shipped_name == name) return {"builtin:" + name, text};
      names += (names.empty() ? "" : ", ") + shipped_name;
    }
    throw PolicyError("'" + name + "' is not a shipped policy (shipped: " + names + "; a file needs a / or a .yaml ending)");
  }
  if (from.starts_with("builtin:")) throw PolicyError("a shipped policy extends shipped ones only");
  std::filesystem::path path(name);
  if (path.is_relative()) path = std::filesystem::path(from).parent_path() / path;
  path = std::filesystem::absolute(path).lexically_normal();
  std::string text = read_policy_file(path.string());
  return {path.string(), text};
}

Policy parse(const std::string& text, const std::string& source, const BaseResolver& resolve) {
  return Reader::converting(source, [&] { return parse_yaml(text, source, resolve); });
}

Policy parse_yaml(const std::string& text, const std::string& source, const BaseResolver& resolve) {
  Reader r(source);
  YAML::Node root = r.load(text);
  r.only_keys(root, "", kTopKeys);
  Policy p;
  p.source = source;
  if (root["extends"]) {
    // The chain as found now: the record keeps each base's bytes with the
    // policy's own, so it says what was enforced without this flightrec's
    // shipped policies or the files.
    std::vector<std::string> chain;
    root = with_bases(r, root, source, resolve, chain, p.bases);
    p.source = source + " (extends";
    for (const auto& b : p.bases) p.source += " " + b.source;
    p.source += ")";
  }
  p.text = text;
  read_rules(r, root, p);
  return p;
}

namespace {

// The rules of a policy document (its chain merged in already) into p.
void read_rules(const Reader& r, const YAML::Node& root, Policy& p) {
  if (!root["version"]) r.fail(root, "version", "missing (this flightrec reads version 1)");
  if (r.number(root["version"], "version") != 1) r.fail(root["version"], "version", "only version 1 is known");
  if (!root["name"]) r.fail(root, "name", "missing");
  p.name = r.str(root["name"], "name");
  if (root["confine"]) p.confine = r.boolean(root["confine"], "confine");
  if (root["mode"]) p.mode = r.choice<Mode>(root["mode"], "mode", {{"enforce", Mode::Enforce}, {"shadow", Mode::Shadow}});
  if (root["on_violation"])
    p.on_violation = r.choice<OnViolation>(root["on_violation"], "on_violation",
                                           {{"kill", OnViolation::Kill}, {"deny-and-continue", OnViolation::DenyAndContinue}});
  if (root["hostname"]) {
    p.hostname = r.str(root["hostname"], "hostname");
    if (p.hostname.empty() || p.hostname.size() > 64 || p.hostname.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") != std::string::npos)
      r.fail(root["hostname"], "hostname", "'" + p.hostname + "' is not a host name (1-64 of a-z A-Z 0-9 - .)");
  }
  if (root["log"]) r.only_keys(root["log"], "log", {"stderr"});
  if (root["log"] && root["log"]["stderr"])
    p.log_stderr = r.choice<int>(root["log"]["stderr"], "log.stderr", {{"none", 0}, {"critical", 1}, {"alert", 2}, {"info", 3}});
  if (root["capabilities"]) {
    p.keep_capabilities = r.strings(root["capabilities"], "capabilities");
    for (size_t i = 0; i < p.keep_capabilities.size(); ++i)
      if (capability_number(p.keep_capabilities[i]) < 0)
        r.fail(root["capabilities"][i], "capabilities", "'" + p.keep_capabilities[i] + "' is not a capability name");
  }

  if (const auto& fs = root["filesystem"]) {
    r.only_keys(fs, "filesystem", {"root", "work_dir", "work_dir_mode", "protect", "home", "read_only", "read_write", "hidden",
                                   "exec", "keep_changes", "proc", "sys", "dev_pts"});
    auto& f = p.filesystem;
    if (fs["root"]) f.root = r.abs_path(fs["root"], "filesystem.root");
    if (fs["work_dir"]) {
      f.work_dir = r.str(fs["work_dir"], "filesystem.work_dir");
      if (f.work_dir != ".") f.work_dir = r.abs_path(fs["work_dir"], "filesystem.work_dir");
    }
    if (fs["read_only"]) f.read_only = r.paths(fs["read_only"], "filesystem.read_only");
    if (fs["read_write"]) f.read_write = r.paths(fs["read_write"], "filesystem.read_write");
    if (fs["hidden"]) f.hidden = r.paths(fs["hidden"], "filesystem.hidden");
    if (fs["exec"]) {
      if (fs["exec"].IsSequence() && fs["exec"].size() == 1 && fs["exec"][0].IsScalar() &&
          fs["exec"][0].Scalar() == "command")
        f.exec_only_command = true;
      else
        f.exec = r.paths(fs["exec"], "filesystem.exec");
    }
    if (fs["keep_changes"]) f.keep_changes = r.boolean(fs["keep_changes"], "filesystem.keep_changes");
    if (fs["work_dir_mode"])
      f.work_dir_mode = r.choice<WorkDirMode>(fs["work_dir_mode"], "filesystem.work_dir_mode",
                                              {{"write", WorkDirMode::Write}, {"overlay", WorkDirMode::Overlay}});
    for (const char* key : {"protect", "home"}) {
      if (!fs[key]) continue;
      std::string name = std::string("filesystem.") + key;
      auto& list = std::string(key) == "protect" ? f.protect : f.home;
      list = r.strings(fs[key], name);
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string& e = list[i];
        std::string norm = normalize_path("/" + e);
        if (e.empty() || e[0] == '/' || norm == "/" || norm.substr(1) != e)
          r.fail(fs[key][i], name,
                 "'" + e + "' must be a path relative to the " + (std::string(key) == "protect" ? "work directory" : "home directory") +
                     ", without '.', '..' or empty parts");
        if (std::string(key) == "home" && e.find('/') != std::string::npos)
          r.fail(fs[key][i], name, "'" + e + "' must be a name in the home directory (no '/')");
      }
    }
    if (fs["proc"]) f.proc = r.boolean(fs["proc"], "filesystem.proc");
    if (fs["sys"]) f.sys = r.boolean(fs["sys"], "filesystem.sys");
    if (fs["dev_pts"]) f.dev_pts = r.boolean(fs["dev_pts"], "filesystem.dev_pts");
    for (size_t i = 0; i < f.hidden.size(); ++i)
      if (f.hidden[i] == "/") r.fail(fs["hidden"][i], "filesystem.hidden", "cannot hide /");
    // The sandbox's /tmp and /dev/shm are its own, empty tmpfs: a tree
    // below them to read or write names nothing of the host's and cannot
    // take effect. (A hidden path there can: BPF-LSM keeps one the session
    // makes closed.)
    for (const char* key : {"read_only", "read_write"})
      for (size_t i = 0; fs[key] && i < fs[key].size(); ++i) {
        std::string path = r.abs_path(fs[key][i], std::string("filesystem.") + key);
        for (const char* priv : {"/tmp", "/dev/shm"})
          if (path.starts_with(std::string(priv) + "/"))
            r.fail(fs[key][i], std::string("filesystem.") + key,
                   "'" + path + "' is inside " + priv + ", which the sandbox gets as a private, empty tmpfs, so the "
                   "entry cannot take effect; to share a host directory, run flightrec from it (it becomes the "
                   "work directory) or name a directory outside " + priv);
      }
  }
  if (const auto& net = root["network"]) parse_network(r, net, p);
  if (const auto& procs = root["processes"]) parse_processes(r, procs, p);
  if (const auto& env = root["env"]) {
    r.only_keys(env, "env", {"pass", "set"});
    if (env["pass"]) {
      p.env.pass = r.strings(env["pass"], "env.pass");
      for (size_t i = 0; i < p.env.pass.size(); ++i)
        if (!env_name_ok(p.env.pass[i], true))
          r.fail(env["pass"][i], "env.pass", "'" + p.env.pass[i] + "' is not a variable name or a glob of one (A-Z a-z 0-9 _ *)");
    }
    if (env["set"]) {
      if (!env["set"].IsMap()) r.fail(env["set"], "env.set", "must be a mapping of NAME: value");
      for (const auto& kv : env["set"]) {
        std::string name = r.str(kv.first, "env.set");
        if (!env_name_ok(name, false)) r.fail(kv.first, "env.set", "'" + name + "' is not a variable name (A-Z a-z 0-9 _)");
        p.env.set.emplace_back(name, r.str(kv.second, "env.set." + name));
      }
    }
  }
  if (root["redact"]) {
    p.redact = r.strings(root["redact"], "redact");
    for (size_t i = 0; i < p.redact.size(); ++i)
      if (p.redact[i].size() < 3)
        r.fail(root["redact"][i], "redact", "'" + p.redact[i] + "' is too short to name a credential (at least 3 characters)");
  }
  if (root["seccomp"]) parse_seccomp(r, root["seccomp"], p);
  if (root["nested_sandboxes"]) {
    p.nested_sandboxes = r.boolean(root["nested_sandboxes"], "nested_sandboxes");
    if (p.nested_sandboxes) std::erase_if(p.seccomp.rules, nested_sandbox_rule);
  }
  if (root["limits"]) parse_limits(r, root["limits"], p.limits);
  if (root["ask"]) parse_ask(r, root["ask"], p);
  if (p.nested_sandboxes && p.ask.any())
    r.fail(root["nested_sandboxes"], "nested_sandboxes",
           "cannot be combined with ask: (grants are judged on paths a nested mount namespace could rebind)");
  if (!p.confine && (root["filesystem"] || root["network"] || root["seccomp"] || root["ask"] || root["env"]))
    r.fail(root["confine"], "confine", "false (observe only) cannot have filesystem, network, seccomp, ask or env rules");
}

}  // namespace

bool nested_sandbox_rule(const SyscallRule& rule) {
  static const std::set<std::string> calls = {"mount", "umount2", "pivot_root", "unshare", "setns"};
  constexpr uint64_t kCloneNew = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000;
  for (const auto& name : rule.names) {
    if (calls.count(name)) return true;
    if (name == "clone")
      for (const auto& c : rule.args)
        if (c.index == 0 && c.op == ArgCheck::Op::MaskedEq && (c.value & kCloneNew) && !(c.value & ~kCloneNew)) return true;
  }
  return false;
}

void override_env(Policy& p, const std::string& item) {
  if (!p.confine) throw PolicyError("--env: policy " + p.name + " does not confine: the command gets flightrec's environment");
  size_t eq = item.find('=');
  std::string name = item.substr(0, eq);
  if (!env_name_ok(name, false))
    throw PolicyError("--env " + item + ": expected NAME or NAME=VALUE with a variable name (A-Z a-z 0-9 _)");
  if (eq == std::string::npos) {
    p.env.pass.push_back(name);
    p.overrides.push_back("env.pass+=" + name);
    return;
  }
  std::erase_if(p.env.set, [&](const auto& kv) { return kv.first == name; });
  p.env.set.emplace_back(name, item.substr(eq + 1));
  p.overrides.push_back("env.set+=" + name);  // the name only: a value may be a secret
}

void add_allowed(Policy& p, const std::string& endpoint) {
  if (p.network != Network::Allowlist)
    throw PolicyError("--allow " + endpoint + ": policy " + p.name + " has no network allowlist (network.mode is not allowlist)");
  parse_allow_entry(Reader("--allow"), YAML::Node(endpoint), p);
  p.overrides.push_back("network.allow+=" + endpoint);
}

void override_limit(Policy& p, const std::string& key_value) {
  size_t eq = key_value.find('=');
  if (eq == std::string::npos || eq == 0)
    throw PolicyError("--limit " + key_value + ": expected KEY=VALUE, e.g. memory=512M or cpu_time=30s");
  if (!p.confine) throw PolicyError("--limit: policy " + p.name + " does not confine, so it has no limits");
  YAML::Node n(YAML::NodeType::Map);
  n[key_value.substr(0, eq)] = key_value.substr(eq + 1);
  parse_limits(Reader("--limit"), n, p.limits);
  p.overrides.push_back("limits." + key_value);
}

void reapply_override(Policy& p, const std::string& recorded) {
  auto after = [&](std::string_view prefix) -> std::optional<std::string> {
    if (!recorded.starts_with(prefix)) return std::nullopt;
    return recorded.substr(prefix.size());
  };
  if (auto e = after("network.allow+=")) return add_allowed(p, *e);
  if (auto kv = after("limits.")) return override_limit(p, *kv);
  if (auto n = after("env.pass+=")) return override_env(p, *n);
  if (auto n = after("env.set+=")) return override_env(p, *n + "=");  // the value is not in the record
  throw PolicyError("unknown recorded override '" + recorded + "'");
}

const std::vector<std::pair<std::string, std::string>>& shipped_policies_table();

const std::vector<int>& write_ask_syscalls() {
  static const std::vector<int> calls = {SYS_open,    SYS_openat,  SYS_openat2, SYS_creat,   SYS_mkdir,
                                         SYS_mkdirat, SYS_unlink,  SYS_unlinkat, SYS_rmdir,  SYS_rename,
                                         SYS_renameat, SYS_renameat2};
  return calls;
}

const std::vector<int>& exec_ask_syscalls() {
  static const std::vector<int> calls = {SYS_execve, SYS_execveat};
  return calls;
}

bool own_network(const Policy& p) {
  return p.confine &&
         (p.network == Network::None || (p.network == Network::Allowlist && p.allow.empty() && p.allow_hosts.empty() &&
                                                  !p.allow_dns && !p.ask.connect));
}

std::vector<std::string> executable_paths(const Policy& p, const std::string& work_dir, const std::string& command) {
  const auto& fs = p.filesystem;
  if (fs.exec_only_command) return {command, "/lib64/ld-linux-x86-64.so.2"};
  if (!fs.exec.empty()) return fs.exec;
  std::vector<std::string> out = fs.read_only;
  out.push_back(work_dir);
  return out;
}

int capability_number(const std::string& name) {
  static const char* names[] = {
      "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
      "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
      "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
      "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
      "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
      "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
      "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"};
  for (int i = 0; i < int(sizeof(names) / sizeof(names[0])); ++i)
    if (name == names[i]) return i;
  return -1;
}

const std::vector<std::pair<std::string, std::string>>& shipped() { return shipped_policies_table(); }

Policy load(const std::string& name_or_path) {
  if (name_or_path.find('/') == std::string::npos && !name_or_path.ends_with(".yaml") &&
      !name_or_path.ends_with(".yml")) {
    for (const auto& [name, text] : shipped())
      if (name == name_or_path) return parse(text, "builtin:" + name);
    std::string names;
    for (const auto& [name, text] : shipped()) names += (names.empty() ? "" : ", ") + name;
    throw PolicyError("no shipped policy named '" + name_or_path + "' (shipped: " + names +
                      "; a file path needs a / or a .yaml ending)");
  }
  return parse(read_policy_file(name_or_path), name_or_path);
}

std::string read_policy_file(const std::string& path) {
  // A regular file of sane size: not a device, a FIFO or a huge file.
  struct stat st;
  if (stat(path.c_str(), &st) != 0) throw PolicyError(errno_message("cannot read policy " + path, errno));
  if (!S_ISREG(st.st_mode)) throw PolicyError(path + ": a policy must be a regular file");
  if (st.st_size > (1 << 20)) throw PolicyError(path + ": a policy is at most 1 MiB");
  auto text = try_read_file(path);
  if (!text) throw PolicyError(errno_message("cannot read policy " + path, errno));
  return *text;
}

std::string effective_yaml(const Policy& p) {
  YAML::Node root = YAML::Load(p.text);
  if (root["extends"]) {
    // Laid over each base in turn, as parse did (the bases were read then).
    YAML::Node merged = YAML::Load(p.bases.back().text);
    for (size_t i = p.bases.size() - 1; i-- > 0;) merged = merge_policy(merged, YAML::Load(p.bases[i].text));
    root = merge_policy(merged, root);
    root.remove("extends");
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

}  // namespace flightrec::policy
