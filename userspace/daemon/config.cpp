// The daemon's config file: YAML read with yaml-cpp (it keeps the line of
// every node), checked key by key in the style of policy files.
#include "daemon/config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>
#include <yaml-cpp/yaml.h>

#include "inspect/filter.h"
#include "policy/yaml_reader.h"
#include "policy/policy.h"

namespace flightrec::daemon {
namespace {

constexpr const char* kLowerName = "abcdefghijklmnopqrstuvwxyz0123456789_-";
constexpr const char* kAnyName = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";

bool has_control(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return (unsigned char)c < 0x20 || c == 0x7f; });
}

class Reader : public policy::YamlReader<ConfigError> {
 public:
  using YamlReader::YamlReader;

  // Decimal digits only: no sign, no 0x, no octal surprises.
  uint64_t number(const YAML::Node& n, const std::string& key) const {
    std::string s = str(n, key);
    errno = 0;
    unsigned long long v = strtoull(s.c_str(), nullptr, 10);
    if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos || errno)
      fail(n, key, "'" + s + "' is not a non-negative integer");
    return v;
  }

  uint64_t size(const YAML::Node& n, const std::string& key) const {
    std::string s = str(n, key);
    bool too_large = false;
    auto v = policy::parse_bytes(s, &too_large);
    if (too_large) fail(n, key, "'" + s + "' is too large");
    if (!v || *v == 0) fail(n, key, "'" + s + "' is not a size like 256M or 10G");
    return *v;
  }

  uint64_t age(const YAML::Node& n, const std::string& key) const {
    std::string s = str(n, key);
    bool too_large = false;
    auto v = parse_age_ms(s, &too_large);
    if (too_large) fail(n, key, "'" + s + "' is too large");
    if (!v || *v == 0) fail(n, key, "'" + s + "' is not a duration like 30s, 10m, 12h or 30d");
    return *v;
  }

  // As policy files spell paths: absolute, no '..', one spelling.
  std::string abs_path(const YAML::Node& n, const std::string& key) const {
    std::string p = str(n, key);
    if (p.empty() || p[0] != '/') fail(n, key, "'" + p + "' must be an absolute path");
    if (has_control(p)) fail(n, key, "'" + p + "' must not contain control characters");
    if (p.find("/../") != std::string::npos || p.ends_with("/..")) fail(n, key, "'" + p + "' must not contain '..'");
    for (size_t at; (at = p.find("//")) != std::string::npos;) p.erase(at, 1);
    for (size_t at; (at = p.find("/./")) != std::string::npos;) p.erase(at, 2);
    if (p.ends_with("/.")) p.pop_back();
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return p;
  }

};

const std::map<std::string, std::string> kOnLoss = {
    {"continue", "continue"}, {"kill", "kill"}, {"backpressure", "backpressure"}};

// HOST:PORT with HOST an IPv4 literal, [IPv6 literal] or localhost.
bool valid_listen(const std::string& s) {
  std::string host, port;
  if (s.starts_with("[")) {
    size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') return false;
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
    in6_addr a6;
    if (inet_pton(AF_INET6, host.c_str(), &a6) != 1) return false;
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos) return false;
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
    in_addr a4;
    if (host != "localhost" && inet_pton(AF_INET, host.c_str(), &a4) != 1) return false;
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return false;
  unsigned long v = std::stoul(port);
  return v >= 1 && v <= 65535;
}

std::string cgroup_glob(const Reader& r, const YAML::Node& n, const std::string& key) {
  std::string g = r.str(n, key);
  if (g.empty()) r.fail(n, key, "must not be empty");
  if (g.size() > 4096) r.fail(n, key, "at most 4096 characters");
  if (has_control(g)) r.fail(n, key, "'" + g + "' must not contain control characters");
  if (g[0] == '/') r.fail(n, key, "'" + g + "' must be relative to the cgroup v2 root (no leading '/')");
  size_t start = 0;
  while (true) {
    size_t slash = g.find('/', start);
    std::string c = g.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (c.empty()) r.fail(n, key, "'" + g + "' has an empty component");
    if (c == "..") r.fail(n, key, "'" + g + "' must not have '..' components");
    if (c == ".") r.fail(n, key, "'" + g + "' must not have '.' components");
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return g;
}

// A shipped policy's name or an absolute path; kept as written (the caller
// loads it). A relative file name would depend on the daemon's cwd.
std::string policy_ref(const Reader& r, const YAML::Node& n, const std::string& key) {
  std::string p = r.str(n, key);
  if (p.find('/') != std::string::npos) {
    r.abs_path(n, key);
    return p;
  }
  if (p.ends_with(".yaml") || p.ends_with(".yml"))
    r.fail(n, key, "'" + p + "' is a relative path; give a policy file as an absolute path");
  if (p.empty() || p.size() > 64 || p.find_first_not_of(kAnyName) != std::string::npos || p == "." || p == "..")
    r.fail(n, key, "'" + p + "' is neither a policy name nor an absolute path");
  return p;
}

WatchRule watch_rule(const Reader& r, const YAML::Node& n, const Config& c) {
  r.only_keys(n, "watch", {"name", "cgroup", "mode", "policy", "tls", "key", "on_loss"});
  WatchRule w;
  w.line = n.Mark().line + 1;
  if (!n["name"]) r.fail(n, "watch.name", "missing");
  w.name = r.str(n["name"], "watch.name");
  if (w.name.empty() || w.name.size() > 64 || w.name.find_first_not_of(kLowerName) != std::string::npos)
    r.fail(n["name"], "watch.name", "'" + w.name + "' is not a name (1-64 of a-z 0-9 _ -)");
  if (!n["cgroup"]) r.fail(n, "watch.cgroup", "missing");
  w.cgroup_glob = cgroup_glob(r, n["cgroup"], "watch.cgroup");
  if (n["mode"])
    w.mode = r.choice<WatchRule::Mode>(n["mode"], "watch.mode",
                                       {{"full", WatchRule::Mode::Full}, {"lite", WatchRule::Mode::Lite}});
  if (n["policy"]) w.policy = policy_ref(r, n["policy"], "watch.policy");
  if (n["tls"]) w.tls = r.boolean(n["tls"], "watch.tls");
  w.key_dir = n["key"] ? r.abs_path(n["key"], "watch.key") : c.key_dir;
  w.on_loss = n["on_loss"] ? r.choice(n["on_loss"], "watch.on_loss", kOnLoss) : c.on_loss;
  return w;
}

// An output's name: [a-z0-9_-]{1,64}, required.
std::string output_name(const Reader& r, const YAML::Node& n, const std::string& prefix) {
  if (!n["name"]) r.fail(n, prefix + ".name", "missing");
  std::string name = r.str(n["name"], prefix + ".name");
  if (name.empty() || name.size() > 64 || name.find_first_not_of(kLowerName) != std::string::npos)
    r.fail(n["name"], prefix + ".name", "'" + name + "' is not a name (1-64 of a-z 0-9 _ -)");
  return name;
}

// Which entries an output sends: `types` (entry types, or [all]) and `min_level`.
ship::EntryFilter entry_filter(const Reader& r, const YAML::Node& n, const std::string& prefix) {
  ship::EntryFilter f;
  if (const YAML::Node& t = n["types"]) {
    if (!t.IsSequence() || t.size() == 0) r.fail(t, prefix + ".types", "must be a non-empty list of entry types, or [all]");
    f.types.clear();
    for (const auto& item : t) {
      std::string type = r.str(item, prefix + ".types");
      if (type == "all") f.all_types = true;
      else if (std::find(inspect::entry_types().begin(), inspect::entry_types().end(), type) == inspect::entry_types().end())
        r.fail(item, prefix + ".types", "'" + type + "' is not an entry type (docs/FORMAT.md lists them)");
      f.types.push_back(type);
    }
    if (f.all_types && f.types.size() > 1) r.fail(t, prefix + ".types", "'all' stands alone");
    std::sort(f.types.begin(), f.types.end());
    if (std::adjacent_find(f.types.begin(), f.types.end()) != f.types.end())
      r.fail(t, prefix + ".types", "names a type twice");
  }
  if (n["min_level"])
    f.min_level = r.choice<int>(n["min_level"], prefix + ".min_level",
                                {{"info", ship::EntryFilter::Info}, {"alert", ship::EntryFilter::Alert},
                                 {"critical", ship::EntryFilter::Critical}});
  return f;
}

// An output's tls: map (the CA file is required unless a default is).
ship::TlsSettings tls_settings(const Reader& r, const YAML::Node& t, const std::string& p, bool ca_required) {
  r.only_keys(t, p + ".tls", {"ca", "cert", "key", "server_name"});
  ship::TlsSettings tls;
  tls.on = true;
  if (!t["ca"] && ca_required) r.fail(t, p + ".tls.ca", "missing (the CA file the server's certificate must chain to)");
  if (t["ca"]) tls.ca_file = r.abs_path(t["ca"], p + ".tls.ca");
  if (t["cert"]) tls.cert_file = r.abs_path(t["cert"], p + ".tls.cert");
  if (t["key"]) tls.key_file = r.abs_path(t["key"], p + ".tls.key");
  if (tls.cert_file.empty() != tls.key_file.empty())
    r.fail(t, p + ".tls", "cert and key go together (a client certificate and its private key)");
  if (t["server_name"]) {
    tls.server_name = r.str(t["server_name"], p + ".tls.server_name");
    if (tls.server_name.empty() || tls.server_name.size() > 253 ||
        tls.server_name.find_first_not_of(std::string(kAnyName) + ":") != std::string::npos)
      r.fail(t["server_name"], p + ".tls.server_name", "'" + tls.server_name + "' is not a host name");
  }
  return tls;
}

ship::SyslogSettings syslog_output(const Reader& r, const YAML::Node& n) {
  const std::string p = "outputs.syslog";
  if (!n.IsMap()) r.fail(n, p, "each output is a map (name, address, ...)");
  r.only_keys(n, p, {"name", "address", "tls", "facility", "types", "min_level", "queue", "hostname"});
  ship::SyslogSettings o;
  o.name = output_name(r, n, p);
  if (!n["address"]) r.fail(n, p + ".address", "missing (HOST:PORT of the syslog server's TCP or TLS listener)");
  o.address = r.str(n["address"], p + ".address");
  if (!ship::split_address(o.address, o.host, o.port) || o.host.size() > 253 ||
      o.host.find_first_not_of(std::string(kAnyName) + ":") != std::string::npos)
    r.fail(n["address"], p + ".address", "'" + o.address + "' is not HOST:PORT (a name, an IPv4 address or [IPv6 address]; a port 1-65535)");
  if (const YAML::Node& t = n["tls"]) o.tls = tls_settings(r, t, p, true);
  if (n["facility"]) {
    std::string f = r.str(n["facility"], p + ".facility");
    o.facility = ship::syslog_facility(f);
    if (o.facility < 0)
      r.fail(n["facility"], p + ".facility", "'" + f + "' is not a syslog facility (auth, authpriv, daemon, local0-7, ...)");
  }
  o.filter = entry_filter(r, n, p);
  if (n["queue"]) {
    o.queue_max = r.number(n["queue"], p + ".queue");
    if (o.queue_max == 0 || o.queue_max > 10'000'000) r.fail(n["queue"], p + ".queue", "must be from 1 to 10000000 messages");
  }
  if (n["hostname"]) {
    o.hostname = r.str(n["hostname"], p + ".hostname");
    if (o.hostname.empty() || o.hostname.size() > 255 ||
        std::any_of(o.hostname.begin(), o.hostname.end(), [](char ch) { return ch < 33 || ch > 126; }))
      r.fail(n["hostname"], p + ".hostname", "must be 1-255 printable ASCII characters without spaces");
  }
  return o;
}

// [A-Za-z0-9_-] tokens joined by '.': no wildcard, no empty token.
bool subject_like(const std::string& s) {
  if (s.empty() || s.size() > 128 || s.front() == '.' || s.back() == '.' || s.find("..") != std::string::npos) return false;
  return s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == std::string::npos;
}

ship::JetStreamSettings jetstream_output(const Reader& r, const YAML::Node& n, const std::string& storage_dir) {
  const std::string p = "outputs.jetstream";
  if (!n.IsMap()) r.fail(n, p, "each output is a map (name, url, ...)");
  r.only_keys(n, p, {"name", "url", "stream", "subject_prefix", "create_stream", "tls", "spool"});
  ship::JetStreamSettings o;
  o.name = output_name(r, n, p);
  if (!n["url"]) r.fail(n, p + ".url", "missing (nats://HOST:PORT of a JetStream server; several, comma-separated)");
  o.url = r.str(n["url"], p + ".url");
  size_t start = 0;
  while (true) {
    size_t comma = o.url.find(',', start);
    std::string one = o.url.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::string rest = one.starts_with("nats://") ? one.substr(7) : one.starts_with("tls://") ? one.substr(6) : "";
    std::string host;
    uint16_t port = 0;
    if (rest.empty() || !ship::split_address(rest, host, port) ||
        host.find_first_not_of(std::string(kAnyName) + ":") != std::string::npos)
      r.fail(n["url"], p + ".url", "'" + one + "' is not nats://HOST:PORT or tls://HOST:PORT");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (n["stream"]) {
    o.stream = r.str(n["stream"], p + ".stream");
    if (o.stream.empty() || o.stream.size() > 64 || o.stream.find_first_not_of(std::string(kAnyName)) != std::string::npos ||
        o.stream.find('.') != std::string::npos)
      r.fail(n["stream"], p + ".stream", "'" + o.stream + "' is not a stream name (1-64 of A-Z a-z 0-9 _ -)");
  }
  if (n["subject_prefix"]) {
    o.subject_prefix = r.str(n["subject_prefix"], p + ".subject_prefix");
    if (!subject_like(o.subject_prefix))
      r.fail(n["subject_prefix"], p + ".subject_prefix", "'" + o.subject_prefix + "' is not a subject without wildcards");
  }
  if (n["create_stream"]) o.create_stream = r.boolean(n["create_stream"], p + ".create_stream");
  if (const YAML::Node& t = n["tls"]) {
    r.only_keys(t, p + ".tls", {"ca"});
    if (!t["ca"]) r.fail(t, p + ".tls.ca", "missing (the CA file the server's certificate must chain to)");
    o.ca_file = r.abs_path(t["ca"], p + ".tls.ca");
  }
  o.spool_dir = storage_dir + "/spool/" + o.name;
  if (const YAML::Node& sp = n["spool"]) {
    r.only_keys(sp, p + ".spool", {"dir", "max"});
    if (sp["dir"]) o.spool_dir = r.abs_path(sp["dir"], p + ".spool.dir");
    if (sp["max"]) {
      o.spool_max = r.size(sp["max"], p + ".spool.max");
      if (o.spool_max < (1u << 20)) r.fail(sp["max"], p + ".spool.max", "must be at least 1M");
    }
  }
  return o;
}

ship::WebSocketSettings websocket_output(const Reader& r, const YAML::Node& n) {
  const std::string p = "outputs.websocket";
  if (!n.IsMap()) r.fail(n, p, "each output is a map (name, listen, token_file, ...)");
  r.only_keys(n, p, {"name", "listen", "token_file", "unix", "buffer", "client_queue", "max_clients", "types", "min_level"});
  ship::WebSocketSettings o;
  if (n["types"] || n["min_level"]) {
    o.filter = entry_filter(r, n, p);
    if (!n["types"]) o.filter = {true, {"all"}, o.filter.min_level};
  }
  o.name = output_name(r, n, p);
  if (n["listen"]) {
    o.listen = r.str(n["listen"], p + ".listen");
    if (!valid_listen(o.listen))
      r.fail(n["listen"], p + ".listen", "'" + o.listen + "' is not HOST:PORT (an IPv4 address, [IPv6 address] or localhost)");
    if (!n["token_file"]) r.fail(n, p + ".token_file", "missing: a TCP listener takes clients with the bearer token in it only");
  }
  if (n["token_file"]) o.token_file = r.abs_path(n["token_file"], p + ".token_file");
  if (n["unix"]) {
    o.unix_path = r.abs_path(n["unix"], p + ".unix");
    if (o.unix_path.size() >= sizeof(sockaddr_un::sun_path)) r.fail(n["unix"], p + ".unix", "too long for a UNIX socket address");
  }
  if (o.listen.empty() && o.unix_path.empty()) r.fail(n, p, "needs listen (HOST:PORT, with token_file) or unix (a socket path), or both");
  if (n["buffer"]) o.buffer_bytes = r.size(n["buffer"], p + ".buffer");
  if (n["client_queue"]) o.client_queue_bytes = r.size(n["client_queue"], p + ".client_queue");
  if (n["max_clients"]) {
    o.max_clients = r.number(n["max_clients"], p + ".max_clients");
    if (o.max_clients == 0 || o.max_clients > 4096) r.fail(n["max_clients"], p + ".max_clients", "must be from 1 to 4096");
  }
  return o;
}

ship::OtlpSettings otlp_output(const Reader& r, const YAML::Node& n) {
  const std::string p = "outputs.otlp";
  if (!n.IsMap()) r.fail(n, p, "each output is a map (name, endpoint, ...)");
  r.only_keys(n, p, {"name", "endpoint", "encoding", "tls", "headers", "queue"});
  ship::OtlpSettings o;
  o.name = output_name(r, n, p);
  if (!n["endpoint"]) r.fail(n, p + ".endpoint", "missing (the collector's OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces)");
  o.endpoint = r.str(n["endpoint"], p + ".endpoint");
  if (!ship::parse_otlp_endpoint(o.endpoint, o))
    r.fail(n["endpoint"], p + ".endpoint", "'" + o.endpoint + "' is not http(s)://HOST[:PORT][/PATH] (no user:password@: use headers)");
  if (n["encoding"]) o.json = r.choice<bool>(n["encoding"], p + ".encoding", {{"protobuf", false}, {"json", true}});
  if (const YAML::Node& t = n["tls"]) {
    if (!o.tls.on) r.fail(t, p + ".tls", "goes with an https:// endpoint");
    o.tls = tls_settings(r, t, p, false);
  }
  if (o.tls.on && o.tls.ca_file.empty()) o.tls.ca_file = "/etc/ssl/certs/ca-certificates.crt";  // the system's CAs
  if (const YAML::Node& h = n["headers"]) {
    if (!h.IsMap()) r.fail(h, p + ".headers", "a map of header names to values");
    for (const auto& kv : h) {
      std::string name = r.str(kv.first, p + ".headers"), value = r.str(kv.second, p + ".headers." + name);
      bool token = !name.empty() && name.size() <= 128 &&
                   name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == std::string::npos;
      if (!token) r.fail(kv.first, p + ".headers", "'" + name + "' is not a header name (letters, digits, - and _)");
      if (value.size() > 8192 || std::any_of(value.begin(), value.end(), [](char ch) { return ch == '\r' || ch == '\n' || ch == '\0'; }))
        r.fail(kv.second, p + ".headers." + name, "a header value is one line of at most 8192 bytes");
      std::string lower = name;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      if (lower == "host" || lower == "content-length" || lower == "content-type" || lower == "transfer-encoding")
        r.fail(kv.first, p + ".headers", "'" + name + "' is flightrec's to set");
      o.headers.emplace_back(name, value);
    }
  }
  if (n["queue"]) {
    o.queue_max = r.number(n["queue"], p + ".queue");
    if (o.queue_max == 0 || o.queue_max > 10'000'000) r.fail(n["queue"], p + ".queue", "must be from 1 to 10000000 spans");
  }
  return o;
}

Config parse_yaml(const std::string& text, const std::string& source) {
  Reader r(source);
  YAML::Node doc = r.load(text);
  const YAML::Node& root = doc;  // const: lookups never add keys
  if (root.IsNull()) throw ConfigError(source + ": empty (needs at least version: 1 and storage.dir)");
  r.only_keys(root, "",
              {"version", "storage", "socket", "metrics", "ring", "on_loss", "key", "lite", "runs", "watch", "outputs"});
  Config c;
  c.source = source;
  if (!root["version"]) r.fail(root, "version", "missing (this flightrec reads version 1)");
  if (r.number(root["version"], "version") != 1) r.fail(root["version"], "version", "only version 1 is known");

  const YAML::Node& st = root["storage"];
  if (!st) r.fail(root, "storage", "missing (storage.dir is required)");
  r.only_keys(st, "storage", {"dir", "rotate", "retain", "disk_full_action", "min_free"});
  if (!st["dir"]) r.fail(st, "storage.dir", "missing");
  c.storage_dir = r.abs_path(st["dir"], "storage.dir");
  if (c.storage_dir == "/") r.fail(st["dir"], "storage.dir", "cannot be /");
  if (const YAML::Node& ro = st["rotate"]) {
    r.only_keys(ro, "storage.rotate", {"size", "age"});
    if (ro["size"]) c.rotate_bytes = r.size(ro["size"], "storage.rotate.size");
    if (ro["age"]) c.rotate_age_ms = r.age(ro["age"], "storage.rotate.age");
  }
  if (const YAML::Node& re = st["retain"]) {
    r.only_keys(re, "storage.retain", {"total", "age", "count"});
    if (re["total"]) c.retain_bytes = r.size(re["total"], "storage.retain.total");
    if (re["age"]) c.retain_age_ms = r.age(re["age"], "storage.retain.age");
    if (re["count"]) {
      c.retain_count = r.number(re["count"], "storage.retain.count");
      if (c.retain_count == 0) r.fail(re["count"], "storage.retain.count", "must be at least 1");
    }
  }
  if (st["min_free"]) c.min_free_bytes = r.size(st["min_free"], "storage.min_free");
  if (st["disk_full_action"])
    c.disk_full = r.choice<Config::DiskFull>(
        st["disk_full_action"], "storage.disk_full_action",
        {{"rotate", Config::DiskFull::Rotate}, {"suspend", Config::DiskFull::Suspend}, {"stop", Config::DiskFull::Stop}});

  if (const YAML::Node& so = root["socket"]) {
    r.only_keys(so, "socket", {"path", "group"});
    if (so["path"]) {
      c.socket_path = r.abs_path(so["path"], "socket.path");
      if (c.socket_path.size() >= sizeof(sockaddr_un::sun_path))
        r.fail(so["path"], "socket.path",
               "'" + c.socket_path + "' is longer than a UNIX socket address allows (" +
                   std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes)");
    }
    if (so["group"]) {
      c.socket_group = r.str(so["group"], "socket.group");
      if (c.socket_group.empty() || c.socket_group.size() > 32 || c.socket_group[0] == '-' ||
          c.socket_group.find_first_not_of(kAnyName) != std::string::npos)
        r.fail(so["group"], "socket.group", "'" + c.socket_group + "' is not a group name");
    }
  }
  if (const YAML::Node& me = root["metrics"]) {
    r.only_keys(me, "metrics", {"listen"});
    if (me["listen"]) {
      c.metrics_listen = r.str(me["listen"], "metrics.listen");
      if (!valid_listen(c.metrics_listen))
        r.fail(me["listen"], "metrics.listen",
               "'" + c.metrics_listen + "' is not HOST:PORT (an IPv4 address, [IPv6 address] or localhost; "
               "a port 1-65535)");
    }
  }
  if (root["ring"]) {
    std::string s = r.str(root["ring"], "ring");
    auto v = policy::parse_bytes(s);
    // The BPF ring buffer's size must be a power of two (and of pages).
    if (!v || *v < (64u << 10) || *v > (1u << 30) || (*v & (*v - 1)))
      r.fail(root["ring"], "ring", "'" + s + "' must be a power of two from 64K to 1G");
    c.ring_bytes = *v;
  }
  if (const YAML::Node& li = root["lite"]) {
    r.only_keys(li, "lite", {"counts_interval"});
    if (li["counts_interval"]) {
      c.lite_counts_ms = r.age(li["counts_interval"], "lite.counts_interval");
      if (c.lite_counts_ms < 1000 || c.lite_counts_ms > 24ull * 3600 * 1000)
        r.fail(li["counts_interval"], "lite.counts_interval", "must be from 1s to 24h");
    }
  }
  if (const YAML::Node& ru = root["runs"]) {
    r.only_keys(ru, "runs", {"accept", "tls", "entry_times"});
    if (ru["entry_times"]) c.runs_entry_times = r.boolean(ru["entry_times"], "runs.entry_times");
    if (ru["accept"]) c.runs_accept = r.boolean(ru["accept"], "runs.accept");
    if (ru["tls"]) c.runs_tls = r.boolean(ru["tls"], "runs.tls");
  }
  if (root["on_loss"]) c.on_loss = r.choice(root["on_loss"], "on_loss", kOnLoss);
  if (root["key"]) c.key_dir = r.abs_path(root["key"], "key");

  if (const YAML::Node& w = root["watch"]; w && !w.IsNull()) {  // "watch:" alone: no rules
    if (!w.IsSequence()) r.fail(w, "watch", "must be a list of rules");
    if (w.size() > 1024) r.fail(w, "watch", "at most 1024 rules");
    std::map<std::string, int> lines;
    for (const auto& item : w) {
      WatchRule rule = watch_rule(r, item, c);
      if (auto [it, fresh] = lines.emplace(rule.name, rule.line); !fresh)
        r.fail(item["name"], "watch.name",
               "'" + rule.name + "' is already the name of the rule at line " + std::to_string(it->second));
      c.watch.push_back(std::move(rule));
    }
  }
  if (const YAML::Node& out = root["outputs"]; out && !out.IsNull()) {
    r.only_keys(out, "outputs", {"syslog", "jetstream", "websocket", "otlp"});
    std::map<std::string, int> lines;  // output names, of every kind: unique
    auto unique = [&](const YAML::Node& item, const std::string& key, const std::string& name) {
      if (auto [it, fresh] = lines.emplace(name, item.Mark().line + 1); !fresh)
        r.fail(item["name"], key, "'" + name + "' is already the name of the output at line " + std::to_string(it->second));
    };
    auto list = [&](const char* kind) -> const YAML::Node {
      const YAML::Node& l = out[kind];
      if (!l || l.IsNull()) return YAML::Node();
      if (!l.IsSequence()) r.fail(l, std::string("outputs.") + kind, "must be a list of outputs");
      if (l.size() > 16) r.fail(l, std::string("outputs.") + kind, "at most 16 outputs");
      return l;
    };
    for (const auto& item : list("syslog")) {
      ship::SyslogSettings o = syslog_output(r, item);
      unique(item, "outputs.syslog.name", o.name);
      c.syslog_outputs.push_back(std::move(o));
    }
    for (const auto& item : list("jetstream")) {
      ship::JetStreamSettings o = jetstream_output(r, item, c.storage_dir);
      unique(item, "outputs.jetstream.name", o.name);
      c.jetstream_outputs.push_back(std::move(o));
    }
    for (const auto& item : list("websocket")) {
      ship::WebSocketSettings o = websocket_output(r, item);
      unique(item, "outputs.websocket.name", o.name);
      c.websocket_outputs.push_back(std::move(o));
    }
    for (const auto& item : list("otlp")) {
      ship::OtlpSettings o = otlp_output(r, item);
      unique(item, "outputs.otlp.name", o.name);
      c.otlp_outputs.push_back(std::move(o));
    }
  }
  return c;
}

// Components of a '/'-separated path; one leading '/' dropped; "" is the
// root (no components). Empty components are kept (callers refuse them).
std::vector<std::string_view> components(std::string_view s, bool drop_leading_slash) {
  if (drop_leading_slash && s.starts_with('/')) s.remove_prefix(1);
  std::vector<std::string_view> out;
  if (s.empty()) return out;
  while (true) {
    size_t slash = s.find('/');
    out.push_back(s.substr(0, slash));
    if (slash == std::string_view::npos) break;
    s.remove_prefix(slash + 1);
  }
  return out;
}

bool sane(const std::vector<std::string_view>& parts) {
  return std::none_of(parts.begin(), parts.end(), [](std::string_view c) {
    return c.empty() || c.find('\0') != std::string_view::npos;
  });
}

bool component_match(std::string_view pattern, std::string_view name) {
  std::string p(pattern), n(name);
  return fnmatch(p.c_str(), n.c_str(), FNM_PATHNAME | FNM_NOESCAPE) == 0;
}

}  // namespace

std::optional<uint64_t> parse_age_ms(const std::string& s, bool* too_large) {
  if (s.size() >= 2 && s.back() == 'd' && s.find_first_not_of("0123456789") == s.size() - 1) {
    auto days = policy::parse_bytes(s.substr(0, s.size() - 1), too_large);  // digits alone: a plain number
    if (!days) return std::nullopt;
    if (*days > UINT64_MAX / 86'400'000) {
      if (too_large) *too_large = true;
      return std::nullopt;
    }
    return *days * 86'400'000;
  }
  return policy::parse_duration_ms(s, too_large);
}

Config parse_config(const std::string& text, const std::string& source) {
  return Reader::converting(source, [&] { return parse_yaml(text, source); });
}

Config load_config(const std::string& path) {
  // O_NONBLOCK: a FIFO put there must not hang the daemon's start.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) throw ConfigError(errno_message("cannot read config " + path, errno));
  struct stat st;
  std::string text, why;
  if (fstat(fd, &st) != 0) why = errno_message("cannot read config " + path, errno);
  else if (!S_ISREG(st.st_mode)) why = path + ": the config must be a regular file";
  else if (st.st_size > (1 << 20)) why = path + ": a config is at most 1 MiB";
  char buf[65536];
  while (why.empty()) {
    ssize_t got = read(fd, buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) why = errno_message("cannot read config " + path, errno);
    if (got <= 0) break;
    text.append(buf, size_t(got));
    if (text.size() > (1 << 20)) why = path + ": a config is at most 1 MiB";  // it grew meanwhile
  }
  close(fd);
  if (!why.empty()) throw ConfigError(why);
  return parse_config(text, path);
}

const WatchRule* Config::match(const std::string& relpath) const {
  for (const auto& w : watch)
    if (cgroup_glob_match(w.cgroup_glob, relpath)) return &w;
  return nullptr;
}

bool cgroup_glob_match(std::string_view glob, std::string_view relpath) {
  auto g = components(glob, false), p = components(relpath, true);
  if (!sane(g) || !sane(p)) return false;
  // at(i, j): glob components i.. match path components j.. (a table, so
  // several `**` cost m*n, not a backtracking explosion).
  size_t m = g.size(), n = p.size();
  std::vector<char> table((m + 1) * (n + 1), 0);
  auto at = [&](size_t i, size_t j) -> char& { return table[i * (n + 1) + j]; };
  at(m, n) = 1;
  for (size_t i = m; i-- > 0;)
    for (size_t j = n + 1; j-- > 0;) {
      if (g[i] == "**") at(i, j) = at(i + 1, j) || (j < n && at(i, j + 1));
      else at(i, j) = j < n && at(i + 1, j + 1) && component_match(g[i], p[j]);
    }
  return at(0, 0);
}

bool cgroup_glob_may_match_below(std::string_view glob, std::string_view relpath) {
  auto g = components(glob, false), p = components(relpath, true);
  if (!sane(g) || !sane(p)) return false;
  // The glob positions reachable after relpath's components (an NFA run):
  // a `**` may also match nothing, so reaching one reaches the next too.
  size_t m = g.size();
  std::vector<char> now(m + 1, 0);
  auto close_over_stars = [&](std::vector<char>& s) {
    for (size_t i = 0; i < m; ++i)
      if (s[i] && g[i] == "**") s[i + 1] = 1;
  };
  now[0] = 1;
  close_over_stars(now);
  for (auto c : p) {
    std::vector<char> next(m + 1, 0);
    for (size_t i = 0; i < m; ++i) {
      if (!now[i]) continue;
      if (g[i] == "**") next[i] = 1;
      else if (component_match(g[i], c)) next[i + 1] = 1;
    }
    close_over_stars(next);
    now = std::move(next);
  }
  // Glob left to match (or a `**` still open): a child could match.
  return std::any_of(now.begin(), now.begin() + long(m), [](char x) { return x != 0; });
}

std::string unsupported_setting(const Config& config) {
  std::string first;
  auto refuse = [&](int line, const std::string& what) {  // line 0: a file-level setting (its line is not kept)
    if (first.empty()) first = config.source + (line ? ":" + std::to_string(line) : "") + ": " + what;
  };
  if (config.on_loss != "continue") refuse(0, "on_loss: " + config.on_loss);
  for (const auto& rule : config.watch) {
    if (!rule.on_loss.empty() && rule.on_loss != "continue")
      refuse(rule.line, "watch rule " + rule.name + ": on_loss: " + rule.on_loss);
  }
  if (first.empty()) return "";
  return first + " is not supported by this flightrecd yet (it records matched cgroups on_loss continue)";
}

}  // namespace flightrec::daemon
