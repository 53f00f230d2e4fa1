#include "wire/json_parse.h"

#include <exception>
#include <string>

#include "core/quote.h"

namespace expanse::wire {
namespace {

using nlohmann::json;

// Forwards every event to nlohmann's own DOM builder after checking the limits; returning
// false stops the parser at once.
class LimitedSax {
 public:
  LimitedSax(json& result, const JsonLimits& limits) : dom_(result, false), limits_(limits) {}

  bool null() { return Count() && dom_.null(); }
  bool boolean(bool v) { return Count() && dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return Count() && dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return Count() && dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const std::string& text) {
    return Count() && dom_.number_float(v, text);
  }
  bool string(std::string& v) { return Count() && FitsString(v) && dom_.string(v); }
  bool binary(json::binary_t&) { return Fail("invalid_json", "binary values are not JSON"); }
  bool key(std::string& k) { return Count() && FitsString(k) && dom_.key(k); }
  bool start_object(size_t n) { return Count() && Enter() && dom_.start_object(n); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(size_t n) { return Count() && Enter() && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // nlohmann's message already names the offset ("at line 1, column 5"); `position` is
    // kept for a message that says which byte.
    std::string what = e.what();
    if (const size_t colon = what.find(": "); colon != std::string::npos)
      what = what.substr(colon + 2);  // drops "[json.exception.parse_error.101] "
    // The message quotes the bytes last read, which are the sender's: escaped, so a record of
    // invalid UTF-8 cannot make the refusal itself unprintable (or a JSON writer throw).
    return Fail("invalid_json", "not valid JSON at byte " + std::to_string(position) + ": " +
                                    EscapeForMessage(what));
  }

  const Status& error() const { return error_; }

 private:
  bool Count() {
    if (++values_ <= limits_.max_values)
      return true;
    return Fail("json_too_large",
                "the document holds more than " + std::to_string(limits_.max_values) + " values");
  }
  bool Enter() {
    if (++depth_ <= limits_.max_depth)
      return true;
    return Fail("json_too_deep", "the document nests arrays and objects deeper than " +
                                     std::to_string(limits_.max_depth) + " levels");
  }
  bool FitsString(const std::string& s) {
    if (s.size() <= limits_.max_string_bytes)
      return true;
    return Fail("json_too_large", "the document holds a string longer than " +
                                      std::to_string(limits_.max_string_bytes) + " bytes");
  }
  bool Fail(const char* reason, std::string message) {
    if (error_.ok())
      error_ = InvalidArgumentError(std::move(message)).WithReason(reason);
    return false;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  const JsonLimits& limits_;
  size_t depth_ = 0;
  size_t values_ = 0;
  Status error_;
};

}  // namespace

Result<json> ParseJson(std::string_view text, const JsonLimits& limits) {
  json result;
  LimitedSax sax(result, limits);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json,
                         /*strict=*/true);
  } catch (const std::exception& e) {
    // Not expected with a SAX handler that never throws; an allocation failure or a
    // library change must still not end the process.
    return InvalidArgumentError(std::string("not valid JSON: ") + e.what())
        .WithReason("invalid_json");
  }
  if (!ok) {
    if (!sax.error().ok())
      return sax.error();
    return InvalidArgumentError("not valid JSON").WithReason("invalid_json");
  }
  return result;
}

}  // namespace expanse::wire
