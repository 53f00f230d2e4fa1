#include "slurm/hook_wiring_block.h"

#include <optional>
#include <string>

namespace expanse::slurm::wiring_block {
namespace {

constexpr std::string_view kBegin = "begin:";
constexpr std::string_view kOriginal = "orig:";
constexpr std::string_view kEnd = "end:";
constexpr std::string_view kNoFinalNewline = "noeol";
constexpr std::string_view kNewlineAdded = "newline-added";
constexpr std::string_view kNote =
    " managed by expanse compute install; uninstall restores the lines below";

struct PhysicalLine {
  std::string_view text;  // without the newline
  std::size_t begin = 0;
  std::size_t end = 0;  // past the newline, if any
};

std::vector<PhysicalLine> SplitPhysicalLines(std::string_view contents) {
  std::vector<PhysicalLine> lines;
  std::size_t pos = 0;
  while (pos < contents.size()) {
    const std::size_t newline = contents.find('\n', pos);
    const std::size_t text_end = newline == std::string_view::npos ? contents.size() : newline;
    const std::size_t end = newline == std::string_view::npos ? contents.size() : newline + 1;
    lines.push_back({contents.substr(pos, text_end - pos), pos, end});
    pos = end;
  }
  return lines;
}

// The part of a marker line after kPrefix, without a CR our own CRLF line ending left;
// nullopt for a line that is not a marker.
std::optional<std::string_view> MarkerBody(std::string_view line) {
  if (!line.starts_with(kPrefix))
    return std::nullopt;
  line.remove_prefix(kPrefix.size());
  if (line.ends_with('\r'))
    line.remove_suffix(1);
  return line;
}

std::string_view BeginKey(std::string_view body) {
  body.remove_prefix(kBegin.size());
  return body.substr(0, body.find(' '));
}

Status Damaged(int line, const std::string& what) {
  return InvalidArgumentError("line " + std::to_string(line) +
                              ": damaged Expanse hook wiring block (" + what +
                              "); restore the original lines by hand")
      .WithReason("slurm_conf_wiring_damaged");
}

// Reads the block whose begin marker is lines[*index]; leaves *index on its end marker.
Result<Block> ReadBlock(const std::vector<PhysicalLine>& lines, std::size_t* index) {
  Block block;
  const PhysicalLine& begin = lines[*index];
  block.begin = begin.begin;
  block.begin_line = static_cast<int>(*index) + 1;
  block.key = std::string(BeginKey(*MarkerBody(begin.text)));
  bool have_assignment = false;
  for (std::size_t i = *index + 1; i < lines.size(); ++i) {
    const int line_number = static_cast<int>(i) + 1;
    const std::optional<std::string_view> body = MarkerBody(lines[i].text);
    if (!body.has_value()) {
      if (have_assignment)
        return Damaged(line_number, "a second line between the markers");
      have_assignment = true;
      block.assignment = std::string(lines[i].text);
      block.assignment_begin = lines[i].begin;
      block.assignment_end = lines[i].end;
      continue;
    }
    if (body->starts_with(kEnd)) {
      if (body->substr(kEnd.size()) != block.key)
        return Damaged(line_number, "the end marker names another key");
      if (!have_assignment)
        return Damaged(line_number, "no assignment between the markers");
      block.end = lines[i].end;
      *index = i;
      return block;
    }
    if (have_assignment)
      return Damaged(line_number, "a marker after the assignment");
    if (body->starts_with(kOriginal) && !block.no_final_newline && !block.newline_added) {
      // Verbatim, so a CR of the original line is kept: only our own markers drop theirs.
      block.original_lines.emplace_back(lines[i].text.substr(kPrefix.size() + kOriginal.size()));
    } else if (*body == kNoFinalNewline && !block.appended() && !block.no_final_newline) {
      block.no_final_newline = true;
    } else if (*body == kNewlineAdded && block.appended() && !block.newline_added) {
      block.newline_added = true;
    } else {
      return Damaged(line_number, "unexpected marker");
    }
  }
  return Damaged(block.begin_line, "no end marker");
}

}  // namespace

std::string Block::OriginalText() const {
  std::string text;
  for (const std::string& line : original_lines)
    text += line + "\n";
  if (no_final_newline && !text.empty())
    text.pop_back();
  return text;
}

Result<std::vector<Block>> FindBlocks(std::string_view contents) {
  const std::vector<PhysicalLine> lines = SplitPhysicalLines(contents);
  std::vector<Block> blocks;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::optional<std::string_view> body = MarkerBody(lines[i].text);
    if (!body.has_value())
      continue;
    if (!body->starts_with(kBegin))
      return Damaged(static_cast<int>(i) + 1, "a marker outside a block");
    if (BeginKey(*body).empty())
      return Damaged(static_cast<int>(i) + 1, "no key in the begin marker");
    EXPANSE_ASSIGN_OR_RETURN(Block block, ReadBlock(lines, &i));
    blocks.push_back(std::move(block));
  }
  return blocks;
}

std::string RenderReplacement(std::string_view key, std::string_view target,
                              std::string_view original, std::string_view eol) {
  const std::string prefix(kPrefix);
  std::string block = prefix + std::string(kBegin) + std::string(key) + std::string(kNote);
  block += eol;
  for (const PhysicalLine& line : SplitPhysicalLines(original))
    block += prefix + std::string(kOriginal) + std::string(line.text) + "\n";
  if (!original.ends_with('\n'))
    block += prefix + std::string(kNoFinalNewline) + std::string(eol);
  block += std::string(key) + "=" + std::string(target) + std::string(eol);
  block += prefix + std::string(kEnd) + std::string(key) + std::string(eol);
  return block;
}

std::string RenderAppended(std::string_view key, std::string_view target,
                           std::string_view file_tail, std::string_view eol) {
  const std::string prefix(kPrefix);
  const bool add_newline = !file_tail.empty() && !file_tail.ends_with('\n');
  std::string block = add_newline ? "\n" : "";
  block += prefix + std::string(kBegin) + std::string(key) + std::string(kNote);
  block += eol;
  if (add_newline)
    block += prefix + std::string(kNewlineAdded) + std::string(eol);
  block += std::string(key) + "=" + std::string(target) + std::string(eol);
  block += prefix + std::string(kEnd) + std::string(key) + std::string(eol);
  return block;
}

Splice RestoreOne(std::string_view contents, const std::vector<Block>& blocks, std::size_t index) {
  const Block& block = blocks[index];
  const bool at_end = block.end == contents.size();
  const Block* heir = nullptr;  // the next block, when only unflagged appended blocks follow
  std::size_t next = block.end;
  for (std::size_t i = index + 1; i < blocks.size() && !at_end; ++i) {
    if (blocks[i].begin != next || !blocks[i].appended() || blocks[i].newline_added)
      break;
    next = blocks[i].end;
    if (next == contents.size())
      heir = &blocks[index + 1];
  }
  Splice splice{block.begin, block.end, ""};
  bool pass_on = false;
  if (block.appended()) {
    if (block.newline_added && at_end && block.begin > 0 && contents[block.begin - 1] == '\n')
      --splice.begin;
    pass_on = block.newline_added && !at_end;
  } else {
    splice.text = block.OriginalText();
    if (block.no_final_newline && !at_end) {
      splice.text += '\n';
      pass_on = true;
    }
  }
  if (pass_on && heir != nullptr) {
    const std::size_t newline = contents.find('\n', heir->begin);
    const std::string_view begin_line = contents.substr(heir->begin, newline + 1 - heir->begin);
    splice.text += begin_line;
    splice.text += std::string(kPrefix) + std::string(kNewlineAdded) +
                   (begin_line.ends_with("\r\n") ? "\r\n" : "\n");
    splice.end = newline + 1;
  }
  return splice;
}

Result<std::string> Restore(std::string_view contents,
                            const std::function<bool(const Block&)>& select) {
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<Block> blocks, FindBlocks(contents));
  // at_end[i]: nothing but blocks restored to nothing follows block i.
  std::vector<bool> at_end(blocks.size(), false);
  bool tail_empty = true;
  std::size_t tail_begin = contents.size();
  for (std::size_t i = blocks.size(); i-- > 0;) {
    tail_empty = tail_empty && blocks[i].end == tail_begin;
    at_end[i] = tail_empty;
    tail_empty = tail_empty && select(blocks[i]) && blocks[i].appended();
    tail_begin = blocks[i].begin;
  }
  std::string out;
  std::size_t copied = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const Block& block = blocks[i];
    out.append(contents.substr(copied, block.begin - copied));
    copied = block.end;
    if (!select(block)) {
      out.append(contents.substr(block.begin, block.end - block.begin));
      continue;
    }
    if (block.appended()) {
      if (block.newline_added && at_end[i] && out.ends_with('\n'))
        out.pop_back();
      continue;
    }
    std::string original = block.OriginalText();
    // A file someone extended after the block keeps the newline between the two.
    if (block.no_final_newline && !at_end[i])
      original += "\n";
    out += original;
  }
  out.append(contents.substr(copied));
  return out;
}

}  // namespace expanse::slurm::wiring_block
