// Internal to the slurm module: SLURM's TRES ("trackable resources") strings.
//
//  - tres_req_str / tres_alloc_str (squeue), AllocTRES (sacct): "cpu=4,mem=1G,node=2,billing=4,
//    gres/gpu=4" — totals for the whole job. gres/gpu appears only where the cluster tracks it
//    (AccountingStorageTRES=gres/gpu); verified on 22.05.8 with and without.
//  - tres_per_job / tres_per_node / tres_per_task / tres_per_socket (squeue): "gres:gpu:2" on
//    22.05 and 23.02 (verified on 22.05.8 for --gres, --gpus, --gpus-per-node and
//    --gpus-per-task); "gres/gpu:2" in later releases (assumed from their changelogs); with a
//    GPU type "gres:gpu:a100:2"; several items comma-separated.
//
// These strings come from users' requests in unusual shapes, so an item that does not parse is
// skipped rather than failing the whole listing: one odd job must not hide all the others.
#ifndef EXPANSE_SLURM_TRES_H_
#define EXPANSE_SLURM_TRES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace expanse::slurm::tres {

// "name=count" items by name ("cpu", "mem", "node", "gres/gpu", "gres/gpu:a100"). Memory
// ("mem", with a K/M/G/T/P suffix, MiB when none) is converted to MiB, rounded up.
std::map<std::string, int64_t> ParseTresCounts(std::string_view text);

// The GPUs in a parsed TRES count map: "gres/gpu", or when only typed entries are present the
// sum of "gres/gpu:<type>". nullopt when it names no GPUs.
std::optional<int64_t> GpusInTresCounts(const std::map<std::string, int64_t>& counts);

// The GPUs a tres_per_* string asks for, summed over its gpu items; a gpu item without a count
// means 1. nullopt when no item names GPUs.
std::optional<int64_t> GpusInTresPer(std::string_view text);

}  // namespace expanse::slurm::tres

#endif  // EXPANSE_SLURM_TRES_H_
