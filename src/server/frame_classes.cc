#include "server/frame_classes.h"

#include <algorithm>
#include <array>

namespace expanse::server {
namespace {

struct Pattern {
  std::string_view path;      // a fragment of the file path ("" = any file)
  std::string_view function;  // the function exactly ("" = any function)
  FrameClass what;
};

// Most specific first: the first match wins. Third-party libraries are matched under
// site-packages or dist-packages ("packages/<name>/"), so a user's own directory called
// "datasets" does not make every frame of their script input.
constexpr std::array kPatterns = {
    // Background threads that wait by design: a stack through them says nothing about why the
    // GPUs wait (torchrun's elastic agent, network clients such as loggers and trackers).
    Pattern{"torch/distributed/elastic/", "", FrameClass::kOther},
    Pattern{"/ssl.py", "", FrameClass::kOther},
    Pattern{"/socket.py", "", FrameClass::kOther},
    Pattern{"/selectors.py", "", FrameClass::kOther},
    Pattern{"/http/client.py", "", FrameClass::kOther},
    // Collectives.
    Pattern{"torch/distributed/", "", FrameClass::kCollective},
    Pattern{"deepspeed/comm/", "", FrameClass::kCollective},
    Pattern{"packages/horovod/", "", FrameClass::kCollective},
    Pattern{"packages/mpi4py/", "", FrameClass::kCollective},
    Pattern{"", "all_reduce", FrameClass::kCollective},
    Pattern{"", "allreduce", FrameClass::kCollective},
    Pattern{"", "all_gather", FrameClass::kCollective},
    Pattern{"", "all_gather_into_tensor", FrameClass::kCollective},
    Pattern{"", "reduce_scatter", FrameClass::kCollective},
    Pattern{"", "reduce_scatter_tensor", FrameClass::kCollective},
    Pattern{"", "all_to_all", FrameClass::kCollective},
    Pattern{"", "broadcast", FrameClass::kCollective},
    Pattern{"", "barrier", FrameClass::kCollective},
    // Device synchronisation.
    Pattern{"torch/cuda/", "synchronize", FrameClass::kSync},
    Pattern{"torch/cuda/streams.py", "", FrameClass::kSync},
    Pattern{"cupy/", "synchronize", FrameClass::kSync},
    Pattern{"", "block_until_ready", FrameClass::kSync},
    Pattern{"", "cuda_synchronize", FrameClass::kSync},
    // Input: loaders, readers, decoders.
    Pattern{"torch/utils/data/", "", FrameClass::kInput},
    Pattern{"torchvision/io/", "", FrameClass::kInput},
    Pattern{"torchvision/datasets/", "", FrameClass::kInput},
    Pattern{"packages/PIL/", "", FrameClass::kInput},
    Pattern{"packages/imageio/", "", FrameClass::kInput},
    Pattern{"packages/h5py/", "", FrameClass::kInput},
    Pattern{"numpy/lib/npyio.py", "", FrameClass::kInput},
    Pattern{"numpy/lib/format.py", "", FrameClass::kInput},
    Pattern{"pandas/io/", "", FrameClass::kInput},
    Pattern{"packages/pyarrow/", "", FrameClass::kInput},
    Pattern{"packages/datasets/", "", FrameClass::kInput},
    Pattern{"packages/webdataset/", "", FrameClass::kInput},
    Pattern{"packages/decord/", "", FrameClass::kInput},
    Pattern{"", "__getitem__", FrameClass::kInput},
    Pattern{"", "read", FrameClass::kInput},
    Pattern{"", "readinto", FrameClass::kInput},
    Pattern{"", "readline", FrameClass::kInput},
    Pattern{"", "readlines", FrameClass::kInput},
    Pattern{"", "imread", FrameClass::kInput},
    Pattern{"", "decode", FrameClass::kInput},
};

// Threads and processes whose every stack says nothing about why the GPUs wait, wherever the
// frame is in the stack (they are the roots of their threads, so nothing of the job's own
// wraps them): PyTorch's pin-memory thread waits on its queue by design, and a DataLoader
// worker loads data whether or not the training loop waits for it (the main thread's wait in
// dataloader.py is the evidence of that). Leaf-first matching would call them input.
constexpr std::array<std::string_view, 2> kBackgroundRoots = {
    "torch/utils/data/_utils/pin_memory.py",
    "torch/utils/data/_utils/worker.py",
};

// "file.py:function:line" -> file and function. A frame without two colons has no function.
void SplitFrame(std::string_view frame, std::string_view* file, std::string_view* function) {
  const size_t last = frame.rfind(':');
  if (last == std::string_view::npos || last == 0) {
    *file = frame;
    *function = {};
    return;
  }
  const size_t middle = frame.rfind(':', last - 1);
  if (middle == std::string_view::npos) {
    *file = frame.substr(0, last);
    *function = {};
    return;
  }
  *file = frame.substr(0, middle);
  *function = frame.substr(middle + 1, last - middle - 1);
}

// The first pattern `frame` matches, or nullptr.
const Pattern* Match(std::string_view frame) {
  std::string_view file, function;
  SplitFrame(frame, &file, &function);
  for (const Pattern& p : kPatterns) {
    if (!p.path.empty() && file.find(p.path) == std::string_view::npos)
      continue;
    if (!p.function.empty() && function != p.function)
      continue;
    return &p;
  }
  return nullptr;
}

}  // namespace

FrameClass ClassifyFrame(std::string_view frame) {
  const Pattern* p = Match(frame);
  return p != nullptr ? p->what : FrameClass::kOther;
}

std::string_view FrameClassName(FrameClass c) {
  switch (c) {
    case FrameClass::kInput:
      return "input";
    case FrameClass::kCollective:
      return "collective";
    case FrameClass::kSync:
      return "sync";
    case FrameClass::kOther:
      break;
  }
  return "other";
}

FrameClass ClassifyStack(std::string_view folded, std::string_view* frame) {
  if (frame != nullptr)
    *frame = {};
  for (const std::string_view root : kBackgroundRoots) {
    if (folded.find(root) != std::string_view::npos)
      return FrameClass::kOther;
  }
  size_t end = folded.size();
  while (end > 0) {
    const size_t start = folded.rfind(';', end - 1);
    const size_t from = start == std::string_view::npos ? 0 : start + 1;
    const Pattern* p = Match(folded.substr(from, end - from));
    if (p != nullptr && p->what == FrameClass::kOther)
      return FrameClass::kOther;  // a background thread, whatever called it
    if (p != nullptr) {
      if (frame != nullptr)
        *frame = folded.substr(from, end - from);
      return p->what;
    }
    if (start == std::string_view::npos)
      break;
    end = start;
  }
  return FrameClass::kOther;
}

FrameClass StackClassShares::Dominant(double* share) const {
  FrameClass best = FrameClass::kOther;
  int64_t most = 0;
  for (const auto& [c, n] :
       {std::pair{FrameClass::kInput, input}, std::pair{FrameClass::kCollective, collective},
        std::pair{FrameClass::kSync, sync}}) {
    if (n > most) {
      best = c;
      most = n;
    }
  }
  *share = samples > 0 ? static_cast<double>(most) / static_cast<double>(samples) : 0;
  return best;
}

StackClassShares ClassifyStacks(const std::vector<store::StackTotal>& stacks) {
  StackClassShares out;
  out.gpu_idle_only = std::any_of(stacks.begin(), stacks.end(),
                                  [](const store::StackTotal& s) { return s.gpu_idle_count > 0; });
  for (const store::StackTotal& s : stacks) {
    const int64_t n = out.gpu_idle_only ? s.gpu_idle_count : s.count;
    if (n <= 0)
      continue;
    out.samples += n;
    switch (ClassifyStack(s.folded)) {
      case FrameClass::kInput:
        out.input += n;
        break;
      case FrameClass::kCollective:
        out.collective += n;
        break;
      case FrameClass::kSync:
        out.sync += n;
        break;
      case FrameClass::kOther:
        break;
    }
  }
  return out;
}

}  // namespace expanse::server
