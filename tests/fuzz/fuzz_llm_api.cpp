// The model APIs' request and response bodies (agent/llm_api.h), as a
// hostile server or program sends them. Input: [which][body...]; which
// picks the API (bits 0-1), request or response (bit 2), and JSON or
// server-sent events (bit 3).
#include "agent/llm_api.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  uint8_t which = in.byte();
  static const char* kTargets[] = {"/v1/messages", "/v1/chat/completions", "/v1/responses",
                                   "/v1beta/models/gemini-x:streamGenerateContent"};
  std::string_view target = kTargets[which & 3];
  flightrec::agent::LlmExchange x;
  x.api = flightrec::agent::llm_api_of("POST", target);
  if (which & 4) flightrec::agent::decode_llm_response((which & 8) ? "text/event-stream" : "application/json", in.rest, x);
  else flightrec::agent::decode_llm_request(target, in.rest, x);
  return 0;
}
