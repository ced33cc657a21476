#include "ship/jetstream.h"

#include <unistd.h>

#include <cstring>
#include <iostream>
#include <utility>

#include "common/error.h"
#include "common/system.h"
#include "ship/nats_lib.h"

namespace flightrec::ship {

namespace {

constexpr size_t kBatchMessages = 2048;
constexpr size_t kBatchBytes = 4u << 20;
constexpr int64_t kAckWaitMs = 5000;
constexpr int64_t kDuplicateWindowNs = 10ll * 60 * 1'000'000'000;

// A spooled message: kind ('e' | 'c'), session, seq, origin, type, payload.
std::string encode(char kind, int64_t session, int64_t seq, std::string_view origin, std::string_view type,
                   std::string_view payload) {
  std::string r;
  r.reserve(1 + 16 + 3 + origin.size() + type.size() + payload.size());
  r += kind;
  r.append(reinterpret_cast<const char*>(&session), 8);
  r.append(reinterpret_cast<const char*>(&seq), 8);
  uint16_t ol = uint16_t(std::min<size_t>(origin.size(), 65535));
  r.append(reinterpret_cast<const char*>(&ol), 2);
  r.append(origin.substr(0, ol));
  uint8_t tl = uint8_t(std::min<size_t>(type.size(), 255));
  r += char(tl);
  r.append(type.substr(0, tl));
  r.append(payload);
  return r;
}

struct Decoded {
  char kind;
  int64_t session, seq;
  std::string_view origin, type, payload;
};

bool decode(std::string_view r, Decoded& d) {
  if (r.size() < 20) return false;
  d.kind = r[0];
  std::memcpy(&d.session, r.data() + 1, 8);
  std::memcpy(&d.seq, r.data() + 9, 8);
  uint16_t ol;
  std::memcpy(&ol, r.data() + 17, 2);
  if (r.size() < 19u + ol + 1) return false;
  d.origin = r.substr(19, ol);
  uint8_t tl = uint8_t(r[19 + ol]);
  if (r.size() < 20u + ol + tl) return false;
  d.type = r.substr(20 + ol, tl);
  d.payload = r.substr(20 + ol + tl);
  return true;
}

}  // namespace

std::string jetstream_subject(const std::string& prefix, const std::string& host) {
  std::string token;
  for (char c : host)
    token += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return prefix + "." + (token.empty() ? "_" : token);
}

// One connection and its JetStream context; acknowledgments counted for the batch in flight.
struct JetStreamOutput::Connection {
  const NatsLib& n;
  natsOptions* opts = nullptr;
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  std::atomic<uint64_t> acked{0}, failed{0};
  std::mutex error_mu;
  std::string first_error;

  explicit Connection(const NatsLib& lib) : n(lib) {}
  ~Connection() {
    if (js) n.jsCtx_Destroy(js);
    if (nc) n.natsConnection_Destroy(nc);
    if (opts) n.natsOptions_Destroy(opts);
  }
  static void on_ack(jsCtx*, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
    auto* c = static_cast<Connection*>(closure);
    if (pa && !pae) {
      c->acked.fetch_add(1);
    } else {
      c->failed.fetch_add(1);
      std::lock_guard lock(c->error_mu);
      if (c->first_error.empty() && pae) c->first_error = pae->ErrText ? pae->ErrText : c->n.natsStatus_GetText(pae->Err);
    }
    c->n.natsMsg_Destroy(msg);
  }
  void check(natsStatus s, const std::string& what) {
    if (s != NATS_OK) throw Error(what + ": " + n.error(s));
  }
  void open(const JetStreamSettings& st) {
    check(n.natsOptions_Create(&opts), "NATS options");
    check(n.natsOptions_SetURL(opts, st.url.c_str()), "NATS url " + st.url);
    check(n.natsOptions_SetTimeout(opts, 2000), "NATS timeout");
    check(n.natsOptions_SetName(opts, "flightrecd"), "NATS name");
    // This output reconnects itself (and publishes again what was not acknowledged).
    check(n.natsOptions_SetMaxReconnect(opts, 0), "NATS reconnect");
    if (!st.ca_file.empty()) {
      check(n.natsOptions_SetSecure(opts, true), "NATS TLS");
      check(n.natsOptions_LoadCATrustedCertificates(opts, st.ca_file.c_str()), "NATS CA file " + st.ca_file);
    }
    check(n.natsConnection_Connect(&nc, opts), "cannot connect to " + st.url);
    jsOptions jo;
    n.jsOptions_Init(&jo);
    jo.Wait = kAckWaitMs;
    jo.PublishAsync.MaxPending = int64_t(kBatchMessages);
    jo.PublishAsync.AckHandler = &Connection::on_ack;
    jo.PublishAsync.AckHandlerClosure = this;
    check(n.natsConnection_JetStream(&js, nc, &jo), "JetStream");
    jsStreamInfo* si = nullptr;
    jsErrCode err = jsErrCode(0);
    natsStatus s = n.js_GetStreamInfo(&si, js, st.stream.c_str(), nullptr, &err);
    if (si) n.jsStreamInfo_Destroy(si);
    if (s == NATS_OK) return;
    if (!(s == NATS_NOT_FOUND || err == JSStreamNotFoundErr) || !st.create_stream)
      throw Error("JetStream stream " + st.stream + ": " + n.error(s));
    jsStreamConfig cfg;
    n.jsStreamConfig_Init(&cfg);
    std::string subjects = st.subject_prefix + ".>";
    const char* list[] = {subjects.c_str()};
    cfg.Name = st.stream.c_str();
    cfg.Subjects = list;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.Duplicates = kDuplicateWindowNs;
    s = n.js_AddStream(&si, js, &cfg, nullptr, &err);
    if (si) n.jsStreamInfo_Destroy(si);
    if (s != NATS_OK) throw Error("cannot make JetStream stream " + st.stream + ": " + n.error(s));
  }
};

JetStreamOutput::JetStreamOutput(JetStreamSettings settings)
    : ThreadedOutput("jetstream", settings.name),
      settings_(std::move(settings)),
      subject_(jetstream_subject(settings_.subject_prefix, host_name())),
      spool_(settings_.spool_dir, settings_.spool_max) {
  filter_.all_types = true;
  filter_.types = {"all"};
  nats_lib();  // a missing library is said now, at start, not on the first entry
  start();
}

void JetStreamOutput::offer(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
                            std::span<const ledger::SealedCheckpoint> checkpoints) {
  // In log order: a checkpoint right after the entry that completes it.
  std::vector<std::string> records;
  records.reserve(entries.size() + checkpoints.size());
  size_t next = 0;
  auto checkpoints_through = [&](int64_t seq) {
    for (; next < checkpoints.size() && int64_t(checkpoints[next].tree_size) <= seq; ++next)
      records.push_back(encode('c', session, int64_t(checkpoints[next].tree_size), origin, "", checkpoints[next].note));
  };
  for (const auto& e : entries) {
    checkpoints_through(e.seq - 1);
    records.push_back(encode('e', session, e.seq, origin, e.type, e.body));
  }
  checkpoints_through(INT64_MAX);
  if (records.empty()) return;
  bool taken = spool_.append(records);
  {
    std::lock_guard lock(mu_);
    if (!taken) {
      stats_.dropped += records.size();
      if (!full_) {
        full_ = true;
        notice_ = "jetstream output " + settings_.name + ": its spool (" + spool_.dir() + ", " +
                  std::to_string(settings_.spool_max >> 20) + " MiB) is full; entries are not shipped until it has room";
        std::cerr << "flightrecd: " << notice_ << "\n";
      }
      return;
    }
    if (full_) {
      full_ = false;
      notice_ = "jetstream output " + settings_.name + ": its spool has room again; entries are shipped from here on";
      std::cerr << "flightrecd: " << notice_ << "\n";
    }
  }
  cv_.notify_one();
}

std::string JetStreamOutput::take_notice() {
  std::lock_guard lock(mu_);
  return std::exchange(notice_, "");
}

bool JetStreamOutput::publish_batch(Connection& c) {
  const NatsLib& n = c.n;
  std::vector<std::string> records;
  size_t count = spool_.read(records, kBatchMessages, kBatchBytes);
  if (count == 0) return true;
  c.acked = 0;
  c.failed = 0;
  c.first_error.clear();
  std::string failure;
  size_t published = 0;
  for (const auto& r : records) {
    Decoded d;
    if (!decode(r, d)) {  // not ours (a damaged spool): skipped, counted as dropped
      std::lock_guard lock(mu_);
      ++stats_.dropped;
      c.acked.fetch_add(1);
      ++published;
      continue;
    }
    natsMsg* m = nullptr;
    natsStatus s = n.natsMsg_Create(&m, subject_.c_str(), nullptr, d.payload.data(), int(d.payload.size()));
    std::string origin(d.origin), id = origin + (d.kind == 'c' ? "#c" : "#e") + std::to_string(d.seq);
    if (s == NATS_OK) s = n.natsMsgHeader_Set(m, "Nats-Msg-Id", id.c_str());
    if (s == NATS_OK) s = n.natsMsgHeader_Set(m, "Flightrec-Origin", origin.c_str());
    if (s == NATS_OK) s = n.natsMsgHeader_Set(m, "Flightrec-Session", std::to_string(d.session).c_str());
    if (s == NATS_OK) s = n.natsMsgHeader_Set(m, "Flightrec-Kind", d.kind == 'c' ? "checkpoint" : "entry");
    if (s == NATS_OK) s = n.natsMsgHeader_Set(m, "Flightrec-Seq", std::to_string(d.seq).c_str());
    if (s == NATS_OK && d.kind == 'e') s = n.natsMsgHeader_Set(m, "Flightrec-Type", std::string(d.type).c_str());
    if (s == NATS_OK) s = n.js_PublishMsgAsync(c.js, &m, nullptr);
    n.natsMsg_Destroy(m);  // no-op when the library took it
    if (s != NATS_OK) {
      failure = "publish: " + n.error(s);
      break;
    }
    ++published;
  }
  jsPubOptions po{};
  po.MaxWait = kAckWaitMs;
  natsStatus s = n.js_PublishAsyncComplete(c.js, &po);
  if (s != NATS_OK || failure.size() || c.acked.load() != count) {
    natsMsgList pending{};
    if (n.js_PublishAsyncGetPendingList(&pending, c.js) == NATS_OK) n.natsMsgList_Destroy(&pending);
    if (failure.empty()) {
      std::lock_guard lock(c.error_mu);
      failure = !c.first_error.empty() ? "the server refused a message: " + c.first_error
                : s != NATS_OK         ? "no acknowledgment: " + n.error(s)
                                       : "not every message was acknowledged";
    }
    spool_.rewind();
    std::lock_guard lock(mu_);
    stats_.last_error = failure;
    return false;
  }
  spool_.ack();
  std::lock_guard lock(mu_);
  stats_.sent += count;
  return true;
}

void JetStreamOutput::run() {
  using clock = std::chrono::steady_clock;
  auto backoff = std::chrono::milliseconds(100);
  std::unique_ptr<Connection> conn;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stopping_ || spool_.pending() > 0; });
      if (stopping_ && (spool_.pending() == 0 || due())) return;
      if (spool_.pending() == 0) continue;
    }
    std::string failure;
    if (!conn) {
      try {
        conn = std::make_unique<Connection>(nats_lib());
        conn->open(settings_);
        std::lock_guard lock(mu_);
        stats_.connected = true;
        ++stats_.connects;
      } catch (const std::exception& e) {
        conn.reset();
        failure = e.what();
      }
    }
    if (conn && publish_batch(*conn)) {
      backoff = std::chrono::milliseconds(100);
      continue;
    }
    conn.reset();  // reconnect: what was not acknowledged is read again from the spool
    std::unique_lock lock(mu_);
    stats_.connected = false;
    if (!failure.empty()) stats_.last_error = failure;
    if (stats_.last_error != said_) {
      said_ = stats_.last_error;
      std::cerr << "flightrecd: jetstream output " << settings_.name << " (" << settings_.url << "): " << said_
                << " (retrying; the spool keeps what is not acknowledged)\n";
    }
    pause(lock, clock::now() + backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

}  // namespace flightrec::ship
