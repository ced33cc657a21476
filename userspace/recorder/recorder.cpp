#include "recorder/recorder.h"

#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/system.h"
#include "common/text.h"
#include "events/secrets.h"
#include "ledger/path_index.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::recorder {
namespace {

// key: the strings as they are when all are UTF-8; else b64_key: each
// base64. Literals: an entry keeps its keys as views.
void set_strings(events::Entry& e, const char* key, const char* b64_key, const std::vector<std::string>& values) {
  bool utf8 = true;
  for (const auto& v : values) utf8 = utf8 && is_valid_utf8(v);
  if (utf8) {
    e.set(key, values);
    return;
  }
  std::vector<std::string> encoded;
  for (const auto& v : values) encoded.push_back(base64_encode(v));
  e.set(b64_key, encoded);
}

// The command as recorded: credentials in it redacted (unless asked not
// to), as they are in every exec entry's argv.
std::vector<std::string> recorded_command(const SessionMeta& meta) {
  if (!meta.redact || meta.command.empty()) return meta.command;
  std::string joined;
  for (const auto& a : meta.command) joined += a + '\0';
  joined.pop_back();
  events::SecretScrubber(meta.redact_prefixes).scrub(joined);
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    size_t nul = joined.find('\0', start);
    out.push_back(joined.substr(start, nul - start));
    if (nul == std::string::npos) return out;
    start = nul + 1;
  }
}

int64_t begin_session(ledger::Store& store, const SessionMeta& meta) {
  ledger::SessionRow row;
  row.mode = meta.mode;
  row.command = nlohmann::json(recorded_command(meta)).dump(-1, ' ', false,
                                                  nlohmann::json::error_handler_t::replace);
  row.host = host_name();
  row.start_real_ns = int64_t(real_ns());
  return store.begin_session(row);
}


}  // namespace

static std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (getrandom(raw.data(), raw.size(), 0) != ssize_t(raw.size()))
    throw Error(errno_message("getrandom", errno));
  return hex_encode(raw);
}

Recorder::Recorder(ledger::Store& store, const SessionMeta& meta)
    : store_(store),
      writer_(store, begin_session(store, meta)),
      key_(meta.key),
      checkpoint_entries_(meta.checkpoint_entries ? meta.checkpoint_entries : 1000),
      checkpoint_ns_(meta.checkpoint_ms * 1'000'000ull),
      tls_(meta.tls_redact ? meta.tls_redact_headers : std::vector<std::string>{}, meta.tls_cap) {
  ctx_.real_minus_mono_ns = int64_t(real_ns()) - int64_t(mono_ns());
  ctx_.tls = &tls_;
  ctx_.names = &answered_;
  if (meta.redact) {
    secrets_.emplace(meta.redact_prefixes);
    ctx_.secrets = &*secrets_;
  }
  if (meta.record_rate) rate_.emplace(meta.record_rate);
  drops_checked_ns_ = last_flush_ns_ = last_checkpoint_ns_ = mono_ns();
  // The log's name in every checkpoint: unique per session, so a checkpoint
  // of one session can never pass for another's.
  std::string host = host_name();
  for (char& c : host)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  origin_ = "flightrec/" + host + "/" + random_hex(16);

  events::Entry e = own_entry("genesis");
  e.set("origin", origin_);
  e.set("mode", meta.mode);
  e.set_bytes("host", host_name());
  e.set_bytes("kernel", kernel_release());
  e.set_bytes("boot_id", boot_id());
  e.set("flightrec_version", FLIGHTREC_VERSION);
  e.set("abi_version", FR_ABI_VERSION);
  set_strings(e, "command", "command_b64", recorded_command(meta));
  e.set("argv_redact", meta.redact ? 1 : 0);
  set_strings(e, "cgroups", "cgroups_b64", meta.cgroups);
  if (!meta.watch_rule.empty()) e.set("watch_rule", meta.watch_rule);
  for (const auto& [key, value] : {std::pair{"pod_uid", &meta.pod_uid}, {"container_id", &meta.container_id},
                                   {"qos_class", &meta.qos_class}, {"container_runtime", &meta.container_runtime},
                                   {"previous_record", &meta.previous_record}, {"previous_origin", &meta.previous_origin},
                                   {"previous_head", &meta.previous_head}})
    if (!value->empty()) e.set_bytes(key, *value);
  if (meta.tasks_at_start) e.set("tasks_at_start", *meta.tasks_at_start);
  e.set("ring_bytes", uint64_t(meta.ring_bytes));
  e.set("capture", meta.capture);
  e.set("capture_mode", meta.lite ? "lite" : "full");
  if (meta.lite) e.set("counts_interval_ms", meta.counts_interval_ms);
  if (meta.lite && !meta.capture_absent.empty()) e.set("capture_absent", meta.capture_absent);
  if (!meta.capture_refused.empty()) e.set("capture_refused", meta.capture_refused);
  e.set("policy_name", meta.policy_name);
  e.set_bytes("policy", meta.policy_text);
  e.set("policy_sha256", ledger::to_hex(ledger::sha256(meta.policy_text)));
  if (!meta.policy_base_sources.empty()) {
    set_strings(e, "policy_bases", "policy_bases_b64", meta.policy_base_sources);
    set_strings(e, "policy_base_texts", "policy_base_texts_b64", meta.policy_base_texts);
  }
  e.set("on_loss", meta.on_loss);
  e.set("tls_capture", meta.tls ? 1 : 0);
  if (!meta.lsm_hidden.empty()) e.set("lsm_hidden", meta.lsm_hidden);
  if (!meta.lsm_exec.empty()) e.set("lsm_exec", meta.lsm_exec);
  if (!meta.policy_mode.empty()) e.set("policy_mode", meta.policy_mode);
  if (!meta.work_dir.empty()) e.set_bytes("work_dir", meta.work_dir);
  if (!meta.sandbox.empty()) e.set("sandbox", meta.sandbox);
  if (!meta.env_passed.empty()) e.set("env_passed", meta.env_passed);
  if (!meta.env_set.empty()) e.set("env_set", meta.env_set);
  if (meta.tls) {
    e.set("agent_turns", meta.agent_turns ? 1 : 0);
    e.set("tls_redact", meta.tls_redact ? 1 : 0);
    if (meta.tls_redact) e.set("tls_redact_headers", meta.tls_redact_headers);
    e.set("tls_chunk_bytes", meta.tls_chunk);
    e.set("tls_call_cap_bytes", meta.tls_cap);
  }
  e.set("checkpoint_every_entries", checkpoint_entries_);
  e.set("checkpoint_every_ms", uint64_t(meta.checkpoint_ms));
  if (key_) {
    e.set("public_key", key_->verifier().vkey());
    e.set("key_id", key_->verifier().key_id_hex());
  }
  if (meta.sink) writer_.set_sink(meta.sink, origin_);
  append(e, getpid());
  writer_.checkpoint(origin_, key_);
  writer_.flush();
}

void Recorder::checkpoint_if_due() {
  uint64_t now = mono_ns();
  uint64_t since = uint64_t(writer_.count()) - writer_.checkpointed();
  if (since == 0) return;
  if (since >= checkpoint_entries_ || (checkpoint_ns_ && now - last_checkpoint_ns_ >= checkpoint_ns_)) {
    writer_.checkpoint(origin_, key_);
    last_checkpoint_ns_ = now;
  }
}

void Recorder::note(const char* type, const std::string& detail) {
  events::Entry e = own_entry(type);
  e.set_bytes("detail", detail);  // may quote paths from the traced processes
  append(e, getpid());
}

events::Entry Recorder::own_entry(const char* type) const {
  events::Entry e;
  e.set("type", type);
  uint64_t now = mono_ns();
  e.set("pid", uint32_t(getpid()));
  e.set("tid", uint32_t(gettid()));
  e.set("ppid", uint32_t(getppid()));
  e.set("uid", uint32_t(getuid()));
  e.set("gid", uint32_t(getgid()));
  e.set("comm", "flightrec");
  e.set("ts_mono_ns", now);
  e.set("ts_real_ns", int64_t(now) + ctx_.real_minus_mono_ns);
  return e;
}

events::Entry Recorder::entry_about(const char* type, const events::Entry& subject) const {
  events::Entry own = own_entry(type), e;
  auto copy = [&](std::string_view key, const events::Value& v) { std::visit([&](const auto& x) { e.set(key, x); }, v); };
  for (const auto& [key, value] : own.fields()) {
    const events::Value* theirs = key == "type" || key.starts_with("ts_") ? nullptr : subject.get(key);
    if (key == "comm" && !theirs)
      if (const events::Value* raw = subject.get("comm_b64")) {  // a name that is not UTF-8
        copy("comm_b64", *raw);
        continue;
      }
    copy(key, theirs ? *theirs : value);
  }
  return e;
}

ledger::SessionWriter::Paths entry_paths(const events::Entry& e, std::vector<uint64_t>& scratch) {
  scratch.clear();
  bool all = false;
  for (const auto& [key, value] : e.fields()) {
    ledger::PathKey kind = ledger::path_key(key);
    const auto* text = std::get_if<std::string>(&value);
    if (kind == ledger::PathKey::kNone || !text) continue;
    if (kind == ledger::PathKey::kPlain) {
      all = !ledger::path_prefix_hashes(*text, scratch) || all;
    } else if (auto bytes = base64_decode(*text)) {
      all = !ledger::path_prefix_hashes(*bytes, scratch) || all;
    }
  }
  return {scratch, all};
}

bool Recorder::append(events::Entry& e, int64_t pid, std::optional<size_t> record_size) {
  e.set("seq", writer_.next_seq());
  e.set("session", writer_.session());
  canonical_.clear();  // its capacity stays: no allocation per entry
  try {
    e.append_canonical(canonical_);
  } catch (const std::logic_error& err) {
    // A bug of ours, not the traced process's fault: keep recording, and
    // keep the evidence that one entry was not understood.
    events::Entry m;
    m.set("type", "malformed");
    m.set("reason", std::string("cannot encode the record: ") + err.what());
    if (record_size) m.set("size", uint64_t(*record_size));
    append(m, 0);
    return false;
  }
  const events::Value* type = e.get("type");
  writer_.append(canonical_, type && std::holds_alternative<std::string>(*type) ? std::get<std::string>(*type) : "?",
                 pid, e.int_or("ts_real_ns"), entry_paths(e, path_hashes_));
  if (uint64_t(writer_.count()) - writer_.checkpointed() >= checkpoint_entries_) checkpoint_if_due();
  return true;
}

const events::Entry* Recorder::on_record(const void* data, size_t size) {
  events::decode_record(data, size, ctx_, last_);
  if (rate_) {
    if (rate_->roll(uint64_t(last_.int_or("ts_mono_ns")))) write_summary();
    if (!rate_->admit(last_)) return nullptr;
  }
  if (!append(last_, last_.int_or("pid"), size)) return nullptr;
  return &last_;
}

void Recorder::note_drops(const std::vector<uint64_t>& per_cpu, uint64_t program_misses) {
  uint64_t now = mono_ns();
  if (drops_seen_.size() < per_cpu.size()) drops_seen_.resize(per_cpu.size(), 0);
  std::vector<int64_t> delta(per_cpu.size(), 0);
  uint64_t dropped = 0;
  for (size_t i = 0; i < per_cpu.size(); ++i) {
    delta[i] = int64_t(per_cpu[i] - drops_seen_[i]);
    dropped += uint64_t(delta[i]);
  }
  uint64_t missed = program_misses - misses_seen_;
  if (dropped + missed > 0) {
    events::Entry e = own_entry("lost");
    e.set("lost", dropped + missed);
    e.set("cpu_lost", delta);
    e.set("program_misses", missed);
    e.set("since_mono_ns", drops_checked_ns_);
    e.set("until_mono_ns", now);
    append(e, getpid());
    lost_total_ += dropped + missed;
    drops_seen_ = per_cpu;
    misses_seen_ = program_misses;
  }
  drops_checked_ns_ = now;
}

void Recorder::count_drops_from(const std::vector<uint64_t>& per_cpu, uint64_t program_misses) {
  drops_seen_ = per_cpu;
  misses_seen_ = program_misses;
  drops_checked_ns_ = mono_ns();
}

// The index keeps the pid the entry names (a violation names its subject).
void Recorder::record_own(events::Entry& e) { append(e, e.int_or("pid", getpid())); }

void Recorder::write_summary() {
  events::Entry e = own_entry("summary");
  if (rate_ && rate_->add_summary(e)) append(e, getpid());
}

void Recorder::note_cgroup_gone(const std::string& path) {
  events::Entry e = own_entry("cgroup_gone");
  e.set_bytes("cgroup", path);
  append(e, getpid());
}

void Recorder::flush_if_due() {
  // Full batches go to the writer thread by themselves; a partial one
  // waits at most 100 ms.
  uint64_t now = mono_ns();
  if (rate_ && rate_->roll(now)) write_summary();  // a window that ended with nothing after it
  if (now - last_flush_ns_ >= 100'000'000ull) {
    writer_.submit();
    last_flush_ns_ = now;
  }
}

void Recorder::finish(int64_t exit_status, const std::string& reason) {
  write_summary();
  events::Entry e = own_entry("session_end");
  e.set("reason", reason);
  if (WIFEXITED(exit_status)) e.set("exit_code", WEXITSTATUS(exit_status));
  if (WIFSIGNALED(exit_status)) e.set("exit_signal", WTERMSIG(exit_status));
  e.set("lost_total", lost_total_);
  e.set("entries_before", writer_.count());
  append(e, getpid());
  writer_.checkpoint(origin_, key_);  // the end checkpoint covers session_end
  writer_.flush();
  store_.end_session(writer_.session(), int64_t(real_ns()), exit_status, writer_.count(),
                     ledger::to_hex(writer_.head()));
}

}  // namespace flightrec::recorder
