// flightrec keygen: an Ed25519 key pair for signing checkpoints.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/system.h"
#include "ledger/keys.h"

namespace flightrec::cli {
namespace {

// Creates path with exactly these bytes and mode; never replaces a file.
void write_new_file(const std::string& path, const std::string& data, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) throw Error(errno_message("cannot create " + path, errno));
  bool ok = fchmod(fd, mode) == 0 && write(fd, data.data(), data.size()) == ssize_t(data.size()) &&
            fsync(fd) == 0;
  int err = errno;
  close(fd);
  if (!ok) {
    unlink(path.c_str());
    throw Error(errno_message("cannot write " + path, err));
  }
}

}  // namespace

int cmd_keygen(const Args& args) {
  po::options_description desc("options");
  std::string out, name;
  desc.add_options()("help,h", "show this help")(
      "out", po::value(&out)->required(), "directory for flightrec.key and flightrec.pub (created 0700)")(
      "name", po::value(&name), "key name in signatures (default: flightrec-<hostname>)");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec keygen --out DIR [--name NAME]\n\n"
      "Creates an Ed25519 key pair: DIR/flightrec.key (PKCS#8 PEM, mode 0600) to sign\n"
      "checkpoints with 'flightrec run --key DIR', and DIR/flightrec.pub, the public\n"
      "verifier key (C2SP signed-note format) to give auditors. Never overwrites a key.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  if (name.empty()) {
    name = "flightrec-" + host_name();
    for (char& c : name)
      if (c <= ' ' || c > '~' || c == '+') c = '_';
  }
  if (!ledger::valid_key_name(name)) throw UsageError("--name may not contain spaces or '+'");

  std::string key_path = out + "/flightrec.key", pub_path = out + "/flightrec.pub";
  if (std::filesystem::exists(key_path) || std::filesystem::exists(pub_path))
    throw Error(out + " already holds a key; flightrec keygen never overwrites one");
  std::error_code ec;
  bool created = std::filesystem::create_directories(out, ec);
  if (ec) throw Error("cannot create " + out + ": " + ec.message());
  if (!std::filesystem::is_directory(out)) throw Error(out + " is not a directory");
  if (created) chmod(out.c_str(), 0700);  // never change a directory we did not make

  auto key = ledger::SigningKey::generate(name);
  write_new_file(key_path, key.private_pem(), 0600);
  try {
    write_new_file(pub_path, key.verifier().vkey() + "\n", 0644);
  } catch (...) {
    unlink(key_path.c_str());
    throw;
  }
  std::cout << "private key: " << key_path << " (0600)\npublic key:  " << pub_path << "\n"
            << key.verifier().vkey() << "\n";
  return 0;
}

}  // namespace flightrec::cli
