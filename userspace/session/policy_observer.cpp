#include "session/policy_observer.h"

#include <cstring>

#include "common/system.h"
#include "session/stderr_log.h"

namespace flightrec::session {
namespace {

int level_rank(const char* level) {
  return std::strcmp(level, "CRITICAL") == 0 ? 1 : std::strcmp(level, "ALERT") == 0 ? 2 : 3;
}

}  // namespace

PolicyObserver::PolicyObserver(const policy::Policy& policy, std::string work_dir, std::string log_prefix)
    : policy_(policy),
      work_dir_(std::move(work_dir)),
      prefix_(std::move(log_prefix)),
      judge_(std::make_unique<policy::Judge>(policy_, work_dir_)) {
  judge_->set_cwd_resolver([this](int64_t pid) { return cwd_of_process(pid); });
  judge_->set_exe_resolver([this](int64_t pid) { return exe_.find(pid); });
}

void PolicyObserver::observe(const events::Entry& e, Emitted& out) {
  follow(e);
  judge_entry(e, out);
}

void PolicyObserver::judge_entry(const events::Entry& e, Emitted& out) {
  if (auto v = judge_->judge(e)) violation(*v, &e, out);
}

void PolicyObserver::follow(const events::Entry& e) {
  exe_.settle();
  for (int64_t gone : cwd_gone_) cwd_.erase(gone);
  cwd_gone_.clear();
  const std::string type = e.type();
  int64_t pid = e.int_or("pid", -1);
  if (type == "exec") {
    const events::Value* name = e.get("filename");
    const std::string* text = name ? std::get_if<std::string>(name) : nullptr;
    exe_.exec(pid, text ? std::optional<std::string>(*text) : std::nullopt);
  } else if (type == "fork" && e.int_or("thread") == 0) {
    int64_t child = e.int_or("child_pid", -1);
    exe_.fork(pid, child);
    if (auto it = cwd_.find(pid); it != cwd_.end()) cwd_[child] = it->second;
    else cwd_.erase(child);
  } else if (type == "process_at_start") {  // watch, flightrecd: what was running before the record began
    const events::Value* exe = e.get("exe");
    const std::string* text = exe ? std::get_if<std::string>(exe) : nullptr;
    exe_.exec(e.int_or("process_pid", -1), text ? std::optional<std::string>(*text) : std::nullopt);
  } else if (type == "exit" && e.int_or("process_exit") == 1) {
    exe_.exit(pid);
    cwd_gone_.push_back(pid);
  } else if (type == "syscall" && e.int_or("ret", -1) == 0) {
    // Where each process is, from the record: it is gone from /proc by the
    // time a short-lived one's entries are judged.
    const std::string name = e.string_or("name");
    if (name == "chdir") {
      std::string path = e.string_or("path");
      std::optional<std::string> from = cwd_of_process(pid);
      if (!path.empty() && (path[0] == '/' || from))
        cwd_[pid] = policy::normalize_path(path[0] == '/' ? path : *from + "/" + path);
    } else if (name == "fchdir" || name == "chroot") {
      cwd_[pid] = "";  // unknown from here: /proc says, while the process lives
    }
  }
}

std::optional<std::string> PolicyObserver::cwd_of_process(int64_t pid) const {
  // Processes start in the work directory (the sandbox's init chdirs there).
  auto it = cwd_.find(pid);
  if (it == cwd_.end()) return work_dir_;
  if (!it->second.empty()) return it->second;
  return cwd_of(int(pid));
}

void PolicyObserver::record_violation(const policy::Violation& v, const events::Entry* subject, Emitted& out,
                                      uint64_t count) {
  events::Entry& e = subject ? out.add_about("violation", *subject) : out.add("violation");
  e.set("level", v.level);
  e.set("rule_id", v.rule);
  e.set("action", v.action);
  e.set_bytes("detail", v.detail);
  int64_t pid = subject ? subject->int_or("pid", -1) : -1;
  e.set("subject_pid", pid);
  e.set("of_seq", subject ? subject->int_or("seq", -1) : -1);
  if (subject) {
    if (const std::string* exe = exe_.find(pid)) e.set_bytes("exe", *exe);
    // The file it was about, where query --path finds it: the one the
    // kernel resolved when it has one.
    for (const char* key : {"kernel_path", "path"})
      if (const events::Value* p = subject->get(key); p && std::holds_alternative<std::string>(*p)) {
        e.set_bytes("path", std::get<std::string>(*p));
        break;
      }
  }
  if (v.from_user_memory) e.set("from_user_memory", 1);
  if (count) e.set("count", count);
}

void PolicyObserver::violation(const policy::Violation& v, const events::Entry* subject, Emitted& out) {
  record_violation(v, subject, out);
  int64_t pid = subject ? subject->int_or("pid", -1) : -1;
  std::string comm = subject ? subject->string_or("comm") : "";
  // On stderr as they happen, once per rule, program and scope: repeats
  // are counted and told at the end, and a flood of distinct ones stays
  // in the record only.
  if (level_rank(v.level) <= policy_.log_stderr) {
    std::string fingerprint = std::string(v.level) + '\0' + v.rule + '\0' + comm + '\0' + v.scope;
    auto seen = alerted_.find(fingerprint);
    if (seen != alerted_.end()) {
      ++seen->second.repeats;
    } else if (alerted_.size() >= kMaxPrinted) {
      ++not_shown_;
    } else {
      alerted_.emplace(fingerprint, Alert{std::string(v.level) + " " + v.rule + " " + v.action, comm, v.scope, 0});
      StderrLog::get().line(prefix_ + ": " + std::string(v.level) + " " + v.rule + " " + v.action + ": " + v.detail +
                            (subject ? " (" + (comm.empty() ? std::string("?") : comm) + ", pid " + std::to_string(pid) + ")" : ""));
      if (alerted_.size() == kMaxPrinted) StderrLog::get().line(prefix_ + ": further violations are in the record only");
    }
  }
  if (then_) then_(v, out);
}

void PolicyObserver::report_repeats(bool wait) {
  for (auto& [fingerprint, a] : alerted_) {
    if (!a.repeats) continue;
    StderrLog::get().line(prefix_ + ": " + a.what + " " + std::to_string(a.repeats) + " more time" +
                          (a.repeats == 1 ? "" : "s") + " (" + (a.comm.empty() ? "?" : a.comm) +
                          (a.scope.empty() ? "" : ", " + a.scope) + "; every one is in the record)");
    a.repeats = 0;
  }
  if (not_shown_)
    StderrLog::get().line(prefix_ + ": " + std::to_string(not_shown_) + " more violations were not shown (past " +
                          std::to_string(kMaxPrinted) + " distinct ones); every one is in the record");
  not_shown_ = 0;
  if (wait) StderrLog::get().flush(200);
}

void describe_policy(const policy::Policy& policy, recorder::SessionMeta& meta) {
  meta.policy_name = policy.name;
  meta.policy_text = policy.text;
  for (const auto& b : policy.bases) {
    meta.policy_base_sources.push_back(b.source);
    meta.policy_base_texts.push_back(b.text);
  }
}

policy::Policy load_audit_policy(const std::string& name_or_path) {
  policy::Policy p = policy::load(name_or_path);
  p.mode = policy::Mode::Shadow;  // nothing is confined: every violation is what enforce mode would deny
  return p;
}

std::string audit_work_dir(const policy::Policy& policy) {
  const std::string& w = policy.filesystem.work_dir;
  // "/nonexistent" is under no tree a policy lists: nothing is writable through it.
  return !w.empty() && w[0] == '/' ? policy::normalize_path(w) : "/nonexistent";
}

}  // namespace flightrec::session
