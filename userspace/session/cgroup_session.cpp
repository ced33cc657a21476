#include "session/cgroup_session.h"

#include "common/text.h"
#include "session/snapshot.h"

namespace flightrec::session {

CgroupSession::CgroupSession(probe::Capture& capture, uint32_t number, std::vector<const sandbox::Cgroup*> cgroups,
                             CgroupSessionSpec spec)
    : capture_(capture),
      number_(number),
      cgroups_(std::move(cgroups)),
      gone_(cgroups_.size(), spec.cgroups_gone),
      db_(std::move(spec.db)),
      tls_kept_(spec.meta.tls),
      resident_(spec.resident),
      policy_(std::move(spec.policy)) {
  // Read first: a cgroup that cannot be listed fails the session before
  // its record file exists.
  std::vector<ProcessInfo> processes;
  if (spec.list_processes) {
    std::vector<std::string> dirs;
    for (const auto* cg : cgroups_) dirs.push_back(cg->path());
    processes = snapshot_cgroups(dirs, spec.exclude_pid, spec.argv_budget);
  }
  if (policy_) {
    recorder::SessionMeta& m = spec.meta;
    describe_policy(*policy_, m);
    m.policy_mode = "shadow";
    m.sandbox.push_back("policy source: " + policy_->source);
    m.sandbox.push_back("watched: nothing is confined; would-deny entries say what the policy would deny");
  }
  store_ = std::make_unique<ledger::Store>(db_, ledger::Store::Mode::Write);
  if (spec.cache_kib) store_->limit_cache(spec.cache_kib);
  rec_ = std::make_unique<recorder::Recorder>(*store_, spec.meta);
  for (const auto& note : spec.notes) rec_->note("error", note);
  size_t argv_left_out = 0;
  for (const auto& p : processes) {
    events::Entry e = rec_->own_entry("process_at_start");
    e.set("process_pid", int64_t(p.pid));
    e.set("process_ppid", int64_t(p.ppid));
    e.set("process_uid", uint64_t(p.uid));
    e.set_bytes("process_comm", p.comm);
    if (!p.exe_unreadable) e.set_bytes("exe", p.exe);
    if (!p.cwd.empty()) e.set_bytes("cwd", p.cwd);
    if (p.argv_left_out) {
      ++argv_left_out;
    } else {  // as an exec entry has it: the NUL-separated block, credentials redacted
      std::string block;
      for (const auto& a : p.argv) block += a + '\0';
      rec_->set_argv(e, block);
    }
    rec_->record_own(e);
  }
  if (argv_left_out && spec.argv_budget)
    rec_->note("error", "process_at_start: the command lines of " + std::to_string(argv_left_out) +
                            " processes are left out (the " + std::to_string(spec.argv_budget >> 20) +
                            " MiB the listing's command lines may hold was spent)");
  pipeline_ = std::make_unique<Pipeline>(*rec_);
  if (spec.meta.tls) {
    // Paths as the processes see them are the host's: no sandbox here.
    tls_ = spec.tls_follower ? spec.tls_follower : std::make_shared<TlsFollower>(capture_.tls(), false);
    pipeline_->add(*tls_);
  }
  if (spec.meta.tls && spec.meta.agent_turns) {
    llm_ = std::make_unique<LlmCalls>(spec.meta.tls_redact);  // one per record file: its entries name seqs of this one
    pipeline_->add(*llm_);
  }
  if (policy_) {
    judging_ = std::make_unique<PolicyObserver>(*policy_, audit_work_dir(*policy_), spec.log_prefix);
    // Its paths are as the workload sees them, in a mount namespace that
    // may not be this one: the host's files say nothing of them.
    judging_->judge().set_host_checks(false);
    pipeline_->add(*judging_);
    for (const auto& p : processes)  // listed above, before the pipeline: who runs what, for processes.expected_parents
      if (!p.exe_unreadable) judging_->running(p.pid, p.exe);
  }
  if (spec.meta.lite && spec.lite_counter) {
    counts_ = spec.lite_counter;  // the counts and their cgroups' paths go on in the next file
  } else if (spec.meta.lite) {
    std::vector<std::string> roots;
    for (const auto* cg : cgroups_) roots.push_back(cg->path());
    counts_ = std::make_shared<LiteCounter>(number_, roots);
  }
}

void CgroupSession::on_record(const void* data, size_t size) {
  // The plaintext is left out unless asked for (the capture may serve
  // sessions that keep it); a hello, from the syscall programs, is not.
  if (!tls_kept_ && size >= sizeof(fr_header) && static_cast<const fr_header*>(data)->type == FR_REC_TLS) return;
  pipeline_->on_record(data, size);
}

void CgroupSession::add_counts(const std::vector<probe::Capture::LiteCount>& taken) {
  if (counts_) counts_->add(taken);
}

void CgroupSession::record_counts() {
  if (counts_) counts_->record(*rec_, capture_.lite_uncounted(number_));
}

bool CgroupSession::cgroups_gone() {
  bool all = true;
  for (size_t i = 0; i < cgroups_.size(); ++i) {
    if (!gone_[i] && !cgroups_[i]->exists()) {
      gone_[i] = true;
      rec_->note_cgroup_gone(cgroups_[i]->path());
    }
    all = all && gone_[i];
  }
  return all;
}

bool CgroupSession::ended() {
  if (!cgroups_gone()) return false;
  return capture_.session_tasks(number_) <= 0 || !capture_.session_has_tasks(number_);
}

void CgroupSession::finish(const std::string& reason) {
  pipeline_->release_held();
  if (tls_) {  // hellos of probed programs no plaintext followed
    Emitted tail = pipeline_->emitted();
    tls_->finish(tail);
    pipeline_->write(tail);
  }
  if (llm_) {  // exchanges still open, tool calls never answered
    Emitted tail = pipeline_->emitted();
    llm_->finish(tail);
    pipeline_->write(tail);
  }
  finish_part(reason);
}

void CgroupSession::finish_part(const std::string& reason) {
  record_counts();
  if (judging_) judging_->report_repeats(!resident_);
  rec_->finish(0, reason);
}

}  // namespace flightrec::session
