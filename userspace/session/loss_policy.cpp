#include "session/loss_policy.h"

#include <cstdio>

#include "common/system.h"

namespace flightrec::session {
namespace {
constexpr double kThawBelow = 0.1;

std::string percent(double fill) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", fill * 100);
  return buf;
}
}  // namespace

LossPolicy::LossPolicy(std::string mode, probe::Source& capture, recorder::Recorder& recorder,
                       std::vector<sandbox::Cgroup*> cgroups, recorder::Watchdog& watchdog)
    : mode_(std::move(mode)), capture_(capture), recorder_(recorder), cgroups_(std::move(cgroups)), watchdog_(watchdog) {
  watchdog_.add([this] { check(); });
}

LossPolicy::~LossPolicy() {
  if (unwarned_)
    std::fprintf(stderr, "flightrec: WARNING: %llu more events lost: the record has a gap\n",
                 static_cast<unsigned long long>(unwarned_));
  if (frozen_) {
    for (auto* cg : cgroups_) {
      try {
        cg->freeze(false);
      } catch (...) {  // a cgroup gone meanwhile has nothing left to thaw; the others still are
      }
    }
  }
  capture_.continue_braked();  // never leaves a process stopped either
}

void LossPolicy::set_frozen(bool frozen, std::string why) {
  std::vector<std::string> errors;
  for (auto* cg : cgroups_) {
    try {
      cg->freeze(frozen);
    } catch (const std::exception& e) {
      errors.push_back(e.what());  // e.g. a watched cgroup that is gone
    }
  }
  frozen_ = frozen;
  if (!frozen) why += continue_braked();
  watchdog_.post([this, frozen, why, errors] {
    for (const auto& e : errors) recorder_.note("error", e);
    recorder_.note(frozen ? "freeze" : "thaw", why);
  });
}

std::string LossPolicy::continue_braked() {
  size_t n = capture_.continue_braked();
  if (!n) return "";
  return "; " + std::to_string(n) + (n == 1 ? " process" : " processes") +
         " the kernel stopped with the ring buffer over three quarters full continued";
}

void LossPolicy::release() {
  if (frozen_) {
    set_frozen(false, "session ending");
  } else if (std::string braked = continue_braked(); !braked.empty()) {
    watchdog_.post([this, braked] { recorder_.note("thaw", "session ending" + braked); });
  }
  watchdog_.run_posted();
}

void LossPolicy::check() {
  if (killed_) return;
  // The kernel's counters, not the record's lost entries: those are
  // written by the recording thread, which a flood keeps busy.
  uint64_t lost = capture_.program_misses();
  for (uint64_t n : capture_.drops_per_cpu()) lost += n;
  bool new_loss = lost > lost_seen_;
  if (new_loss) {
    // Loud: a gap in the record is never silent.
    unwarned_ += lost - lost_seen_;
    uint64_t now = mono_ns();
    if (now - warned_ns_ >= 1'000'000'000ull) {
      std::fprintf(stderr, "flightrec: WARNING: %llu events lost (the ring buffer was full): the record has a gap%s\n",
                   static_cast<unsigned long long>(unwarned_),
                   mode_ == "continue" ? " (--on-loss backpressure slows the command down instead)" : "");
      warned_ns_ = now;
      unwarned_ = 0;
    }
  }
  lost_seen_ = lost;
  if (mode_ == "continue") return;
  if (mode_ == "kill") {
    if (new_loss) {
      killed_ = true;
      for (auto* cg : cgroups_) cg->kill_all();
    }
    return;
  }
  double fill = capture_.ring_fill();
  if (!frozen_ && (fill >= kFreezeAbove || new_loss))
    set_frozen(true, new_loss ? "events were lost; ring buffer " + percent(fill) + " full"
                              : "ring buffer " + percent(fill) + " full");
  else if (frozen_ && fill <= kThawBelow && !new_loss)
    set_frozen(false, "ring buffer drained to " + percent(fill));
  else if (!frozen_ && fill <= kThawBelow) {
    // The brake can act before this thread froze anything, and the ring
    // drain before it looked.
    std::string braked = continue_braked();
    if (!braked.empty())
      watchdog_.post([this, why = "ring buffer drained to " + percent(fill) + braked] { recorder_.note("thaw", why); });
  }
}

}  // namespace flightrec::session
