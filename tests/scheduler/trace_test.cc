#include "scheduler/trace.h"

#include <gtest/gtest.h>

#include <sstream>
#include <utility>

#include "common/model_shape.h"
#include "scheduler/synth.h"

namespace tencache {
namespace {

const char* kHeader = R"({"format":"tencache-trace","version":1,"model":"m"})";

StatusOr<Trace> Parse(const std::string& text) {
  std::istringstream in(text);
  return ParseTrace(in, "t.jsonl");
}

TEST(TraceTest, RoundTripsASynthesisedTrace) {
  SynthOptions o;
  o.ranks = 2;
  Trace t = *SynthesizeTrace(*FindPreset("tiny"), o);
  std::stringstream buf;
  WriteTrace(t, buf);
  StatusOr<Trace> back = ParseTrace(buf, "buf");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->events.size(), t.events.size());
  EXPECT_EQ(back->header.model, "tiny");
  EXPECT_EQ(back->header.ranks, 2);
  for (size_t i = 0; i < t.events.size(); ++i) {
    EXPECT_EQ(back->events[i].kind, t.events[i].kind);
    EXPECT_EQ(back->events[i].id, t.events[i].id);
    EXPECT_EQ(back->events[i].bytes, t.events[i].bytes);
    EXPECT_EQ(back->events[i].phase, t.events[i].phase);
    EXPECT_DOUBLE_EQ(back->events[i].end_s, t.events[i].end_s);
  }
}

TEST(TraceTest, ErrorsNameFileLineAndExpectation) {
  auto r = Parse(std::string(kHeader) + "\n{\"type\":\"access\",\"id\":0}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("t.jsonl:2"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("'bytes'"), std::string::npos);

  r = Parse(std::string(kHeader) + "\nnot json\n");
  EXPECT_NE(r.status().message().find("t.jsonl:2: expected one JSON object"), std::string::npos);

  r = Parse(R"({"format":"other","version":1,"model":"m"})");
  EXPECT_NE(r.status().message().find("t.jsonl:1: key 'format'"), std::string::npos);

  r = Parse("");
  EXPECT_NE(r.status().message().find("expected a header"), std::string::npos);

  const std::string bad_phase = std::string(kHeader) +
      "\n{\"type\":\"access\",\"id\":0,\"name\":\"w\",\"phase\":\"up\",\"bytes\":4,\"start_s\":0,\"end_s\":1}\n";
  r = Parse(bad_phase);
  EXPECT_NE(r.status().message().find("expected fwd, bwd or optimizer"), std::string::npos);

  // The optional times an access carries: a number >= 0.
  for (const auto& [key, field] : {std::pair{"lead_s", &TraceEvent::lead_s}, std::pair{"wait_s", &TraceEvent::wait_s}}) {
    const std::string access = std::string(kHeader) +
                               "\n{\"type\":\"access\",\"id\":0,\"name\":\"w\",\"phase\":\"fwd\",\"bytes\":4,"
                               "\"start_s\":0,\"end_s\":1,\"" + key + "\":";
    r = Parse(access + "\"soon\"}\n");
    EXPECT_NE(r.status().message().find(std::string("key '") + key + "': expected a number"), std::string::npos)
        << r.status().message();
    r = Parse(access + "-0.5}\n");
    EXPECT_NE(r.status().message().find(std::string("expected ") + key + " >= 0"), std::string::npos)
        << r.status().message();
    r = Parse(access + "0.5}\n");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->events[0].*field, 0.5) << key;
  }
}

// An optimizer access may name the state pieces it updates: written, read
// back, and refused on another access or when empty.
TEST(TraceTest, AnUpdatesPiecesRoundTripAndAreChecked) {
  const std::string fwd = R"({"type":"access","id":0,"name":"w","phase":"fwd","bytes":4,"start_s":0,"end_s":1})";
  const std::string opt = R"({"type":"access","id":0,"name":"w","phase":"optimizer","bytes":4,"start_s":1,"end_s":2)";
  auto r = Parse(std::string(kHeader) + "\n" + fwd + "\n" + opt + R"(,"pieces_begin":2,"pieces_end":5})" + "\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->events[1].pieces_begin, 2);
  EXPECT_EQ(r->events[1].pieces_end, 5);
  std::ostringstream out;
  WriteTrace(*r, out);
  auto back = Parse(out.str());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->events[1].pieces_begin, 2);
  EXPECT_EQ(back->events[1].pieces_end, 5);
  EXPECT_EQ(back->events[0].pieces_end, 0);  // not written for an access that updates nothing
  const std::string text = out.str();
  EXPECT_EQ(text.find("pieces_begin"), text.rfind("pieces_begin"));  // on the optimizer access only
  r = Parse(std::string(kHeader) + "\n" + fwd + "\n" + opt + R"(,"pieces_begin":5,"pieces_end":5})" + "\n");
  EXPECT_NE(r.status().message().find("pieces_begin < pieces_end"), std::string::npos) << r.status().message();
  const std::string fwd_pieces = R"({"type":"access","id":0,"name":"w","phase":"fwd","bytes":4,"start_s":0,"end_s":1,"pieces_end":1})";
  r = Parse(std::string(kHeader) + "\n" + fwd_pieces + "\n");
  EXPECT_NE(r.status().message().find("on an optimizer access"), std::string::npos) << r.status().message();
}

// An update run on the optimizer lane carries "lane":"optimizer": read,
// written back on it alone, and refused with any other value or on a device
// access, naming the file, line and key.
TEST(TraceTest, AnOptimizerLaneUpdateRoundTripsAndIsChecked) {
  const std::string fwd = R"({"type":"access","id":0,"name":"w","phase":"fwd","bytes":4,"start_s":0,"end_s":1})";
  const std::string opt = R"({"type":"access","id":0,"name":"w","phase":"optimizer","bytes":4,"start_s":1,"end_s":2)";
  auto r = Parse(std::string(kHeader) + "\n" + fwd + "\n" + opt + R"(,"lane":"optimizer"})" + "\n" + opt + "}\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->events[0].optimizer_lane);
  EXPECT_TRUE(r->events[1].optimizer_lane);
  EXPECT_FALSE(r->events[2].optimizer_lane);  // absent: the training thread ran it
  std::ostringstream out;
  WriteTrace(*r, out);
  const std::string text = out.str();
  ASSERT_NE(text.find(R"("lane":"optimizer")"), std::string::npos) << text;
  EXPECT_EQ(text.find("\"lane\""), text.rfind("\"lane\""));  // on the lane's update only
  auto back = Parse(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->events[1].optimizer_lane);
  EXPECT_FALSE(back->events[2].optimizer_lane);
  for (const std::string& bad : {std::string(R"("lane":"training")"), std::string(R"("lane":true)")}) {
    r = Parse(std::string(kHeader) + "\n" + fwd + "\n" + opt + "," + bad + "}\n");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("t.jsonl:3: key 'lane': expected \"optimizer\""), std::string::npos)
        << r.status().message();
  }
  const std::string fwd_lane = R"({"type":"access","id":0,"name":"w","phase":"fwd","bytes":4,"start_s":0,"end_s":1,"lane":"optimizer"})";
  r = Parse(std::string(kHeader) + "\n" + fwd_lane + "\n");
  EXPECT_NE(r.status().message().find("t.jsonl:2: key 'lane'"), std::string::npos) << r.status().message();
  Trace built = *back;
  built.events[0].optimizer_lane = true;
  EXPECT_NE(ValidateTrace(built, "built").message().find("event 0: expected the optimizer lane only on an optimizer"),
            std::string::npos);
}

// Whether the run defers its updates: false when absent (older traces),
// written and read back, refused when not a boolean.
TEST(TraceTest, TheHeaderSaysWhetherUpdatesAreDeferred) {
  const std::string fwd = R"({"type":"access","id":0,"name":"w","phase":"fwd","bytes":4,"start_s":0,"end_s":1})";
  auto r = Parse(std::string(kHeader) + "\n" + fwd + "\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->header.deferred_updates);
  r->header.deferred_updates = true;
  std::ostringstream out;
  WriteTrace(*r, out);
  auto back = Parse(out.str());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->header.deferred_updates);
  const std::string yes = R"({"format":"tencache-trace","version":1,"model":"m","deferred_updates":"yes"})";
  r = Parse(yes + "\n" + fwd);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t.jsonl:1: key 'deferred_updates': expected true or false"), std::string::npos)
      << r.status().message();
}

TEST(TraceTest, RejectsInconsistentTensorsAndGaps) {
  const std::string a0 = R"({"type":"access","id":0,"name":"w","phase":"fwd","bytes":4,"start_s":0,"end_s":1})";
  const std::string a0big = R"({"type":"access","id":0,"name":"w","phase":"bwd","bytes":8,"start_s":1,"end_s":2})";
  const std::string a2 = R"({"type":"access","id":2,"name":"x","phase":"fwd","bytes":4,"start_s":0,"end_s":1})";
  auto r = Parse(std::string(kHeader) + "\n" + a0 + "\n" + a0big + "\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expected the same name and size"), std::string::npos);
  r = Parse(std::string(kHeader) + "\n" + a0 + "\n" + a2 + "\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor id 1 never accessed"), std::string::npos);
  EXPECT_TRUE(Parse(std::string(kHeader) + "\n" + a0 + "\n").ok());
}

TEST(TraceTest, MissingFileIsNotFound) {
  auto r = ReadTraceFile("/nonexistent/trace.jsonl");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tencache
