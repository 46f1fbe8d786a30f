// SPDX-License-Identifier: Apache-2.0
// VKPAGED_DECODE_TUNE's parser (ops/decode_tuning.cpp): every knob in its range, and every
// malformed text refused naming the variable, the key and the value. No GPU.
#include <gtest/gtest.h>

#include <string>

#include "ops/decode_tuning.hpp"
#include "support/expect_error.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::test {
namespace {

using detail::DecodeTuning;
using detail::parse_decode_tuning;

void expect_tune_refused(const std::string& text, const std::vector<std::string>& mentions) {
  try {
    parse_decode_tuning(text);
    ADD_FAILURE() << "accepted \"" << text << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("VKPAGED_DECODE_TUNE: ", 0), 0u) << what;
    for (const auto& m : mentions) EXPECT_NE(what.find(m), std::string::npos) << "'" << m << "' not in: " << what;
  }
}

TEST(DecodeTuningParse, NothingGivesTheDefaults) {
  EXPECT_EQ(parse_decode_tuning(""), DecodeTuning{});
  const DecodeTuning t;
  EXPECT_EQ(t.lanes, 0u);
  EXPECT_EQ(t.workgroup, 0u);
  EXPECT_EQ(t.units, 4u);
  EXPECT_EQ(t.heads, 0u);
  EXPECT_EQ(t.matrix, 1u);
  EXPECT_EQ(t.subgroups, 0u);
  EXPECT_EQ(t.prefetch, 2u);
  EXPECT_EQ(t.qregs, 1u);
  EXPECT_EQ(t.pipeline, 2u);
  EXPECT_EQ(t.order, 2u);
  EXPECT_EQ(t.share, 2u);
  EXPECT_EQ(t.vbytes, 0u);
  EXPECT_EQ(t.fp8conv, 0u);
  EXPECT_EQ(t.f16math, 0u);
  EXPECT_EQ(t.vloads, 0u);
}

TEST(DecodeTuningParse, EveryKnobTakesItsRange) {
  const DecodeTuning t = parse_decode_tuning(
      "lanes=4,workgroup=128,units=8,heads=2,matrix=0,subgroups=3,prefetch=1,qregs=0,pipeline=0,order=1,share=0");
  EXPECT_EQ(t.lanes, 4u);
  EXPECT_EQ(t.workgroup, 128u);
  EXPECT_EQ(t.units, 8u);
  EXPECT_EQ(t.heads, 2u);
  EXPECT_EQ(t.matrix, 0u);
  EXPECT_EQ(t.subgroups, 3u);
  EXPECT_EQ(t.prefetch, 1u);
  EXPECT_EQ(t.qregs, 0u);
  EXPECT_EQ(t.pipeline, 0u);
  EXPECT_EQ(t.order, 1u);
  EXPECT_EQ(t.share, 0u);
  // The edges of each range, in any order; the keys not given keep their defaults.
  EXPECT_EQ(parse_decode_tuning("vbytes=4").vbytes, 4u);
  EXPECT_EQ(parse_decode_tuning("vbytes=8").vbytes, 8u);
  EXPECT_EQ(parse_decode_tuning("vbytes=16").vbytes, 16u);
  const DecodeTuning variants = parse_decode_tuning("fp8conv=1,f16math=3");
  EXPECT_EQ(variants.fp8conv, 1u);
  EXPECT_EQ(variants.f16math, 3u);
  EXPECT_EQ(parse_decode_tuning("f16math=2").f16math, 2u);
  EXPECT_EQ(parse_decode_tuning("vloads=8").vloads, 8u);
  const DecodeTuning edges = parse_decode_tuning("share=2,lanes=256,workgroup=1,units=64,heads=256,subgroups=32");
  EXPECT_EQ(edges.lanes, 256u);
  EXPECT_EQ(edges.workgroup, 1u);
  EXPECT_EQ(edges.units, 64u);
  EXPECT_EQ(edges.heads, 256u);
  EXPECT_EQ(edges.subgroups, 32u);
  EXPECT_EQ(edges.share, 2u);
  EXPECT_EQ(edges.matrix, 1u);
  EXPECT_EQ(edges.order, 2u);
  const DecodeTuning zeros = parse_decode_tuning("lanes=0,workgroup=0,units=1,heads=0,subgroups=0,prefetch=0,order=0");
  EXPECT_EQ(zeros.lanes, 0u);
  EXPECT_EQ(zeros.workgroup, 0u);
  EXPECT_EQ(zeros.units, 1u);
  EXPECT_EQ(zeros.prefetch, 0u);
  EXPECT_EQ(zeros.order, 0u);
  EXPECT_EQ(parse_decode_tuning("units=007").units, 7u);
}

TEST(DecodeTuningParse, RefusesUnknownKeys) {
  // Keys of experiments that are gone, misspellings, other case, spaces: all refused.
  expect_tune_refused("balanced=1", {"unknown key \"balanced\"", "value \"1\"", "lanes, workgroup"});
  expect_tune_refused("lanes=4,subgroup=2", {"unknown key \"subgroup\"", "\"2\""});
  expect_tune_refused("Lanes=4", {"unknown key \"Lanes\""});
  expect_tune_refused(" lanes=4", {"unknown key \" lanes\""});
  expect_tune_refused("=4", {"unknown key \"\"", "\"4\""});
}

TEST(DecodeTuningParse, RefusesItemsWithoutAnEqualsSign) {
  expect_tune_refused("lanes", {"item \"lanes\"", "not key=value"});
  expect_tune_refused("lanes=4,units", {"item \"units\"", "\"lanes=4,units\""});
  expect_tune_refused("lanes=4,", {"item \"\"", "not key=value"});
  expect_tune_refused(",lanes=4", {"item \"\""});
  expect_tune_refused("lanes=4,,units=2", {"item \"\""});
  expect_tune_refused(",", {"item \"\""});
}

TEST(DecodeTuningParse, RefusesEmptyAndNonNumericValues) {
  expect_tune_refused("units=", {"key \"units\" has an empty value", "1 to 64"});
  expect_tune_refused("units=four", {"key \"units\"", "value \"four\" is not a decimal number"});
  expect_tune_refused("units=4x", {"key \"units\"", "value \"4x\""});
  expect_tune_refused("units=-1", {"key \"units\"", "value \"-1\" is not a decimal number"});
  expect_tune_refused("units=+4", {"key \"units\"", "value \"+4\""});
  expect_tune_refused("units= 4", {"key \"units\"", "value \" 4\""});
  expect_tune_refused("units=0x10", {"key \"units\"", "value \"0x10\""});
  expect_tune_refused("units=2.5", {"key \"units\"", "value \"2.5\""});
  expect_tune_refused("lanes=4=4", {"key \"lanes\"", "value \"4=4\""});
}

TEST(DecodeTuningParse, RefusesValuesOutOfRange) {
  expect_tune_refused("lanes=3", {"key \"lanes\"", "value \"3\" is out of range", "0 or a power of two from 1 to 256"});
  expect_tune_refused("lanes=512", {"key \"lanes\"", "value \"512\" is out of range"});
  expect_tune_refused("workgroup=96", {"key \"workgroup\"", "value \"96\"", "power of two"});
  expect_tune_refused("workgroup=512", {"key \"workgroup\"", "value \"512\""});
  expect_tune_refused("units=0", {"key \"units\"", "value \"0\" is out of range (1 to 64)"});
  expect_tune_refused("units=65", {"key \"units\"", "value \"65\""});
  expect_tune_refused("heads=257", {"key \"heads\"", "value \"257\""});
  expect_tune_refused("matrix=2", {"key \"matrix\"", "value \"2\"", "0 to 1"});
  expect_tune_refused("subgroups=33", {"key \"subgroups\"", "value \"33\"", "0 to 32"});
  expect_tune_refused("prefetch=3", {"key \"prefetch\"", "value \"3\"", "0 to 2"});
  expect_tune_refused("qregs=2", {"key \"qregs\"", "value \"2\""});
  expect_tune_refused("pipeline=3", {"key \"pipeline\"", "value \"3\""});
  expect_tune_refused("order=3", {"key \"order\"", "value \"3\""});
  expect_tune_refused("share=3", {"key \"share\"", "value \"3\""});
  expect_tune_refused("vbytes=2", {"key \"vbytes\"", "value \"2\"", "0 or a power of two from 4 to 16"});
  expect_tune_refused("vbytes=12", {"key \"vbytes\"", "value \"12\""});
  expect_tune_refused("vbytes=32", {"key \"vbytes\"", "value \"32\""});
  expect_tune_refused("fp8conv=2", {"key \"fp8conv\"", "value \"2\"", "0 to 1"});
  expect_tune_refused("f16math=4", {"key \"f16math\"", "value \"4\"", "0 to 3"});
  expect_tune_refused("vloads=3", {"key \"vloads\"", "value \"3\"", "0 or a power of two from 1 to 8"});
  expect_tune_refused("vloads=16", {"key \"vloads\"", "value \"16\""});
  // Past 32 and 64 bits: out of range, not wrapped.
  expect_tune_refused("units=4294967300", {"key \"units\"", "value \"4294967300\" is out of range"});
  expect_tune_refused("units=99999999999999999999999", {"key \"units\"", "is out of range"});
}

TEST(DecodeTuningParse, RefusesAKeyGivenTwice) {
  expect_tune_refused("units=2,lanes=4,units=8", {"key \"units\" given twice", "value \"8\""});
}

}  // namespace
}  // namespace vkpaged::test
