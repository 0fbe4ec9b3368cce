#include "features/preprocess.h"

#include <gtest/gtest.h>

namespace fednode {
TEST(Preprocess, Placeholder) { EXPECT_EQ(sidecar_path("a.pt"), "a.pt.preprocessing"); }
}
