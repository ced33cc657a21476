#pragma once
// The agent's turns as OpenTelemetry traces (OTLP, with the GenAI semantic
// conventions): per session one trace, its root span `invoke_agent` (from
// genesis to session_end), a `chat {model}` span per llm_call entry and an
// `execute_tool {name}` span per tool_call entry under it. Ids are derived
// from the record (origin, session, seq), so every exporter of one record
// sends the same trace; every span names its entry (flightrec.origin,
// .session, .seq) and the entry's leaf hash, so a span in any OTel backend
// is proven against the record (`flightrec prove`). docs/OTLP.md says it all.
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ledger/hash.h"
#include "ship/connection.h"
#include "ship/hub.h"

namespace flightrec::ship {

using OtelValue = std::variant<std::string, int64_t, bool, std::vector<std::string>, std::vector<int64_t>>;

struct OtelSpan {
  size_t bytes() const;  // about what it takes encoded
  std::array<uint8_t, 16> trace_id{};
  std::array<uint8_t, 8> span_id{}, parent_id{};  // parent all zero: a root
  std::string name;
  int kind = 1;  // OTLP SpanKind: 1 internal, 3 client
  uint64_t start_ns = 0, end_ns = 0;  // Unix epoch nanoseconds
  std::vector<std::pair<std::string, OtelValue>> attributes;
  int status = 0;  // 0 unset, 2 error
  std::string status_message;
};

// What a span may carry beyond the record's metadata: the content of the
// exchange (prompt, answer, tool input and result), only when asked.
struct OtelContent {
  std::string input_messages, output_messages;  // GenAI JSON, for a chat span
  std::string tool_result;                      // for an execute_tool span
};

class OtelSpans {
 public:
  // content: tool inputs go in execute_tool spans; `extra` (by entry seq)
  // adds what only the whole record gives (export reads the bodies).
  explicit OtelSpans(bool content = false) : content_(content) {}
  // One entry of a session, in log order. The spans it completes are
  // appended to out: llm_call and tool_call at once, the root at
  // session_end. Entries of other types only feed the root's members.
  void add(const std::string& origin, int64_t session, int64_t seq, std::string_view type, std::string_view body,
           const ledger::Hash& leaf, std::vector<OtelSpan>& out, const OtelContent* extra = nullptr);

 private:
  struct Root {
    uint64_t start_ns = 0;
    std::string agent, mode, host;
    std::vector<std::string> command;
    ledger::Hash leaf{};  // the genesis entry's: the root span names it
  };
  bool content_;
  std::map<std::pair<std::string, int64_t>, Root> roots_;  // sessions whose genesis came, not their end
};

// One OTLP ExportTraceServiceRequest: one resource (service.name
// "flightrec", host.name) and one scope, holding the spans.
std::string otlp_protobuf(const std::vector<OtelSpan>& spans, const std::string& host);
std::string otlp_json(const std::vector<OtelSpan>& spans, const std::string& host);  // OTLP/JSON (hex ids)

// flightrecd's `otlp:` output: the spans of every session recorded, as
// they are sealed, POSTed to an OTLP/HTTP endpoint (a collector's
// /v1/traces) in batches; a span waits in a bounded queue while the
// endpoint is away. Content is never sent (it stays in the record).
struct OtlpSettings {
  std::string name;      // the config's
  std::string endpoint;  // as configured: http(s)://HOST:PORT[/PATH]
  std::string host, path = "/v1/traces";
  uint16_t port = 0;
  TlsSettings tls;       // on for https
  bool json = false;     // encoding: protobuf (the OTLP/HTTP default) or json
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every request (e.g. an API key)
  size_t queue_max = 100000;  // spans held while the endpoint is away
  size_t queue_max_bytes = 64u << 20;  // ... and their bytes (as encoded, about)
  size_t batch_max = 512;     // spans per request
  bool operator==(const OtlpSettings&) const = default;
};
// Splits an endpoint URL into s.host, s.port, s.path and s.tls.on; false
// when it is not http(s)://HOST[:PORT][/PATH] (a default port 4318 / 443).
bool parse_otlp_endpoint(const std::string& url, OtlpSettings& s);

class OtlpOutput : public ThreadedOutput {
 public:
  explicit OtlpOutput(OtlpSettings settings);
  ~OtlpOutput() override { close(std::chrono::milliseconds(0)); }
  void offer(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
             std::span<const ledger::SealedCheckpoint> checkpoints) override;
  const EntryFilter& filter() const override { return filter_; }

 private:
  void run() override;
  void fill(OutputStats& s) const override { s.queued = queue_.size(); }
  // One request of `spans`; "" when the endpoint took it, else why not.
  // *retry: whether sending it again may help (not for a 4xx answer).
  std::string post(std::unique_ptr<Connection>& conn, const std::vector<OtelSpan>& spans, bool* retry);

  OtlpSettings settings_;
  EntryFilter filter_;
  std::string hostname_;
  OtelSpans builder_;             // under mu_
  std::deque<OtelSpan> queue_;    // under mu_
  size_t queued_bytes_ = 0;       // under mu_
};

}  // namespace flightrec::ship
