// Fuzzes the tsdb WAL file as a restart finds it after a crash or disk damage (src/tsdb/wal.h):
// Wal::Open's framing, torn-tail cut, skipping of a damaged record that a sound one follows and
// setting aside of a file with a damaged magic. The file is either the input's bytes or a real
// log of three records with the input's bytes written over it and cut short. Properties:
//  - Open never crashes and succeeds (every damage is cut, skipped or set aside);
//  - a second Open replays exactly the records the first replayed, in order, and skips none
//    that the first did not;
//  - a record appended after Open is replayed after them at the next Open.

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tsdb/wal.h"

namespace {

using expanse::tsdb::Wal;

void Require(bool condition) {
  if (!condition)
    std::abort();
}

const std::string& Directory() {
  static const std::string dir = [] {
    char pattern[] = "/tmp/fuzz_tsdb_wal_file_XXXXXX";
    Require(mkdtemp(pattern) != nullptr);
    return std::string(pattern);
  }();
  return dir;
}

// A sound log of three records, as the WAL writes it (zeros preallocated after them cut off).
const std::string& SoundLog() {
  static const std::string log = [] {
    const std::string path = Directory() + "/sound.log";
    std::filesystem::remove(path);
    {
      auto wal = Wal::Open(
          path, [](std::string_view) { return expanse::OkStatus(); }, nullptr);
      Require(wal.ok());
      for (const std::string_view payload : {"first", "second record", ""})
        Require((*wal)->Append(payload).ok());
    }
    std::string bytes;
    const int fd = open(path.c_str(), O_RDONLY);
    Require(fd >= 0);
    char buffer[4096];
    for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;)
      bytes.append(buffer, static_cast<size_t>(n));
    close(fd);
    const size_t end = bytes.find_last_not_of('\0');
    return bytes.substr(0, end == std::string::npos ? 0 : end + 1);
  }();
  return log;
}

// Mode byte 0: the rest is the file. Otherwise bytes 1-2 say where the rest is written over
// the sound log and bytes 3-4 where the result is cut.
std::string FileFromInput(std::string_view input) {
  if (input.empty() || input[0] == 0)
    return std::string(input.empty() ? input : input.substr(1));
  if (input.size() < 5)
    return SoundLog();
  const auto u16 = [&](size_t i) {
    return static_cast<size_t>(static_cast<uint8_t>(input[i])) |
           static_cast<size_t>(static_cast<uint8_t>(input[i + 1])) << 8;
  };
  std::string file = SoundLog();
  const size_t at = u16(1) % (file.size() + 1);
  const std::string_view patch = input.substr(5);
  file.resize(std::max(file.size(), at + patch.size()));
  file.replace(at, patch.size(), patch);
  file.resize(std::min(file.size(), u16(3) == 0 ? file.size() : u16(3)));
  return file;
}

void WriteFile(const std::string& path, std::string_view bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  Require(fd >= 0);
  Require(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  close(fd);
}

struct Replayed {
  std::vector<std::string> payloads;
  uint64_t skipped = 0;
};

Replayed OpenAndReplay(const std::string& path, std::string_view append = {}) {
  Replayed out;
  auto wal = Wal::Open(
      path,
      [&](std::string_view payload) {
        out.payloads.emplace_back(payload);
        return expanse::OkStatus();
      },
      [](std::string_view) {});
  Require(wal.ok());
  out.skipped = (*wal)->skipped_records();
  if (!append.empty())
    Require((*wal)->Append(append).ok());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = Directory();
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename() != "sound.log")
      std::filesystem::remove(entry.path());
  }
  const std::string path = dir + "/wal.log";
  WriteFile(path, FileFromInput(std::string_view(reinterpret_cast<const char*>(data), size)));

  const Replayed first = OpenAndReplay(path);
  const Replayed second = OpenAndReplay(path, "appended");
  Require(second.payloads == first.payloads);
  Require(second.skipped <= first.skipped);
  Replayed third = OpenAndReplay(path);
  Require(!third.payloads.empty() && third.payloads.back() == "appended");
  third.payloads.pop_back();
  Require(third.payloads == first.payloads);
  return 0;
}
