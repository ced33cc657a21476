// flightrec export: one session as a bundle an auditor verifies elsewhere.
#include <ext/stdio_filebuf.h>
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/progress.h"
#include "common/system.h"
#include "inspect/turns.h"
#include "ledger/bundle.h"
#include "ledger/hash.h"
#include "ledger/store.h"
#include "ship/otlp.h"

namespace flightrec::cli {
namespace {

// The session's turns as one OTLP request (docs/OTLP.md); with content,
// prompts, answers, tool inputs and results read from the recorded bytes.
std::string otlp_of(ledger::Store& store, int64_t session, bool json, bool content) {
  std::map<int64_t, ship::OtelContent> extra;  // by llm_call or tool_call seq
  if (content) {
    nlohmann::json turns = inspect::agent_turns(store, session)["turns"];
    for (const auto& t : turns) {
      ship::OtelContent& c = extra[t["llm_call"].get<int64_t>()];
      nlohmann::json out_parts = nlohmann::json::array();
      if (!t["answer"].get<std::string>().empty()) out_parts.push_back({{"type", "text"}, {"content", t["answer"]}});
      for (const auto& tool : t["tool_calls"]) {
        out_parts.push_back({{"type", "tool_call"}, {"id", tool["id"]}, {"name", tool["name"]}, {"arguments", tool["input"]}});
        if (tool.contains("result")) extra[tool["tool_call"].get<int64_t>()].tool_result = tool["result"];
      }
      if (!t["prompt"].get<std::string>().empty())
        c.input_messages = nlohmann::json::array({{{"role", "user"}, {"parts", {{{"type", "text"}, {"content", t["prompt"]}}}}}})
                               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      nlohmann::json message = {{"role", "assistant"}, {"parts", out_parts}};
      if (t.contains("stop_reason")) message["finish_reason"] = t["stop_reason"];
      if (!out_parts.empty())
        c.output_messages = nlohmann::json::array({message}).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  ship::OtelSpans builder(content);
  std::vector<ship::OtelSpan> spans;
  std::string origin, host;
  ledger::EntryFilter f;
  f.session = session;
  f.types = {"genesis", "llm_call", "tool_call", "session_end"};
  store.for_each_entry(f, [&](const ledger::EntryRow& row) {
    if (row.type == "genesis") {
      auto g = nlohmann::json::parse(row.body, nullptr, false);
      if (g.is_object() && g.value("origin", nlohmann::json()).is_string()) origin = g["origin"];
      if (g.is_object() && g.value("host", nlohmann::json()).is_string()) host = g["host"];
    }
    auto it = extra.find(row.seq);
    builder.add(origin, session, row.seq, row.type, row.body, ledger::leaf_hash(row.body), spans,
                it == extra.end() ? nullptr : &it->second);
    return true;
  });
  if (origin.empty()) throw Error("no session " + std::to_string(session) + " in " + store.path());
  return json ? ship::otlp_json(spans, host) : ship::otlp_protobuf(spans, host);
}

// Writes to `out` ('-': standard output) beside the target, then renames:
// a reader never sees half an export. The temporary file is new (O_EXCL),
// no symlink is followed, and it is its owner's alone (the session's plaintext).
void write_out(const std::string& out, const std::function<void(std::ostream&)>& write) {
  if (out == "-") {
    write(std::cout);
    std::cout.flush();
    return;
  }
  std::string tmp = out + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(errno_message("cannot create " + tmp, errno));
  {
    __gnu_cxx::stdio_filebuf<char> buf(fd, std::ios::out | std::ios::binary);
    std::ostream file(&buf);
    try {
      write(file);
      file.flush();
      if (!file || fsync(fd) != 0) throw Error(errno_message("cannot write " + tmp, errno));
    } catch (...) {
      std::remove(tmp.c_str());
      throw;
    }
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot rename " + tmp + " to " + out);
  }
}

}  // namespace

int cmd_export(const Args& args) {
  po::options_description desc("options");
  std::string db, out, format = "json";
  int64_t session = 0;
  bool otel_content = false;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record")(
      "session", po::value(&session)->required(), "session to export")(
      "out", po::value(&out)->required(), "bundle file to write ('-': standard output)")(
      "format", po::value(&format)->default_value(format),
      "json (one document), jsonl (JSON Lines, streams for sessions too large for memory), "
      "otlp (the agent's turns as OpenTelemetry traces, OTLP protobuf) or otlp-json (OTLP/JSON)")(
      "otel-content", po::bool_switch(&otel_content),
      "otlp: put prompts, answers, tool inputs and results in the spans (they are the session's plaintext)");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec export --db FILE --session N --out FILE [--format json|jsonl|otlp|otlp-json]\n"
      "                        [--otel-content]\n\n"
      "json, jsonl: the session's entries (canonical bytes), its signed checkpoints and\n"
      "the public key in one bundle; 'flightrec verify BUNDLE --pubkey KEY' checks it.\n"
      "otlp, otlp-json: one OTLP ExportTraceServiceRequest (POST it to a collector's\n"
      "/v1/traces): the session's root span, a 'chat' span per model call and an\n"
      "'execute_tool' span per tool call, each naming its entry and leaf hash, so\n"
      "'flightrec prove' proves a span against the record (docs/OTLP.md).";
  if (!parse_options(args, desc, usage, vm)) return 0;
  bool otlp = format == "otlp" || format == "otlp-json";
  if (format != "json" && format != "jsonl" && !otlp) throw UsageError("--format must be json, jsonl, otlp or otlp-json");
  if (otel_content && !otlp) throw UsageError("--otel-content goes with --format otlp or otlp-json");
  auto fmt = format == "json" ? ledger::BundleFormat::Json : ledger::BundleFormat::Lines;

  ledger::Store store(db, ledger::Store::Mode::Read);
  if (otlp) {
    std::string request = otlp_of(store, session, format == "otlp-json", otel_content);
    write_out(out, [&](std::ostream& o) { o << request; });
    if (out != "-") std::cerr << "exported session " << session << " as OTLP (" << request.size() << " bytes) to " << out << "\n";
    return 0;
  }
  int64_t n = 0;
  {
    Progress progress("exporting session " + std::to_string(session), store.stored_entries(session));
    if (out == "-" && isatty(STDOUT_FILENO)) progress.disable();  // the bundle itself is on the terminal
    write_out(out, [&](std::ostream& o) { n = ledger::export_bundle(store, session, o, fmt, &progress); });
  }
  if (out != "-") std::cerr << "exported session " << session << ": " << n << " entries to " << out << "\n";
  return 0;
}

}  // namespace flightrec::cli
