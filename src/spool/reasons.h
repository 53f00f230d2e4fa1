// Why a spool entry was refused: the stable snake_case codes used as Status reasons, as
// counter keys in DrainStats and as the last part of a quarantine entry's name.
#ifndef EXPANSE_SPOOL_REASONS_H_
#define EXPANSE_SPOOL_REASONS_H_

namespace expanse::spool::reason {

// Found by looking at the directory entry before reading any byte.
inline constexpr char kSymlink[] = "symlink";
inline constexpr char kHardlink[] = "hardlink";
inline constexpr char kNotRegular[] = "not_regular";
inline constexpr char kNotDirectory[] = "not_directory";
inline constexpr char kWrongOwner[] = "wrong_owner";
inline constexpr char kTooLarge[] = "too_large";
inline constexpr char kUnexpectedName[] = "unexpected_name";
inline constexpr char kUnreadable[] = "unreadable";
inline constexpr char kPermissionDenied[] = "permission_denied";  // its mode keeps us out
// Found by decoding the bytes.
inline constexpr char kBadMagic[] = "bad_magic";
inline constexpr char kBadVersion[] = "bad_version";
inline constexpr char kTruncated[] = "truncated";
inline constexpr char kTrailingBytes[] = "trailing_bytes";
inline constexpr char kBadChecksum[] = "bad_checksum";
inline constexpr char kMalformed[] = "malformed";
// Found by comparing the decoded header with where the file sits.
inline constexpr char kHostMismatch[] = "host_mismatch";
inline constexpr char kNameMismatch[] = "name_mismatch";
// Found by the sink: records none of which the controller could take (kDataLoss from the
// sink, unless it named its own reason), or the sink threw on the file.
inline constexpr char kRefusedBySink[] = "refused_by_sink";
inline constexpr char kSinkException[] = "sink_exception";

}  // namespace expanse::spool::reason

#endif  // EXPANSE_SPOOL_REASONS_H_
