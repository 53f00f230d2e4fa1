// What a Python stack was waiting on, read from its frames: loading input (DataLoader, file
// reads, decoding), a collective (torch.distributed, NCCL/MPI wrappers), or a device
// synchronisation. The verdicts (docs/formats/verdicts.md) use the share of a job's stack
// samples in each class to say why its GPUs sat idle.
//
// A frame is "file.py:function:line" (the daemon's folded form). The class of a stack is that of
// the frame nearest its leaf that has one: a DataLoader worker blocked in a file read is input,
// whatever called the loader. The patterns are path fragments and function names of the
// libraries users run (PyTorch, torchvision, PIL, NumPy, h5py, pandas, Hugging Face datasets,
// DeepSpeed, Horovod, mpi4py, CuPy, JAX); the table is in frame_classes.cc.
#ifndef EXPANSE_SERVER_FRAME_CLASSES_H_
#define EXPANSE_SERVER_FRAME_CLASSES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store/job_store.h"

namespace expanse::server {

enum class FrameClass { kOther, kInput, kCollective, kSync };

// "input", "collective", "sync", "other".
std::string_view FrameClassName(FrameClass c);

// The class of one frame.
FrameClass ClassifyFrame(std::string_view frame);
// The class of a folded stack (root first, ';'-separated), from its leaf up; `frame`, when
// given, gets the frame that decided it (empty for kOther).
FrameClass ClassifyStack(std::string_view folded, std::string_view* frame = nullptr);

// Samples of a set of stacks per class. When some were taken while the job's GPUs were idle
// (burst mode), only those count: they are the ones that say why the GPUs waited.
struct StackClassShares {
  int64_t samples = 0;
  int64_t input = 0;
  int64_t collective = 0;
  int64_t sync = 0;
  bool gpu_idle_only = false;  // counted gpu_idle_count, not count

  // The class with the most samples among input, collective and sync, and its share of all;
  // kOther with share 0 when none has any.
  FrameClass Dominant(double* share) const;
};
StackClassShares ClassifyStacks(const std::vector<store::StackTotal>& stacks);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_FRAME_CLASSES_H_
