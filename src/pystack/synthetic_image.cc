#include "pystack/synthetic_image.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "pystack/python_layout.h"
#include "pystack/stack_walker.h"
#include "pystack/text_format.h"

namespace expanse::pystack {
namespace {

// Type and None addresses: outside the image, only ever compared.
constexpr std::uint64_t kCodeType = 0x7f0000001000;
constexpr std::uint64_t kStrType = 0x7f0000002000;
constexpr std::uint64_t kBytesType = 0x7f0000003000;
constexpr std::uint64_t kNoneObject = 0x7f0000004000;

// _Py_DebugOffsets of CPython 3.13.0 (x86-64, GIL), after the cookie, as read from a live
// 3.13.0 process.
constexpr std::array<std::uint64_t, 72> kDebugOffsets3130 = {
    0x030d00f0, 0,    283320, 608, 632, 194968, 7272, 7264, 7344, 7400, 7656, 7640, 7648, 16, 7752,
    0,          7768, 7760,   304, 0,   8,      16,   72,   152,  160,  232,  32,   80,   8,  0,
    56,         72,   70,     208, 112, 120,    128,  136,  68,   52,   96,   104,  200,  16, 8,
    416,        24,   88,     168, 32,  24,     16,   40,   24,   16,   48,   32,   40,   24, 16,
    32,         16,   24,     40,  16,  32,     64,   32,   16,   40,   240,  200};

class Builder {
 public:
  // Reserves `size` zeroed bytes, 16-aligned like the interpreter's allocations.
  std::uint64_t Allocate(std::size_t size) {
    const std::size_t offset = (bytes_.size() + 15) & ~std::size_t{15};
    bytes_.resize(offset + size, '\0');
    return kSyntheticBase + offset;
  }
  void PutU64(std::uint64_t address, std::uint64_t value) { Put(address, &value, 8); }
  void PutU32(std::uint64_t address, std::uint32_t value) { Put(address, &value, 4); }
  void PutU8(std::uint64_t address, std::uint8_t value) { Put(address, &value, 1); }
  void Put(std::uint64_t address, const void* data, std::size_t size) {
    std::memcpy(bytes_.data() + (address - kSyntheticBase), data, size);
  }
  std::string Take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

std::vector<std::uint32_t> CodePoints(const std::string& utf8) {
  std::vector<std::uint32_t> points;
  for (std::size_t i = 0; i < utf8.size();) {
    const auto lead = static_cast<unsigned char>(utf8[i]);
    const std::size_t length = lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
    std::uint32_t point = length == 1 ? lead : lead & (0xff >> (length + 1));
    for (std::size_t k = 1; k < length && i + k < utf8.size(); ++k) {
      point = (point << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3f);
    }
    points.push_back(point);
    i += length;
  }
  return points;
}

// A compact str, as PyUnicode_New makes them.
std::uint64_t PutString(Builder& image, const PythonLayout& layout, const std::string& text) {
  const std::vector<std::uint32_t> points = CodePoints(text);
  std::uint32_t widest = 0;
  for (const std::uint32_t point : points) {
    widest = std::max(widest, point);
  }
  const bool ascii = widest < 0x80;
  const std::uint32_t kind = widest < 0x100 ? 1 : widest < 0x10000 ? 2 : 4;
  const std::uint32_t data = ascii ? layout.unicode_ascii_data : layout.unicode_compact_data;
  const std::uint64_t address = image.Allocate(data + (points.size() + 1) * kind);
  image.PutU64(address + layout.object_type, kStrType);
  image.PutU64(address + layout.unicode_length, points.size());
  const std::uint32_t ready = layout.minor <= 11 ? 1u << 7 : 0;
  image.PutU32(address + layout.unicode_state,
               (kind << 2) | (1u << 5) | (ascii ? 1u << 6 : 0) | ready);
  for (std::size_t i = 0; i < points.size(); ++i) {
    image.Put(address + data + i * kind, &points[i], kind);
  }
  return address;
}

std::uint64_t PutBytes(Builder& image, const PythonLayout& layout, const std::string& bytes) {
  const std::uint64_t address = image.Allocate(layout.bytes_data + bytes.size() + 1);
  image.PutU64(address + layout.object_type, kBytesType);
  image.PutU64(address + layout.bytes_size, bytes.size());
  image.Put(address + layout.bytes_data, bytes.data(), bytes.size());
  return address;
}

void AppendSignedVarint(std::int64_t value, std::string& out) {
  std::uint64_t raw = value < 0 ? (static_cast<std::uint64_t>(-value) << 1) | 1
                                : static_cast<std::uint64_t>(value) << 1;
  while (raw >= 64) {
    out.push_back(static_cast<char>(0x40 | (raw & 63)));
    raw >>= 6;
  }
  out.push_back(static_cast<char>(raw));
}

// Splits `delta` into steps of at most 127 either way.
std::vector<int> Steps(int delta) {
  std::vector<int> steps;
  do {
    const int step = std::clamp(delta, -127, 127);
    steps.push_back(step);
    delta -= step;
  } while (delta != 0);
  return steps;
}

// A line table saying: bytes [0, 2) are on first_line, bytes [2, 4) on `line`.
std::string LineTable(LineTableKind kind, int first_line, int line) {
  std::string table;
  const std::vector<int> steps = Steps(line - first_line);
  switch (kind) {
    case LineTableKind::kLnotab:
      for (std::size_t i = 0; i < steps.size(); ++i) {
        table.push_back(static_cast<char>(i == 0 ? 2 : 0));
        table.push_back(static_cast<char>(steps[i]));
      }
      break;
    case LineTableKind::kLineTable310:
      table += std::string("\x02\x00", 2);
      for (std::size_t i = 0; i < steps.size(); ++i) {
        table.push_back(static_cast<char>(i + 1 == steps.size() ? 2 : 0));
        table.push_back(static_cast<char>(steps[i]));
      }
      break;
    case LineTableKind::kLocationTable: {
      // Two one-unit entries of code 13 ("no columns": a signed line delta).
      constexpr char kNoColumnsOneUnit = static_cast<char>(0x80 | (13 << 3));
      table.push_back(kNoColumnsOneUnit);
      AppendSignedVarint(0, table);
      table.push_back(kNoColumnsOneUnit);
      AppendSignedVarint(line - first_line, table);
      break;
    }
  }
  return table;
}

std::uint64_t PutCode(Builder& image, const PythonLayout& layout, const SyntheticFrame& frame) {
  const std::uint32_t size = std::max(
      layout.CodeReadSize(), layout.code_bytecode == kNoField ? 0 : layout.code_bytecode + 8);
  const std::uint64_t address = image.Allocate(size);
  image.PutU64(address + layout.object_type, kCodeType);
  image.PutU64(address + layout.code_filename, PutString(image, layout, frame.file));
  const std::uint32_t function =
      layout.code_qualname != kNoField ? layout.code_qualname : layout.code_name;
  image.PutU64(address + function, PutString(image, layout, frame.function));
  if (function != layout.code_name) {
    image.PutU64(address + layout.code_name, PutString(image, layout, frame.function));
  }
  image.PutU32(address + layout.code_first_line, static_cast<std::uint32_t>(frame.first_line));
  image.PutU64(address + layout.code_line_table,
               PutBytes(image, layout, LineTable(layout.line_table, frame.first_line, frame.line)));
  return address;
}

// One frame whose current instruction is at byte 2 of its code.
std::uint64_t PutFrame(Builder& image, const PythonLayout& layout, std::uint64_t code,
                       std::uint64_t previous, bool shim) {
  const std::uint64_t address = image.Allocate(layout.FrameReadSize() + 8);
  image.PutU64(address + layout.frame_previous, previous);
  image.PutU64(address + layout.frame_code, code);
  if (!layout.interpreter_frames) {
    image.PutU32(address + layout.frame_instruction, layout.minor == 9 ? 2 : 1);
  } else {
    image.PutU64(address + layout.frame_instruction, code + layout.code_bytecode + 2);
    image.PutU8(address + layout.frame_owner,
                shim ? static_cast<std::uint8_t>(layout.frame_owner_c_stack) : 0);
  }
  return address;
}

}  // namespace

std::string DebugOffsetsTable3130() {
  std::string table(kDebugOffsetsCookie);
  for (const std::uint64_t value : kDebugOffsets3130) {
    table.append(reinterpret_cast<const char*>(&value), 8);
  }
  return table;
}

Result<InterpreterInfo> SyntheticInterpreterInfo(int minor, std::span<const std::uint8_t> image) {
  InterpreterInfo info;
  info.runtime_address = kSyntheticBase;
  info.code_type = kCodeType;
  info.str_type = kStrType;
  info.bytes_type = kBytesType;
  info.none_object = kNoneObject;
  info.version.major = 3;
  info.version.minor = minor;
  info.version.micro = 0;
  if (minor == 13) {
    EXPANSE_ASSIGN_OR_RETURN(info.layout, LayoutFromDebugOffsets(image));
  } else {
    EXPANSE_ASSIGN_OR_RETURN(info.layout, BuiltInLayout(info.version));
  }
  return info;
}

Result<SyntheticImage> BuildSyntheticImage(const SyntheticProcess& process) {
  if (process.minor < 9 || process.minor > 13) {
    return InvalidArgumentError(Format("no synthetic layout for 3.{}", process.minor));
  }
  const std::string table = process.minor == 13 ? DebugOffsetsTable3130() : std::string();
  EXPANSE_ASSIGN_OR_RETURN(
      InterpreterInfo info,
      SyntheticInterpreterInfo(
          process.minor,
          std::span(reinterpret_cast<const std::uint8_t*>(table.data()), table.size())));
  const PythonLayout& layout = info.layout;
  SyntheticImage out;
  Builder image;

  const std::uint64_t runtime = image.Allocate(std::max<std::size_t>(
      {table.size(), layout.runtime_interpreters_head + 8,
       layout.runtime_gil_locked == kNoField ? 0 : layout.runtime_gil_locked + 8,
       layout.runtime_gil_holder == kNoField ? 0 : layout.runtime_gil_holder + 8}));
  image.Put(runtime, table.data(), table.size());
  const std::uint64_t interp = image.Allocate(
      std::max({layout.interp_next, layout.interp_threads_head,
                layout.interp_gil_pointer == kNoField ? 0 : layout.interp_gil_pointer}) +
      8);
  image.PutU64(runtime + layout.runtime_interpreters_head, interp);
  std::uint64_t gil = 0;
  if (layout.interp_gil_pointer != kNoField) {
    gil = image.Allocate(std::max(layout.gil_holder, layout.gil_locked) + 8);
    image.PutU64(interp + layout.interp_gil_pointer, gil);
  }

  // Thread states, linked in list order.
  for (std::size_t i = 0; i < process.threads.size(); ++i) {
    out.thread_addresses.push_back(image.Allocate(layout.ThreadReadSize() + 8));
  }
  for (std::size_t i = 0; i < process.threads.size(); ++i) {
    const SyntheticThread& thread = process.threads[i];
    const std::uint64_t state = out.thread_addresses[i];
    image.PutU64(state + layout.thread_interp, interp);
    image.PutU64(state + layout.thread_next,
                 i + 1 < process.threads.size() ? out.thread_addresses[i + 1] : 0);
    if (layout.thread_native_id != kNoField) {
      image.PutU64(state + layout.thread_native_id, static_cast<std::uint64_t>(thread.tid));
    } else {
      const std::uint64_t pthread = image.Allocate(kGlibcPthreadTidOffset + 8);
      image.PutU32(pthread + kGlibcPthreadTidOffset, static_cast<std::uint32_t>(thread.tid));
      image.PutU64(state + layout.thread_id, pthread);
    }
    if (thread.holds_gil) {
      if (gil != 0) {
        image.PutU32(gil + layout.gil_locked, 1);
        image.PutU64(gil + layout.gil_holder, state);
      } else {
        image.PutU32(runtime + layout.runtime_gil_locked, 1);
        image.PutU64(runtime + layout.runtime_gil_holder, state);
      }
    }
    // Frames from the root up, so each knows its caller.
    std::vector<std::uint64_t> frames;
    std::uint64_t previous = 0;
    if (process.shim_frames && layout.frame_owner_c_stack >= 0) {
      previous = PutFrame(image, layout, 0, 0, /*shim=*/true);
      frames.push_back(previous);
    }
    for (const SyntheticFrame& frame : thread.frames) {
      previous = PutFrame(image, layout, PutCode(image, layout, frame), previous, false);
      frames.push_back(previous);
    }
    std::reverse(frames.begin(), frames.end());
    out.frame_addresses.push_back(frames);
    if (layout.cframe_current_frame != kNoField) {
      const std::uint64_t cframe = image.Allocate(layout.cframe_current_frame + 8);
      image.PutU64(cframe + layout.cframe_current_frame, previous);
      image.PutU64(state + layout.thread_frame, cframe);
    } else {
      image.PutU64(state + layout.thread_frame, previous);
    }
  }
  image.PutU64(interp + layout.interp_threads_head,
               out.thread_addresses.empty() ? 0 : out.thread_addresses.front());
  out.bytes = image.Take();
  out.info = std::move(info);
  return out;
}

}  // namespace expanse::pystack
