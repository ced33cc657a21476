#include "grants/grants.h"
#include "policy/network.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "events/syscall_table.h"
#include "policy/judge.h"

namespace flightrec::grants {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxDurationMs = 24ull * 3600 * 1000;
constexpr int64_t kMaxUses = 1'000'000'000;
constexpr size_t kMaxReason = 1000;
constexpr size_t kMaxPath = 4095;

bool only_keys(const json& j, const std::set<std::string>& known, std::string* error) {
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) {
      *error = "unknown key '" + k + "'";
      return false;
    }
  return true;
}

// A non-negative integer field, or false with *error set.
bool number(const json& j, const char* key, uint64_t max, uint64_t* out, std::string* error) {
  if (!j.contains(key)) return true;
  const json& v = j[key];
  if (!v.is_number_unsigned() || v.get<uint64_t>() > max) {
    *error = std::string(key) + " must be an integer from 0 to " + std::to_string(max);
    return false;
  }
  *out = v.get<uint64_t>();
  return true;
}

bool text(const json& j, const char* key, size_t max, std::string* out, std::string* error) {
  if (!j.contains(key)) return true;
  if (!j[key].is_string() || j[key].get<std::string>().size() > max) {
    *error = std::string(key) + " must be a string of at most " + std::to_string(max) + " bytes";
    return false;
  }
  *out = j[key].get<std::string>();
  if (out->find('\0') != std::string::npos) {
    *error = std::string(key) + " must not hold a NUL byte";
    return false;
  }
  return true;
}

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Write: return "write";
    case Kind::Syscall: return "syscall";
    case Kind::Connect: return "connect";
    case Kind::Exec: return "exec";
    case Kind::Name: return "name";
  }
  return "?";
}

int normal_endpoint(int family, uint8_t* addr) {
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (family != AF_INET6 || std::memcmp(addr, mapped, 12) != 0) return family;
  std::memmove(addr, addr + 12, 4);
  std::memset(addr + 4, 0, 12);
  return AF_INET;
}

std::optional<Request> parse_request(const std::string& line, std::string* error) {
  json j = json::parse(line, nullptr, false);  // invalid UTF-8 is a parse error too
  if (j.is_discarded() || !j.is_object()) {
    *error = "not a JSON object";
    return std::nullopt;
  }
  std::string op;
  if (!j.contains("op") || !text(j, "op", 16, &op, error)) {
    if (error->empty()) *error = "needs op: grant, revoke or list";
    return std::nullopt;
  }
  Request r;
  if (op == "list") {
    if (!only_keys(j, {"op"}, error)) return std::nullopt;
    r.op = Request::Op::List;
    return r;
  }
  if (op == "revoke") {
    r.op = Request::Op::Revoke;
    if (!only_keys(j, {"op", "id", "reason"}, error) || !number(j, "id", UINT64_MAX, &r.revoke_id, error) ||
        !text(j, "reason", kMaxReason, &r.reason, error))
      return std::nullopt;
    if (!r.revoke_id) {
      *error = "revoke needs the grant's id";
      return std::nullopt;
    }
    return r;
  }
  if (op != "grant") {
    *error = "op must be grant, revoke or list";
    return std::nullopt;
  }
  r.op = Request::Op::Grant;
  Grant& g = r.grant;
  std::string kind, syscall;
  uint64_t uses = 0, port = 0;
  if (!only_keys(j, {"op", "kind", "path", "syscall", "address", "name", "port", "duration_ms", "uses", "reason"}, error) ||
      !text(j, "address", 64, &g.address, error) || !text(j, "name", 256, &g.name, error) || !number(j, "port", 65535, &port, error) ||
      !text(j, "kind", 16, &kind, error) || !text(j, "path", kMaxPath, &g.path, error) ||
      !text(j, "syscall", 64, &syscall, error) || !number(j, "duration_ms", kMaxDurationMs, &r.duration_ms, error) ||
      !number(j, "uses", uint64_t(kMaxUses), &uses, error) || !text(j, "reason", kMaxReason, &g.reason, error))
    return std::nullopt;
  if (j.contains("uses") && uses == 0) {
    *error = "uses must be at least 1 (leave it out for no count limit)";
    return std::nullopt;
  }
  if (j.contains("duration_ms") && r.duration_ms == 0) {
    *error = "duration_ms must be at least 1 (leave it out for no time limit)";
    return std::nullopt;
  }
  g.uses_left = j.contains("uses") ? int64_t(uses) : -1;
  if (kind == "write" || kind == "exec") {
    g.kind = kind == "write" ? Kind::Write : Kind::Exec;
    if (g.path.empty() || g.path[0] != '/' || j.contains("syscall") || j.contains("address") || j.contains("port")) {
      *error = kind == "write" ? "a write grant needs path, an absolute directory as the sandbox sees it (and no syscall)"
                               : "an exec grant needs path, an absolute file or directory as the sandbox sees it "
                                 "(and no syscall)";
      return std::nullopt;
    }
  } else if (kind == "syscall") {
    g.kind = Kind::Syscall;
    auto nr = events::syscall_number(syscall);
    if (!nr || j.contains("path") || j.contains("address") || j.contains("port")) {
      *error = "a syscall grant needs syscall, an x86-64 system call name (and no path)";
      return std::nullopt;
    }
    g.syscall = int(*nr);
  } else if (kind == "connect") {
    g.kind = Kind::Connect;
    if (j.contains("path") || j.contains("syscall") || port == 0) {
      *error = "a connect grant needs address (an IP address) and port (1 to 65535), and no path or syscall";
      return std::nullopt;
    }
    if (inet_pton(AF_INET, g.address.c_str(), g.addr) == 1) g.family = AF_INET;
    else if (inet_pton(AF_INET6, g.address.c_str(), g.addr) == 1) g.family = AF_INET6;
    else {
      *error = "address must be an IPv4 or IPv6 address, not '" + g.address + "' (a client resolves names itself)";
      return std::nullopt;
    }
    g.family = normal_endpoint(g.family, g.addr);
    char text_form[INET6_ADDRSTRLEN] = {};
    inet_ntop(g.family, g.addr, text_form, sizeof(text_form));
    g.address = text_form;
    g.port = uint16_t(port);
  } else if (kind == "name") {
    g.kind = Kind::Name;
    auto name = policy::normal_host_name(g.name, true);
    // A wildcard names a domain of two labels at least (*.com would be any host).
    bool too_broad = name && name->starts_with("*.") && name->find('.', 2) == std::string::npos;
    if (!name || name->find('*', 1) != std::string::npos || too_broad || j.contains("path") || j.contains("syscall") ||
        j.contains("address") || j.contains("uses") || !j.contains("port") || port == 53 || port == 853) {
      *error = "a name grant needs name (a host name, or *.domain of two labels at least) and port (1 to 65535, "
               "or 0 for any; not 53 or 853: names are asked of the session's resolver), and no path, syscall, "
               "address or uses (it lasts for duration_ms or until revoked)";
      return std::nullopt;
    }
    g.name = *name;
    g.port = uint16_t(port);
  } else {
    *error = "kind must be write, syscall, connect, exec or name";
    return std::nullopt;
  }
  if (kind != "name" && j.contains("name")) {
    *error = "name is for a name grant";
    return std::nullopt;
  }
  return r;
}

uint64_t GrantTable::add(Grant g) {
  g.id = next_id_++;
  grants_.push_back(std::move(g));
  return grants_.back().id;
}

bool GrantTable::revoke(uint64_t id) {
  auto it = std::find_if(grants_.begin(), grants_.end(), [&](const Grant& g) { return g.id == id; });
  if (it == grants_.end()) return false;
  grants_.erase(it);
  return true;
}

std::vector<Grant> GrantTable::expire(uint64_t now_ns) {
  std::vector<Grant> out;
  auto up = [&](const Grant& g) { return g.expires_ns && g.expires_ns <= now_ns; };
  for (const auto& g : grants_)
    if (up(g)) out.push_back(g);
  std::erase_if(grants_, up);
  return out;
}

uint64_t GrantTable::next_expiry() const {
  uint64_t next = 0;
  for (const auto& g : grants_)
    if (g.expires_ns && (!next || g.expires_ns < next)) next = g.expires_ns;
  return next;
}

Grant* GrantTable::for_syscall(int nr, uint64_t now_ns) {
  for (auto& g : grants_)
    if (g.kind == Kind::Syscall && g.syscall == nr && (!g.expires_ns || g.expires_ns > now_ns)) return &g;
  return nullptr;
}

Grant* GrantTable::for_connect(int family, const uint8_t* addr, uint16_t port, uint64_t now_ns) {
  for (auto& g : grants_)
    if (g.kind == Kind::Connect && g.family == family && g.port == port && std::memcmp(g.addr, addr, 16) == 0 &&
        (!g.expires_ns || g.expires_ns > now_ns))
      return &g;
  return nullptr;
}

Grant* GrantTable::for_exec(const std::string& canonical, uint64_t now_ns) {
  for (auto& g : grants_) {
    if (g.kind == Kind::Exec && (!g.expires_ns || g.expires_ns > now_ns) && policy::path_under(canonical, g.path))
      return &g;
  }
  return nullptr;
}

Grant* GrantTable::for_name(const std::string& name, uint64_t now_ns) {
  for (auto& g : grants_)
    if (g.kind == Kind::Name && (!g.expires_ns || g.expires_ns > now_ns) &&
        policy::host_matches(policy::HostRule{"", g.name, g.port}, name))
      return &g;
  return nullptr;
}

std::vector<Grant*> GrantTable::writes(uint64_t now_ns) {
  std::vector<Grant*> out;
  for (auto& g : grants_)
    if (g.kind == Kind::Write && (!g.expires_ns || g.expires_ns > now_ns)) out.push_back(&g);
  return out;
}

bool GrantTable::use(Grant& g) {
  if (g.uses_left < 0 || --g.uses_left > 0) return false;
  revoke(g.id);
  return true;
}

}  // namespace flightrec::grants
