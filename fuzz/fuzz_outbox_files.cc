// Fuzzes the daemon's outbox as a restart finds it after a crash or disk damage
// (src/outbox/outbox.h): a segment file and the acknowledgement cursor, each either the input's
// bytes or a real one with the input's bytes written over it and cut short. Properties:
//  - Open never crashes and succeeds (damage is skipped, cut or set aside, never fatal);
//  - the entries Peek then gives have rising sequences, and a second Open gives the same ones
//    with the same payloads;
//  - an entry enqueued after that gets a sequence above all of them and follows them at the
//    next Open.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "outbox/outbox.h"
#include "outbox/outbox_format.h"
#include "outbox/payload.h"

namespace {

namespace fs = std::filesystem;
using expanse::outbox::Outbox;
using expanse::outbox::OutboxEntry;

constexpr int64_t kNowMs = 1'790'000'000'000;

void Require(bool condition) {
  if (!condition)
    std::abort();
}

const std::string& Scratch() {
  static const std::string dir = [] {
    char pattern[] = "/tmp/fuzz_outbox_files_XXXXXX";
    Require(mkdtemp(pattern) != nullptr);
    return std::string(pattern);
  }();
  return dir;
}

std::string ReadAll(const std::string& path) {
  std::string bytes;
  const int fd = open(path.c_str(), O_RDONLY);
  Require(fd >= 0);
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;)
    bytes.append(buffer, static_cast<size_t>(n));
  close(fd);
  return bytes;
}

void WriteAll(const std::string& path, std::string_view bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  Require(fd >= 0);
  Require(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  close(fd);
}

std::unique_ptr<Outbox> OpenOutbox(const std::string& dir) {
  static expanse::ManualClock clock(kNowMs);
  expanse::outbox::OutboxOptions options;
  options.directory = dir;
  options.log = [](std::string_view) {};
  auto outbox = Outbox::Open(options, clock);
  Require(outbox.ok());
  return std::move(outbox).value();
}

expanse::outbox::PayloadBuilder Json(std::string text) {
  return [text](uint64_t) -> expanse::Result<expanse::outbox::Payload> {
    return expanse::outbox::JsonPayload(text);
  };
}

// A real segment of three entries, one acknowledged, and its cursor: {segment name, segment,
// cursor}.
struct SoundFiles {
  std::string segment_name, segment, cursor;
};

const SoundFiles& Sound() {
  static const SoundFiles files = [] {
    const std::string dir = Scratch() + "/sound";
    fs::remove_all(dir);
    {
      auto outbox = OpenOutbox(dir);
      for (const char* text : {"{\"a\":1}", "{\"b\":[1,2,3]}", "{}"})
        Require(outbox->Enqueue("telemetry", Json(text)).ok());
      auto first = outbox->Peek();
      Require(first.ok() && first->has_value());
      Require(outbox->Ack((*first)->sequence).ok());
    }
    SoundFiles out;
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename();
      if (name.starts_with("seg-")) {
        out.segment_name = name;
        out.segment = ReadAll(entry.path());
      }
    }
    out.cursor = ReadAll(dir + "/ack");
    Require(!out.segment_name.empty());
    return out;
  }();
  return files;
}

size_t U16(std::string_view in, size_t i) {
  return static_cast<size_t>(static_cast<uint8_t>(in[i])) |
         static_cast<size_t>(static_cast<uint8_t>(in[i + 1])) << 8;
}

// `patch` written over `sound` at `at` (modulo its size + 1), the result cut at `cut` (0: not).
std::string Patched(const std::string& sound, size_t at, std::string_view patch, size_t cut) {
  std::string file = sound;
  at %= file.size() + 1;
  file.resize(std::max(file.size(), at + patch.size()));
  file.replace(at, patch.size(), patch);
  if (cut != 0)
    file.resize(std::min(file.size(), cut));
  return file;
}

std::vector<OutboxEntry> PeekAll(Outbox& outbox) {
  std::vector<OutboxEntry> entries;
  uint64_t after = 0;
  for (;;) {
    auto entry = outbox.Peek(after);
    Require(entry.ok());
    if (!entry->has_value())
      return entries;
    Require((*entry)->sequence > after);
    after = (*entry)->sequence;
    entries.push_back(std::move(**entry));
  }
}

bool Same(const std::vector<OutboxEntry>& a, const std::vector<OutboxEntry>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.sequence == y.sequence && x.stream == y.stream && x.payload == y.payload &&
           x.content_type == y.content_type;
  });
}

}  // namespace

// Input: a mode byte (bit 0: patch the sound segment rather than take the bytes as it; bit 1: the
// same for the cursor; bit 2: no cursor file), then for each of cursor and segment a 2-byte
// length and, when patching, 2-byte offset and cut, then the bytes.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (in.size() < 1)
    return 0;
  const uint8_t mode = static_cast<uint8_t>(in[0]);
  in.remove_prefix(1);
  const auto next_file = [&](bool patch, const std::string& sound) -> std::string {
    const size_t header = patch ? 6 : 2;
    if (in.size() < header)
      return patch ? sound : std::string();
    const size_t length = std::min(U16(in, 0), in.size() - header);
    const std::string_view bytes = in.substr(header, length);
    std::string file = patch ? Patched(sound, U16(in, 2), bytes, U16(in, 4)) : std::string(bytes);
    in.remove_prefix(header + length);
    return file;
  };
  const SoundFiles& sound = Sound();
  const std::string cursor = next_file(mode & 2, sound.cursor);
  const std::string segment = next_file(mode & 1, sound.segment);

  const std::string dir = Scratch() + "/box";
  fs::remove_all(dir);
  fs::create_directory(dir);
  fs::permissions(dir, fs::perms::owner_all);
  WriteAll(dir + "/" + sound.segment_name, segment);
  if (!(mode & 4))
    WriteAll(dir + "/ack", cursor);

  std::vector<OutboxEntry> first;
  {
    auto outbox = OpenOutbox(dir);
    first = PeekAll(*outbox);
  }
  uint64_t appended = 0;
  {
    auto outbox = OpenOutbox(dir);
    Require(Same(PeekAll(*outbox), first));
    auto sequence = outbox->Enqueue("telemetry", Json("{\"after\":true}"));
    Require(sequence.ok());
    appended = *sequence;
    Require(first.empty() || appended > first.back().sequence);
  }
  auto outbox = OpenOutbox(dir);
  std::vector<OutboxEntry> last = PeekAll(*outbox);
  Require(!last.empty() && last.back().sequence == appended);
  last.pop_back();
  Require(Same(last, first));
  return 0;
}
