// The model APIs read from HTTP/1 bytes as the TLS probes give them: a
// message split anywhere between calls, chunked bodies, gaps; each API's
// tool calls, results, ids and usage, streamed or not; and hostile bodies,
// which are said to be malformed, never guessed at.
#include <brotli/encode.h>
#include <doctest/doctest.h>
#include <zlib.h>
#include <zstd.h>

#include <string>
#include <vector>

#include "agent/content_coding.h"
#include "agent/http1.h"
#include "agent/llm_api.h"

using namespace flightrec::agent;

namespace {

// The stream fed in pieces of `step` bytes, one entry each.
std::vector<HttpMessage> feed_all(const std::string& bytes, size_t step) {
  Http1Stream s;
  std::vector<HttpMessage> out;
  int64_t seq = 1;
  for (size_t at = 0; at < bytes.size(); at += step) {
    std::string piece = bytes.substr(at, step);
    s.feed(at, piece.size(), piece, seq++, at, out);
  }
  return out;
}

std::string chunked(const std::vector<std::string>& parts) {
  std::string out;
  char size[32];
  for (const auto& p : parts) {
    snprintf(size, sizeof(size), "%zx\r\n", p.size());
    out += size + p + "\r\n";
  }
  return out + "0\r\n\r\n";
}

LlmExchange exchange(const std::string& method, const std::string& target, const std::string& request,
                     const std::string& content_type, const std::string& response) {
  LlmExchange x;
  x.api = llm_api_of(method, target);
  decode_llm_request(target, request, x);
  decode_llm_response(content_type, response, x);
  return x;
}

}  // namespace

TEST_CASE("http1: requests and chunked responses, split at every size, each with the entries that held it") {
  std::string body = R"({"model":"m","stream":true})";
  std::string request = "POST /v1/messages?beta=true HTTP/1.1\r\nHost: api\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\nX-Api-Key: [REDACTED]\r\n\r\n" + body;
  std::string response = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
                         chunked({"event: a\ndata: {}\n\n", "data: [DONE]\n\n"});
  for (size_t step : {1, 2, 3, 7, 64, 4096}) {
    CAPTURE(step);
    auto requests = feed_all(request + request, step);
    REQUIRE(requests.size() == 2);
    for (const auto& r : requests) {
      CHECK(r.request);
      CHECK(r.method == "POST");
      CHECK(r.target == "/v1/messages?beta=true");
      CHECK(r.header("host") == "api");
      CHECK(r.body == body);
      CHECK(r.problem.empty());
      CHECK(!r.seqs.empty());
    }
    auto responses = feed_all(response + response, step);
    REQUIRE(responses.size() == 2);
    CHECK(responses[0].status == 200);
    CHECK(responses[0].body == "event: a\ndata: {}\n\ndata: [DONE]\n\n");
    CHECK(responses[1].body == responses[0].body);
  }
}

TEST_CASE("http1: a gap inside a body is said; a gap where framing was, or bytes that are no HTTP/1, stop the stream") {
  Http1Stream s;
  std::vector<HttpMessage> out;
  std::string head = "POST /v1/messages HTTP/1.1\r\nContent-Length: 10\r\n\r\n";
  s.feed(0, head.size(), head, 1, 0, out);
  s.feed(head.size(), 3, "abc", 2, 0, out);
  s.feed(head.size() + 5, 5, "fghij", 3, 0, out);  // 2 bytes never recorded
  REQUIRE(out.size() == 1);
  CHECK(out[0].body == "abcfghij");
  CHECK(!out[0].problem.empty());
  s.feed(head.size() + 20, 4, "POST", 4, 0, out);  // lost between messages
  CHECK(s.lost());
  Http1Stream h2;
  h2.feed(0, 24, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 1, 0, out);
  CHECK(h2.lost());
  Http1Stream huge;
  std::string endless = "POST / HTTP/1.1\r\nX: " + std::string(Http1Stream::kMaxHead + 10, 'a');
  huge.feed(0, endless.size(), endless, 1, 0, out);
  CHECK(huge.lost());
  Http1Stream bad_chunk;
  std::string r = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
  bad_chunk.feed(0, r.size(), r, 1, 0, out);
  CHECK(bad_chunk.lost());
}

TEST_CASE("llm api: which requests are model calls") {
  CHECK(llm_api_of("POST", "/v1/messages?beta=true") == "anthropic.messages");
  CHECK(llm_api_of("POST", "/v1/messages/count_tokens") == "");
  CHECK(llm_api_of("POST", "/openai/v1/chat/completions") == "openai.chat_completions");
  CHECK(llm_api_of("POST", "/v1/responses") == "openai.responses");
  CHECK(llm_api_of("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse") == "gemini.generate_content");
  CHECK(llm_api_of("GET", "/v1/models") == "");
}

TEST_CASE("llm api: OpenAI Chat Completions, streamed tool calls put together by index; results by tool_call_id") {
  std::string req = R"({"model":"gpt-4.1","stream":true,"messages":[{"role":"user","content":"hi"},)"
                    R"({"role":"tool","tool_call_id":"call_old","content":"ok"}]})";
  std::string sse =
      "data: {\"id\":\"chatcmpl-1\",\"model\":\"gpt-4.1-2025\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":["
      "{\"index\":0,\"id\":\"call_a\",\"function\":{\"name\":\"shell\",\"arguments\":\"{\\\"comm\"}},"
      "{\"index\":1,\"id\":\"call_b\",\"function\":{\"name\":\"read\",\"arguments\":\"\"}}]}}]}\n\n"
      "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":["
      "{\"index\":0,\"function\":{\"arguments\":\"and\\\":\\\"ls\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"
      "data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7}}\n\n"
      "data: [DONE]\n\n";
  auto x = exchange("POST", "/v1/chat/completions", req, "text/event-stream; charset=utf-8", sse);
  CHECK(x.api == "openai.chat_completions");
  CHECK(x.model == "gpt-4.1");
  CHECK(x.response_model == "gpt-4.1-2025");
  CHECK(x.stream);
  CHECK(x.response_id == "chatcmpl-1");
  CHECK(x.stop_reason == "tool_calls");
  CHECK(x.input_tokens == 12);
  CHECK(x.output_tokens == 7);
  REQUIRE(x.tool_calls.size() == 2);  // parallel calls told apart
  CHECK(x.tool_calls[0].id == "call_a");
  CHECK(x.tool_calls[0].name == "shell");
  CHECK(x.tool_calls[0].input == R"({"command":"ls"})");
  CHECK(x.tool_calls[1].id == "call_b");
  CHECK(x.tool_results == std::vector<std::string>{"call_old"});
  CHECK(x.result_texts == std::vector<std::string>{"ok"});
  CHECK(x.prompt.empty());  // the tool's result came after the user's "hi"
  CHECK(x.problems.empty());
}

TEST_CASE("llm api: Gemini generateContent, JSON and SSE; function calls and responses") {
  std::string req = R"({"contents":[{"role":"user","parts":[{"functionResponse":{"id":"fc-1","name":"ls","response":{}}}]}]})";
  std::string resp = R"({"candidates":[{"content":{"parts":[{"functionCall":{"id":"fc-2","name":"run","args":{"cmd":"make"}}}]},)"
                     R"("finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":5},)"
                     R"("responseId":"r-9","modelVersion":"gemini-2.5-pro-001"})";
  auto x = exchange("POST", "/v1beta/models/gemini-2.5-pro:generateContent", req, "application/json", resp);
  CHECK(x.api == "gemini.generate_content");
  CHECK(x.model == "gemini-2.5-pro");
  CHECK_FALSE(x.stream);
  CHECK(x.response_id == "r-9");
  CHECK(x.input_tokens == 30);
  CHECK(x.output_tokens == 5);
  REQUIRE(x.tool_calls.size() == 1);
  CHECK(x.tool_calls[0].name == "run");
  CHECK(x.tool_calls[0].input == R"({"cmd":"make"})");
  CHECK(x.tool_results == std::vector<std::string>{"fc-1"});
  auto s = exchange("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", req, "text/event-stream",
                    "data: " + resp + "\r\n\r\n");
  CHECK(s.stream);
  CHECK(s.tool_calls.size() == 1);
}

TEST_CASE("llm api: hostile bodies are said to be malformed, never guessed at, and bounded") {
  auto x = exchange("POST", "/v1/messages", "{not json", "text/event-stream", "data: {\"type\":\n\ndata: [1,2\n\n");
  CHECK(x.problems.size() >= 2);
  CHECK(x.tool_calls.empty());
  // An id or name of any type, members missing, deep nesting: no crash.
  auto y = exchange("POST", "/v1/responses", R"({"input":[{"type":"function_call_output","call_id":7}],"model":[]})",
                    "application/json", R"({"output":[{"type":"function_call","call_id":{"a":1},"name":null,"arguments":42}]})");
  CHECK(y.tool_results.empty());
  REQUIRE(y.tool_calls.size() == 1);
  CHECK(y.tool_calls[0].id.empty());
  CHECK(y.tool_calls[0].input == "42");
  std::string deep(100000, '[');
  auto z = exchange("POST", "/v1/messages", deep, "application/json", deep);
  CHECK(z.problems.size() == 2);
  // Balanced but 200000 deep, where a tool's input or an error is printed
  // again: cut at 64 levels as it is parsed (dump() recurses; a stack would not hold it).
  std::string abyss = std::string(200000, '[') + std::string(200000, ']');
  auto v = exchange("POST", "/v1/messages", "{}", "application/json",
                    R"({"content":[{"type":"tool_use","id":"t","name":"n","input":)" + abyss + R"(}],"error":)" + abyss + "}");
  REQUIRE(v.tool_calls.size() == 1);
  CHECK(v.tool_calls[0].input.size() < 200);
  auto sse = exchange("POST", "/v1/messages", "{}", "text/event-stream", "event: error\ndata: {\"type\":\"error\",\"error\":" + abyss + "}\n\n");
  CHECK(sse.error.size() < 200);
  // A tool call's input is kept up to 64 KiB.
  std::string big = R"({"content":[{"type":"tool_use","id":"t","name":"n","input":{"x":")" + std::string(200000, 'a') + R"("}}]})";
  auto w = exchange("POST", "/v1/messages", "{}", "application/json", big);
  REQUIRE(w.tool_calls.size() == 1);
  CHECK(w.tool_calls[0].input.size() == 64 << 10);
}

namespace {

std::string gzip(const std::string& in, int window_bits) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, uLong(in.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string brotli(const std::string& in) {
  std::string out(BrotliEncoderMaxCompressedSize(in.size()) + 64, '\0');
  size_t n = out.size();
  REQUIRE(BrotliEncoderCompress(5, 22, BROTLI_MODE_TEXT, in.size(), reinterpret_cast<const uint8_t*>(in.data()), &n,
                                reinterpret_cast<uint8_t*>(out.data())));
  out.resize(n);
  return out;
}

std::string zstd(const std::string& in) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  REQUIRE(!ZSTD_isError(n));
  out.resize(n);
  return out;
}

}  // namespace

TEST_CASE("content codings: gzip, deflate, br, zstd and their chains decode; damage, unknown codings and bombs are said") {
  std::string body = R"({"id":"msg_1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]})";
  std::string why;
  for (const auto& cd : std::vector<std::pair<std::string, std::string>>{
           {"gzip", gzip(body, 31)}, {"deflate", gzip(body, 15)}, {"deflate", gzip(body, -15)},
           {"br", brotli(body)}, {"zstd", zstd(body)}, {"gzip, br", brotli(gzip(body, 31))}, {"identity", body}}) {
    const std::string &coding = cd.first, &data = cd.second;  // (not structured bindings: CAPTURE's lambda takes them)
    CAPTURE(coding);
    auto out = decode_content(coding, data, 1 << 20, &why);
    REQUIRE(out.has_value());
    CHECK(*out == body);
  }
  // Damaged, cut, unknown.
  std::string gz = gzip(body, 31);
  CHECK_FALSE(decode_content("gzip", gz.substr(0, gz.size() / 2), 1 << 20, &why));
  CHECK(why.find("damaged or cut") != std::string::npos);
  std::string z = zstd(body);  // (no checksum: a changed byte may decode; a cut frame never does)
  CHECK_FALSE(decode_content("zstd", z.substr(0, z.size() - 4), 1 << 20, &why));
  z[0] ^= 0x55;  // not a zstd frame at all
  CHECK_FALSE(decode_content("zstd", z, 1 << 20, &why));
  CHECK_FALSE(decode_content("compress", body, 1 << 20, &why));
  CHECK(why.find("compress") != std::string::npos);
  // A bomb: 256 MiB of zeros in a few KiB stops at the bound, for each coding.
  std::string zeros(256 << 20, '\0');
  for (const auto& cd : std::vector<std::pair<std::string, std::string>>{
           {"gzip", gzip(zeros, 31)}, {"zstd", zstd(zeros)}, {"br", brotli(zeros)}}) {
    const std::string &coding = cd.first, &data = cd.second;
    CAPTURE(coding);
    CHECK(data.size() < (1 << 20));
    why.clear();
    CHECK_FALSE(decode_content(coding, data, 16 << 20, &why));
    CHECK(why.find("more than 16 MiB") != std::string::npos);
  }
  // A response read through its coding, as the recorder reads it.
  HttpMessage m;
  m.headers = {{"content-encoding", "gzip"}};
  m.body = gz;
  why.clear();
  LlmExchange x;
  x.api = "anthropic.messages";
  decode_llm_response("application/json", body_of(m, &why), x);
  CHECK(why.empty());
  REQUIRE(x.tool_calls.size() == 1);
  CHECK(x.tool_calls[0].id == "t1");
}
