#include "recorder/recorder.h"

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/system.h"
#include "common/text.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::recorder {
namespace {

int64_t begin_session(ledger::Store& store, const SessionMeta& meta) {
  ledger::SessionRow row;
  row.mode = meta.mode;
  row.command = nlohmann::json(meta.command).dump(-1, ' ', false,
                                                  nlohmann::json::error_handler_t::replace);
  row.host = host_name();
  row.start_real_ns = int64_t(real_ns());
  return store.begin_session(row);
}

int64_t field_int(const events::Entry& e, const char* key) {
  const events::Value* v = e.get(key);
  if (!v) return 0;
  if (auto* i = std::get_if<int64_t>(v)) return *i;
  if (auto* u = std::get_if<uint64_t>(v)) return int64_t(*u);
  return 0;
}

}  // namespace

Recorder::Recorder(ledger::Store& store, const SessionMeta& meta)
    : store_(store), writer_(store, begin_session(store, meta)) {
  ctx_.real_minus_mono_ns = int64_t(real_ns()) - int64_t(mono_ns());
  drops_checked_ns_ = last_flush_ns_ = mono_ns();

  events::Entry e = own_entry("session_start");
  e.set("mode", meta.mode);
  e.set_bytes("host", host_name());
  e.set_bytes("kernel", kernel_release());
  e.set_bytes("boot_id", boot_id());
  e.set("flightrec_version", FLIGHTREC_VERSION);
  e.set("abi_version", FR_ABI_VERSION);
  bool utf8 = true;
  for (const auto& a : meta.command) utf8 = utf8 && is_valid_utf8(a);
  if (utf8) {
    e.set("command", meta.command);
  } else {
    std::vector<std::string> encoded;
    for (const auto& a : meta.command) encoded.push_back(base64_encode(a));
    e.set("command_b64", encoded);
  }
  e.set("cgroups", meta.cgroups);
  e.set("ring_bytes", uint64_t(meta.ring_bytes));
  e.set("capture", std::vector<std::string>{"tp_btf:sys_enter", "tp_btf:sys_exit",
                                            "tp_btf:sched_process_fork",
                                            "tp_btf:sched_process_exec",
                                            "tp_btf:sched_process_exit"});
  append(e, getpid());
  writer_.flush();
}

events::Entry Recorder::own_entry(const char* type) {
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

void Recorder::append(events::Entry& e, int64_t pid) {
  e.set("seq", writer_.next_seq());
  e.set("session", writer_.session());
  writer_.append(e.canonical(), e.type(), pid);
}

void Recorder::on_record(const void* data, size_t size) {
  events::Entry e = events::decode_record(data, size, ctx_);
  append(e, field_int(e, "pid"));
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

void Recorder::note_cgroup_gone(const std::string& path) {
  events::Entry e = own_entry("cgroup_gone");
  e.set_bytes("cgroup", path);
  append(e, getpid());
}

void Recorder::flush_if_due() {
  // Full batches go to the writer thread by themselves; a partial one
  // waits at most 100 ms.
  uint64_t now = mono_ns();
  if (now - last_flush_ns_ >= 100'000'000ull) {
    writer_.submit();
    last_flush_ns_ = now;
  }
}

void Recorder::finish(int64_t exit_status, const std::string& reason) {
  events::Entry e = own_entry("session_end");
  e.set("reason", reason);
  if (WIFEXITED(exit_status)) e.set("exit_code", WEXITSTATUS(exit_status));
  if (WIFSIGNALED(exit_status)) e.set("exit_signal", WTERMSIG(exit_status));
  e.set("lost_total", lost_total_);
  e.set("entries_before", writer_.count());
  append(e, getpid());
  writer_.flush();
  store_.end_session(writer_.session(), int64_t(real_ns()), exit_status, writer_.count(),
                     ledger::to_hex(writer_.head()));
}

}  // namespace flightrec::recorder
