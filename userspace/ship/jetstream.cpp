#include "ship/jetstream.h"

#include <unistd.h>

#include <cstring>
#include <iostream>
#include <utility>

#include "common/error.h"
#include "common/system.h"
#include "ship/nats_lib.h"
#include <nlohmann/json.hpp>

namespace flightrec::ship {

namespace {

constexpr size_t kBatchMessages = 256;        // messages in flight before their acknowledgments
constexpr size_t kBatchBytes = 16u << 20;
constexpr size_t kMessageBytes = 256u << 10;  // lines per message, at most (NATS's default limit: 1 MiB)
constexpr int64_t kAckWaitMs = 5000;
constexpr int64_t kDuplicateWindowNs = 10ll * 60 * 1'000'000'000;

// A spooled message: session, first and last entry seq (0, 0: checkpoints
// alone), origin, and the payload: the log's JSON Lines from first to last.
constexpr size_t kHead = 26;
std::string head(int64_t session, int64_t first, int64_t last, std::string_view origin) {
  std::string r;
  r.append(reinterpret_cast<const char*>(&session), 8);
  r.append(reinterpret_cast<const char*>(&first), 8);
  r.append(reinterpret_cast<const char*>(&last), 8);
  uint16_t ol = uint16_t(std::min<size_t>(origin.size(), 65535));
  r.append(reinterpret_cast<const char*>(&ol), 2);
  r.append(origin.substr(0, ol));
  return r;
}

struct Decoded {
  int64_t session, first, last;
  std::string_view origin, payload;
};

bool decode(std::string_view r, Decoded& d) {
  if (r.size() < kHead) return false;
  std::memcpy(&d.session, r.data(), 8);
  std::memcpy(&d.first, r.data() + 8, 8);
  std::memcpy(&d.last, r.data() + 16, 8);
  uint16_t ol;
  std::memcpy(&ol, r.data() + 24, 2);
  if (r.size() < 26u + ol) return false;
  d.origin = r.substr(26, ol);
  d.payload = r.substr(26 + ol);
  return true;
}

}  // namespace

uint64_t checkpoint_size(std::string_view lines) {
  // {"checkpoint":"<origin>\n<size>\n...": the note's second line.
  auto j = nlohmann::json::parse(lines.substr(0, lines.find('\n')), nullptr, false);
  if (!j.is_object() || !j.contains("checkpoint") || !j["checkpoint"].is_string()) return 0;
  const std::string& note = j["checkpoint"].get_ref<const std::string&>();
  size_t a = note.find('\n');
  if (a == std::string::npos) return 0;
  try {
    return std::stoull(note.substr(a + 1, note.find('\n', a + 1) - a - 1));
  } catch (const std::exception&) {
    return 0;
  }
}

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
  // Messages of consecutive lines of the log's JSON Lines bundle (a
  // checkpoint right after the entry that completes it), cut at the same
  // places whenever they are published again: each one's id stays its own.
  // Framed for the spool as they are written: [u32 length][head][lines], one buffer.
  std::string framed, start = head(session, 0, 0, origin);
  framed.reserve(entries.size() * 400 + 4096);
  size_t at = 0, messages = 0;  // where the open message's frame begins
  int64_t first = 0, last = 0;
  size_t count = 0;
  auto open_message = [&] {
    at = framed.size();
    framed.append(4 + start.size(), '\0');
    std::memcpy(framed.data() + at + 4, start.data(), start.size());
  };
  auto cut = [&] {
    size_t len = framed.size() - at - 4;
    if (len == start.size()) return;  // nothing in it yet: it stays open
    uint32_t l32 = uint32_t(len);
    std::memcpy(framed.data() + at, &l32, 4);
    std::memcpy(framed.data() + at + 4 + 8, &first, 8);
    std::memcpy(framed.data() + at + 4 + 16, &last, 8);
    first = last = 0;
    ++messages;
    open_message();
  };
  open_message();
  auto entry = [&](const ledger::SealedEntry& e) {
    if (framed.size() - at - 4 - start.size() + e.body.size() > kMessageBytes) cut();
    if (!first) first = e.seq;
    last = e.seq;
    framed.append(e.body);
    framed += '\n';
    ++count;
  };
  in_log_order(entries, checkpoints, entry, [&](const ledger::SealedCheckpoint& c) {
    framed += nlohmann::json({{"checkpoint", c.note}}).dump();
    framed += '\n';
    ++count;
  });
  cut();
  framed.resize(at);  // the message left open is empty
  if (!messages) return;
  bool taken = spool_.append_framed(framed, messages);
  {
    std::lock_guard lock(mu_);
    if (!taken) {
      stats_.dropped += count;
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
  std::vector<std::string_view> records;
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
    std::string origin(d.origin);
    // Its place in the log: its entries, or (checkpoints alone) the tree size of its first.
    std::string id = origin + "#" + (d.first ? std::to_string(d.first) + "-" + std::to_string(d.last)
                                             : "c" + std::to_string(checkpoint_size(d.payload)));
    if (s == NATS_OK) s = n.natsMsgHeader_Set(m, "Nats-Msg-Id", id.c_str());
    if (s == NATS_OK) s = n.natsMsgHeader_Set(m, "Flightrec-Origin", origin.c_str());
    if (s == NATS_OK) s = n.natsMsgHeader_Set(m, "Flightrec-Session", std::to_string(d.session).c_str());
    if (s == NATS_OK) s = n.natsMsgHeader_Set(m, "Flightrec-First", std::to_string(d.first).c_str());
    if (s == NATS_OK) s = n.natsMsgHeader_Set(m, "Flightrec-Last", std::to_string(d.last).c_str());
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
