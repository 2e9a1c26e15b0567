// tcpadvise-loadgen MODE [OPTIONS]: see Usage() and loadgen.h.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "loadgen.h"

namespace {

[[noreturn]] void Usage() {
  fputs(
      "usage: tcpadvise-loadgen serve [--host ADDR] [--port P]\n"
      "       tcpadvise-loadgen pingpong --target HOST:PORT --sizes N,...  (also mss, mss+N, K*mss+N)\n"
      "       tcpadvise-loadgen rpc --target HOST:PORT --sizes N,... [--tail BYTES]\n"
      "       tcpadvise-loadgen burst --target HOST:PORT [--writes W] [--size S] [--send writes|writev|cork]\n"
      "       tcpadvise-loadgen stream --target HOST:PORT [--write-bytes N] [--seconds S] [--interval-ms MS]\n"
      "round trips: [--rounds N] [--warmup N] [--connection-warmup N] [--budget-ms MS] [--reply BYTES]\n"
      "near end:    [--nodelay] [--sndbuf BYTES]\n"
      "The near end prints one JSON line: {\"near\": what it measured, \"far\": what the far end counted}.\n",
      stderr);
  exit(2);
}

long Number(const char* text, long lowest) {
  char* end = nullptr;
  const long n = strtol(text, &end, 10);
  if (*end != '\0' || n < lowest) Usage();
  return n;
}

std::vector<std::string> SplitCommas(const std::string& list) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const size_t end = comma == std::string::npos ? list.size() : comma;
    if (end > start) items.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Usage();
  const std::string mode = argv[1];
  std::string host = "127.0.0.1";
  int port = 0;
  loadgen::RoundTripOptions rt;
  loadgen::StreamOptions stream;
  loadgen::SocketSetup setup;
  rt.mode = mode;
  rt.reply_bytes = mode == "burst" ? 2 : mode == "rpc" ? 28 : 1;
  if (mode == "burst") {
    rt.burst_writes = 15;  // seed 004: 15 two-byte writes, a 2-byte reply
    rt.burst_size = 2;
  }
  std::string target;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) Usage();
      return argv[++i];
    };
    if (a == "--host") host = next();
    else if (a == "--port") port = static_cast<int>(Number(next(), 0));
    else if (a == "--target") target = next();
    else if (a == "--nodelay") setup.nodelay = true;
    else if (a == "--sndbuf") setup.sndbuf = static_cast<int>(Number(next(), 1));
    else if (a == "--sizes") rt.sizes = SplitCommas(next());
    else if (a == "--tail") rt.tail_bytes = Number(next(), 0);
    else if (a == "--writes") rt.burst_writes = static_cast<int>(Number(next(), 1));
    else if (a == "--size") rt.burst_size = Number(next(), 1);
    else if (a == "--rounds") rt.rounds = Number(next(), 1);
    else if (a == "--warmup") rt.warmup = Number(next(), 0);
    else if (a == "--connection-warmup") rt.connection_warmup = Number(next(), 0);
    else if (a == "--budget-ms") rt.budget_ns = static_cast<uint64_t>(Number(next(), 0)) * 1000000;
    else if (a == "--reply") rt.reply_bytes = Number(next(), 1);
    else if (a == "--write-bytes") stream.write_bytes = Number(next(), 1);
    else if (a == "--seconds") stream.seconds = atof(next());
    else if (a == "--interval-ms") stream.interval_us = Number(next(), 1) * 1000;
    else if (a == "--send") {
      const std::string method = next();
      if (method == "writes") rt.method = loadgen::SendMethod::kWrites;
      else if (method == "writev") rt.method = loadgen::SendMethod::kWritev;
      else if (method == "cork") rt.method = loadgen::SendMethod::kCork;
      else Usage();
    } else {
      Usage();
    }
  }
  if (mode == "serve") return loadgen::RunServe(host, port);
  if (target.empty() || rt.reply_bytes > loadgen::kMaxReplyBytes) Usage();
  if (mode == "stream") {
    if (stream.seconds <= 0) Usage();
    stream.target = target;
    stream.setup = setup;
    return loadgen::RunStream(stream);
  }
  if (mode != "pingpong" && mode != "rpc" && mode != "burst") Usage();
  if (mode == "burst") {
    if (!rt.sizes.empty()) Usage();
    rt.sizes = {std::to_string(rt.burst_writes * rt.burst_size)};  // one request shape
  }
  if (rt.sizes.empty()) Usage();
  rt.target = target;
  rt.setup = setup;
  return loadgen::RunRoundTrips(rt);
}
