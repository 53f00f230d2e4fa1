#include "capture/capture_trigger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "capture/process_identity.h"
#include "core/utf8.h"

namespace expanse::capture {

std::optional<CaptureTrigger> ParseTrigger(std::string_view text, std::string* error) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    *error = "trigger is not a JSON object";
    return std::nullopt;
  }
  CaptureTrigger t;
  const auto id = doc.find("id");
  const auto until = doc.find("until_ms");
  if (id == doc.end() || !id->is_string() || id->get<std::string>().empty() ||
      CleanText(id->get<std::string>(), 128) != id->get<std::string>()) {
    *error = "trigger has no id (a string of 1 to 128 bytes of UTF-8 text)";
    return std::nullopt;
  }
  if (until == doc.end() || !until->is_number_unsigned()) {
    *error = "trigger has no until_ms (a non-negative integer)";
    return std::nullopt;
  }
  t.id = id->get<std::string>();
  t.until_ms = until->get<uint64_t>();
  if (const auto reason = doc.find("reason"); reason != doc.end() && reason->is_string())
    t.reason = CleanText(reason->get<std::string>(), 64);  // never half a character
  if (const auto gpus = doc.find("gpus"); gpus != doc.end() && gpus->is_array()) {
    for (const auto& gpu : *gpus) {
      if (gpu.is_string() && t.gpus.size() < 64)
        t.gpus.push_back(CleanText(gpu.get<std::string>(), 64));
    }
  }
  return t;
}

std::string TriggerJson(const CaptureTrigger& trigger) {
  nlohmann::json doc = {{"id", trigger.id},
                        {"until_ms", trigger.until_ms},
                        {"reason", trigger.reason},
                        {"gpus", trigger.gpus}};
  return doc.dump() + "\n";
}

std::optional<CaptureTrigger> ReadTrigger(const std::string& control_dir, const std::string& job_id,
                                          std::string* error) {
  if (!SafeJobId(job_id))
    return std::nullopt;
  const std::string path = control_dir + "/" + kTriggerDirName + "/" + job_id;
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno != ENOENT)
      *error = path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  struct stat st {};
  std::string text;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) > kMaxTriggerBytes) {
    *error =
        path + ": not a regular file of at most " + std::to_string(kMaxTriggerBytes) + " bytes";
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    const ssize_t n = read(fd, text.data(), text.size());
    if (n < 0)
      *error = path + ": " + std::strerror(errno);
    text.resize(n < 0 ? 0 : static_cast<size_t>(n));
  }
  close(fd);
  if (!error->empty())
    return std::nullopt;
  std::optional<CaptureTrigger> trigger = ParseTrigger(text, error);
  if (!trigger)
    *error = path + ": " + *error;
  return trigger;
}

}  // namespace expanse::capture
