#include "server/s3_segment_store.h"

#include <string>

#include <gtest/gtest.h>

namespace expanse::server {
namespace s3_segment_store_test {
namespace {

TEST(S3ErrorCodeTest, TheCodeOfAnS3ErrorBody) {
  EXPECT_EQ(S3ErrorCode("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
                        "<Message>Please reduce your request rate.</Message></Error>"),
            "SlowDown");
  EXPECT_EQ(S3ErrorCode("<Error><Code>XAmzContentSHA256Mismatch</Code></Error>"),
            "XAmzContentSHA256Mismatch");
  EXPECT_EQ(S3ErrorCode("<html>502 Bad Gateway</html>"), "");
  EXPECT_EQ(S3ErrorCode("<Code>" + std::string(kMaxS3ErrorCodeBytes + 1, 'A') + "</Code>"), "");
  EXPECT_EQ(S3ErrorCode("<Code>NoSuchKey"), "");
}

// The code goes into the store's error messages and the server's log: it used to be whatever
// bytes the answer held between the tags, a terminal escape or a line break included.
TEST(S3ErrorCodeTest, ACodeOfOtherBytesIsNotRepeated) {
  EXPECT_EQ(S3ErrorCode("<Error><Code>\x1b]0;owned\x07</Code></Error>"), "");
  EXPECT_EQ(S3ErrorCode("<Error><Code>Slow\nlevel=error msg=forged</Code></Error>"), "");
  EXPECT_EQ(S3ErrorCode("<Error><Code>Slow Down</Code></Error>"), "");
  EXPECT_EQ(S3ErrorCode("<Error><Code>\xc3\xa9</Code></Error>"), "");
}

}  // namespace
}  // namespace s3_segment_store_test
}  // namespace expanse::server
