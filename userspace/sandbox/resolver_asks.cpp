// The session resolver's lookups that wait for a grant (ask.connect): a
// query for a name no rule allows is held, the grant supervisor is asked
// once per name (policy/name_ask_messages.h), and every query held for the name is
// taken up again when it answers: through the grant, or refused.
#include <sys/socket.h>

#include <cerrno>
#include <system_error>

#include "common/system.h"
#include "policy/name_ask_messages.h"
#include "policy/network.h"
#include "sandbox/resolver.h"

namespace flightrec::sandbox {
namespace {

constexpr size_t kMaxAsking = 64;           // names waiting at once; then refused at once
constexpr size_t kMaxParkedPerName = 32;    // queries held for one name (retries, A and AAAA)
// TCP queries held at once: each holds its connection open (a descriptor of
// this process) until answered, whether or not the asker still reads.
constexpr size_t kMaxParkedTcp = 16;
constexpr uint64_t kAnswerGraceMs = 2'000;  // past the ask's timeout, before the resolver refuses it itself
constexpr size_t kMaxParkedQuery = 1024;    // bytes; a question is ~50 (a TCP message may be 64 KiB: not held)

}  // namespace

bool Resolver::park(const uint8_t* msg, size_t size, const std::shared_ptr<Client>& client, const NameEvent& ev) {
  if (opts_.asks_fd < 0 || size > kMaxParkedQuery || policy::normal_host_name(ev.name) != ev.name) return false;
  std::lock_guard lock(mu_);
  if (!asks_open_ || stopping_) return false;
  bool tcp = ev.transport == "tcp";
  if (tcp && parked_tcp_ >= kMaxParkedTcp) return false;
  Parked held{std::string(reinterpret_cast<const char*>(msg), size), client, ev.mono_ns, tcp};
  auto held_now = [&] { parked_tcp_ += tcp ? 1 : 0; };
  for (auto& [tag, asking] : asking_) {
    if (asking.name != ev.name) continue;
    if (asking.queries.size() >= kMaxParkedPerName) return false;
    asking.queries.push_back(std::move(held));
    held_now();
    return true;
  }
  if (asking_.size() >= kMaxAsking) return false;
  policy::NameAsk ask{++next_tag_, ev.name, ev.type, ev.client};
  std::string m = policy::encode(ask);
  if (send(opts_.asks_fd, m.data(), m.size(), MSG_DONTWAIT | MSG_NOSIGNAL) != ssize_t(m.size())) return false;
  uint64_t deadline = mono_ns() + (opts_.ask_timeout_ms + kAnswerGraceMs) * 1'000'000;
  asking_[ask.tag] = {ev.name, deadline, {std::move(held)}};
  held_now();
  return true;
}

void Resolver::take_answers() {
  char buf[2048];
  for (;;) {
    ssize_t n = recv(opts_.asks_fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) {  // the supervisor is gone: what waits is refused, and nothing waits from now on
      {
        std::lock_guard lock(mu_);
        asks_open_ = false;
      }
      end_asks(0, true);
      return;
    }
    auto answer = size_t(n) <= sizeof(buf) ? policy::parse_name_answer(std::string_view(buf, size_t(n))) : std::nullopt;
    if (!answer) continue;
    // The grant may reach the resolver here before the record's copy does;
    // taken before the ask ends, so a query of the name meanwhile finds it.
    if (answer->grant) grant(answer->grant, answer->name, answer->port, answer->until_ns);
    Asking asking;
    {
      std::lock_guard lock(mu_);
      auto it = asking_.find(answer->tag);
      if (it == asking_.end()) continue;  // refused already, its deadline past
      asking = std::move(it->second);
      asking_.erase(it);
    }
    for (auto& held : asking.queries) resume(std::move(held), answer->ask);
  }
}

void Resolver::end_asks(uint64_t now_ns, bool all) {
  std::vector<Parked> refused;
  {
    std::lock_guard lock(mu_);
    if (all) asks_open_ = false;
    std::erase_if(asking_, [&](auto& kv) {
      if (!all && kv.second.deadline_ns > now_ns) return false;
      for (auto& held : kv.second.queries) refused.push_back(std::move(held));
      return true;
    });
  }
  // Taken up again with no grant: refused as any name off the allowlist (the ask unknown here).
  for (auto& held : refused) resume(std::move(held), 0);
}

void Resolver::resume(Parked held, uint64_t ask) {
  Resumed again{held.asked_ns, ask};
  if (!held.tcp) {  // a reply never blocks (sendto, MSG_DONTWAIT)
    guarded_query(reinterpret_cast<const uint8_t*>(held.query.data()), held.query.size(), held.client, &again);
    return;
  }
  {
    std::lock_guard lock(mu_);
    parked_tcp_--;
  }
  // A TCP asker may not read its reply: written on a thread of its own, never this one's.
  auto job = std::make_shared<Parked>(std::move(held));
  auto run = [this, job, again] {
    guarded_query(reinterpret_cast<const uint8_t*>(job->query.data()), job->query.size(), job->client, &again);
  };
  auto done = std::make_shared<std::atomic<bool>>(false);
  try {
    std::lock_guard lock(mu_);
    workers_.emplace_back(std::thread([run, done] {
      run();
      done->store(true);
    }), done);
  } catch (const std::system_error&) {  // no thread to be had: answered here (a write of up to 1 s)
    run();
  }
}

int Resolver::ask_wait_ms() {
  std::lock_guard lock(mu_);
  if (asking_.empty()) return -1;
  uint64_t next = UINT64_MAX;
  for (const auto& [tag, asking] : asking_) next = std::min(next, asking.deadline_ns);
  uint64_t now = mono_ns();
  return next <= now ? 0 : int(std::min<uint64_t>((next - now) / 1'000'000 + 1, 60'000));
}

}  // namespace flightrec::sandbox
