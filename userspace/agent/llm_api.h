#pragma once
// The model APIs agents call, read from their HTTP messages: Anthropic
// Messages, OpenAI Chat Completions and Responses, Gemini generateContent;
// JSON or server-sent events. What an exchange says about the agent's turn:
// the model, the tool calls the model made, the tool results the request
// carried, ids, token usage and why the model stopped. The bodies are the
// traced program's: anything may be malformed, and is then said, not guessed.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flightrec::agent {

struct ToolCall {
  std::string id, name;
  std::string input;  // as the model gave it: JSON text (arguments), or the tool's raw input
};

struct LlmExchange {
  std::string api;  // "anthropic.messages", "openai.chat_completions", "openai.responses", "gemini.generate_content"
  std::string model, response_model, response_id, stop_reason, error;
  bool stream = false;
  int64_t input_tokens = -1, output_tokens = -1;  // -1: not said
  std::vector<ToolCall> tool_calls;          // the model's, in the order it made them
  std::vector<std::string> tool_results;     // ids of the tool calls whose results the request carries
  std::vector<std::string> result_texts;     // ... and each result's text (at most 4 KiB each)
  std::string prompt;                        // the request's last user text, "" when tool results follow it (<= 4 KiB)
  std::string answer;                        // the model's text (at most 4 KiB)
  std::vector<std::string> problems;         // what could not be read, and why
};

// The API a request speaks, from its method and target ("" for none).
std::string llm_api_of(std::string_view method, std::string_view target);
// Fill x from the request's body (x.api set) and from the response's.
void decode_llm_request(std::string_view target, std::string_view body, LlmExchange& x);
void decode_llm_response(std::string_view content_type, std::string_view body, LlmExchange& x);

}  // namespace flightrec::agent
