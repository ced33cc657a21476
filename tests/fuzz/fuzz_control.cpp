// flightrecd's control protocol (control/protocol.h): a line as the daemon
// reads it from a client of root or its socket group, or as `flightrec run`
// reads the daemon's answer. What parses must come out of to_json the same
// when parsed again: the struct holds all the message says.
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "control/protocol.h"
#include "fuzz_input.h"

namespace {

using namespace flightrec::control;

template <class T, class Parse>
void round_trip(const nlohmann::json& j, Parse parse) {
  T first;
  try {
    first = parse(j);
  } catch (const ProtocolError&) {
    return;  // refused, naming the field: what a bad message must get
  }
  nlohmann::json again = to_json(first);
  if (to_json(parse(again)) != again) abort();  // the struct lost or changed a field
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  uint8_t which = in.byte();
  nlohmann::json j = nlohmann::json::parse(in.rest, nullptr, false);
  if (j.is_discarded()) return 0;
  switch (which % 8) {
    case 0: round_trip<Request>(j, parse_request); break;
    case 1: round_trip<RunRequest>(j, parse_run_request); break;
    case 2: round_trip<SessionAnswer>(j, parse_session_answer); break;
    case 3: round_trip<ForwardAnswer>(j, parse_forward_answer); break;
    case 4: round_trip<EndAnswer>(j, parse_end_answer); break;
    case 5: round_trip<AttachTlsAnswer>(j, parse_attach_tls_answer); break;
    case 6: round_trip<ProbesFileAnswer>(j, parse_probes_file_answer); break;
    default: round_trip<DaemonStatus>(j, parse_status); break;
  }
  (void)line_of(j);
  return 0;
}
