#include "ship/collect.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/system.h"
#include "ledger/hash.h"
#include "ledger/verify.h"
#include "ship/jetstream.h"
#include "ship/nats_lib.h"
#include "policy/yaml_reader.h"

namespace flightrec::ship {

namespace {

constexpr size_t kMaxPending = 100000;            // entries held while one before them has not come
constexpr uint64_t kMaxPendingBytes = 64ull << 20;  // ... and their bytes
constexpr size_t kMaxLogsPerHost = 100000;         // a stream's publisher cannot make the collector hold more

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/')
      if (mkdir(path.substr(0, i).c_str(), 0700) != 0 && errno != EEXIST)
        throw Error(errno_message("cannot create " + path.substr(0, i), errno));
}

bool token_like(const std::string& s, size_t max) {
  return !s.empty() && s.size() <= max &&
         s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == std::string::npos;
}

// A file of at most max bytes; throws Error.
std::string small_file(const std::string& path, size_t max) {
  std::string text = read_file(path);
  if (text.size() > max) throw Error(path + " is larger than " + std::to_string(max) + " bytes");
  return text;
}

}  // namespace

CollectSettings parse_collect_config(const std::string& text, const std::string& source, const std::string& base_dir) {
  policy::YamlReader<Error> r(source);
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(source + ":" + std::to_string(e.mark.line + 1) + ": not YAML: " + e.msg);
  }
  const YAML::Node& root = doc;
  if (!root.IsMap()) throw Error(source + ": must be a mapping (url, hosts, ...)");
  r.only_keys(root, "", {"url", "stream", "subject_prefix", "durable", "tls", "hosts"});
  CollectSettings c;
  if (!root["url"]) r.fail(root, "url", "missing (nats://HOST:PORT)");
  c.url = r.str(root["url"], "url");
  if (!(c.url.starts_with("nats://") || c.url.starts_with("tls://")) || c.url.size() > 1024)
    r.fail(root["url"], "url", "'" + c.url + "' is not nats://HOST:PORT or tls://HOST:PORT");
  if (root["stream"]) {
    c.stream = r.str(root["stream"], "stream");
    if (!token_like(c.stream, 64)) r.fail(root["stream"], "stream", "'" + c.stream + "' is not a stream name");
  }
  if (root["subject_prefix"]) {
    c.subject_prefix = r.str(root["subject_prefix"], "subject_prefix");
    bool ok = !c.subject_prefix.empty() && c.subject_prefix.size() <= 128;
    for (size_t start = 0; ok;) {
      size_t dot = c.subject_prefix.find('.', start);
      ok = token_like(c.subject_prefix.substr(start, dot == std::string::npos ? std::string::npos : dot - start), 128);
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    if (!ok) r.fail(root["subject_prefix"], "subject_prefix", "'" + c.subject_prefix + "' is not a subject without wildcards");
  }
  if (root["durable"]) {
    c.durable = r.str(root["durable"], "durable");
    if (!token_like(c.durable, 64)) r.fail(root["durable"], "durable", "'" + c.durable + "' is not a consumer name");
  }
  if (const YAML::Node& t = root["tls"]) {
    r.only_keys(t, "tls", {"ca"});
    if (!t["ca"]) r.fail(t, "tls.ca", "missing");
    c.ca_file = r.str(t["ca"], "tls.ca");
  }
  const YAML::Node& hosts = root["hosts"];
  if (!hosts || !hosts.IsMap() || hosts.size() == 0)
    r.fail(hosts ? hosts : root, "hosts", "missing: each host's name (its subject token) and its verifier key file");
  for (const auto& kv : hosts) {
    std::string host = r.str(kv.first, "hosts");
    if (!token_like(host, 255)) r.fail(kv.first, "hosts", "'" + host + "' is not a host's subject token (A-Z a-z 0-9 _ -)");
    std::string file = r.str(kv.second, "hosts." + host);
    if (!file.starts_with("/")) file = base_dir + "/" + file;
    std::string text;
    try {
      text = small_file(file, 4096);
    } catch (const Error& e) {
      r.fail(kv.second, "hosts." + host, e.what());
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    auto key = ledger::VerifierKey::parse(text);
    if (!key) r.fail(kv.second, "hosts." + host, file + " is not a verifier key (flightrec keygen's flightrec.pub)");
    if (!c.hosts.emplace(host, *key).second) r.fail(kv.first, "hosts." + host, "given twice");
  }
  return c;
}

CollectSettings load_collect_config(const std::string& path) {
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  if (dir.empty()) dir = "/";
  return parse_collect_config(small_file(path, 1 << 20), path, dir);
}

bool HostReport::ok() const {
  if (rejected) return false;
  for (const auto& l : logs)
    if (!l.ok) return false;
  return true;
}

struct Collector::Log {
  std::string origin, file;
  int64_t session;
  ledger::SessionVerifier verifier;
  std::string out;  // lines not written to the file yet (written, and the file closed, per message)
  uint64_t ahead_bytes = 0;
  bool header = false;  // the bundle's first line is written
  std::vector<std::array<uint8_t, 16>> leaves;  // a prefix of each leaf: what comes twice must be the same
  std::map<int64_t, std::string> entries_ahead;   // seq -> body, before one not come yet
  std::map<uint64_t, std::string> checkpoints_ahead;
  std::map<uint64_t, ledger::Hash> notes;  // each checkpoint's hash, by tree size
  uint64_t duplicates = 0, last_checkpoint = 0;
  bool failed = false;
  std::string reason;

  Log(std::string o, std::string f, int64_t s, const ledger::VerifierKey* key)
      : origin(std::move(o)), file(std::move(f)), session(s), verifier(s, key, nullptr) {}

  void fail(const std::string& why) {
    if (failed) return;
    failed = true;
    reason = why;
  }
  void fail_from_verifier() {
    const auto& v = verifier.verdict();
    fail((v.where.empty() ? "" : v.where + ": ") + v.reason);
  }
  // Entry seq = entries()+1: verified, then written.
  void add(const std::string& body, bool write) {
    ledger::Hash leaf = ledger::leaf_hash(body);
    if (!verifier.add_entry(body, nullptr, nullptr, &leaf)) return fail_from_verifier();
    std::array<uint8_t, 16> p;
    std::memcpy(p.data(), leaf.data(), 16);
    leaves.push_back(p);
    if (!write) return;
    if (!header) {
      // The genesis entry names the key; the verifier has checked it is the pinned one.
      ledger::TopLevel top;
      ledger::check_canonical(body, &top);
      nlohmann::json h = {{"format", "flightrec-bundle-lines"}, {"format_version", 1},
                          {"public_key", top.string("public_key").value_or("")}, {"session", session}};
      out += h.dump() + "\n";
      header = true;
    }
    out += body;
    out += '\n';
  }
  void add_checkpoint(const std::string& note, bool write) {
    if (!verifier.add_checkpoint(note)) return fail_from_verifier();
    notes[uint64_t(verifier.entries())] = ledger::sha256(note);
    if (write) out += nlohmann::json({{"checkpoint", note}}).dump() + "\n";
  }
  void entry(int64_t seq, const std::string& body) {
    if (failed) return;
    int64_t have = verifier.entries();
    if (seq <= have) {
      ledger::Hash leaf = ledger::leaf_hash(body);
      if (std::memcmp(leaves[size_t(seq - 1)].data(), leaf.data(), 16) != 0)
        return fail("entry " + std::to_string(seq) + " came twice with different contents (one of them forged or edited)");
      ++duplicates;
      return;
    }
    if (seq > have + 1) {
      if (entries_ahead.size() >= kMaxPending || ahead_bytes + body.size() > kMaxPendingBytes)
        return fail("entries from " + std::to_string(have + 1) + " have not come, and too many after them have (" +
                    std::to_string(entries_ahead.size()) + " held)");
      if (entries_ahead.emplace(seq, body).second) ahead_bytes += body.size();
      return;
    }
    add(body, true);
    flush_ahead();
  }
  void checkpoint(uint64_t size, const std::string& note) {
    if (failed) return;
    if (size <= last_checkpoint) {
      // Again: the same note (checked the first time), or a forgery.
      auto it = notes.find(size);
      if (it != notes.end() && it->second != ledger::sha256(note))
        return fail("checkpoint at size " + std::to_string(size) + " came twice with different contents (one of them forged)");
      ++duplicates;
      return;
    }
    if (size > uint64_t(verifier.entries())) {
      if (checkpoints_ahead.size() >= kMaxPending || ahead_bytes + note.size() > kMaxPendingBytes)
        return fail("checkpoints beyond entries that have not come: too many held");
      if (checkpoints_ahead.emplace(size, note).second) ahead_bytes += note.size();
      return;
    }
    if (size < uint64_t(verifier.entries()))
      return fail("checkpoint at size " + std::to_string(size) + " came after entry " + std::to_string(verifier.entries()));
    last_checkpoint = size;
    add_checkpoint(note, true);
  }
  void flush_ahead() {
    while (!failed) {
      if (auto c = checkpoints_ahead.find(uint64_t(verifier.entries())); c != checkpoints_ahead.end()) {
        std::string note = std::move(c->second);
        ahead_bytes -= note.size();
        checkpoints_ahead.erase(c);
        last_checkpoint = uint64_t(verifier.entries());
        add_checkpoint(note, true);
        continue;
      }
      auto e = entries_ahead.find(verifier.entries() + 1);
      if (e == entries_ahead.end()) break;
      std::string body = std::move(e->second);
      ahead_bytes -= body.size();
      entries_ahead.erase(e);
      add(body, true);
    }
  }
  // What this message added, appended to the file (opened and closed here:
  // a collector follows many logs and holds no descriptor for each).
  void write_out() {
    if (out.empty()) return;
    std::ofstream f(file, std::ios::app | std::ios::binary);
    f << out;
    f.close();
    if (!f) throw Error("cannot write " + file);
    out.clear();
  }
  // What an earlier collect wrote: read back through the verifier.
  void load() {
    std::ifstream in(file);
    std::string line;
    bool first = true;
    uint64_t good = 0, at = 0;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // a last line without its newline: cut short, dropped
      at += line.size() + 1;
      if (first) {
        first = false;
        header = true;
      } else if (line.starts_with("{\"checkpoint\":")) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_object() || !j.contains("checkpoint") || !j["checkpoint"].is_string()) {
          fail("the bundle " + file + " is damaged");
          break;
        }
        last_checkpoint = uint64_t(verifier.entries());
        add_checkpoint(j["checkpoint"].get<std::string>(), false);
      } else {
        add(line, false);
      }
      if (failed) break;
      good = at;
    }
    in.close();
    if (!failed && std::filesystem::file_size(file) != good) std::filesystem::resize_file(file, good);
  }
};

Collector::Collector(CollectSettings settings) : settings_(std::move(settings)) {}
Collector::~Collector() = default;

Collector::Log* Collector::log_for(const std::string& host, const std::string& origin, int64_t session, std::string& why) {
  auto& logs = logs_[host];
  if (auto it = logs.find(origin); it != logs.end()) {
    if (it->second->session != session) why = "a message of " + origin + " names another session";
    return it->second.get();
  }
  std::string id = log_id(origin);  // the log's file name
  if (id.empty()) {
    why = "the origin " + origin + " is not a flightrec log's";
    return nullptr;
  }
  // The origin names its host (docs/FORMAT.md); it must be the subject's.
  std::string named = origin.substr(10, origin.size() - 33 - 10);
  if (jetstream_subject("x", named) != "x." + host) {
    why = "a log of host " + named + " came on host " + host + "'s subject";
    return nullptr;
  }
  std::string dir = settings_.out_dir + "/" + host;
  make_dirs(dir);
  std::string file = dir + "/" + id + ".jsonl";
  auto log = std::make_unique<Log>(origin, file, session, &settings_.hosts.at(host));
  if (std::filesystem::exists(file)) log->load();
  if (logs.size() >= kMaxLogsPerHost) {
    why = "host " + host + " has " + std::to_string(kMaxLogsPerHost) + " logs in this collect already";
    return nullptr;
  }
  return logs.emplace(origin, std::move(log)).first->second.get();
}

void Collector::take(const std::string& subject, const std::map<std::string, std::string>& headers,
                     std::string_view payload) {
  std::string prefix = settings_.subject_prefix + ".";
  std::string host = subject.starts_with(prefix) ? subject.substr(prefix.size()) : "";
  auto refuse = [&](const std::string& why) {
    HostReport& r = rejected_[host.empty() ? subject : host];
    r.host = host.empty() ? subject : host;
    ++r.rejected;
    if (r.rejected_reason.empty()) r.rejected_reason = why;
  };
  if (host.empty() || host.find('.') != std::string::npos) return refuse("not a host's subject: " + subject);
  if (!settings_.hosts.count(host)) return refuse("no key is pinned for host " + host + " (trust on first use is refused)");
  auto header = [&](const char* k) -> std::string {
    auto it = headers.find(k);
    return it == headers.end() ? "" : it->second;
  };
  std::string origin = header("Flightrec-Origin");
  int64_t session = 0, first = 0, last = 0;
  try {
    session = std::stoll(header("Flightrec-Session"));
    first = std::stoll(header("Flightrec-First"));
    last = std::stoll(header("Flightrec-Last"));
  } catch (const std::exception&) {
    return refuse("a message without its session, first or last seq");
  }
  if (first < 0 || last < first || (first == 0) != (last == 0)) return refuse("a message whose first and last seq do not hold");
  std::string why;
  Log* log = log_for(host, origin, session, why);
  if (!log) return refuse(why);
  if (!why.empty()) return log->fail(why);
  // Its lines: entries first..last, each checkpoint right after the entry that completes it.
  int64_t seq = first;
  for (size_t pos = 0; pos < payload.size() && !log->failed;) {
    size_t nl = payload.find('\n', pos);
    if (nl == std::string_view::npos) return log->fail("a message's last line lacks its newline");
    std::string_view line = payload.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.starts_with("{\"checkpoint\":")) {
      uint64_t size = checkpoint_size(line);
      if (!size) return log->fail("a checkpoint line that is not one");
      log->checkpoint(size, nlohmann::json::parse(line)["checkpoint"].get<std::string>());
      continue;
    }
    if (!first || seq > last) return log->fail("a message holds more entries than its first and last seq say");
    log->entry(seq++, std::string(line));
  }
  if (first && seq != last + 1 && !log->failed) log->fail("a message holds fewer entries than its first and last seq say");
  if (!log->failed) log->flush_ahead();
  log->write_out();
}

void Collector::run(const std::atomic<bool>& stop) {
  const NatsLib& n = nats_lib();
  auto check = [&](natsStatus s, const std::string& what) {
    if (s != NATS_OK) throw Error(what + ": " + n.error(s));
  };
  natsOptions* opts = nullptr;
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  natsSubscription* sub = nullptr;
  struct Cleanup {
    const NatsLib& n;
    natsOptions*& o;
    natsConnection*& c;
    jsCtx*& j;
    natsSubscription*& s;
    ~Cleanup() {
      if (s) n.natsSubscription_Destroy(s);
      if (j) n.jsCtx_Destroy(j);
      if (c) n.natsConnection_Destroy(c);
      if (o) n.natsOptions_Destroy(o);
    }
  } cleanup{n, opts, nc, js, sub};
  check(n.natsOptions_Create(&opts), "NATS options");
  check(n.natsOptions_SetURL(opts, settings_.url.c_str()), "NATS url " + settings_.url);
  check(n.natsOptions_SetName(opts, "flightrec collect"), "NATS name");
  if (!settings_.ca_file.empty()) {
    check(n.natsOptions_SetSecure(opts, true), "NATS TLS");
    check(n.natsOptions_LoadCATrustedCertificates(opts, settings_.ca_file.c_str()), "NATS CA file " + settings_.ca_file);
  }
  check(n.natsConnection_Connect(&nc, opts), "cannot connect to " + settings_.url);
  check(n.natsConnection_JetStream(&js, nc, nullptr), "JetStream");
  jsSubOptions so;
  n.jsSubOptions_Init(&so);
  so.Stream = settings_.stream.c_str();
  so.Config.AckPolicy = js_AckAll;
  so.Config.MaxAckPending = 100000;
  jsErrCode err = jsErrCode(0);
  std::string subjects = settings_.subject_prefix + ".>";
  check(n.js_PullSubscribe(&sub, js, subjects.c_str(), settings_.durable.c_str(), nullptr, &so, &err),
        "cannot consume " + subjects + " from stream " + settings_.stream);
  auto idle_since = std::chrono::steady_clock::now();
  while (!stop) {
    natsMsgList list{};
    // A fetch that times out may still bring some: those are taken too.
    natsStatus s = n.natsSubscription_Fetch(&list, sub, 64, 1000, &err);
    if (list.Count == 0) {
      n.natsMsgList_Destroy(&list);
      if (s != NATS_OK && s != NATS_TIMEOUT) throw Error("fetching from stream " + settings_.stream + ": " + n.error(s));
      if (!settings_.follow && std::chrono::steady_clock::now() - idle_since >= std::chrono::milliseconds(settings_.idle_ms))
        break;
      continue;
    }
    for (int i = 0; i < list.Count; ++i) {
      natsMsg* m = list.Msgs[i];
      std::map<std::string, std::string> headers;
      for (const char* k : {"Flightrec-Origin", "Flightrec-Session", "Flightrec-First", "Flightrec-Last"}) {
        const char* v = nullptr;
        if (n.natsMsgHeader_Get(m, k, &v) == NATS_OK && v) headers[k] = v;
      }
      const char* data = n.natsMsg_GetData(m);
      take(n.natsMsg_GetSubject(m), headers, std::string_view(data ? data : "", size_t(n.natsMsg_GetDataLength(m))));
    }
    // Written (the bundles flushed as they grew): acknowledged, this and every one before it.
    n.natsMsg_Ack(list.Msgs[list.Count - 1], nullptr);
    n.natsMsgList_Destroy(&list);
    idle_since = std::chrono::steady_clock::now();
  }
}

std::vector<HostReport> Collector::report() {
  std::map<std::string, HostReport> by_host = rejected_;
  for (auto& [host, logs] : logs_) {
    HostReport& r = by_host[host];
    r.host = host;
    for (auto& [origin, log] : logs) {
      log->write_out();
      LogReport l;
      l.origin = origin;
      l.file = log->file;
      l.duplicates = log->duplicates;
      const auto& v = log->failed ? log->verifier.verdict() : log->verifier.finish();
      l.entries = v.entries;
      l.checkpoints = v.checkpoints;
      l.gaps = v.gaps;
      l.lost = v.lost;
      l.terminated = v.terminated;
      l.entries_after_checkpoint = v.entries - int64_t(v.last_checkpoint);
      if (!log->entries_ahead.empty()) l.missing_from = log->verifier.entries() + 1;
      l.ok = !log->failed && v.ok;
      if (log->failed) l.reason = log->reason;
      else if (!v.ok) l.reason = (v.where.empty() ? "" : v.where + ": ") + v.reason;
      r.logs.push_back(l);
    }
  }
  std::vector<HostReport> out;
  for (auto& [h, r] : by_host) out.push_back(std::move(r));
  return out;
}

}  // namespace flightrec::ship
