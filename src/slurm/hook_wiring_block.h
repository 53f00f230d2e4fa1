// Internal to src/slurm: the marker block that replaces a hook assignment in slurm.conf and
// carries the original lines, so that uninstall restores the file byte for byte. The format is
// docs/formats/slurm-conf-patch.md; hook_wiring.h is the public side.
//
//   #expanse-wiring:v1:begin:Prolog <note for the operator>
//   #expanse-wiring:v1:orig:<original physical line, verbatim, without its newline>   (0..n)
//   #expanse-wiring:v1:noeol            (the last original line had no newline)
//   #expanse-wiring:v1:newline-added    (an appended block: the file lacked a final newline)
//   Prolog=/srv/expanse/libexec/expanse-prolog
//   #expanse-wiring:v1:end:Prolog
#ifndef EXPANSE_SLURM_HOOK_WIRING_BLOCK_H_
#define EXPANSE_SLURM_HOOK_WIRING_BLOCK_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::slurm::wiring_block {

inline constexpr std::string_view kPrefix = "#expanse-wiring:v1:";

struct Block {
  std::string key;  // as in the begin line
  std::size_t begin = 0;
  std::size_t end = 0;  // one past the end line's newline (or the end of the file)
  int begin_line = 0;   // 1-based physical line of the begin marker
  std::vector<std::string> original_lines;  // verbatim, without newlines
  bool no_final_newline = false;
  bool newline_added = false;
  // The assignment line between the markers, without its newline, and its byte range.
  std::string assignment;
  std::size_t assignment_begin = 0;
  std::size_t assignment_end = 0;

  bool appended() const { return original_lines.empty(); }
  // The original lines as they were in the file, each with its newline.
  std::string OriginalText() const;
};

// Every block in `contents`, in order. kInvalidArgument (reason slurm_conf_wiring_damaged),
// naming the line, when a block is incomplete or holds lines of unknown shape: a file someone
// edited inside a block must be repaired by hand rather than guessed at.
Result<std::vector<Block>> FindBlocks(std::string_view contents);

// The block text replacing `original` (whole physical lines, possibly without a final newline)
// with `key=target`. `eol` is "\n" or "\r\n", for the block's own lines.
std::string RenderReplacement(std::string_view key, std::string_view target,
                              std::string_view original, std::string_view eol);
// The block text appended to a file that ends with `file_tail` (its last bytes; "" when empty).
std::string RenderAppended(std::string_view key, std::string_view target,
                           std::string_view file_tail, std::string_view eol);

// A change to a file: bytes [begin, end) become `text`.
struct Splice {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::string text;
};

// The change that puts blocks[index] (one of FindBlocks(contents)) back to its original lines
// and leaves the other blocks in place. When only appended blocks follow it, the next one takes
// over its record of a missing final newline, so a later full restore still gives the original
// bytes.
Splice RestoreOne(std::string_view contents, const std::vector<Block>& blocks, std::size_t index);

// `contents` with the blocks `select` picks put back to their original lines. A block that is
// followed only by blocks restored to nothing gets its missing final newline back; elsewhere the
// newline stays, since someone has added lines after it.
Result<std::string> Restore(std::string_view contents,
                            const std::function<bool(const Block&)>& select);

}  // namespace expanse::slurm::wiring_block

#endif  // EXPANSE_SLURM_HOOK_WIRING_BLOCK_H_
