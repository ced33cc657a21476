#include "ship/hub.h"

#include <iostream>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <set>

#include "ledger/canonical.h"

namespace flightrec::ship {

std::string log_id(std::string_view origin) {
  if (!origin.starts_with("flightrec/") || origin.size() < 10 + 1 + 33 || origin.size() > 512) return "";
  std::string_view id = origin.substr(origin.size() - 32);
  if (origin[origin.size() - 33] != '/' || id.find_first_not_of("0123456789abcdef") != std::string_view::npos) return "";
  return std::string(id);
}

int level_of(std::string_view name) {
  std::string up(name);
  for (char& c : up) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (up == "INFO") return EntryFilter::Info;
  if (up == "ALERT") return EntryFilter::Alert;
  if (up == "CRITICAL") return EntryFilter::Critical;
  return -1;
}

bool EntryFilter::accepts(std::string_view type, std::string_view body) const {
  if (!all_types && !std::binary_search(types.begin(), types.end(), type)) return false;
  if (type != "violation" || min_level == Info) return true;
  ledger::TopLevel top;
  if (!ledger::check_canonical(body, &top).empty()) return true;  // sent rather than judged unread
  auto level = top.string("level");
  return level && level_of(*level) >= min_level;
}

ThreadedOutput::ThreadedOutput(std::string kind, std::string name) {
  stats_.kind = std::move(kind);
  stats_.name = std::move(name);
}

OutputStats ThreadedOutput::stats() const {
  std::lock_guard lock(mu_);
  OutputStats s = stats_;
  fill(s);
  return s;
}

void ThreadedOutput::close(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      stopping_ = true;
      stop_by_ = std::chrono::steady_clock::now() + grace;
    }
  }
  cv_.notify_all();
  std::lock_guard join(join_mu_);
  if (thread_.joinable()) thread_.join();
}

void ThreadedOutput::pause(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point until) {
  if (stopping_ && stop_by_ < until) until = stop_by_;
  cv_.wait_until(lock, until, [&] { return due(); });
}

std::string ThreadedOutput::connect_if_needed(std::unique_ptr<Connection>& conn, const std::string& host, uint16_t port,
                                              const TlsSettings& tls) {
  if (conn) return "";
  try {
    conn = std::make_unique<Connection>(host, port, tls, 5000);
  } catch (const std::exception& e) {
    return e.what();
  }
  std::lock_guard lock(mu_);
  stats_.connected = true;
  ++stats_.connects;
  return "";
}

void ThreadedOutput::note_failure(const std::string& why, const std::string& where, bool retrying) {
  if (!why.empty()) stats_.last_error = why;
  if (stats_.last_error == said_) return;
  said_ = stats_.last_error;
  std::cerr << "flightrecd: " << stats_.kind << " output " << stats_.name << " (" << where << "): " << said_
            << (retrying ? " (retrying)" : "") << "\n";
}

void Hub::replace(std::vector<std::unique_ptr<Output>> outputs, std::chrono::milliseconds grace) {
  std::vector<std::unique_ptr<Output>> old;
  {
    std::unique_lock lock(mu_);
    old.swap(outputs_);
    outputs_ = std::move(outputs);
  }
  for (auto& o : old) o->close(grace);
}

void Hub::sealed(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
                 std::span<const ledger::SealedCheckpoint> checkpoints) {
  std::shared_lock lock(mu_);
  for (auto& o : outputs_) o->offer(origin, session, entries, checkpoints);
}

std::vector<OutputStats> Hub::stats() const {
  std::shared_lock lock(mu_);
  std::vector<OutputStats> all;
  for (const auto& o : outputs_) all.push_back(o->stats());
  return all;
}

std::vector<std::string> Hub::take_notices() {
  std::shared_lock lock(mu_);
  std::vector<std::string> all;
  for (const auto& o : outputs_)
    if (std::string n = o->take_notice(); !n.empty()) all.push_back(n);
  return all;
}

bool Hub::empty() const {
  std::shared_lock lock(mu_);
  return outputs_.empty();
}

std::vector<std::string> Hub::wanted_types() const {
  std::shared_lock lock(mu_);
  std::set<std::string> types;
  for (const auto& o : outputs_) {
    if (o->filter().all_types) return {"*"};
    types.insert(o->filter().types.begin(), o->filter().types.end());
  }
  return {types.begin(), types.end()};
}

}  // namespace flightrec::ship
