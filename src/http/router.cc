#include "http/router.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "core/quote.h"

namespace expanse::http {

namespace {

// "/a/b" -> {"a", "b"}; "/" -> {""}; "/a/" -> {"a", ""}. `path` starts with '/'.
std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> segments;
  std::string_view rest = path.substr(1);
  while (true) {
    const size_t slash = rest.find('/');
    segments.push_back(rest.substr(0, slash));
    if (slash == std::string_view::npos) {
      return segments;
    }
    rest.remove_prefix(slash + 1);
  }
}

// Byte offset in `path` where segment `index` starts.
size_t SegmentOffset(std::string_view path, size_t index) {
  size_t offset = 1;
  for (size_t i = 0; i < index; ++i) {
    offset = path.find('/', offset) + 1;
  }
  return offset;
}

}  // namespace

Status Router::Add(std::string_view method, std::string_view pattern, Handler handler,
                   size_t max_body_bytes, size_t deferred_id) {
  const std::string where = std::string(method) + " route \"" + std::string(pattern) + "\": ";
  if (pattern.empty() || pattern.front() != '/') {
    return InvalidArgumentError(where + "pattern must start with '/'");
  }
  if (!handler) {
    return InvalidArgumentError(where + "handler is empty");
  }
  Route route{std::string(method), std::string(pattern), {},
              std::move(handler),  max_body_bytes,       deferred_id};
  std::set<std::string_view> names;
  const std::vector<std::string_view> parts = SplitPath(pattern);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string_view part = parts[i];
    SegmentKind kind = SegmentKind::kLiteral;
    std::string_view text = part;
    if (!part.empty() && (part.front() == ':' || part.front() == '*')) {
      kind = part.front() == ':' ? SegmentKind::kParam : SegmentKind::kRest;
      text.remove_prefix(1);
      if (text.empty()) {
        return InvalidArgumentError(where + "parameter in segment " + std::to_string(i + 1) +
                                    " has no name");
      }
      if (!names.insert(text).second) {
        return InvalidArgumentError(where + "parameter \"" + std::string(text) +
                                    "\" appears twice");
      }
      if (kind == SegmentKind::kRest && i + 1 != parts.size()) {
        return InvalidArgumentError(where + "'*" + std::string(text) +
                                    "' must be the last segment");
      }
    }
    route.segments.push_back({kind, std::string(text)});
  }
  for (const Route& existing : routes_) {
    if (existing.method != route.method || existing.segments.size() != route.segments.size()) {
      continue;
    }
    const bool same_shape = std::equal(
        existing.segments.begin(), existing.segments.end(), route.segments.begin(),
        [](const Segment& a, const Segment& b) {
          return a.kind == b.kind && (a.kind != SegmentKind::kLiteral || a.text == b.text);
        });
    if (same_shape) {
      return InvalidArgumentError(where + "matches the same paths as \"" + existing.pattern + "\"");
    }
  }
  routes_.push_back(std::move(route));
  return OkStatus();
}

bool Router::MatchRoute(const Route& route, const std::vector<std::string>& path_segments,
                        std::string_view raw_path,
                        std::map<std::string, std::string, std::less<>>* params) {
  const std::vector<Segment>& segments = route.segments;
  const bool has_rest = !segments.empty() && segments.back().kind == SegmentKind::kRest;
  const size_t fixed = has_rest ? segments.size() - 1 : segments.size();
  if (has_rest ? path_segments.size() < fixed : path_segments.size() != fixed) {
    return false;
  }
  for (size_t i = 0; i < fixed; ++i) {
    const Segment& segment = segments[i];
    if (segment.kind == SegmentKind::kLiteral ? path_segments[i] != segment.text
                                              : path_segments[i].empty()) {
      return false;
    }
  }
  if (params != nullptr) {
    params->clear();
    for (size_t i = 0; i < fixed; ++i) {
      if (segments[i].kind == SegmentKind::kParam) {
        params->emplace(segments[i].text, path_segments[i]);
      }
    }
    if (has_rest) {
      // "/files" against "/files/*rest" has no segment left: the rest is empty.
      std::string rest = path_segments.size() == fixed
                             ? std::string()
                             : PercentDecode(raw_path.substr(SegmentOffset(raw_path, fixed)),
                                             /*plus_is_space=*/false);
      params->emplace(segments.back().text, std::move(rest));
    }
  }
  return true;
}

bool Router::MoreSpecific(const Route& a, const Route& b) {
  const size_t common = std::min(a.segments.size(), b.segments.size());
  for (size_t i = 0; i < common; ++i) {
    if (a.segments[i].kind != b.segments[i].kind) {
      return a.segments[i].kind < b.segments[i].kind;
    }
  }
  // "/files/:id" (exact length) over "/files/*rest" is decided above; here both
  // agree on the common prefix, and the longer pattern is the more specific one.
  return a.segments.size() > b.segments.size();
}

Router::Match Router::Find(std::string_view method, std::string_view raw_path) const {
  Match match;
  if (raw_path.empty() || raw_path.front() != '/') {
    return match;
  }
  const std::string_view route_method = method == "HEAD" ? std::string_view("GET") : method;
  // Split before decoding: a "%2F" inside a segment is part of it, not a separator.
  std::vector<std::string> path_segments;
  for (const std::string_view segment : SplitPath(raw_path)) {
    path_segments.push_back(PercentDecode(segment, /*plus_is_space=*/false));
  }
  const Route* best = nullptr;
  std::set<std::string> allowed;
  for (const Route& route : routes_) {
    if (!MatchRoute(route, path_segments, raw_path, nullptr)) {
      continue;
    }
    if (route.method != route_method) {
      allowed.insert(route.method);
      if (route.method == "GET") {
        allowed.insert("HEAD");
      }
      continue;
    }
    if (best == nullptr || MoreSpecific(route, *best)) {
      best = &route;
    }
  }
  if (best != nullptr) {
    MatchRoute(*best, path_segments, raw_path, &match.path_params);
    match.handler = &best->handler;
    match.max_body_bytes = best->max_body_bytes;
    match.deferred_id = best->deferred_id;
  } else {
    match.allowed_methods.assign(allowed.begin(), allowed.end());
  }
  return match;
}

size_t Router::LargestBodyLimit() const {
  size_t largest = 0;
  for (const Route& route : routes_) {
    largest = std::max(largest, route.max_body_bytes);
  }
  return largest;
}

}  // namespace expanse::http
