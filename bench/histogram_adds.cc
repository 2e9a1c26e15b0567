// histogram_adds: a Histogram fed values that cycle through a number of
// distinct buckets, for counting the instructions an add costs in each of
// its tiers (inline, tables, chunks) under callgrind, which counts the same
// every run where hooks_bench's nanoseconds move with the machine:
//
//   valgrind --tool=callgrind --callgrind-out-file=cg build/bench/histogram_adds 500 100000 200000
//   (instructions an add, the loop's own included: the summary / 200000)
//
// Arguments: distinct buckets, the smallest value (values step by 1% of it,
// so each falls in a bucket of its own), adds. Every bucket is added once
// before the counted adds, so that these find them where they live.
//
// histogram_adds --merge DISTINCT SOCKETS instead folds SOCKETS histograms
// of 5,000 values over DISTINCT buckets into one group, as closed
// connections are: callgrind_annotate --inclusive=yes, the line of
// Histogram::MergeBucketsFrom, divided by SOCKETS.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "histogram.h"

namespace {

int Merge(uint64_t distinct, uint64_t sockets) {
  static tcpadvise::Histogram group;
  uint64_t x = 1;
  for (uint64_t s = 0; s < sockets; ++s) {
    auto* h = new tcpadvise::Histogram;
    for (int i = 0; i < 5000; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      h->Record(100000 + (x >> 33) % distinct * 1001);
    }
    group.MergeFrom(*h);
    delete h;
  }
  printf("%llu values\n", static_cast<unsigned long long>(group.count()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "--merge") == 0) {
    const uint64_t distinct = strtoull(argv[2], nullptr, 10);
    return distinct == 0 ? 2 : Merge(distinct, strtoull(argv[3], nullptr, 10));
  }
  if (argc != 4) {
    fprintf(stderr, "usage: histogram_adds DISTINCT SMALLEST ADDS | --merge DISTINCT SOCKETS\n");
    return 2;
  }
  const uint64_t distinct = strtoull(argv[1], nullptr, 10);
  const uint64_t smallest = strtoull(argv[2], nullptr, 10);
  const uint64_t adds = strtoull(argv[3], nullptr, 10);
  if (distinct == 0) return 2;
  const uint64_t step = smallest / 100 + 1;
  static tcpadvise::Histogram h;
  for (uint64_t i = 0; i < distinct; ++i) h.Record(smallest + i * step);
  uint64_t x = 1;
  for (uint64_t i = 0; i < adds; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;  // a fixed sequence, the same in every build
    h.Record(smallest + (x >> 33) % distinct * step);
  }
  printf("%llu values\n", static_cast<unsigned long long>(h.count()));
  return 0;
}
