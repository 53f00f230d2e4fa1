#include "attribution/gres_conf.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "attribution/devices_list.h"
#include "attribution/parse_util.h"
#include "core/quote.h"
#include "slurm/hostlist.h"

namespace expanse::attribution {
namespace {

struct Token {
  std::string_view key;
  std::string_view value;
};

// One logical line: comments removed and continuations joined, with the number of its first
// physical line for messages.
struct LogicalLine {
  size_t number = 0;
  std::string text;
};

std::vector<LogicalLine> LogicalLines(std::string_view text) {
  std::vector<LogicalLine> lines;
  std::optional<LogicalLine> pending;
  size_t number = 0;
  for (std::string_view line : internal::Split(text, '\n')) {
    ++number;
    line = line.substr(0, line.find('#'));
    if (line.ends_with('\r')) {
      line.remove_suffix(1);
    }
    if (!pending) {
      pending = LogicalLine{number, ""};
    }
    const bool continues = line.ends_with('\\');
    if (continues) {
      line.remove_suffix(1);
    }
    pending->text += line;
    if (!continues) {
      pending->text += ' ';
      lines.push_back(std::move(*pending));
      pending.reset();
    }
  }
  if (pending) {
    lines.push_back(std::move(*pending));
  }
  return lines;
}

std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (true) {
    pos = line.find_first_not_of(" \t\r", pos);
    if (pos == std::string_view::npos) {
      return words;
    }
    const size_t end = std::min(line.find_first_of(" \t\r", pos), line.size());
    words.push_back(line.substr(pos, end - pos));
    pos = end;
  }
}

const Token* Find(const std::vector<Token>& tokens, std::string_view key) {
  for (const Token& token : tokens) {
    if (internal::EqualsIgnoreCase(token.key, key)) {
      return &token;
    }
  }
  return nullptr;
}

class Parser {
 public:
  explicit Parser(std::string_view node_name) : node_name_(node_name) {}

  Status Line(const LogicalLine& line) {
    line_number_ = line.number;
    const std::vector<std::string_view> words = Words(line.text);
    if (words.empty()) {
      return OkStatus();
    }
    if (internal::EqualsIgnoreCase(words[0], "include")) {
      if (words.size() != 2) {
        return Malformed("Include needs exactly one file name");
      }
      result_.includes.emplace_back(words[1]);
      return OkStatus();
    }
    std::vector<Token> tokens;
    for (const std::string_view word : words) {
      const size_t equals = word.find('=');
      if (equals == std::string_view::npos || equals == 0) {
        return Malformed("expected Key=Value, got " + QuoteForMessage(word));
      }
      tokens.push_back(Token{word.substr(0, equals), word.substr(equals + 1)});
    }
    const Token* node = Find(tokens, "NodeName");
    if (node != nullptr) {
      Result<bool> applies = slurm::HostListContains(node->value, node_name_);
      if (!applies.ok()) {
        return Malformed("NodeName=: " + applies.status().message());
      }
      if (!*applies) {
        return OkStatus();
      }
    }
    if (const Token* auto_detect = Find(tokens, "AutoDetect")) {
      EXPANSE_RETURN_IF_ERROR(SetAutoDetect(auto_detect->value, node != nullptr));
    }
    const Token* name = Find(tokens, "Name");
    if (name == nullptr || !internal::EqualsIgnoreCase(name->value, "gpu")) {
      return OkStatus();  // mps, shard and other GRES share no device numbering with gpu
    }
    return GpuLine(tokens);
  }

  Result<NodeGres> Finish() && {
    if (node_auto_detect_) {
      result_.auto_detect_nvidia = IsNvidiaDetector(*node_auto_detect_);
    } else if (global_auto_detect_) {
      result_.auto_detect_nvidia = IsNvidiaDetector(*global_auto_detect_);
    }
    return std::move(result_);
  }

 private:
  static bool IsNvidiaDetector(std::string_view value) {
    return internal::EqualsIgnoreCase(value, "nvml") || internal::EqualsIgnoreCase(value, "nvidia");
  }

  Status Malformed(const std::string& why) const {
    return InvalidArgumentError("gres.conf line " + std::to_string(line_number_) + ": " + why)
        .WithReason("gres_conf_malformed");
  }

  // A node-specific AutoDetect beats a global one; SLURM requires a node's own settings to agree.
  Status SetAutoDetect(std::string_view value, bool node_specific) {
    if (!node_specific) {
      global_auto_detect_ = std::string(value);
      return OkStatus();
    }
    if (node_auto_detect_ && !internal::EqualsIgnoreCase(*node_auto_detect_, value)) {
      return Malformed("AutoDetect=" + QuoteForMessage(value) + " conflicts with AutoDetect=" +
                       QuoteForMessage(*node_auto_detect_) + " set for this node earlier");
    }
    node_auto_detect_ = std::string(value);
    return OkStatus();
  }

  Status GpuLine(const std::vector<Token>& tokens) {
    if (Find(tokens, "MultipleFiles") != nullptr) {
      return InvalidArgumentError("gres.conf line " + std::to_string(line_number_) +
                                  ": MultipleFiles= is not supported; GRES indices cannot be "
                                  "mapped to single GPUs")
          .WithReason("gres_conf_unsupported");
    }
    std::optional<uint32_t> count;
    if (const Token* count_token = Find(tokens, "Count")) {
      // Suffixed counts ("1K") only make sense for GRES without files.
      count = internal::ParseDecimalU32(count_token->value);
    }
    const Token* file = Find(tokens, "File");
    if (file == nullptr) {
      result_.gpus_without_file += count.value_or(1);
      return OkStatus();
    }
    const size_t room = kMaxGresFilesPerNode - result_.files.size();
    Result<std::vector<std::string>> paths = slurm::ExpandHostList(file->value, room);
    if (paths.status().code() == StatusCode::kResourceExhausted) {
      return ResourceExhaustedError("gres.conf line " + std::to_string(line_number_) +
                                    ": more than " + std::to_string(kMaxGresFilesPerNode) +
                                    " gpu device files for this node")
          .WithReason("gres_conf_too_large");
    }
    if (!paths.ok()) {
      return Malformed("File=: " + paths.status().message());
    }
    if (count && *count != paths->size()) {
      return Malformed("Count=" + std::to_string(*count) + " but File= names " +
                       std::to_string(paths->size()) + " device files");
    }
    for (std::string& path : *paths) {
      const std::string_view base = std::string_view(path).substr(path.rfind('/') + 1);
      constexpr std::string_view kPrefix = "nvidia";
      const std::optional<uint32_t> minor =
          base.starts_with(kPrefix) ? internal::ParseDecimalU32(base.substr(kPrefix.size()))
                                    : std::nullopt;
      if (!minor || *minor >= kFirstNvidiaControlMinor) {
        return Malformed("File= " + QuoteForMessage(path) +
                         " is not an NVIDIA GPU device file (nvidia<N>)");
      }
      if (!seen_paths_.insert(path).second) {
        return Malformed("device file " + QuoteForMessage(path) + " is listed twice");
      }
      if (!seen_minors_.insert(*minor).second) {
        return Malformed("device file " + QuoteForMessage(path) + " repeats minor " +
                         std::to_string(*minor));
      }
      result_.files.push_back(GresGpuFile{std::move(path), *minor});
    }
    return OkStatus();
  }

  std::string_view node_name_;
  size_t line_number_ = 0;
  NodeGres result_;
  std::optional<std::string> global_auto_detect_;
  std::optional<std::string> node_auto_detect_;
  std::set<std::string> seen_paths_;
  std::set<uint32_t> seen_minors_;
};

}  // namespace

Result<NodeGres> ParseGresConf(std::string_view text, std::string_view node_name) {
  if (text.size() > kMaxGresConfBytes) {
    return ResourceExhaustedError("gres.conf is " + std::to_string(text.size()) +
                                  " bytes, more than the " + std::to_string(kMaxGresConfBytes) +
                                  " this reader accepts")
        .WithReason("gres_conf_too_large");
  }
  Parser parser(node_name);
  for (const LogicalLine& line : LogicalLines(text)) {
    EXPANSE_RETURN_IF_ERROR(parser.Line(line));
  }
  return std::move(parser).Finish();
}

}  // namespace expanse::attribution
