// expanse-test-spool-write: writes one well-framed spool file (docs/formats/spool.md) holding
// the records given on the command line, as a worker would, so cluster tests can put records
// a broken or hostile sampler might write into a worker's spool directory.
//
//   expanse-test-spool-write DIR HOST BOOT_ID SEQUENCE KIND=PAYLOAD [KIND=PAYLOAD...]
//
// The file appears atomically (a temporary name, then rename) as DIR/<sequence>-<boot id>.spool.
// A payload of @PATH is read from PATH. Exits 1 with a message on any error.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "spool/spool_file.h"
#include "spool/spool_names.h"

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "expanse-test-spool-write: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace expanse::spool;
  if (argc < 6)
    return Fail("usage: DIR HOST BOOT_ID SEQUENCE KIND=PAYLOAD [KIND=PAYLOAD...]");
  const std::string dir = argv[1];
  SpoolFile file;
  file.host = argv[2];
  file.boot_id = argv[3];
  file.sequence = std::strtoull(argv[4], nullptr, 10);
  file.created_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  for (int i = 5; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos)
      return Fail("not KIND=PAYLOAD: " + arg);
    SpoolRecord record{arg.substr(0, eq), arg.substr(eq + 1)};
    if (record.payload.starts_with("@")) {
      std::ifstream in(record.payload.substr(1), std::ios::binary);
      if (!in)
        return Fail("cannot read " + record.payload.substr(1));
      std::ostringstream text;
      text << in.rdbuf();
      record.payload = text.str();
    }
    file.records.push_back(std::move(record));
  }
  expanse::Result<std::string> bytes = EncodeSpoolFile(file);
  if (!bytes.ok())
    return Fail(bytes.status().message());
  const std::string name = SpoolFileName(file.sequence, file.boot_id);
  const std::string temp = dir + "/" + TempFileName(name);
  {
    std::ofstream out(temp, std::ios::binary);
    out << *bytes;
    if (!out.flush())
      return Fail("cannot write " + temp);
  }
  if (std::rename(temp.c_str(), (dir + "/" + name).c_str()) != 0)
    return Fail("cannot rename " + temp);
  std::printf("%s\n", name.c_str());
  return 0;
}
