#include "dcgm/dcgmi_errors.h"

#include <array>
#include <charconv>
#include <utility>

namespace expanse::dcgm {
namespace {

struct Sentence {
  std::string_view prefix;
  DcgmiFailure failure;
  std::optional<int> dcgm_return;  // the code the sentence implies when it prints none
};

// Matched against the start of the trimmed line, first match wins.
constexpr std::array kSentences{
    // Command.cpp, Connect() and DoExecuteConnectionFailure(): both lines on stdout.
    Sentence{"Error: unable to establish a connection to the specified host",
             DcgmiFailure::kEngineUnreachable, -21},
    Sentence{"Error: Unable to connect to host engine.", DcgmiFailure::kEngineUnreachable, -21},
    Sentence{"Error: unable to initialize DCGM", DcgmiFailure::kInitFailed, std::nullopt},
    // DeviceMonitor.cpp, LockWatchAndUpdate() and ValidateOrCreateFieldGroup(): stderr.
    Sentence{"Error setting watches.", DcgmiFailure::kWatchFailed, std::nullopt},
    Sentence{"Error getting values information.", DcgmiFailure::kReadFailed, std::nullopt},
    Sentence{"No data returned from the hostengine", DcgmiFailure::kNoData, -14},
    Sentence{"dmon was stopped due to receiving a signal", DcgmiFailure::kStopped, std::nullopt},
    // dcgmi_common.cpp, dcgmi_parse_field_id_list_string(): stderr.
    Sentence{"Error: Got invalid field ID.", DcgmiFailure::kInvalidField, -1},
    Sentence{"Error: Expected numerical fieldId.", DcgmiFailure::kInvalidField, -1},
    // Health.cpp: stdout.
    Sentence{"Error: Health watches not enabled.", DcgmiFailure::kHealthNotEnabled, -3},
    Sentence{"Error: Unable to check health watches.", DcgmiFailure::kHealthFailed, std::nullopt},
    Sentence{"Error: Unable to set health watches.", DcgmiFailure::kHealthFailed, std::nullopt},
    Sentence{"Error: Unable to get health watches.", DcgmiFailure::kHealthFailed, std::nullopt},
};

constexpr std::array<std::pair<int, std::string_view>, 27> kReturnNames{{
    {-1, "DCGM_ST_BADPARAM"},
    {-3, "DCGM_ST_GENERIC_ERROR"},
    {-4, "DCGM_ST_MEMORY"},
    {-5, "DCGM_ST_NOT_CONFIGURED"},
    {-6, "DCGM_ST_NOT_SUPPORTED"},
    {-7, "DCGM_ST_INIT_ERROR"},
    {-8, "DCGM_ST_NVML_ERROR"},
    {-11, "DCGM_ST_TIMEOUT"},
    {-13, "DCGM_ST_UNKNOWN_FIELD"},
    {-14, "DCGM_ST_NO_DATA"},
    {-16, "DCGM_ST_NOT_WATCHED"},
    {-17, "DCGM_ST_NO_PERMISSION"},
    {-18, "DCGM_ST_GPU_IS_LOST"},
    {-21, "DCGM_ST_CONNECTION_NOT_VALID"},
    {-22, "DCGM_ST_GPU_NOT_SUPPORTED"},
    {-29, "DCGM_ST_REQUIRES_ROOT"},
    {-32, "DCGM_ST_FIELD_UNSUPPORTED_BY_API"},
    {-33, "DCGM_ST_MODULE_NOT_LOADED"},
    {-34, "DCGM_ST_IN_USE"},
    {-35, "DCGM_ST_GROUP_IS_EMPTY"},
    {-36, "DCGM_ST_PROFILING_NOT_SUPPORTED"},
    {-37, "DCGM_ST_PROFILING_LIBRARY_ERROR"},
    {-38, "DCGM_ST_PROFILING_MULTI_PASS"},
    {-44, "DCGM_ST_INSUFFICIENT_DRIVER_VERSION"},
    {-54, "DCGM_ST_PAUSED"},
    {-56, "DCGM_ST_NVML_NOT_LOADED"},
    {-57, "DCGM_ST_NVML_DRIVER_TIMEOUT"},
}};

std::string_view Trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos)
    return {};
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

std::string CleanMessage(std::string_view line) {
  std::string message;
  for (const char c : line.substr(0, kMaxErrorMessageBytes))
    message += (c >= 0x20 && c < 0x7F) ? c : '?';
  return message;
}

// The code in "<marker>-33: ..." (4.x prints "Result: -33: ...", 2.x "Result: The ..." without).
std::optional<int> CodeAfter(std::string_view line, std::string_view marker) {
  const size_t at = line.find(marker);
  if (at == std::string_view::npos)
    return std::nullopt;
  const std::string_view rest = line.substr(at + marker.size());
  int code = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), code);
  if (error != std::errc() || end == rest.data() || end == rest.data() + rest.size() ||
      *end != ':' || code >= 0 || code < -1000)
    return std::nullopt;
  return code;
}

std::optional<int> PrintedCode(std::string_view line) {
  for (const std::string_view marker : {"Result: ", "Return ", "Error: "}) {
    if (std::optional<int> code = CodeAfter(line, marker))
      return code;
  }
  return std::nullopt;
}

}  // namespace

std::optional<DcgmiError> RecognizeDcgmiError(std::string_view line) {
  const std::string_view text = Trim(line);
  for (const Sentence& sentence : kSentences) {
    if (text.starts_with(sentence.prefix)) {
      std::optional<int> code = PrintedCode(text);
      return DcgmiError{sentence.failure, code ? code : sentence.dcgm_return, CleanMessage(text)};
    }
  }
  // Other failures dcgmi prints, e.g. "Unable to get DCGM sorted entities. Error: -3: ...".
  if (text.starts_with("Error") || text.starts_with("Unable to "))
    return DcgmiError{DcgmiFailure::kOther, PrintedCode(text), CleanMessage(text)};
  return std::nullopt;
}

std::string_view FailureReason(DcgmiFailure failure) {
  switch (failure) {
    case DcgmiFailure::kEngineUnreachable:
      return "engine_unreachable";
    case DcgmiFailure::kInitFailed:
      return "dcgm_init_failed";
    case DcgmiFailure::kWatchFailed:
      return "watch_failed";
    case DcgmiFailure::kInvalidField:
      return "invalid_field";
    case DcgmiFailure::kReadFailed:
      return "read_failed";
    case DcgmiFailure::kNoData:
      return "no_data";
    case DcgmiFailure::kStopped:
      return "stopped_by_signal";
    case DcgmiFailure::kHealthNotEnabled:
      return "health_watches_not_enabled";
    case DcgmiFailure::kHealthFailed:
      return "health_check_failed";
    case DcgmiFailure::kOther:
      break;
  }
  return "dcgmi_error";
}

std::string_view DcgmReturnName(int dcgm_return) {
  for (const auto& [code, name] : kReturnNames) {
    if (code == dcgm_return)
      return name;
  }
  return {};
}

std::optional<int> DcgmReturnOfExitStatus(int exit_status) {
  if (exit_status <= 128 || exit_status > 255)
    return std::nullopt;
  const int code = exit_status - 256;
  if (DcgmReturnName(code).empty())
    return std::nullopt;
  return code;
}

}  // namespace expanse::dcgm
