// Device specs: parsing of every SDK syntax, precedence explicit > FURIOSA_DEVICES > NPU_DEVNAME >
// default, and resolution to device files against hand-made card sets and the simulator.
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "furiosa/device/device_spec.h"
#include "furiosa/core/error.h"
#include "furiosa/device/sim.h"
#include "test_support.h"

using namespace furiosa;
using namespace furiosa::device;
using Kind = DeviceSpec::Entry::Kind;

namespace {

DeviceSpec::Entry any(std::string text, int x, int y) {
  DeviceSpec::Entry e;
  e.kind = Kind::Any;
  e.text = std::move(text);
  e.fused_pes = x;
  e.count = y;
  return e;
}

DeviceSpec::Entry file(std::string text, int card, int first, int last) {
  DeviceSpec::Entry e;
  e.kind = Kind::File;
  e.text = std::move(text);
  e.card = card;
  e.file = DeviceFile{card, first, last};
  return e;
}

DeviceSpec::Entry whole_card(std::string text, int card) {
  DeviceSpec::Entry e;
  e.kind = Kind::Card;
  e.text = std::move(text);
  e.card = card;
  return e;
}

// A Warboy-like card with `pes` PEs, `busy` of them held.
CardInfo card(int index, int pes = 2, std::set<int> busy = {}, std::string arch = "warboy") {
  CardInfo c;
  c.index = index;
  c.arch = std::move(arch);
  c.pe_count = pes;
  for (int pe = 0; pe < pes; ++pe) c.pe_busy.push_back(busy.count(pe) != 0);
  for (int pe = 0; pe < pes; ++pe) c.device_files.push_back({index, pe, pe});
  if (pes >= 2) c.device_files.push_back({index, 0, pes - 1});
  return c;
}

std::vector<std::string> resolve(std::string_view spec, const std::vector<CardInfo>& cards) {
  std::vector<std::string> names;
  for (const DeviceFile& f : resolve_device_spec(parse_device_spec(spec), cards)) {
    names.push_back(f.name());
  }
  return names;
}

// The Error resolve() throws; fails the test when it does not throw one.
Error resolve_error(std::string_view spec, const std::vector<CardInfo>& cards) {
  try {
    resolve(spec, cards);
  } catch (const Error& e) {
    return e;
  }
  FAIL("'" << spec << "' resolved without an error");
  return Error(ErrorCode::Internal, "unreachable");
}

}  // namespace

TEST_CASE("Device spec: every syntax parses", "[device][spec]") {
  struct Row {
    const char* text;
    std::vector<DeviceSpec::Entry> entries;
  };
  const std::vector<Row> table = {
      {"warboy(2)*1", {any("warboy(2)*1", 2, 1)}},
      {"warboy(1)*4", {any("warboy(1)*4", 1, 4)}},
      {"warboy*3", {any("warboy*3", 1, 3)}},
      {"warboy(2)*1024", {any("warboy(2)*1024", 2, 1024)}},
      {"npu:0:1", {file("npu:0:1", 0, 1, 1)}},
      {"npu:1:0-1", {file("npu:1:0-1", 1, 0, 1)}},
      {"npu:3", {whole_card("npu:3", 3)}},
      {"npu0pe1", {file("npu0pe1", 0, 1, 1)}},
      {"npu1pe0-1", {file("npu1pe0-1", 1, 0, 1)}},
      {"/dev/npu0pe0-1", {file("/dev/npu0pe0-1", 0, 0, 1)}},
      {"npu2", {whole_card("npu2", 2)}},
      {"0:1", {file("0:1", 0, 1, 1)}},
      {"1:0-1", {file("1:0-1", 1, 0, 1)}},
      {"1", {whole_card("1", 1)}},
      {"npu0pe0,npu0pe1", {file("npu0pe0", 0, 0, 0), file("npu0pe1", 0, 1, 1)}},
      {"npu:0:0-1, npu:1:0-1", {file("npu:0:0-1", 0, 0, 1), file("npu:1:0-1", 1, 0, 1)}},
      {"  warboy(2)*1\t", {any("warboy(2)*1", 2, 1)}},
      {" npu:0:0 ,\tnpu:0:1 ", {file("npu:0:0", 0, 0, 0), file("npu:0:1", 0, 1, 1)}},
      {"warboy(1)*1,npu1pe0-1,npu:2,0:1",
       {any("warboy(1)*1", 1, 1), file("npu1pe0-1", 1, 0, 1), whole_card("npu:2", 2),
        file("0:1", 0, 1, 1)}},
  };
  for (const Row& row : table) {
    INFO("spec: '" << row.text << "'");
    const DeviceSpec spec = parse_device_spec(row.text);
    CHECK(spec.entries == row.entries);
  }
  CHECK(parse_device_spec("  npu0pe0 , npu0pe1 ").text == "npu0pe0 , npu0pe1");
}

TEST_CASE("Device spec: bad inputs name the spec and the bad part", "[device][spec]") {
  struct Row {
    const char* text;
    const char* fragment;  // must appear in the message
  };
  const std::vector<Row> table = {
      {"", "it is empty"},
      {"   ", "it is empty"},
      {"warboy", "'warboy' has no device count"},
      {"warboy(2)", "'warboy(2)' has no device count"},
      {"warboy(2)*", "'warboy(2)*' has no valid device count"},
      {"warboy(2*1", "has no PE count"},
      {"warboy()*1", "has no PE count"},
      {"warboy(3)*1", "X must be 1 or 2"},
      {"warboy(0)*1", "X must be 1 or 2"},
      {"warboy(2)*0", "count must be in 1..1024"},
      {"warboy(2)*2000", "count must be in 1..1024"},
      {"warboy(2)*1x", "'warboy(2)*1x' has no valid device count"},
      {"Warboy(2)*1", "'Warboy(2)*1' is not a device spec"},
      {"gpu0", "'gpu0' is not a device spec"},
      {"*1", "'*1' is not a device spec"},
      {"npu:", "'npu:' has no card number"},
      {"npu:0:", "'npu:0:' has no PE number"},
      {"npu:0:1-0", "PE range 1-0"},
      {"npu:0:1-1", "PE range 1-1"},
      {"npu:0:0-", "has no last PE"},
      {"npu:0-1", "has no ':' before the PE number"},
      {"npu:0:0 1", "unexpected text ' 1'"},
      {"npu0pe", "'npu0pe' has no PE number"},
      {"npupe0", "'npupe0' has no card number"},
      {"npu0p1", "has no 'pe'"},
      {"npu0pe0-1-", "unexpected text '-'"},
      {"npu0pe0,", "item 2 is empty"},
      {",npu0pe0", "item 1 is empty"},
      {"npu0pe0,,npu0pe1", "item 2 is empty"},
      {"npu0pe0, ,npu0pe1", "item 2 is empty"},
      {"npu0pe0,npu:x", "'npu:x' has no card number"},
      {"0:", "has no PE number"},
  };
  for (const Row& row : table) {
    INFO("spec: '" << row.text << "'");
    try {
      parse_device_spec(row.text);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK_THAT(e.message(), Catch::Contains(row.fragment));
      CHECK_THAT(e.message(), Catch::StartsWith("invalid device spec '"));
      CHECK_THAT(e.message(), Catch::Contains("warboy(X)*Y"));  // says what is expected
    }
  }
  // The whole spec is named, not only the item.
  try {
    parse_device_spec("npu0pe0, warboy(5)*1");
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK_THAT(e.message(), Catch::Contains("'npu0pe0, warboy(5)*1'") &&
                                Catch::Contains("item 'warboy(5)*1'"));
  }
}

TEST_CASE("Device spec: precedence explicit > FURIOSA_DEVICES > NPU_DEVNAME > default",
          "[device][spec]") {
  using Env = std::map<std::string, std::string>;
  struct Row {
    const char* explicit_spec;
    Env env;
    const char* text;
    const char* source;
  };
  const std::vector<Row> table = {
      {"npu0pe1", {{"FURIOSA_DEVICES", "warboy(1)*2"}, {"NPU_DEVNAME", "npu0pe0"}}, "npu0pe1",
       "argument"},
      {"", {{"FURIOSA_DEVICES", "warboy(1)*2"}, {"NPU_DEVNAME", "npu0pe0"}}, "warboy(1)*2",
       "FURIOSA_DEVICES"},
      {"", {{"NPU_DEVNAME", "npu0pe0"}}, "npu0pe0", "NPU_DEVNAME"},
      {"", {{"FURIOSA_DEVICES", ""}, {"NPU_DEVNAME", "npu0pe0-1"}}, "npu0pe0-1", "NPU_DEVNAME"},
      {"", {{"FURIOSA_DEVICES", "  "}, {"NPU_DEVNAME", " "}}, "warboy(2)*1", "default"},
      {"", {}, "warboy(2)*1", "default"},
      {"  ", {{"FURIOSA_DEVICES", " npu:0:0 "}}, "npu:0:0", "FURIOSA_DEVICES"},
      {" warboy*2 ", {}, "warboy*2", "argument"},
      {"", {{"OTHER", "npu0pe0"}}, "warboy(2)*1", "default"},
  };
  for (const Row& row : table) {
    INFO("explicit '" << row.explicit_spec << "'");
    const Env env = row.env;
    EnvGetter getter = [env](std::string_view name) -> std::optional<std::string> {
      auto it = env.find(std::string(name));
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
    const DeviceSpecChoice choice = choose_device_spec(row.explicit_spec, getter);
    CHECK(choice.text == row.text);
    CHECK(choice.source == row.source);
    CHECK(effective_device_spec(row.explicit_spec, getter) == row.text);
  }
  CHECK(kDefaultDeviceSpec == "warboy(2)*1");
  // The process environment is the default getter.
  furiosa::test::ScopedEnv devices("FURIOSA_DEVICES", "npu:0:1");
  CHECK(effective_device_spec("") == "npu:0:1");
  CHECK(choose_device_spec("").source == "FURIOSA_DEVICES");
  devices.set(std::nullopt);
  CHECK(process_env("FURIOSA_DEVICES") == std::nullopt);
}

TEST_CASE("Device spec: resolution on one card", "[device][spec]") {
  const std::vector<CardInfo> free1 = {card(0)};
  CHECK(resolve("warboy(2)*1", free1) == std::vector<std::string>{"npu0pe0-1"});
  CHECK(resolve("warboy(1)*2", free1) == std::vector<std::string>{"npu0pe0", "npu0pe1"});
  CHECK(resolve("warboy*1", free1) == std::vector<std::string>{"npu0pe0"});
  CHECK(resolve("npu:0", free1) == std::vector<std::string>{"npu0pe0-1"});
  CHECK(resolve("npu0", free1) == std::vector<std::string>{"npu0pe0-1"});
  CHECK(resolve("npu:0:1", free1) == std::vector<std::string>{"npu0pe1"});
  CHECK(resolve("/dev/npu0pe0-1", free1) == std::vector<std::string>{"npu0pe0-1"});
  CHECK(resolve("npu0pe0,npu0pe1", free1) == std::vector<std::string>{"npu0pe0", "npu0pe1"});
  // Explicit items are placed first; warboy items fill in around them, output in spec order.
  CHECK(resolve("warboy(1)*1,npu0pe0", free1) == std::vector<std::string>{"npu0pe1", "npu0pe0"});

  // PE 1 held: the single free PE still works, anything needing PE 1 is busy.
  const std::vector<CardInfo> half = {card(0, 2, {1})};
  CHECK(resolve("warboy(1)*1", half) == std::vector<std::string>{"npu0pe0"});
  CHECK(resolve("npu:0:0", half) == std::vector<std::string>{"npu0pe0"});

  Error busy = resolve_error("warboy(2)*1", half);
  CHECK(busy.code() == ErrorCode::DeviceBusy);
  CHECK_THAT(busy.message(), Catch::Contains("device spec 'warboy(2)*1'") &&
                                 Catch::Contains("held cores: npu0pe1") &&
                                 Catch::Contains("only 0 of 1 (npu0pe0-1) are free"));

  busy = resolve_error("warboy(1)*2", half);
  CHECK(busy.code() == ErrorCode::DeviceBusy);
  CHECK_THAT(busy.message(), Catch::Contains("'warboy(1)*2'") &&
                                 Catch::Contains("needs 2 devices of 1 fused PE") &&
                                 Catch::Contains("held cores: npu0pe1"));

  busy = resolve_error("npu:0:0-1", half);
  CHECK(busy.code() == ErrorCode::DeviceBusy);
  CHECK_THAT(busy.message(), Catch::Contains("device spec 'npu:0:0-1'") &&
                                 Catch::Contains("names npu0pe0-1") &&
                                 Catch::Contains("cores npu0pe1 are held"));
  CHECK(resolve_error("npu0pe1", half).code() == ErrorCode::DeviceBusy);
  CHECK(resolve_error("npu:0", half).code() == ErrorCode::DeviceBusy);

  // More than the machine has at all: DeviceNotFound, even when cores are also busy.
  Error missing = resolve_error("warboy(2)*2", free1);
  CHECK(missing.code() == ErrorCode::DeviceNotFound);
  CHECK_THAT(missing.message(), Catch::Contains("device spec 'warboy(2)*2'") &&
                                    Catch::Contains("needs 2 devices of 2 fused PEs") &&
                                    Catch::Contains("but only 1 exists (npu0pe0-1)") &&
                                    Catch::Contains("npu0 (pe0-1)"));
  CHECK(resolve_error("warboy(1)*3", half).code() == ErrorCode::DeviceNotFound);

  missing = resolve_error("npu:0:2", free1);
  CHECK(missing.code() == ErrorCode::DeviceNotFound);
  CHECK_THAT(missing.message(), Catch::Contains("names npu0pe2, which does not exist") &&
                                    Catch::Contains("the machine has npu0 (pe0-1)"));
  missing = resolve_error("npu1pe0", free1);
  CHECK(missing.code() == ErrorCode::DeviceNotFound);
  CHECK_THAT(missing.message(), Catch::Contains("'npu1pe0'") && Catch::Contains("npu1pe0"));
  missing = resolve_error("npu:1", free1);
  CHECK(missing.code() == ErrorCode::DeviceNotFound);
  CHECK_THAT(missing.message(), Catch::Contains("names card npu1, which does not exist"));

  // An item overlapping another item of the same spec.
  Error overlap = resolve_error("npu0pe0,npu:0:0-1", free1);
  CHECK(overlap.code() == ErrorCode::InvalidArgument);
  CHECK_THAT(overlap.message(), Catch::Contains("'npu0pe0' (npu0pe0)") &&
                                    Catch::Contains("'npu:0:0-1' (npu0pe0-1) overlap"));
  CHECK(resolve_error("npu0pe1,0:1", free1).code() == ErrorCode::InvalidArgument);
  // A warboy item whose only range is taken by an explicit item of the spec: not found.
  missing = resolve_error("npu0pe0,warboy(2)*1", free1);
  CHECK(missing.code() == ErrorCode::DeviceNotFound);
  CHECK_THAT(missing.message(), Catch::Contains("npu0pe0-1 (overlaps 'npu0pe0')"));

  // A single-PE card: npu:0 is its only PE; warboy(2) cannot match.
  const std::vector<CardInfo> single = {card(0, 1)};
  CHECK(resolve("npu:0", single) == std::vector<std::string>{"npu0pe0"});
  CHECK(resolve_error("warboy(2)*1", single).code() == ErrorCode::DeviceNotFound);
}

TEST_CASE("Device spec: resolution across two cards", "[device][spec]") {
  const std::vector<CardInfo> free2 = {card(0), card(1)};
  CHECK(resolve("warboy(2)*1", free2) == std::vector<std::string>{"npu0pe0-1"});
  CHECK(resolve("warboy(2)*2", free2) == std::vector<std::string>{"npu0pe0-1", "npu1pe0-1"});
  CHECK(resolve("warboy(1)*2", free2) == std::vector<std::string>{"npu0pe0", "npu0pe1"});
  CHECK(resolve("warboy(1)*4", free2) ==
        std::vector<std::string>{"npu0pe0", "npu0pe1", "npu1pe0", "npu1pe1"});
  CHECK(resolve("warboy(1)*1,warboy(1)*1,warboy(1)*1", free2) ==
        std::vector<std::string>{"npu0pe0", "npu0pe1", "npu1pe0"});
  CHECK(resolve("npu:0:0,npu:0:1,warboy(1)*2", free2) ==
        std::vector<std::string>{"npu0pe0", "npu0pe1", "npu1pe0", "npu1pe1"});
  CHECK(resolve("npu0pe0,warboy(2)*1", free2) == std::vector<std::string>{"npu0pe0", "npu1pe0-1"});
  CHECK(resolve("npu:1,npu:0", free2) == std::vector<std::string>{"npu1pe0-1", "npu0pe0-1"});
  CHECK(resolve_error("warboy(1)*5", free2).code() == ErrorCode::DeviceNotFound);
  CHECK(resolve_error("warboy(2)*3", free2).code() == ErrorCode::DeviceNotFound);

  // Card 0 partly busy: the fused device comes from card 1, single PEs fill the free ones.
  const std::vector<CardInfo> partly = {card(0, 2, {0}), card(1)};
  CHECK(resolve("warboy(2)*1", partly) == std::vector<std::string>{"npu1pe0-1"});
  CHECK(resolve("warboy(1)*2", partly) == std::vector<std::string>{"npu0pe1", "npu1pe0"});
  CHECK(resolve("warboy(1)*3", partly) ==
        std::vector<std::string>{"npu0pe1", "npu1pe0", "npu1pe1"});
  Error busy = resolve_error("warboy(2)*2", partly);
  CHECK(busy.code() == ErrorCode::DeviceBusy);
  CHECK_THAT(busy.message(), Catch::Contains("device spec 'warboy(2)*2'") &&
                                 Catch::Contains("only 1 of 2 (npu0pe0-1, npu1pe0-1) is free") &&
                                 Catch::Contains("held cores: npu0pe0"));
  busy = resolve_error("warboy(1)*4", partly);
  CHECK(busy.code() == ErrorCode::DeviceBusy);
  CHECK_THAT(busy.message(), Catch::Contains("held cores: npu0pe0"));

  // Everything held.
  const std::vector<CardInfo> all_busy = {card(0, 2, {0, 1}), card(1, 2, {1})};
  busy = resolve_error("warboy(2)*1", all_busy);
  CHECK(busy.code() == ErrorCode::DeviceBusy);
  CHECK_THAT(busy.message(), Catch::Contains("held cores: npu0pe0, npu0pe1, npu1pe1"));

  // Card order is by index, whatever the order enumerate() gave.
  CHECK(resolve("warboy(2)*1", {card(1), card(0)}) == std::vector<std::string>{"npu0pe0-1"});
  // Only Warboy cards serve warboy(X)*Y; explicit names work on any card.
  const std::vector<CardInfo> mixed = {card(0, 2, {}, "other"), card(1)};
  CHECK(resolve("warboy(2)*1", mixed) == std::vector<std::string>{"npu1pe0-1"});
  CHECK(resolve("npu:0:0", mixed) == std::vector<std::string>{"npu0pe0"});
  CHECK(resolve("warboy(2)*1", {card(0, 2, {}, "Warboy")}) ==
        std::vector<std::string>{"npu0pe0-1"});
}

TEST_CASE("Device spec: no cards at all", "[device][spec]") {
  for (const char* spec : {"warboy(2)*1", "npu:0:0", "npu:0", "npu0pe0-1"}) {
    INFO(spec);
    const Error e = resolve_error(spec, {});
    CHECK(e.code() == ErrorCode::DeviceNotFound);
    CHECK_THAT(e.message(), Catch::Contains(std::string("device spec '") + spec + "'") &&
                                Catch::Contains("no NPU cards were found"));
  }
}

TEST_CASE("Device spec: resolve and open on the simulator", "[device][spec][sim]") {
  SimConfig config;
  config.cards = 2;
  auto driver = create_sim_driver(config);
  auto held = driver->open(DeviceFile::parse("npu0pe1"));

  const auto files = resolve_device_spec(parse_device_spec("warboy(2)*1"), driver->enumerate());
  REQUIRE(files.size() == 1);
  CHECK(files[0].name() == "npu1pe0-1");
  auto fused = driver->open(files[0]);

  const auto singles = resolve_device_spec(parse_device_spec("warboy*1"), driver->enumerate());
  REQUIRE(singles.size() == 1);
  CHECK(singles[0].name() == "npu0pe0");

  try {
    resolve_device_spec(parse_device_spec("warboy(2)*1"), driver->enumerate());
    FAIL("resolved");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::DeviceBusy);
    CHECK_THAT(e.message(), Catch::Contains("npu0pe1") && Catch::Contains("npu1pe0"));
  }
  // Between resolve and open another opener may win: open still says DeviceBusy.
  const auto raced = resolve_device_spec(parse_device_spec("npu:0:0"), driver->enumerate());
  auto winner = driver->open(raced[0]);
  try {
    driver->open(raced[0]);
    FAIL("opened twice");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::DeviceBusy);
  }
  held.reset();
  fused.reset();
  winner.reset();
  CHECK(resolve_device_spec(parse_device_spec("warboy(2)*2"), driver->enumerate()).size() == 2);
}
