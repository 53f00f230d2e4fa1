#include "capture/activity_window.h"

#include <algorithm>
#include <cmath>

namespace expanse::capture {
namespace {

// Longest first; equal times by name so the order is stable from run to run.
std::vector<NamedTotal> SortedByTime(const NamedTotals& totals) {
  std::vector<NamedTotal> sorted;
  sorted.reserve(totals.size());
  for (const auto& [name, total] : totals)
    sorted.push_back(total);
  std::sort(sorted.begin(), sorted.end(), [](const NamedTotal& a, const NamedTotal& b) {
    return a.ns != b.ns ? a.ns > b.ns : a.name < b.name;
  });
  return sorted;
}

// The length of the valid UTF-8 sequence at `s[i]`, or 0 when it is not one.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const size_t n = b < 0x80             ? 1
                   : (b & 0xE0) == 0xC0 ? 2
                   : (b & 0xF0) == 0xE0 ? 3
                   : (b & 0xF8) == 0xF0 ? 4
                                        : 0;
  if (n == 0 || i + n > s.size() || (n == 2 && b < 0xC2))
    return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
      return 0;
  }
  return n;
}

}  // namespace

std::string BoundedName(std::string_view name) {
  // Control characters and bytes that are not UTF-8 become '?', so the name is clean text of
  // at most kMaxNameBytes whatever the job called its kernel or range.
  std::string out;
  out.reserve(std::min(name.size(), kMaxNameBytes));
  for (size_t i = 0; i < name.size();) {
    const size_t n = Utf8Length(name, i);
    const auto b = static_cast<unsigned char>(name[i]);
    const bool control = n == 1 && (b < 0x20 || b == 0x7F);
    const size_t take = (n == 0 || control) ? 1 : n;
    if (out.size() + take > kMaxNameBytes)
      break;
    if (n == 0 || control)
      out += '?';
    else
      out.append(name.substr(i, n));
    i += take;
  }
  return out;
}

std::string_view LongNameKey(std::string_view name) {
  if (name.size() <= kMaxNameBytes)
    return {};
  // The cut lands at kMaxNameBytes, or before a character that starts there and ends past it.
  size_t cut = kMaxNameBytes;
  while (cut > kMaxNameBytes - 3 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80)
    --cut;
  if (cut < kMaxNameBytes) {
    // BoundedName keeps that character out only when it is whole UTF-8 (a bad byte becomes a
    // '?' that still fits).
    const size_t n = Utf8Length(name, cut);
    if (n == 0 || cut + n <= kMaxNameBytes)
      return {};
  }
  return name.substr(0, cut);
}

void ActivityWindow::AddNamed(NamedTotals& totals, std::string_view name, uint64_t ns) {
  if (name.empty())
    name = "(unnamed)";
  // The name as it came, first: a clean name of a kernel seen before costs one hash. A longer
  // one than any key (CUTLASS, FlashAttention and CUB kernels take 0.6-3 KB) is looked up by
  // the key BoundedName would give it, without making that key: every key is clean, so a key
  // equal to the name's first bytes is that name's cut. This runs on CUPTI's thread for every
  // record.
  auto it = totals.end();
  if (name.size() <= kMaxNameBytes)
    it = totals.find(name);
  else if (const std::string_view key = LongNameKey(name); !key.empty())
    it = totals.find(key);
  if (it == totals.end()) {
    std::string key = BoundedName(name);
    it = totals.find(key);
    if (it == totals.end()) {
      if (totals.size() >= kMaxDistinctNames)
        key = kOtherName;
      it = totals.try_emplace(key, NamedTotal{key}).first;
    }
  }
  it->second.count += 1;
  it->second.ns += ns;
}

void ActivityWindow::Add(const Activity& a) {
  ++activities_;
  const uint64_t ns = a.duration_ns();
  switch (a.kind) {
    case ActivityKind::kKernel:
      devices_.insert(a.device);
      ++kernel_count_;
      kernel_ns_ += ns;
      AddNamed(kernels_, a.name, ns);
      break;
    case ActivityKind::kMemcpy: {
      devices_.insert(a.device);
      ByteTotal& t = memcpy_[a.detail.empty() ? "other" : std::string(a.detail)];
      t.count += 1;
      t.bytes += a.bytes;
      t.ns += ns;
      break;
    }
    case ActivityKind::kMemset:
      devices_.insert(a.device);
      memset_.count += 1;
      memset_.bytes += a.bytes;
      memset_.ns += ns;
      break;
    case ActivityKind::kSync:
      AddNamed(sync_, a.detail.empty() ? "other" : a.detail, ns);
      break;
    case ActivityKind::kNvtxRange:
      AddNamed(nvtx_, a.name, ns);
      break;
    case ActivityKind::kNvtxMark:
      ++nvtx_marks_;
      break;
  }
}

namespace {

uint64_t Scaled(uint64_t value, double factor) {
  return static_cast<uint64_t>(std::llround(static_cast<double>(value) * factor));
}

void Scale(NamedTotal& t, double factor) {
  t.count = Scaled(t.count, factor);
  t.ns = Scaled(t.ns, factor);
}

void Scale(ByteTotal& t, double factor) {
  t.count = Scaled(t.count, factor);
  t.bytes = Scaled(t.bytes, factor);
  t.ns = Scaled(t.ns, factor);
}

// What was seen in `observed_ms` taken as a sample of the whole window. Dropped records are
// left as counted: they are a fact about CUPTI's buffers, not an estimate.
void ScaleToWindow(WindowSummary& s, double factor) {
  s.kernel_count = Scaled(s.kernel_count, factor);
  s.kernel_ns = Scaled(s.kernel_ns, factor);
  for (NamedTotal& k : s.top_kernels)
    Scale(k, factor);
  Scale(s.other_kernels, factor);
  for (auto& [direction, t] : s.memcpy)
    Scale(t, factor);
  Scale(s.memset, factor);
  for (auto& [type, t] : s.sync)
    Scale(t, factor);
  for (NamedTotal& r : s.nvtx_ranges)
    Scale(r, factor);
  s.nvtx_marks = Scaled(s.nvtx_marks, factor);
}

}  // namespace

WindowSummary ActivityWindow::Close(uint64_t end_ms) {
  WindowSummary s;
  s.start_ms = start_ms_;
  s.end_ms = end_ms;
  s.kernel_count = kernel_count_;
  s.kernel_ns = kernel_ns_;
  std::vector<NamedTotal> kernels = SortedByTime(kernels_);
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (i < kTopKernels && kernels[i].name != kOtherName) {
      s.top_kernels.push_back(kernels[i]);
    } else {
      s.other_kernels.count += kernels[i].count;
      s.other_kernels.ns += kernels[i].ns;
    }
  }
  s.memcpy = memcpy_;
  s.memset = memset_;
  s.sync = std::map<std::string, NamedTotal>(sync_.begin(), sync_.end());
  s.nvtx_ranges = SortedByTime(nvtx_);
  if (s.nvtx_ranges.size() > kTopNvtxRanges)
    s.nvtx_ranges.resize(kTopNvtxRanges);
  s.nvtx_marks = nvtx_marks_;
  s.devices = devices_;
  s.dropped_records = dropped_;
  const uint64_t length = end_ms > start_ms_ ? end_ms - start_ms_ : 0;
  s.observed_ms = length - std::min(length, unobserved_ms_);
  if (s.observed_ms > 0 && s.observed_ms < length)
    ScaleToWindow(s, static_cast<double>(length) / static_cast<double>(s.observed_ms));
  *this = ActivityWindow(end_ms);
  return s;
}

}  // namespace expanse::capture
