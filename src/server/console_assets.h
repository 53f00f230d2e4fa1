// The web console's static files (console/src plus the charting library from console's npm
// install), compiled into expanse-server by cmake/EmbedFiles.cmake so the server needs no asset
// directory and no network at run time.
#ifndef EXPANSE_SERVER_CONSOLE_ASSETS_H_
#define EXPANSE_SERVER_CONSOLE_ASSETS_H_

#include <cstddef>
#include <string_view>

namespace expanse::server {

struct EmbeddedFile {
  const char* name;  // path below /assets/, e.g. "app.js", "pages/jobs.js", "vendor/uPlot.min.css"
  const unsigned char* data;
  size_t size;
};

extern const EmbeddedFile kConsoleAssets[];
extern const size_t kConsoleAssetsCount;

// The asset called `name`, or null.
const EmbeddedFile* FindConsoleAsset(std::string_view name);

// Content-Type from the file name's extension; application/octet-stream when unknown.
std::string_view ConsoleContentType(std::string_view name);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_CONSOLE_ASSETS_H_
