#include "sandbox/seccomp_filter.h"

#include <seccomp.h>

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

SeccompFilter::SeccompFilter(const policy::Seccomp& s) {
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
}

SeccompFilter::~SeccompFilter() {
  if (ctx_) seccomp_release(static_cast<scmp_filter_ctx>(ctx_));
}

int SeccompFilter::load() const {
  int rc = seccomp_load(static_cast<scmp_filter_ctx>(ctx_));
  return rc < 0 ? -rc : 0;
}

}  // namespace flightrec::sandbox
