#include "http/message.h"

#include <strings.h>

#include <utility>

namespace expanse::http {

std::string_view Request::PathParam(std::string_view name) const {
  const auto it = path_params.find(name);
  return it == path_params.end() ? std::string_view() : std::string_view(it->second);
}

std::optional<std::string_view> Request::QueryParam(std::string_view name) const {
  const auto it = query_params.find(name);
  if (it == query_params.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<std::string_view> Request::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key.size() == name.size() && strncasecmp(key.data(), name.data(), name.size()) == 0) {
      return value;
    }
  }
  return std::nullopt;
}

Response JsonResponse(int status, std::string body) {
  Response response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

}  // namespace expanse::http
