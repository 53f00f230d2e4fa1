#include "tsdb/sample.h"

#include <algorithm>
#include <functional>

namespace expanse::tsdb {

Batch::Batch(std::initializer_list<std::pair<SeriesKey, std::vector<Sample>>> series) {
  for (const auto& [key, samples] : series)
    Add(key, samples);
}

Batch::Text Batch::Intern(std::string_view s, const Text* previous) {
  if (previous != nullptr && View(*previous) == s)
    return *previous;
  const Text t{.at = text_.size(), .size = s.size()};
  text_.append(s);
  return t;
}

namespace {

// Whether [data, data + size) lies in [begin, end): std::less orders pointers into unrelated
// objects too.
template <typename T>
bool Within(const T* data, size_t size, const T* begin, const T* end) {
  const std::less<const T*> less;
  return size > 0 && !less(data, begin) && less(data, end);
}

}  // namespace

bool Batch::Holds(const SeriesKeyView& key) const {
  const char* begin = text_.data();
  const char* end = begin + text_.size();
  for (const std::string_view s : {key.compute_id, key.host, key.device, key.metric}) {
    if (Within(s.data(), s.size(), begin, end))
      return true;
  }
  return false;
}

std::span<Sample> Batch::AddToFill(const SeriesKeyView& key, size_t count) {
  if (Holds(key))  // one of this batch's own keys: appending may move the strings it views
    return AddToFill(OwnedKey(key), count);
  const Entry* previous = entries_.empty() ? nullptr : &entries_.back();
  Entry e;
  e.compute_id = Intern(key.compute_id, previous ? &previous->compute_id : nullptr);
  e.host = Intern(key.host, previous ? &previous->host : nullptr);
  e.device = Intern(key.device, previous ? &previous->device : nullptr);
  e.metric = Intern(key.metric, previous ? &previous->metric : nullptr);
  e.samples_at = samples_.size();
  e.samples_size = count;
  // Room for the entry first, so that once the samples are added nothing can fail: a batch
  // left by bad_alloc holds no samples outside a series.
  if (entries_.size() == entries_.capacity())
    entries_.reserve(std::max<size_t>(16, 2 * entries_.capacity()));
  samples_.resize(samples_.size() + count);
  entries_.push_back(e);
  return std::span<Sample>(samples_).subspan(e.samples_at, count);
}

void Batch::Add(const SeriesKeyView& key, std::span<const Sample> samples) {
  if (Within(samples.data(), samples.size(), samples_.data(), samples_.data() + samples_.size())) {
    // This batch's own samples, which growing it may move.
    const std::vector<Sample> copy(samples.begin(), samples.end());
    Add(key, copy);
    return;
  }
  const std::span<Sample> out = AddToFill(key, samples.size());
  std::copy(samples.begin(), samples.end(), out.begin());
}

void Batch::Reserve(size_t series, size_t samples, size_t text_bytes) {
  entries_.reserve(series);
  samples_.reserve(samples);
  text_.reserve(text_bytes);
}

void Batch::TrimExcess() {
  // Each buffer kept when within twice its contents (what growing by doubling leaves anyway).
  const auto trim = [](auto& buffer) {
    if (buffer.capacity() > 2 * buffer.size() + 64)
      buffer.shrink_to_fit();
  };
  trim(text_);
  trim(samples_);
  trim(entries_);
}

Batch::Series Batch::operator[](size_t i) const {
  const Entry& e = entries_[i];
  return Series{.key = {View(e.compute_id), View(e.host), View(e.device), View(e.metric)},
                .samples = std::span<const Sample>(samples_).subspan(e.samples_at, e.samples_size)};
}

bool operator==(const Batch& a, const Batch& b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Batch::Series x = a[i], y = b[i];
    if (x.key != y.key ||
        !std::equal(x.samples.begin(), x.samples.end(), y.samples.begin(), y.samples.end())) {
      return false;
    }
  }
  return true;
}

}  // namespace expanse::tsdb
