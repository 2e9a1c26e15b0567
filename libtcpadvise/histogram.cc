#include "histogram.h"

#include "json_writer.h"

namespace tcpadvise {

uint64_t HistogramBucketHigh(int bucket) {
  if (bucket < 2 * kHistogramSubBuckets) return static_cast<uint64_t>(bucket) + 1;
  const int shift = (bucket >> kHistogramSubBucketBits) - 1;
  const uint64_t high = HistogramBucketLow(bucket) + (uint64_t{1} << shift);
  return high == 0 ? ~uint64_t{0} : high;
}

void Histogram::RecordRepeated(uint64_t value, uint64_t n) {
  sum_.Add(value * n);
  if (~value > min_inverted_.Get()) min_inverted_.Set(~value);
  if (value > max_.Get()) max_.Set(value);
  buckets_.AddOutOfLine(HistogramBucketOf(value), n);
}

void Histogram::MergeBoundsFrom(const Histogram& other) {
  sum_.Add(other.sum_.Get());
  if (other.min_inverted_.Get() > min_inverted_.Get()) min_inverted_.Set(other.min_inverted_.Get());
  if (other.max_.Get() > max_.Get()) max_.Set(other.max_.Get());
}

void Histogram::MergeBucketsFrom(const Histogram& other, int except, uint64_t except_n) {
  if (except < 0) {
    buckets_.MergeFrom(other.buckets_);
    return;
  }
  other.buckets_.ForEach([this, except, except_n](int bucket, uint64_t n) {
    if (bucket == except) {
      n = n > except_n ? n - except_n : 0;
      if (n == 0) return;
    }
    buckets_.AddOutOfLine(bucket, n);
  });
  buckets_.AddLost(other.buckets_.lost());
}

void Histogram::Reset() {
  sum_.Set(0);
  min_inverted_.Set(0);
  max_.Set(0);
  buckets_.Reset();
}

HistogramSummary Histogram::SummaryOver(const Histogram& buckets) const {
  HistogramSummary s;
  s.count = buckets.buckets_.Total();
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

namespace {

// EmitHistogramParts writes a histogram of exact figures s whose buckets are
// those of `buckets` plus extra_count values of extra_value.
void EmitHistogramParts(JsonWriter* w, const char* key, const char* unit, const HistogramSummary& s,
                        const Histogram& buckets, double scale, uint64_t extra_count, uint64_t extra_value) {
  // Whole units are written as integers; scaled ones (ticks as ns) rounded
  // to whole ns, finer than any clock the shim reads.
  auto value = [w, scale](uint64_t v) {
    if (scale == 1.0) {
      w->Uint(v);
    } else {
      w->Whole(static_cast<double>(v) * scale);
    }
  };
  auto bucket = [w](int index, uint64_t n) {
    w->BeginArray();
    w->Uint(static_cast<uint64_t>(index));
    w->Uint(n);
    w->EndArray();
  };
  w->KeyString(key);
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
  if (buckets.unbucketed() != 0) {
    w->Key("unbucketed");
    w->Uint(buckets.unbucketed());
  }
  w->Key("buckets");
  w->BeginArray();
  const int extra = HistogramBucketOf(extra_value);
  bool extra_pending = extra_count != 0;
  buckets.ForEachBucket([&](int index, uint64_t n) {
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

// WithExtra adds extra_count values of extra_value to s's bounds and sum.
HistogramSummary WithExtra(HistogramSummary s, uint64_t extra_count, uint64_t extra_value) {
  if (extra_count == 0) return s;
  s.min = s.count == 0 || s.min > extra_value ? extra_value : s.min;
  s.max = s.max < extra_value ? extra_value : s.max;
  s.sum += extra_count * extra_value;
  return s;
}

}  // namespace

void EmitHistogram(JsonWriter* w, const char* key, const char* unit, const Histogram& h, double scale,
                   uint64_t extra_count, uint64_t extra_value) {
  HistogramSummary s = WithExtra(h.Summary(), extra_count, extra_value);
  s.count += extra_count;
  EmitHistogramParts(w, key, unit, s, h, scale, extra_count, extra_value);
}

void EmitHistogramOver(JsonWriter* w, const char* key, const char* unit, const Histogram& h, const Histogram& buckets,
                       double scale, uint64_t extra_count, uint64_t extra_value) {
  // h's own bounds: with nothing recorded, min reads 2^64-1 and max 0, which
  // leave the extra values' bounds as they are.
  HistogramSummary s = h.SummaryOver(buckets);
  s.count = s.count > extra_count ? s.count - extra_count : 0;
  s = WithExtra(s, extra_count, extra_value);
  s.count = buckets.count();
  EmitHistogramParts(w, key, unit, s, buckets, scale, 0, extra_value);
}

}  // namespace tcpadvise
