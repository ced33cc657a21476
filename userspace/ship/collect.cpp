#include "ship/collect.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <deque>
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

// What a stream's publishers can make the collector hold, whatever they
// send (aim: under 256 MiB in all). Entries that come before one they
// follow cannot be verified yet: they are held only in a log whose key is
// proven (its genesis sealed by a signed checkpoint), and only this much:
constexpr size_t kMaxPending = 100000;                 // entries and checkpoints held by one log
constexpr uint64_t kHeldPerHostMax = 32ull << 20;      // bytes held ahead of gaps for one host's logs
constexpr uint64_t kHeldTotalMax = 128ull << 20;       // ... and for all hosts
constexpr uint64_t kHeldOverhead = 96;                 // what holding one line costs beyond its bytes
// Logs followed in memory at once; the least recently used one that holds
// nothing ahead is let go (its file is read back if it grows again).
constexpr size_t kResidentLogs = 256;
constexpr size_t kMaxLogsPerHost = 50000;              // logs one host may have in one collect
constexpr size_t kMaxLogs = 100000;                    // ... all hosts (a collect that resumes starts again)
constexpr size_t kLeafWindow = 4096;                   // recent leaves kept to check entries that come twice
constexpr size_t kNotesWindow = 1024;                  // recent checkpoints kept to check those that come twice
constexpr size_t kMaxRefusalKeys = 1024;               // subjects whose refusals are counted apart

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
    auto key = ledger::VerifierKey::parse_file(text);
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

// Bytes held ahead of gaps, by host and in all.
struct Collector::Held {
  uint64_t total = 0;
  std::map<std::string, uint64_t> by_host;
};

struct Collector::Log {
  std::string host, origin, file;
  int64_t session;
  Held& held;
  ledger::SessionVerifier verifier;
  std::string out;  // lines not written to the file yet (written, and the file closed, per message)
  uint64_t ahead_bytes = 0;  // charged to `held`
  bool header = false;  // the bundle's first line is written
  std::deque<std::array<uint8_t, 16>> leaves;  // a prefix of each recent leaf: what comes twice must be the same
  int64_t leaves_from = 1;                     // the seq of leaves.front()
  std::map<int64_t, std::string> entries_ahead;   // seq -> body, before one not come yet
  std::map<uint64_t, std::string> checkpoints_ahead;
  std::map<uint64_t, ledger::Hash> notes;  // recent checkpoints' hashes, by tree size
  uint64_t duplicates = 0, last_checkpoint = 0;
  uint64_t last_used = 0;  // the collector's message count when it was last given one
  bool failed = false;
  std::string reason;

  Log(std::string h, std::string o, std::string f, int64_t s, Held& held, const ledger::VerifierKey* key)
      : host(std::move(h)), origin(std::move(o)), file(std::move(f)), session(s), held(held), verifier(s, key, nullptr) {}
  ~Log() { release(ahead_bytes); }
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  // Its key is proven: the genesis entry is sealed by a signed checkpoint.
  // Before that nothing of it is held or written.
  bool proven() const { return verifier.verdict().signed_checkpoints > 0; }
  bool hold(size_t bytes) {
    uint64_t charge = bytes + kHeldOverhead;
    uint64_t& host_held = held.by_host[host];
    if (held.total + charge > kHeldTotalMax || host_held + charge > kHeldPerHostMax) return false;
    held.total += charge;
    host_held += charge;
    ahead_bytes += charge;
    return true;
  }
  void release_one(size_t bytes) { release(bytes + kHeldOverhead); }
  void release(uint64_t charge) {
    held.total -= charge;
    held.by_host[host] -= charge;
    ahead_bytes -= charge;
  }
  void fail(const std::string& why) {
    if (failed) return;
    failed = true;
    reason = why.size() > 256 ? why.substr(0, 256) + "..." : why;
    // A failed log takes nothing more: what it held goes.
    entries_ahead.clear();
    checkpoints_ahead.clear();
    release(ahead_bytes);
    leaves.clear();
    notes.clear();
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
    if (leaves.size() > kLeafWindow) {
      leaves.pop_front();
      ++leaves_from;
    }
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
    if (notes.size() > kNotesWindow) notes.erase(notes.begin());
    if (write) out += nlohmann::json({{"checkpoint", note}}).dump() + "\n";
  }
  void entry(int64_t seq, const std::string& body) {
    if (failed) return;
    int64_t have = verifier.entries();
    if (seq <= have) {
      // Checked against the recent leaves; an older one is counted only
      // (the log keeps the copy that came first and was verified).
      ledger::Hash leaf = ledger::leaf_hash(body);
      if (seq >= leaves_from && std::memcmp(leaves[size_t(seq - leaves_from)].data(), leaf.data(), 16) != 0)
        return fail("entry " + std::to_string(seq) + " came twice with different contents (one of them forged or edited)");
      ++duplicates;
      return;
    }
    if (seq > have + 1) {
      if (!proven())
        return fail("entries from " + std::to_string(have + 1) +
                    " have not come, and the log's key is not proven yet (no signed checkpoint): nothing ahead is held");
      if (entries_ahead.count(seq)) return;
      if (entries_ahead.size() >= kMaxPending || !hold(body.size()))
        return fail("entries from " + std::to_string(have + 1) + " have not come, and too many after them have (" +
                    std::to_string(entries_ahead.size()) + " held by this log; the collector holds at most " +
                    std::to_string(kHeldPerHostMax >> 20) + " MiB per host, " + std::to_string(kHeldTotalMax >> 20) +
                    " MiB in all, ahead of gaps)");
      entries_ahead.emplace(seq, body);
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
      if (!proven()) return fail("a checkpoint beyond entries that have not come, before the log's key is proven");
      if (checkpoints_ahead.count(size)) return;
      if (checkpoints_ahead.size() >= kMaxPending || !hold(note.size()))
        return fail("checkpoints beyond entries that have not come: too many held");
      checkpoints_ahead.emplace(size, note);
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
        release_one(note.size());
        checkpoints_ahead.erase(c);
        last_checkpoint = uint64_t(verifier.entries());
        add_checkpoint(note, true);
        continue;
      }
      auto e = entries_ahead.find(verifier.entries() + 1);
      if (e == entries_ahead.end()) break;
      std::string body = std::move(e->second);
      release_one(body.size());
      entries_ahead.erase(e);
      add(body, true);
    }
  }
  // What this message added, appended to the file (opened and closed here:
  // a collector follows many logs and holds no descriptor for each).
  void write_out() {
    if (out.empty() || !proven()) return;  // a log whose key is not proven leaves no file
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

Collector::Collector(CollectSettings settings) : settings_(std::move(settings)), held_(std::make_unique<Held>()) {}
Collector::~Collector() = default;

LogReport Collector::report_of(Log& log, bool finish) {
  LogReport l;
  l.origin = log.origin;
  l.file = log.file;
  l.duplicates = log.duplicates;
  const auto& v = log.failed || !finish ? log.verifier.verdict() : log.verifier.finish();
  l.entries = v.entries;
  l.checkpoints = v.checkpoints;
  l.gaps = v.gaps;
  l.lost = v.lost;
  l.terminated = v.terminated;
  l.entries_after_checkpoint = v.entries - int64_t(v.last_checkpoint);
  if (!log.entries_ahead.empty()) l.missing_from = log.verifier.entries() + 1;
  l.ok = !log.failed && v.ok;
  if (log.failed) l.reason = log.reason;
  else if (!v.ok) l.reason = (v.where.empty() ? "" : v.where + ": ") + v.reason;
  return l;
}

Collector::Log* Collector::log_for(const std::string& host, const std::string& origin, int64_t session, int64_t first,
                                   std::string& why) {
  auto& logs = logs_[host];
  if (auto it = logs.find(origin); it != logs.end()) {
    if (it->second->session != session) why = "a message of " + origin + " names another session";
    it->second->last_used = ++messages_;
    return it->second.get();
  }
  if (failed_[host].count(origin)) return nullptr;  // failed: it stays so, nothing more is added
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
  std::string file = settings_.out_dir + "/" + host + "/" + id + ".jsonl";
  auto let_go = let_go_[host].find(origin);
  bool known = let_go != let_go_[host].end() || std::filesystem::exists(file);
  // A log begins at its genesis entry (or goes on from its file): what
  // comes before that cannot be verified and is not held.
  if (!known && first != 1) {
    why = "a message of a log not seen from its genesis entry (it begins at seq " + std::to_string(first) +
          "): not held, as nothing before it can verify it";
    return nullptr;
  }
  if (!known && (logs_by_host_[host] >= kMaxLogsPerHost || logs_total_ >= kMaxLogs)) {
    why = "host " + host + " has " + std::to_string(logs_by_host_[host]) + " logs in this collect already (at most " +
          std::to_string(kMaxLogsPerHost) + " per host, " + std::to_string(kMaxLogs) + " in all)";
    return nullptr;
  }
  if (resident_ >= kResidentLogs && !let_one_go()) {
    why = "the collector follows " + std::to_string(kResidentLogs) + " logs already, each holding entries ahead of a gap";
    return nullptr;
  }
  make_private_dirs(settings_.out_dir + "/" + host);
  auto log = std::make_unique<Log>(host, origin, file, session, *held_, &settings_.hosts.at(host));
  if (std::filesystem::exists(file)) log->load();
  if (let_go != let_go_[host].end()) {
    log->duplicates = let_go->second.duplicates;
    let_go_[host].erase(let_go);
  } else {
    ++logs_by_host_[host];
    ++logs_total_;
  }
  log->last_used = ++messages_;
  ++resident_;
  return logs.emplace(origin, std::move(log)).first->second.get();
}

bool Collector::let_one_go() {
  Log* oldest = nullptr;
  for (auto& [host, logs] : logs_)
    for (auto& [origin, log] : logs)
      if (log->entries_ahead.empty() && log->checkpoints_ahead.empty() && (!oldest || log->last_used < oldest->last_used))
        oldest = log.get();
  if (!oldest) return false;
  std::string host = oldest->host, origin = oldest->origin;
  oldest->write_out();
  if (oldest->proven()) {
    let_go_[host][origin] = {oldest->session, oldest->duplicates};  // its file holds the rest: read back if it grows again
  } else {
    // Nothing of it was written: a log flooded out before its key was proven.
    refuse(host, "logs whose key was not proven yet were let go, to follow newer ones");
    --logs_by_host_[host];
    --logs_total_;
  }
  logs_[host].erase(origin);
  --resident_;
  return true;
}

void Collector::refuse(const std::string& key, const std::string& why) {
  // Keyed by what the publisher chose: bounded, the rest counted together.
  std::string k = rejected_.count(key) || rejected_.size() < kMaxRefusalKeys ? key : "(other subjects)";
  HostReport& r = rejected_[k];
  r.host = k;
  ++r.rejected;
  if (r.rejected_reason.empty()) r.rejected_reason = why.size() > 512 ? why.substr(0, 512) + "..." : why;
}

void Collector::take(const std::string& subject, const std::map<std::string, std::string>& headers,
                     std::string_view payload) {
  std::string prefix = settings_.subject_prefix + ".";
  std::string host = subject.starts_with(prefix) ? subject.substr(prefix.size()) : "";
  auto refuse = [&](const std::string& why) { this->refuse(host.empty() ? subject : host, why); };
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
  Log* log = log_for(host, origin, session, first, why);
  if (!log) {
    if (!why.empty()) refuse(why);
    return;  // (or a log that failed already)
  }
  // A failed log keeps only its report.
  struct Settle {
    Collector& c;
    Log* log;
    ~Settle() {
      if (log->failed) c.settle_failed(*log);
    }
  } settle{*this, log};
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

void Collector::settle_failed(Log& log) {
  log.write_out();  // what was verified before the failure
  std::string host = log.host, origin = log.origin;
  failed_[host][origin] = report_of(log, false);
  logs_[host].erase(origin);
  --resident_;
}

std::vector<HostReport> Collector::report() {
  std::map<std::string, HostReport> by_host = rejected_;
  for (auto& [host, logs] : logs_) {
    HostReport& r = by_host[host];
    r.host = host;
    for (auto& [origin, log] : logs) {
      log->write_out();
      r.logs.push_back(report_of(*log, true));
    }
  }
  for (auto& [host, logs] : let_go_) {
    HostReport& r = by_host[host];
    r.host = host;
    for (auto& [origin, gone] : logs) {  // read back, one at a time
      Log log(host, origin, settings_.out_dir + "/" + host + "/" + log_id(origin) + ".jsonl", gone.session, *held_,
              &settings_.hosts.at(host));
      log.load();
      log.duplicates = gone.duplicates;
      LogReport l = report_of(log, true);
      l.origin = origin;
      r.logs.push_back(std::move(l));
    }
  }
  for (auto& [host, logs] : failed_) {
    HostReport& r = by_host[host];
    r.host = host;
    for (auto& [origin, l] : logs) r.logs.push_back(l);
  }
  std::vector<HostReport> out;
  for (auto& [h, r] : by_host) {
    std::sort(r.logs.begin(), r.logs.end(), [](const LogReport& a, const LogReport& b) { return a.origin < b.origin; });
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace flightrec::ship
