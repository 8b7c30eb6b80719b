#include <doctest/doctest.h>

#include "common/hostfile.h"

namespace test_common_hostfile {

using namespace ringsync;

TEST_CASE("hostfile lines: host, port, slots, comments, IPv6") {
  auto hosts = parse_hostfile(
      "# cluster\n"
      "node-a slots=4\n"
      "\n"
      "198.18.0.2:7100   slots=2   # second\n"
      "[fd00::3]:7101 slots=1\n"
      "node-d\n",
      "hosts.txt");
  REQUIRE(hosts.ok());
  REQUIRE(hosts->size() == 4);
  CHECK((*hosts)[0].host == "node-a");
  CHECK((*hosts)[0].port == 0);
  CHECK((*hosts)[0].slots == 4);
  CHECK((*hosts)[1].host == "198.18.0.2");
  CHECK((*hosts)[1].port == 7100);
  CHECK((*hosts)[1].slots == 2);
  CHECK((*hosts)[2].host == "fd00::3");
  CHECK((*hosts)[2].port == 7101);
  CHECK((*hosts)[3].slots == 1);
}

TEST_CASE("hostfile errors name the file and line") {
  CHECK(parse_hostfile("a slots=0\n", "h").status().message() == "h:1: slots must be at least 1");
  CHECK(parse_hostfile("a\nb slots=x\n", "h").status().message().find("h:2: slots") == 0);
  CHECK(parse_hostfile("a:99999 slots=1\n", "h").status().message().find("h:1: port") == 0);
  CHECK(parse_hostfile("a maxslots=3\n", "h").status().message().find("expected 'host[:port] slots=N'") !=
        std::string::npos);
  CHECK(parse_hostfile("[::1 slots=1\n", "h").status().message().find("unterminated") != std::string::npos);
  CHECK(parse_hostfile("# nothing\n\n", "h").status().message().find("no hosts") != std::string::npos);
  CHECK(read_hostfile("/nonexistent/hostfile").status().message() ==
        "cannot read hostfile /nonexistent/hostfile");
}

TEST_CASE("-H host lists") {
  auto hosts = parse_host_list("a:4,b:2,c");
  REQUIRE(hosts.ok());
  REQUIRE(hosts->size() == 3);
  CHECK((*hosts)[0].slots == 4);
  CHECK((*hosts)[1].host == "b");
  CHECK((*hosts)[2].slots == 1);
  CHECK_FALSE(parse_host_list("a:4,,b").ok());
  CHECK_FALSE(parse_host_list("a:0").ok());
  CHECK_FALSE(parse_host_list(":3").ok());
}

}  // namespace test_common_hostfile
