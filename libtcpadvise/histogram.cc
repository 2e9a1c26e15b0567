#include "histogram.h"

#include "json_writer.h"

namespace tcpadvise {

uint64_t HistogramBucketHigh(int bucket) {
  if (bucket < 2 * kHistogramSubBuckets) return static_cast<uint64_t>(bucket) + 1;
  const int shift = (bucket >> kHistogramSubBucketBits) - 1;
  const uint64_t high = HistogramBucketLow(bucket) + (uint64_t{1} << shift);
  return high == 0 ? ~uint64_t{0} : high;
}

void Histogram::MergeFrom(const Histogram& other) {
  sum_.Add(other.sum_.Get());
  if (other.min_inverted_.Get() > min_inverted_.Get()) min_inverted_.Set(other.min_inverted_.Get());
  if (other.max_.Get() > max_.Get()) max_.Set(other.max_.Get());
  buckets_.MergeFrom(other.buckets_);
}

void Histogram::Reset() {
  sum_.Set(0);
  min_inverted_.Set(0);
  max_.Set(0);
  buckets_.Reset();
}

HistogramSummary Histogram::Summary() const {
  HistogramSummary s;
  s.count = buckets_.Total();
  if (s.count == 0) return s;
  s.min = ~min_inverted_.Get();
  s.max = max_.Get();
  s.sum = sum_.Get();
  return s;
}

uint64_t Histogram::Percentile(double q) const {
  const HistogramSummary s = Summary();
  if (s.count == 0) return 0;
  const double rank = q * static_cast<double>(s.count);
  if (rank >= static_cast<double>(s.count)) return s.max;  // the top is known exactly
  uint64_t seen = 0, value = s.max;  // ranks past the buckets (unbucketed values): the top
  bool found = false;
  const int top = HistogramBucketOf(s.max);
  const bool top_alone = top != HistogramBucketOf(s.min);
  ForEachBucket([&](int bucket, uint64_t n) {
    seen += n;
    if (found || static_cast<double>(seen) < rank) return;
    found = true;
    value = bucket == top && top_alone ? s.max : HistogramBucketLow(bucket);
  });
  return value < s.min ? s.min : value > s.max ? s.max : value;
}

void EmitHistogram(JsonWriter* w, const char* key, const char* unit, const Histogram& h, double scale,
                   uint64_t extra_count, uint64_t extra_value) {
  HistogramSummary s = h.Summary();
  if (extra_count != 0) {
    s.min = s.count == 0 || s.min > extra_value ? extra_value : s.min;
    s.max = s.max < extra_value ? extra_value : s.max;
    s.count += extra_count;
    s.sum += extra_count * extra_value;
  }
  // Whole units are written as integers; scaled ones (ticks as ns) as doubles.
  auto value = [w, scale](uint64_t v) {
    if (scale == 1.0) {
      w->Uint(v);
    } else {
      w->Double(static_cast<double>(v) * scale);
    }
  };
  auto bucket = [w](int index, uint64_t n) {
    w->BeginArray();
    w->Uint(static_cast<uint64_t>(index));
    w->Uint(n);
    w->EndArray();
  };
  w->Key(key);
  w->BeginObject();
  w->Key("unit");
  w->String(unit);
  w->Key("count");
  w->Uint(s.count);
  w->Key("sum");
  value(s.sum);
  w->Key("min");
  value(s.min);
  w->Key("max");
  value(s.max);
  w->Key("sub_buckets");
  w->Uint(kHistogramSubBuckets);
  w->Key("scale");
  w->Double(scale);
  if (h.unbucketed() != 0) {
    w->Key("unbucketed");
    w->Uint(h.unbucketed());
  }
  w->Key("buckets");
  w->BeginArray();
  const int extra = HistogramBucketOf(extra_value);
  bool extra_pending = extra_count != 0;
  h.ForEachBucket([&](int index, uint64_t n) {
    if (extra_pending && index >= extra) {
      extra_pending = false;
      if (index == extra) {
        n += extra_count;
      } else {
        bucket(extra, extra_count);
      }
    }
    bucket(index, n);
  });
  if (extra_pending) bucket(extra, extra_count);
  w->EndArray();
  w->EndObject();
}

}  // namespace tcpadvise
