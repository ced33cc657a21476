#pragma once
// Shared option parsing on top of Boost.Program_options.
#include <boost/program_options.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/commands.h"
#include "ledger/keys.h"

namespace flightrec::cli {

namespace po = boost::program_options;

// Parses args against desc; --help prints `usage` and desc and returns false.
bool parse_options(const Args& args, const po::options_description& desc, const std::string& usage,
                   po::variables_map& vm, const po::positional_options_description* pos = nullptr);

// A whole number >= 0 written in digits only (no sign, no spaces).
uint64_t parse_count(const std::string& text, const std::string& option);
// "16M", "64K", "1G" or plain bytes.
size_t parse_size(const std::string& text, const std::string& option);

// A small input file (a key, a proof, saved checkpoints): a regular file of
// at most 64 MiB, read whole; `what` names it in the error ("a proof").
std::string read_small_file(const std::string& path, const std::string& what);
// The verifier key file (flightrec.pub) at path, or Error saying it is not one.
ledger::VerifierKey read_verifier_key(const std::string& path);

}  // namespace flightrec::cli
