// Messages as `flightrec collect` takes them from the stream (ship/collect.h
// Collector::take): a publisher's subject, headers and JSON Lines, all of
// them chosen by whoever can publish. The host is pinned to the key the
// seeds were signed with (tests/fuzz/corpus/collect), so signed logs reach
// the chain, tree and checkpoint checks.
//
// Input: HOST '\n', then messages, each ORIGIN '\n' SESSION '\n' FIRST '\n'
// LAST '\n' PAYLOAD, apart by a line holding one 0x1e byte.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/error.h"
#include "fuzz_input.h"
#include "ship/collect.h"

namespace {

const char* kSeedKey = "flightrec-fuzz+b46fe56b+AeOvblaHMqG8/JLVk4i5Fu0l00/JpF40n+XYtGxhgdhP";

std::string_view next_line(std::string_view& rest) {
  size_t nl = rest.find('\n');
  std::string_view line = rest.substr(0, nl);
  rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string out = [] {
    char dir[] = "/tmp/fuzz-collect-XXXXXX";
    return std::string(mkdtemp(dir) ? dir : "/tmp/fuzz-collect");
  }();
  FuzzInput in(data, size);
  std::string_view rest = in.rest;
  std::string host(next_line(rest));
  flightrec::ship::CollectSettings settings;
  settings.out_dir = out + "/out";
  if (auto key = flightrec::ledger::VerifierKey::parse(kSeedKey)) settings.hosts.emplace(host, *key);
  try {
    flightrec::ship::Collector collector(settings);
    while (!rest.empty()) {
      size_t end = rest.find("\n\x1e\n");
      std::string_view message = rest.substr(0, end);
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 3);
      std::map<std::string, std::string> headers;
      for (const char* name : {"Flightrec-Origin", "Flightrec-Session", "Flightrec-First", "Flightrec-Last"})
        headers[name] = std::string(next_line(message));
      collector.take("flightrec." + host, headers, message);
    }
    auto report = collector.report();
    if (getenv("FUZZ_COLLECT_SAY"))  // to see what a seed reaches: FUZZ_COLLECT_SAY=1 fuzz_collect SEED
      for (const auto& h : report)
        for (const auto& l : h.logs)
          fprintf(stderr, "%s: ok %d entries %lld checkpoints %lld %s\n", l.origin.c_str(), int(l.ok),
                  (long long)l.entries, (long long)l.checkpoints, l.reason.c_str());
  } catch (const flightrec::Error&) {  // a refusal the collector reports: fine
  }
  std::error_code ec;
  std::filesystem::remove_all(settings.out_dir, ec);
  return 0;
}
