// Entry points of a library the agent opened at run time (libcupti, libcuda): each looked up by
// name, the missing ones collected so one message names them all.
#ifndef EXPANSE_CAPTURE_CUDA_DL_SYMBOLS_H_
#define EXPANSE_CAPTURE_CUDA_DL_SYMBOLS_H_

#include <dlfcn.h>

#include <string>

namespace expanse::capture {

// Sets `out` to `name` in `handle`; false (and `name` appended to `missing`) when absent.
template <typename F>
bool ResolveSymbol(void* handle, const char* name, F& out, std::string& missing) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    missing += (missing.empty() ? "" : ", ") + std::string(name);
    return false;
  }
  out = reinterpret_cast<F>(symbol);
  return true;
}

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_CUDA_DL_SYMBOLS_H_
