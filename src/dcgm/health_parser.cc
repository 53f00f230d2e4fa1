#include "dcgm/health_parser.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/quote.h"
#include "dcgm/dcgmi_errors.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::dcgm {
namespace {

using nlohmann::json;

constexpr std::string_view kOverallHealth = "Overall Health";

// Health::HelperSystemToString in dcgmi/Health.cpp.
constexpr std::array<std::pair<std::string_view, std::string_view>, 11> kSystems{{
    {"PCIe system", "pcie"},
    {"NVLINK system", "nvlink"},
    {"PMU system", "pmu"},
    {"MCU system", "mcu"},
    {"Memory system", "memory"},
    {"SM system", "sm"},
    {"InfoROM system", "inforom"},
    {"Thermal system", "thermal"},
    {"Power system", "power"},
    {"Driver", "driver"},
    {"ConnectX system", "connectx"},
}};

Status Malformed(std::string what) {
  return InvalidArgumentError("dcgmi health JSON: " + std::move(what))
      .WithReason("dcgmi_health_output");
}

// "<path>.<key>" for a key the format fixes, "<path>.\"<key>\"" for one the input chose.
std::string Member(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}
std::string Child(std::string_view path, std::string_view key) {
  return Member(path, QuoteForMessage(key));
}

// The string member `key` of `node` at `path`: clean text of at most max_bytes.
Result<std::string> Text(const json& node, std::string_view path, const char* key,
                         size_t max_bytes) {
  const auto member = node.find(key);
  const std::string where = Member(path, key);
  if (member == node.end() || !member->is_string())
    return Malformed(where + " must be a string");
  const auto& text = member->get_ref<const std::string&>();
  if (text.size() > max_bytes || !wire::IsCleanText(text))
    return Malformed(where + " must be printable text of at most " + std::to_string(max_bytes) +
                     " bytes");
  return text;
}

// The object member `key`, nullptr when absent; an error when present and not an object.
Result<const json*> Object(const json& node, std::string_view path, const char* key) {
  const auto member = node.find(key);
  if (member == node.end())
    return static_cast<const json*>(nullptr);
  if (!member->is_object())
    return Malformed(Member(path, key) + " must be an object");
  return &*member;
}

Health HealthOf(std::string_view text) {
  if (text == "Healthy")
    return Health::kPass;
  if (text == "Warning")
    return Health::kWarn;
  if (text == "Failure")
    return Health::kFail;
  return Health::kUnknown;  // "Internal error", or a word a later dcgmi adds
}

std::string SystemId(std::string_view label) {
  for (const auto& [printed, id] : kSystems) {
    if (printed == label)
      return std::string(id);
  }
  return "other";
}

// The pieces of a system's messages, joined back with blanks.
Result<std::string> Message(const json& node, std::string_view path) {
  const auto overflow = node.find("overflow");
  if (overflow == node.end())
    return std::string();
  const std::string where = Member(path, "overflow");
  if (!overflow->is_array())
    return Malformed(where + " must be an array of strings");
  std::string message;
  for (const json& piece : *overflow) {
    if (!piece.is_string())
      return Malformed(where + " must be an array of strings");
    const auto& text = piece.get_ref<const std::string&>();
    if (!wire::IsCleanText(text))
      return Malformed(where + " must hold printable text");
    if (!message.empty())
      message += ' ';
    message += text;
    if (message.size() > kMaxHealthMessageBytes)
      return Malformed(where + " is longer than " + std::to_string(kMaxHealthMessageBytes) +
                       " bytes");
  }
  return message;
}

Result<EntityHealth> Entity(std::string_view group, std::string_view id, const json& node,
                            std::string_view path) {
  EntityHealth entity;
  entity.entity_group = std::string(group);
  const auto [end, error] = std::from_chars(id.data(), id.data() + id.size(), entity.entity_id);
  if (error != std::errc() || end != id.data() + id.size() || id.empty())
    return Malformed(std::string(path) + " is not an entity id");
  if (!node.is_object())
    return Malformed(std::string(path) + " must be an object");
  EXPANSE_ASSIGN_OR_RETURN(const std::string health, Text(node, path, "value", 64));
  entity.health = HealthOf(health);

  EXPANSE_ASSIGN_OR_RETURN(const json* children, Object(node, path, "children"));
  if (children == nullptr)
    return entity;
  const std::string errors_path = std::string(path) + ".children";
  EXPANSE_ASSIGN_OR_RETURN(const json* errors, Object(*children, errors_path, "Errors"));
  if (errors == nullptr)
    return entity;
  const std::string systems_path = errors_path + ".Errors";
  EXPANSE_ASSIGN_OR_RETURN(const json* systems, Object(*errors, systems_path, "children"));
  if (systems == nullptr)
    return entity;
  if (systems->size() > kMaxHealthIncidents)
    return Malformed(systems_path + ".children has more than " +
                     std::to_string(kMaxHealthIncidents) + " systems");
  for (const auto& [label, system] : systems->items()) {
    const std::string system_path = Child(systems_path + ".children", label);
    if (!system.is_object())
      return Malformed(system_path + " must be an object");
    if (label.size() > 64 || !wire::IsCleanText(label))
      return Malformed(system_path + " is not a system name");
    HealthIncident incident;
    incident.system = SystemId(label);
    incident.system_label = label;
    EXPANSE_ASSIGN_OR_RETURN(const std::string system_health,
                             Text(system, system_path, "value", 64));
    incident.health = HealthOf(system_health);
    EXPANSE_ASSIGN_OR_RETURN(incident.message, Message(system, system_path));
    entity.incidents.push_back(std::move(incident));
  }
  return entity;
}

Status ErrorPrinted(const DcgmiError& error) {
  std::string message = "dcgmi health: " + error.message;
  switch (error.failure) {
    case DcgmiFailure::kEngineUnreachable:
      return UnavailableError(std::move(message)).WithReason("engine_unreachable");
    case DcgmiFailure::kHealthNotEnabled:
      return FailedPreconditionError(std::move(message)).WithReason("health_watches_not_enabled");
    default:
      return UnavailableError(std::move(message))
          .WithReason(std::string(FailureReason(error.failure)));
  }
}

}  // namespace

std::string_view HealthName(Health health) {
  switch (health) {
    case Health::kPass:
      return "pass";
    case Health::kWarn:
      return "warn";
    case Health::kFail:
      return "fail";
    case Health::kUnknown:
      break;
  }
  return "unknown";
}

Result<HealthReport> ParseHealthCheck(std::string_view output) {
  if (output.size() > kMaxHealthOutputBytes)
    return Malformed("output of " + std::to_string(output.size()) + " bytes is longer than " +
                     std::to_string(kMaxHealthOutputBytes));
  const size_t start = output.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos)
    return Malformed("the output is empty");
  if (output[start] != '{') {
    // dcgmi printed a sentence instead of the document (it does so even with -j).
    std::string_view rest = output;
    while (!rest.empty()) {
      const size_t end = rest.find('\n');
      if (std::optional<DcgmiError> error = RecognizeDcgmiError(rest.substr(0, end)))
        return ErrorPrinted(*error);
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    }
    return Malformed("expected a JSON document, got " +
                     QuoteForMessage(output.substr(start, output.find('\n', start) - start)));
  }

  // The deepest path is body.GPU.children.<id>.children.Errors.children.<system>.overflow[]:
  // ten levels.
  Result<json> parsed = wire::ParseJson(
      output, wire::JsonLimits{.max_depth = 12, .max_values = 100'000, .max_string_bytes = 4096});
  if (!parsed.ok())
    return Malformed(parsed.status().message());
  const json& doc = *parsed;
  if (!doc.is_object())
    return Malformed("the document must be an object");
  EXPANSE_ASSIGN_OR_RETURN(const json* body, Object(doc, "", "body"));
  if (body == nullptr)
    return Malformed("body is required");

  HealthReport report;
  const auto overall = body->find(kOverallHealth);
  if (overall == body->end() || !overall->is_object())
    return Malformed("body.\"Overall Health\" must be an object");
  EXPANSE_ASSIGN_OR_RETURN(const std::string overall_health,
                           Text(*overall, "body.\"Overall Health\"", "value", 64));
  report.overall = HealthOf(overall_health);

  for (const auto& [group, section] : body->items()) {
    if (group == kOverallHealth)
      continue;
    const std::string group_path = Child("body", group);
    if (!section.is_object())
      return Malformed(group_path + " must be an object");
    if (group.size() > 64 || !wire::IsCleanText(group))
      return Malformed(group_path + " is not an entity group");
    EXPANSE_ASSIGN_OR_RETURN(const json* entities, Object(section, group_path, "children"));
    if (entities == nullptr)
      continue;
    for (const auto& [id, node] : entities->items()) {
      if (report.entities.size() == kMaxHealthEntities)
        return Malformed("more than " + std::to_string(kMaxHealthEntities) + " entities");
      EXPANSE_ASSIGN_OR_RETURN(EntityHealth entity,
                               Entity(group, id, node, Child(group_path + ".children", id)));
      report.entities.push_back(std::move(entity));
    }
  }
  // JSON objects come back in key order ("10" before "2"); order by number instead.
  std::sort(report.entities.begin(), report.entities.end(),
            [](const EntityHealth& a, const EntityHealth& b) {
              return std::tie(a.entity_group, a.entity_id) < std::tie(b.entity_group, b.entity_id);
            });
  return report;
}

}  // namespace expanse::dcgm
