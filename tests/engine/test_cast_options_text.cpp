// The one parser of cast options from text (parse_cast_options): every field reaches its
// CastOptions member, an empty field keeps the base, and bad text is an error that names the
// option and the text.
#include <gtest/gtest.h>

#include <string>

#include "castscope/cast.hpp"

namespace {

using namespace castscope;

TEST(CastOptionText, EveryFieldIsParsed) {
  const CastOptions o =
      parse_cast_options({"compress", "stochastic", "ceil", "ieee", "1:", "h64r5", "cpu"});
  EXPECT_EQ(o.mode, CastMode::Compress);
  EXPECT_EQ(o.round, Round::Stochastic);
  EXPECT_EQ(o.scale_mode, ScaleMode::Ceil);
  EXPECT_EQ(o.overflow, Overflow::IEEE);
  EXPECT_EQ(o.axis, 1);
  EXPECT_TRUE(o.flatten);
  EXPECT_FALSE(o.axis_auto);
  EXPECT_EQ(o.rotate.str(), "h64r5");
  EXPECT_EQ(o.device, Device::CPU);
  // The aliases the CLI accepts.
  const CastOptions b =
      parse_cast_options({.round = "nearest", .scale_mode = "auto", .device = "gpu"});
  EXPECT_EQ(b.round, Round::Away);
  EXPECT_EQ(b.scale_mode, ScaleMode::Midmax);
  EXPECT_EQ(b.device, Device::CUDA);
  EXPECT_TRUE(parse_cast_options({.axis = "auto"}).axis_auto);
}

TEST(CastOptionText, EmptyFieldsKeepTheBase) {
  CastOptions base;
  base.round = Round::Zero;
  base.seed = 17;
  base.threads = 3;
  base.axis = 0;
  const CastOptions o = parse_cast_options({.scale_mode = "option3"}, base);
  EXPECT_EQ(o.round, Round::Zero);
  EXPECT_EQ(o.seed, 17u);
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.axis, 0);
  EXPECT_EQ(o.scale_mode, ScaleMode::Option3);
}

// Each bad field: the error starts with the option as the caller spells it and quotes the text.
TEST(CastOptionText, BadTextNamesTheOptionAndTheText) {
  struct Case {
    CastOptionText text;
    const char* cli;  // the CLI's name
    const char* py;   // Python's keyword
  };
  const Case cases[] = {
      {{.mode = "real"}, "--mode", "mode"},
      {{.round = "up"}, "--round", "round"},
      {{.scale_mode = "huge"}, "--scale-mode", "scale_mode"},
      {{.overflow = "wrap"}, "--overflow", "overflow"},
      {{.axis = "x:"}, "--axis", "axis"},
      {{.rotate = "h7"}, "--rotate", "rotate"},
      {{.device = "tpu"}, "--device", "device"},
  };
  for (const Case& c : cases) {
    const CastOptionText& t = c.text;
    const std::string bad =
        t.mode + t.round + t.scale_mode + t.overflow + t.axis + t.rotate + t.device;
    for (const bool cli : {true, false}) {
      SCOPED_TRACE(bad);
      try {
        parse_cast_options(t, {}, cli ? "--" : "");
        ADD_FAILURE() << "accepted '" << bad << "'";
      } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(msg.rfind(std::string(cli ? c.cli : c.py) + ": ", 0), 0u) << msg;
        EXPECT_NE(msg.find("'" + bad + "'"), std::string::npos) << msg;
      }
    }
  }
}

}  // namespace
