#pragma once
// An agent's session turn by turn, from its llm_call and tool_call entries
// and the tls entries that hold the bytes: what the model was asked, what it
// answered (text and tool calls), what each tool call did on the machine,
// and the result the model was told. For `flightrec agent`.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "ledger/store.h"

namespace flightrec::inspect {

// {"session": N, "turns": [{"llm_call": SEQ, "api", "model", "status", "stream",
//   "input_tokens", "output_tokens", "stop_reason", "prompt", "answer", "problems",
//   "tool_calls": [{"tool_call": SEQ, "id", "name", "input", "result",
//     "result_seen", "duration_ns", "acts": [{"seq", "kind", "link", "what"}]}]}]}
// Text comes from the recorded bytes (redacted as recorded), at most 4 KiB
// each. Throws Error when the session is not in the record.
nlohmann::json agent_turns(ledger::Store& store, int64_t session);

}  // namespace flightrec::inspect
