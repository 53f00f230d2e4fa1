#include "gpu/nvidia_smi_parse.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>
#include <utility>

#include "core/quote.h"
#include "gpu/nvidia_smi_text.h"

namespace expanse::gpu {
namespace {

using nvidia_smi_internal::IsAbsent;
using nvidia_smi_internal::Line;
using nvidia_smi_internal::OutputError;
using nvidia_smi_internal::ParseUint;
using nvidia_smi_internal::SplitLines;
using nvidia_smi_internal::Trim;

enum class FieldId {
  kIndex,
  kUuid,
  kName,
  kPciBusId,
  kDriverVersion,
  kMemoryTotal,
  kMemoryUsed,
  kUtilizationGpu,
  kUtilizationMemory,
  kTemperatureGpu,
  kPowerDraw,
  kClockSm,
  kClockMem,
  kClockEventReasons,
  kEccUncorrected,
  kEccCorrected,
  kPid,
  kGpuUuid,
  kUsedMemory,
};

// A field we read. `name` is how we query it; `alias` is the catalogue's other name for it
// ("clocks.sm" or "clocks.current.sm"), which may be what the header prints. `unit` is the
// unit the header names and values carry without nounits.
struct FieldSpec {
  FieldId id;
  std::string_view name;
  std::string_view alias;
  std::string_view unit;
  bool required;
};

// Names and units from nvidia-smi --help-query-gpu and the csv fixtures of driver 580.159.04.
constexpr std::array<FieldSpec, 16> kGpuSpecs = {{
    {FieldId::kIndex, "index", "", "", true},
    {FieldId::kUuid, "uuid", "gpu_uuid", "", true},
    {FieldId::kName, "name", "gpu_name", "", false},
    {FieldId::kPciBusId, "pci.bus_id", "gpu_bus_id", "", false},
    {FieldId::kDriverVersion, "driver_version", "", "", false},
    {FieldId::kMemoryTotal, "memory.total", "", "MiB", false},
    {FieldId::kMemoryUsed, "memory.used", "", "MiB", false},
    {FieldId::kUtilizationGpu, "utilization.gpu", "", "%", false},
    {FieldId::kUtilizationMemory, "utilization.memory", "", "%", false},
    {FieldId::kTemperatureGpu, "temperature.gpu", "", "", false},
    {FieldId::kPowerDraw, "power.draw", "", "W", false},
    {FieldId::kClockSm, "clocks.sm", "clocks.current.sm", "MHz", false},
    {FieldId::kClockMem, "clocks.mem", "clocks.current.memory", "MHz", false},
    {FieldId::kClockEventReasons, "clocks_throttle_reasons.active", "clocks_event_reasons.active",
     "", false},
    {FieldId::kEccUncorrected, "ecc.errors.uncorrected.volatile.total", "", "", false},
    {FieldId::kEccCorrected, "ecc.errors.corrected.volatile.total", "", "", false},
}};

// From nvidia-smi --help-query-compute-apps; the header prints used_memory as used_gpu_memory.
constexpr std::array<FieldSpec, 3> kAppsSpecs = {{
    {FieldId::kPid, "pid", "", "", true},
    {FieldId::kGpuUuid, "gpu_uuid", "", "", true},
    {FieldId::kUsedMemory, "used_memory", "used_gpu_memory", "MiB", false},
}};

const FieldSpec* FindSpec(std::span<const FieldSpec> specs, std::string_view name) {
  for (const FieldSpec& spec : specs) {
    if (name == spec.name || (!spec.alias.empty() && name == spec.alias))
      return &spec;
  }
  return nullptr;
}

std::string ColumnPrefix(int line, std::string_view column) {
  return "nvidia-smi line " + std::to_string(line) + " column " + std::string(column) + ": ";
}

// The lines of a csv output, split into cells, with the field each column holds.
struct Table {
  struct Column {
    const FieldSpec* spec = nullptr;  // null: a column we do not read
    bool unit_in_header = false;      // the header named a unit, so values must carry it
  };
  struct Row {
    int line = 0;
    std::vector<std::string_view> cells;
  };
  std::vector<Column> columns;
  std::vector<Row> rows;
};

std::vector<std::string_view> SplitCells(std::string_view line) {
  std::vector<std::string_view> cells;
  while (true) {
    const size_t comma = line.find(',');
    cells.push_back(Trim(line.substr(0, comma)));
    if (comma == std::string_view::npos)
      return cells;
    line.remove_prefix(comma + 1);
  }
}

// Maps the header line's columns to fields: "memory.total [MiB]" is memory.total in MiB.
Result<std::vector<Table::Column>> ReadHeader(const Line& line, std::span<const FieldSpec> specs) {
  std::vector<Table::Column> columns;
  for (std::string_view cell : SplitCells(line.text)) {
    std::string_view name = cell;
    std::string_view unit;
    if (const size_t bracket = cell.find(" [");
        bracket != std::string_view::npos && cell.back() == ']') {
      name = Trim(cell.substr(0, bracket));
      unit = cell.substr(bracket + 2, cell.size() - bracket - 3);
    }
    const FieldSpec* spec = FindSpec(specs, name);
    if (spec != nullptr && unit != spec->unit) {
      return OutputError(ColumnPrefix(line.number, spec->name) + "header says unit " +
                         QuoteForMessage(unit) + ", expected " + QuoteForMessage(spec->unit));
    }
    columns.push_back({spec, !unit.empty()});
  }
  return columns;
}

// Splits `text` into a Table. `none_line` is the sentence nvidia-smi prints instead of rows
// when there are none ("No running processes found").
Result<Table> ReadTable(std::string_view text, std::span<const std::string_view> fields,
                        CsvHeader header, std::span<const FieldSpec> specs,
                        std::string_view none_line) {
  Table table;
  bool header_pending = header == CsvHeader::kPresent;
  int header_line = 0;
  for (const Line& line : SplitLines(text)) {
    if (line.text.empty() || line.text == none_line)
      continue;
    if (header_pending) {
      EXPANSE_ASSIGN_OR_RETURN(table.columns, ReadHeader(line, specs));
      header_pending = false;
      header_line = line.number;
      continue;
    }
    std::vector<std::string_view> cells = SplitCells(line.text);
    if (header == CsvHeader::kAbsent && table.columns.empty()) {
      for (std::string_view field : fields)
        table.columns.push_back({FindSpec(specs, field), false});
    }
    if (cells.size() != table.columns.size()) {
      return OutputError("nvidia-smi line " + std::to_string(line.number) + ": expected " +
                         std::to_string(table.columns.size()) + " columns, got " +
                         std::to_string(cells.size()));
    }
    table.rows.push_back({line.number, std::move(cells)});
  }
  if (table.rows.empty())
    return table;  // nothing to read fields from: an empty output or a header alone

  auto has_column = [&](const FieldSpec& spec) {
    for (const Table::Column& column : table.columns) {
      if (column.spec == &spec)
        return true;
    }
    return false;
  };
  for (std::string_view field : fields) {
    const FieldSpec* spec = FindSpec(specs, field);
    if (spec != nullptr && !has_column(*spec)) {
      return OutputError("nvidia-smi line " + std::to_string(header_line) +
                         ": the header has no column " + std::string(spec->name));
    }
  }
  for (const FieldSpec& spec : specs) {
    if (spec.required && !has_column(spec))
      return OutputError("nvidia-smi output has no column " + std::string(spec.name));
  }
  return table;
}

// One cell to convert, with what its error messages need.
struct Cell {
  int line;
  const FieldSpec& spec;
  std::string_view text;
  bool unit_required;

  Status Error(std::string_view expected) const {
    return OutputError(ColumnPrefix(line, spec.name) + "expected " + std::string(expected) +
                       ", got " + QuoteForMessage(text));
  }
};

// The number in a cell without its unit, or nullopt when nvidia-smi had no value. The unit
// suffix is optional unless the header named one: the noheader form may or may not carry
// units, and the same parser serves both.
Result<std::optional<std::string_view>> NumberText(const Cell& cell) {
  if (IsAbsent(cell.text))
    return std::optional<std::string_view>();
  std::string_view number = cell.text;
  if (!cell.spec.unit.empty()) {
    const std::string suffix = " " + std::string(cell.spec.unit);
    if (number.ends_with(suffix)) {
      number.remove_suffix(suffix.size());
    } else if (cell.unit_required) {
      return cell.Error("a number in " + std::string(cell.spec.unit));
    }
  }
  return std::optional<std::string_view>(number);
}

Result<std::optional<double>> DoubleCell(const Cell& cell) {
  EXPANSE_ASSIGN_OR_RETURN(const std::optional<std::string_view> number, NumberText(cell));
  if (!number.has_value())
    return std::optional<double>();
  double value = 0;
  const char* end = number->data() + number->size();
  const auto [ptr, error] = std::from_chars(number->data(), end, value);
  if (number->empty() || error != std::errc() || ptr != end || !std::isfinite(value))
    return cell.Error("a number");
  return std::optional<double>(value);
}

Result<std::optional<uint64_t>> UintCell(const Cell& cell, uint64_t max, int base = 10) {
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string_view> number, NumberText(cell));
  if (!number.has_value())
    return std::optional<uint64_t>();
  if (base == 16) {
    if (!number->starts_with("0x") && !number->starts_with("0X"))
      return cell.Error("a hexadecimal bitmask like 0x0000000000000004");
    number->remove_prefix(2);
  }
  const std::optional<uint64_t> value = ParseUint(*number, base);
  if (!value.has_value() || *value > max)
    return cell.Error(base == 16 ? "a hexadecimal bitmask like 0x0000000000000004"
                                 : "a whole number up to " + std::to_string(max));
  return value;
}

Result<uint32_t> RequiredUint32Cell(const Cell& cell) {
  EXPANSE_ASSIGN_OR_RETURN(const std::optional<uint64_t> value,
                           UintCell(cell, std::numeric_limits<uint32_t>::max()));
  if (!value.has_value())
    return cell.Error("a value");
  return static_cast<uint32_t>(*value);
}

Result<std::string> RequiredTextCell(const Cell& cell) {
  if (cell.text.empty() || IsAbsent(cell.text))
    return cell.Error("a value");
  return std::string(cell.text);
}

std::string TextCell(const Cell& cell) {
  return IsAbsent(cell.text) ? std::string() : std::string(cell.text);
}

constexpr uint64_t kAnyUint = std::numeric_limits<uint64_t>::max();

Status SetGpuField(const Cell& cell, GpuQueryRow& row) {
  GpuReading& reading = row.reading;
  switch (cell.spec.id) {
    case FieldId::kIndex: {
      EXPANSE_ASSIGN_OR_RETURN(row.info.index, RequiredUint32Cell(cell));
      return OkStatus();
    }
    case FieldId::kUuid: {
      EXPANSE_ASSIGN_OR_RETURN(row.info.uuid, RequiredTextCell(cell));
      reading.uuid = row.info.uuid;
      return OkStatus();
    }
    case FieldId::kName:
      row.info.name = TextCell(cell);
      return OkStatus();
    case FieldId::kPciBusId:
      row.info.pci_bus_id = TextCell(cell);
      return OkStatus();
    case FieldId::kDriverVersion:
      row.driver_version = TextCell(cell);
      return OkStatus();
    case FieldId::kMemoryTotal: {
      EXPANSE_ASSIGN_OR_RETURN(row.info.memory_total_mib, UintCell(cell, kAnyUint));
      return OkStatus();
    }
    case FieldId::kClockEventReasons: {
      EXPANSE_ASSIGN_OR_RETURN(reading.clock_event_reasons, UintCell(cell, kAnyUint, 16));
      return OkStatus();
    }
    case FieldId::kEccUncorrected: {
      EXPANSE_ASSIGN_OR_RETURN(reading.ecc_uncorrected, UintCell(cell, kAnyUint));
      return OkStatus();
    }
    case FieldId::kEccCorrected: {
      EXPANSE_ASSIGN_OR_RETURN(reading.ecc_corrected, UintCell(cell, kAnyUint));
      return OkStatus();
    }
    default:
      break;
  }
  std::optional<double>* target = nullptr;
  switch (cell.spec.id) {
    case FieldId::kMemoryUsed:
      target = &reading.mem_used_mib;
      break;
    case FieldId::kUtilizationGpu:
      target = &reading.sm_util;
      break;
    case FieldId::kUtilizationMemory:
      target = &reading.mem_util;
      break;
    case FieldId::kTemperatureGpu:
      target = &reading.temp_c;
      break;
    case FieldId::kPowerDraw:
      target = &reading.power_w;
      break;
    case FieldId::kClockSm:
      target = &reading.sm_clock_mhz;
      break;
    case FieldId::kClockMem:
      target = &reading.mem_clock_mhz;
      break;
    default:
      return InternalError("nvidia-smi parser: no handler for field " +
                           std::string(cell.spec.name));
  }
  EXPANSE_ASSIGN_OR_RETURN(*target, DoubleCell(cell));
  return OkStatus();
}

Status SetAppField(const Cell& cell, GpuProcess& process) {
  switch (cell.spec.id) {
    case FieldId::kPid: {
      EXPANSE_ASSIGN_OR_RETURN(process.pid, RequiredUint32Cell(cell));
      return OkStatus();
    }
    case FieldId::kGpuUuid: {
      EXPANSE_ASSIGN_OR_RETURN(process.gpu_uuid, RequiredTextCell(cell));
      return OkStatus();
    }
    case FieldId::kUsedMemory: {
      EXPANSE_ASSIGN_OR_RETURN(process.used_memory_mib, UintCell(cell, kAnyUint));
      return OkStatus();
    }
    default:
      return InternalError("nvidia-smi parser: no handler for field " +
                           std::string(cell.spec.name));
  }
}

// Converts every row of `table` into a T with `set_field`.
template <typename T, typename SetField>
Result<std::vector<T>> ConvertRows(const Table& table, SetField set_field) {
  std::vector<T> out;
  out.reserve(table.rows.size());
  for (const Table::Row& row : table.rows) {
    T value{};
    for (size_t i = 0; i < row.cells.size(); ++i) {
      const Table::Column& column = table.columns[i];
      if (column.spec == nullptr)
        continue;
      EXPANSE_RETURN_IF_ERROR(
          set_field(Cell{row.line, *column.spec, row.cells[i], column.unit_in_header}, value));
    }
    out.push_back(std::move(value));
  }
  return out;
}

}  // namespace

Result<std::vector<GpuQueryRow>> ParseGpuQueryCsv(std::string_view text,
                                                  std::span<const std::string_view> fields,
                                                  CsvHeader header) {
  EXPANSE_ASSIGN_OR_RETURN(const Table table,
                           ReadTable(text, fields, header, kGpuSpecs, "No devices were found"));
  return ConvertRows<GpuQueryRow>(table, SetGpuField);
}

Result<std::vector<GpuProcess>> ParseComputeAppsCsv(std::string_view text,
                                                    std::span<const std::string_view> fields,
                                                    CsvHeader header) {
  EXPANSE_ASSIGN_OR_RETURN(
      const Table table, ReadTable(text, fields, header, kAppsSpecs, "No running processes found"));
  return ConvertRows<GpuProcess>(table, SetAppField);
}

}  // namespace expanse::gpu
