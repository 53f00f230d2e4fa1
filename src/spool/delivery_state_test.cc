#include "spool/delivery_state.h"

#include <gtest/gtest.h>

namespace expanse::spool {
namespace {

TEST(DeliveryStateTest, RemembersTheHighestSequencePerHostAndBoot) {
  DeliveryState state;
  EXPECT_FALSE(state.WasDelivered("n1", "b1", 1));
  state.MarkDelivered("n1", "b1", 1, 100);
  state.MarkDelivered("n1", "b1", 2, 200);
  EXPECT_TRUE(state.WasDelivered("n1", "b1", 1));
  EXPECT_TRUE(state.WasDelivered("n1", "b1", 2));
  EXPECT_FALSE(state.WasDelivered("n1", "b1", 3));
  EXPECT_FALSE(state.WasDelivered("n1", "b2", 1));
  EXPECT_FALSE(state.WasDelivered("n2", "b1", 1));
  EXPECT_EQ(state.LastDeliveredMs("n1", "b1"), 200);
  EXPECT_EQ(state.LastDeliveredMs("n1", "b2"), std::nullopt);
}

TEST(DeliveryStateTest, AFileSkippedOnTheWayUpIsStillDeliverable) {
  DeliveryState state;
  state.MarkDelivered("n1", "b1", 1, 1);
  state.MarkDelivered("n1", "b1", 4, 2);
  EXPECT_FALSE(state.WasDelivered("n1", "b1", 2));
  EXPECT_FALSE(state.WasDelivered("n1", "b1", 3));
  state.MarkDelivered("n1", "b1", 2, 3);
  EXPECT_TRUE(state.WasDelivered("n1", "b1", 2));
  EXPECT_FALSE(state.WasDelivered("n1", "b1", 3));
  // Only the newest kMaxGapsPerBoot gaps are kept.
  state.MarkDelivered("n1", "b1", 100, 4);
  EXPECT_TRUE(state.WasDelivered("n1", "b1", 3));
  EXPECT_TRUE(state.WasDelivered("n1", "b1", 91));
  EXPECT_FALSE(state.WasDelivered("n1", "b1", 92));
  EXPECT_FALSE(state.WasDelivered("n1", "b1", 99));
}

TEST(DeliveryStateTest, KeepsTheMostRecentBootsOfAHost) {
  DeliveryState state;
  for (int boot = 0; boot < 5; ++boot)
    state.MarkDelivered("n1", "b" + std::to_string(boot), 1, boot);
  EXPECT_FALSE(state.WasDelivered("n1", "b0", 1));
  for (int boot = 1; boot < 5; ++boot)
    EXPECT_TRUE(state.WasDelivered("n1", "b" + std::to_string(boot), 1));
}

TEST(DeliveryStateTest, SerializesAndParsesBack) {
  DeliveryState state;
  state.MarkDelivered("n1", "b1", 1, 100);
  state.MarkDelivered("n1", "b1", 5, 200);
  state.MarkDelivered("n1", "b2", 7, 300);
  state.MarkDelivered("node-2.x", "c", 3, -5);
  Result<DeliveryState> back = DeliveryState::Parse(state.Serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, state);
  EXPECT_TRUE(DeliveryState::Parse(DeliveryState().Serialize()).ok());
}

TEST(DeliveryStateTest, ParseRefusesDamage) {
  DeliveryState state;
  state.MarkDelivered("n1", "b1", 5, 200);
  const std::string text = state.Serialize();
  for (size_t cut = 0; cut < text.size(); ++cut)
    EXPECT_FALSE(DeliveryState::Parse(text.substr(0, cut)).ok()) << cut;
  std::string flipped = text;
  flipped[text.find("b1")] = 'c';
  Result<DeliveryState> parsed = DeliveryState::Parse(flipped);
  EXPECT_EQ(parsed.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(parsed.status().reason(), "spool_state_corrupt");
}

}  // namespace
}  // namespace expanse::spool
