// The web console's pages: GET / is the single page (index.html) and GET /assets/<path> its
// scripts, styles and the charting library, all compiled into the binary (console_assets.h).
// The page talks only to the console API on the same origin, so a strict Content-Security-Policy
// holds: no inline script, nothing from another origin, no framing.
#include <string>

#include "http/error.h"
#include "server/console_assets.h"
#include "server/routes.h"

namespace expanse::server {
namespace {

// Inline style attributes stay allowed: the charting library positions its cursor and legend
// through them. Scripts, connections and images are same-origin only.
constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'";

http::Response AssetResponse(const EmbeddedFile& file) {
  http::Response response;
  response.status = 200;
  response.content_type = std::string(ConsoleContentType(file.name));
  response.body.assign(reinterpret_cast<const char*>(file.data), file.size);
  // The assets change with the binary; revalidating each load keeps an upgraded server's page
  // and scripts consistent (they are small and served from memory).
  response.headers.emplace_back("Cache-Control", "no-cache");
  response.headers.emplace_back("Referrer-Policy", "no-referrer");
  response.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  response.headers.emplace_back("X-Frame-Options", "DENY");
  // At most one byte range is served (http/listener_handlers.cc); API answers take none.
  response.headers.emplace_back("Accept-Ranges", "bytes");
  return response;
}

}  // namespace

const EmbeddedFile* FindConsoleAsset(std::string_view name) {
  for (size_t i = 0; i < kConsoleAssetsCount; ++i) {
    if (name == kConsoleAssets[i].name)
      return &kConsoleAssets[i];
  }
  return nullptr;
}

std::string_view ConsoleContentType(std::string_view name) {
  struct Type {
    std::string_view extension;
    std::string_view content_type;
  };
  static constexpr Type kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".json", "application/json"},
  };
  for (const Type& t : kTypes) {
    if (name.ends_with(t.extension))
      return t.content_type;
  }
  return "application/octet-stream";
}

void RegisterConsolePageRoutes(http::Listener& listener) {
  auto index = [](const http::Request&) {
    const EmbeddedFile* page = FindConsoleAsset("index.html");
    if (page == nullptr)
      return http::ErrorResponse(500, "internal", "the console page is missing from this build");
    return AssetResponse(*page);
  };
  listener.Get("/", index);
  listener.Get("/index.html", index);
  listener.Get("/assets/*path", [](const http::Request& request) {
    const EmbeddedFile* file = FindConsoleAsset(request.PathParam("path"));
    if (file == nullptr)
      return http::ErrorResponse(404, "not_found", "no such console asset");
    return AssetResponse(*file);
  });
}

}  // namespace expanse::server
