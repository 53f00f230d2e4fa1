#include "agent/run_history.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <optional>

#include "core/file_util.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::agent {
namespace {

constexpr char kHistoryFile[] = "run-history.json";
constexpr char kRunningMarker[] = "running";
constexpr char kLastFatal[] = "last-fatal";

// Set once by InstallFatalRecorder; the handlers only read it.
char g_fatal_path[4096] = {};

// Async-signal-safe: open, write, close.
void WriteFatal(const char* text, size_t length) {
  if (g_fatal_path[0] == '\0')
    return;
  const int fd = ::open(g_fatal_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return;
  ssize_t ignored = ::write(fd, text, length);
  (void)ignored;
  ::close(fd);
}

void OnFatalSignal(int signal_number) {
  const char* text = "fatal signal";
  switch (signal_number) {
    case SIGSEGV:
      text = "fatal signal SIGSEGV";
      break;
    case SIGBUS:
      text = "fatal signal SIGBUS";
      break;
    case SIGFPE:
      text = "fatal signal SIGFPE";
      break;
    case SIGILL:
      text = "fatal signal SIGILL";
      break;
    case SIGABRT:
      text = "fatal signal SIGABRT (abort)";
      break;
    default:
      break;
  }
  WriteFatal(text, std::strlen(text));
  // Die as the signal would have: the default action, raised again on return (SA_RESETHAND).
}

void OnTerminate() {
  std::string text = "uncaught exception";
  if (std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& e) {
      text += ": ";
      text += e.what();
    } catch (...) {
    }
  } else {
    text = "std::terminate without an active exception";
  }
  if (text.size() > 300)
    text.resize(300);
  WriteFatal(text.data(), text.size());
  signal(SIGABRT, SIG_DFL);  // the reason is written; abort without overwriting it
  std::abort();
}

std::string JoinPath(const std::string& dir, const char* name) { return dir + "/" + name; }

template <typename T, typename U>
T Or(Result<T> result, U fallback) {
  return result.ok() ? std::move(*result) : T(fallback);
}

}  // namespace

nlohmann::json RunHistory::ToJson() const {
  return {{"starts", starts},
          {"unclean_exits", unclean_exits},
          {"last_unclean_ms", last_unclean_ms},
          {"last_unclean_reason", last_unclean_reason}};
}

RunHistory RecordStart(const std::string& state_dir, int64_t now_ms) {
  RunHistory history;
  (void)fs::MakeDirectories(state_dir, 0755);
  Result<std::optional<std::string>> text =
      fs::ReadSmallFile(JoinPath(state_dir, kHistoryFile), 16 * 1024);
  if (text.ok() && text->has_value()) {
    Result<nlohmann::json> doc = wire::ParseJson(**text, wire::JsonLimits{.max_depth = 2});
    if (doc.ok()) {
      if (Result<wire::FieldReader> r = wire::FieldReader::Object(*doc, "run history", "bad");
          r.ok()) {
        constexpr int64_t kMax = int64_t{1} << 50;
        history.starts =
            static_cast<uint64_t>(Or(r->Int("starts", 0, kMax, wire::Need::kOptional), 0));
        history.unclean_exits =
            static_cast<uint64_t>(Or(r->Int("unclean_exits", 0, kMax, wire::Need::kOptional), 0));
        history.last_unclean_ms =
            Or(r->Int("last_unclean_ms", 0, wire::kMaxTimeMs, wire::Need::kOptional), 0);
        history.last_unclean_reason =
            Or(r->Text("last_unclean_reason", 300, wire::Need::kOptional), "");
      }
    }
  }
  ++history.starts;
  if (::access(JoinPath(state_dir, kRunningMarker).c_str(), F_OK) == 0) {
    ++history.unclean_exits;
    history.previous_run_unclean = true;
    history.last_unclean_ms = now_ms;
    history.last_unclean_reason = "ended without a clean stop (killed, or the machine stopped)";
    Result<std::optional<std::string>> fatal =
        fs::ReadSmallFile(JoinPath(state_dir, kLastFatal), 4096);
    if (fatal.ok() && fatal->has_value() && !(*fatal)->empty() && wire::IsCleanText(**fatal)) {
      history.last_unclean_reason = **fatal;
    }
  }
  ::unlink(JoinPath(state_dir, kLastFatal).c_str());
  (void)fs::WriteFileAtomically(state_dir, kHistoryFile, history.ToJson().dump() + "\n", 0644);
  (void)fs::WriteFileAtomically(state_dir, kRunningMarker, std::to_string(::getpid()) + "\n", 0644);
  return history;
}

void RecordCleanStop(const std::string& state_dir) {
  ::unlink(JoinPath(state_dir, kRunningMarker).c_str());
}

void InstallFatalRecorder(const std::string& state_dir) {
  const std::string path = JoinPath(state_dir, kLastFatal);
  if (path.size() >= sizeof(g_fatal_path))
    return;
  std::memcpy(g_fatal_path, path.c_str(), path.size() + 1);
  std::set_terminate(OnTerminate);
  struct sigaction action {};
  action.sa_handler = OnFatalSignal;
  action.sa_flags = SA_RESETHAND;  // the default action runs when the signal comes again
  sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    sigaction(signal_number, &action, nullptr);
}

}  // namespace expanse::agent
