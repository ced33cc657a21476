#include "sandbox/seccomp_filter.h"

#include <seccomp.h>

#include <fcntl.h>

#include <cstring>

#include "common/error.h"

namespace flightrec::sandbox {
namespace {

uint32_t action(policy::Action a, int err) {
  switch (a) {
    case policy::Action::Allow: return SCMP_ACT_ALLOW;
    case policy::Action::Errno: return SCMP_ACT_ERRNO(uint32_t(err));
    case policy::Action::Kill: return SCMP_ACT_KILL_PROCESS;
  }
  return SCMP_ACT_KILL_PROCESS;
}

scmp_compare op(policy::ArgCheck::Op o) {
  using O = policy::ArgCheck::Op;
  switch (o) {
    case O::Eq: return SCMP_CMP_EQ;
    case O::Ne: return SCMP_CMP_NE;
    case O::Lt: return SCMP_CMP_LT;
    case O::Le: return SCMP_CMP_LE;
    case O::Gt: return SCMP_CMP_GT;
    case O::Ge: return SCMP_CMP_GE;
    case O::MaskedEq: return SCMP_CMP_MASKED_EQ;
  }
  return SCMP_CMP_EQ;
}

}  // namespace

SeccompFilter::SeccompFilter(const policy::Seccomp& s, const policy::Ask& ask) {
  scmp_filter_ctx ctx = seccomp_init(action(s.default_action, s.default_errno));
  if (!ctx) throw Error("seccomp_init failed");
  ctx_ = ctx;
  // Only the native ABI: i386 (int 0x80) and x32 calls kill the process.
  seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  uint32_t dflt = action(s.default_action, s.default_errno);
  for (const auto& rule : s.rules) {
    uint32_t act = action(rule.action, rule.errno_value);
    if (act == dflt) continue;  // libseccomp refuses rules equal to the default
    std::vector<scmp_arg_cmp> cmps;
    for (const auto& a : rule.args)
      cmps.push_back(scmp_arg_cmp{a.index, op(a.op), a.value, a.value_two});
    for (int nr : rule.numbers) {
      int rc = seccomp_rule_add_array(ctx, act, nr, unsigned(cmps.size()), cmps.data());
      // -EEXIST: an earlier rule already decides this call (first rule wins).
      if (rc != 0 && rc != -EEXIST)
        throw Error("seccomp rule " + rule.id + " cannot be compiled: " + strerror(-rc));
    }
  }
  // Asked calls go to the supervisor (the policy has no other rule for
  // them). Opens only when their flags may write: a plain read costs
  // nothing; openat2's flags are in memory, so every openat2 asks.
  auto notify = [&](int nr, std::vector<scmp_arg_cmp> cmps) {
    int rc = seccomp_rule_add_array(ctx, SCMP_ACT_NOTIFY, nr, unsigned(cmps.size()), cmps.data());
    if (rc != 0 && rc != -EEXIST) throw Error(std::string("seccomp ask rule cannot be compiled: ") + strerror(-rc));
    notifies_ = true;
  };
  for (int nr : ask.syscalls) notify(nr, {});
  if (ask.connect) notify(SCMP_SYS(connect), {});
  if (ask.exec)
    for (int nr : policy::exec_ask_syscalls()) notify(nr, {});
  if (ask.write) {
    constexpr uint64_t kTmpfileBit = 020000000;  // __O_TMPFILE
    for (uint64_t bit : {uint64_t(O_WRONLY), uint64_t(O_RDWR), uint64_t(O_CREAT), uint64_t(O_TRUNC), kTmpfileBit}) {
      notify(SCMP_SYS(open), {scmp_arg_cmp{1, SCMP_CMP_MASKED_EQ, bit, bit}});
      notify(SCMP_SYS(openat), {scmp_arg_cmp{2, SCMP_CMP_MASKED_EQ, bit, bit}});
    }
    for (int nr : policy::write_ask_syscalls())
      if (nr != SCMP_SYS(open) && nr != SCMP_SYS(openat)) notify(nr, {});
  }
}

int SeccompFilter::notify_fd() const {
  return notifies_ ? seccomp_notify_fd(static_cast<scmp_filter_ctx>(ctx_)) : -1;
}

SeccompFilter::~SeccompFilter() {
  if (ctx_) seccomp_release(static_cast<scmp_filter_ctx>(ctx_));
}

int SeccompFilter::load() const {
  int rc = seccomp_load(static_cast<scmp_filter_ctx>(ctx_));
  return rc < 0 ? -rc : 0;
}

}  // namespace flightrec::sandbox
