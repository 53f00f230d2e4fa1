// Router: maps (method, path) to a handler, with path parameters. Pure data structure
// with no I/O; the Listener feeds it every request.
//
// Patterns are absolute paths split at '/'. A segment is matched literally, except
//   :name   matches one non-empty segment and stores it as path parameter `name`;
//   *name   (last segment only) matches the rest of the path, possibly empty or
//           containing '/'.
// The path is given as sent (percent-encoded): it is split at the '/' sent, and each segment
// is decoded before it is compared or stored, so "/jobs/a%2Fb" has the one parameter "a/b".
// Matching is exact: "/jobs" does not match "/jobs/". When several routes match, the
// most specific wins, comparing segment by segment: literal before :param before
// *rest ("/jobs/summary" beats "/jobs/:id" whatever the registration order).
//
// A route may carry its own body limit (max_body_bytes), which the Listener applies while it
// reads the body, before the handler runs.

#ifndef EXPANSE_HTTP_ROUTER_H_
#define EXPANSE_HTTP_ROUTER_H_

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "http/message.h"

namespace expanse::http {

class Router {
 public:
  struct Match {
    const Handler* handler = nullptr;  // null when nothing matched
    size_t max_body_bytes = 0;         // the matched route's; 0: none of its own
    size_t deferred_id = 0;            // the matched route's; 0: an ordinary route
    std::map<std::string, std::string, std::less<>> path_params;
    // When handler is null: the methods that have a route for this path (for 405
    // and its Allow header). Empty means no route has this path: 404.
    std::vector<std::string> allowed_methods;
  };

  // kInvalidArgument for a malformed pattern (not starting with '/', an empty or
  // duplicate parameter name, '*' not last) or one that duplicates the shape of an
  // existing route for the same method. `method` is upper-case, e.g. "GET".
  // `max_body_bytes`: the most request body bytes the route accepts; 0 leaves it to the
  // caller's default. `deferred_id`: a caller's tag handed back in Match (the Listener's
  // long-poll routes, whose `handler` is then never called); 0 for none.
  Status Add(std::string_view method, std::string_view pattern, Handler handler,
             size_t max_body_bytes = 0, size_t deferred_id = 0);

  // HEAD requests match GET routes. The returned handler points into the router and
  // stays valid while the router lives and no route is added. `raw_path`: as sent, not yet
  // percent-decoded.
  Match Find(std::string_view method, std::string_view raw_path) const;

  // The largest max_body_bytes of any route; 0 when none has one.
  size_t LargestBodyLimit() const;

 private:
  enum class SegmentKind { kLiteral = 0, kParam = 1, kRest = 2 };  // order = precedence
  struct Segment {
    SegmentKind kind;
    std::string text;  // the literal, or the parameter name
  };
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<Segment> segments;
    Handler handler;
    size_t max_body_bytes = 0;
    size_t deferred_id = 0;
  };

  static bool MatchRoute(const Route& route, const std::vector<std::string>& path_segments,
                         std::string_view raw_path,
                         std::map<std::string, std::string, std::less<>>* params);
  static bool MoreSpecific(const Route& a, const Route& b);

  std::vector<Route> routes_;
};

}  // namespace expanse::http

#endif  // EXPANSE_HTTP_ROUTER_H_
