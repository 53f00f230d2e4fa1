// The telemetry store's data model: which series a number belongs to and the number.
#ifndef EXPANSE_TSDB_SAMPLE_H_
#define EXPANSE_TSDB_SAMPLE_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace expanse::tsdb {

// A series key whose strings are held elsewhere: by a SeriesKey, or by the Batch it came from.
struct SeriesKeyView {
  std::string_view compute_id;
  std::string_view host;
  std::string_view device;
  std::string_view metric;

  friend auto operator<=>(const SeriesKeyView& a, const SeriesKeyView& b) {
    return std::tie(a.compute_id, a.host, a.device, a.metric) <=>
           std::tie(b.compute_id, b.host, b.device, b.metric);
  }
  friend bool operator==(const SeriesKeyView&, const SeriesKeyView&) = default;
};

// Identifies one series. There is no job label on purpose: job attribution is stored
// as intervals elsewhere, so a series does not multiply with every job that ran.
struct SeriesKey {
  std::string compute_id;
  std::string host;
  std::string device;  // GPU uuid, or "" for a host-level metric
  std::string metric;

  // Free, as a std::string is a std::string_view. (An aggregate: no constructors.)
  operator SeriesKeyView() const { return {compute_id, host, device, metric}; }

  friend auto operator<=>(const SeriesKey& a, const SeriesKey& b) {
    return std::tie(a.compute_id, a.host, a.device, a.metric) <=>
           std::tie(b.compute_id, b.host, b.device, b.metric);
  }
  friend bool operator==(const SeriesKey&, const SeriesKey&) = default;
};

// A copy of the viewed strings (a batch's key kept beyond the batch).
inline SeriesKey OwnedKey(const SeriesKeyView& v) {
  return {std::string(v.compute_id), std::string(v.host), std::string(v.device),
          std::string(v.metric)};
}

struct Sample {
  int64_t t_ms;  // Unix epoch milliseconds
  double v;
  friend bool operator==(const Sample&, const Sample&) = default;
};

// What one append carries: samples grouped by series, each group in time order.
//
// A batch holds its keys' strings in one buffer and its samples in another, so that a parsed
// batch of ~160 series is three heap blocks rather than ~700: a replica spent 17 % of its CPU
// in malloc and free for the keys and sample vectors of the batches it parsed, made on the
// thread that parsed them and freed on the one that wrote their group (docs/performance.md).
// A series' strings repeated from the series before it (the same compute, host and GPU) are
// stored once. Iterating yields each series as a view into the batch, valid while the batch
// is neither changed nor destroyed.
class Batch {
 public:
  struct Series {
    SeriesKeyView key;
    std::span<const Sample> samples;
  };

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Series;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Series;

    Iterator() = default;
    Series operator*() const { return (*batch_)[index_]; }
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++index_;
      return before;
    }
    friend bool operator==(const Iterator& a, const Iterator& b) { return a.index_ == b.index_; }

   private:
    friend class Batch;
    Iterator(const Batch* batch, size_t index) : batch_(batch), index_(index) {}
    const Batch* batch_ = nullptr;
    size_t index_ = 0;
  };

  Batch() = default;
  // For tests and tools: each series' key and samples, copied in.
  Batch(std::initializer_list<std::pair<SeriesKey, std::vector<Sample>>> series);

  // A series with a copy of `key` and of `samples`.
  void Add(const SeriesKeyView& key, std::span<const Sample> samples);
  // A series with a copy of `key` and `count` zeroed samples for the caller to write, through the
  // span returned (valid until the batch is next changed).
  std::span<Sample> AddToFill(const SeriesKeyView& key, size_t count);
  // Room for `series` series, `samples` samples and `text_bytes` bytes of key strings.
  void Reserve(size_t series, size_t samples, size_t text_bytes);

  // Gives back what a Reserve set aside beyond twice what the batch holds (an estimate that
  // proved too large, e.g. for a document padded with spaces).
  void TrimExcess();
  // Bytes of heap the batch holds, reserved or used.
  size_t capacity_bytes() const {
    return text_.capacity() + samples_.capacity() * sizeof(Sample) +
           entries_.capacity() * sizeof(Entry);
  }

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  // Samples across all series.
  size_t sample_count() const { return samples_.size(); }
  Series operator[](size_t i) const;
  Series front() const { return (*this)[0]; }
  Iterator begin() const { return Iterator(this, 0); }
  Iterator end() const { return Iterator(this, entries_.size()); }

  // Same series, keys and samples, in the same order (however the strings are shared).
  friend bool operator==(const Batch& a, const Batch& b);

 private:
  struct Text {
    size_t at = 0;
    size_t size = 0;
  };
  struct Entry {
    Text compute_id, host, device, metric;
    size_t samples_at = 0;
    size_t samples_size = 0;
  };
  // Whether any of key's strings lies in text_ (a series of this batch added again).
  bool Holds(const SeriesKeyView& key) const;
  // Where `s` is in text_: the previous series' same field when equal, else appended.
  Text Intern(std::string_view s, const Text* previous);
  std::string_view View(Text t) const { return std::string_view(text_).substr(t.at, t.size); }

  std::string text_;
  std::vector<Sample> samples_;
  std::vector<Entry> entries_;
};

}  // namespace expanse::tsdb

#endif  // EXPANSE_TSDB_SAMPLE_H_
