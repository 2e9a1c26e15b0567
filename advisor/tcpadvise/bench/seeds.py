"""The seeds' own figures (../shared/seeds/*.txt), set beside what `tcpadvise
bench` measures. Copied from the texts as they stand; where a seed gives no
unit or no exact figure, the comment says how it is read here."""

# 000: "Eyeballing the minimum times from the graphs": penalty over a 1-byte
# message, by network, as fractions.
PINGPONG_PENALTIES = {
    "Wired LAN": {"fill": 0.30, "second": 0.30, "fourth": 0.60},
    "Wireless": {"fill": 0.15, "second": 0.40, "fourth": 0.80},
    "ADSL": {"fill": 0.05, "second": 0.15, "fourth": 0.25},
    "3G": {"fill": 0.0, "second": 0.20, "fourth": 0.40},
    "2G": {"fill": 0.0, "second": 0.0, "fourth": 0.25},
}

# 004: 10,000 rounds over loopback, total milliseconds, so per round in us.
NAGLE_ROUND_US = {"plain": 400129.781250 / 10, "nodelay": 1649.771240 / 10, "cork": 850.796448 / 10}

# 002: time for an RPC call with an argument of N bytes, TCP, client and
# server on one machine (SunOS 4.0.1, sun3/60); the seed names no unit, so
# only ratios are compared.
RPC_TCP_LOCAL = {0: 6.9, 512: 8.2, 1024: 10.6, 2048: 14.9, 4000: 23.6, 4096: 174.5, 8000: 40.2, 8192: 182.8}

# 003: iperf on 1 Gbit/s, Mbit/s. By message size (window 256 KB): (Nagle on, Nagle off).
STREAM_BY_SIZE_MBIT_S = {
    4096 * 1024: (933, 939),
    1024 * 1024: (917, 939),
    256 * 1024: (941, 941),
    64 * 1024: (942, 941),
    32 * 1024: (942, 941),
    16 * 1024: (942, 941),
    8 * 1024: (942, 941),
    4 * 1024: (942, 941),
    2 * 1024: (941, 857),
    1024: (941, 907),
    512: (816, 462),
    256: (530, 256),
    128: (349, 124),
    64: (209, 62),
    16: (71, 25),
    4: (17.5, 6.5),
    1: (4, 1),
}
# By TCP window (bytes): Mbit/s.
STREAM_BY_WINDOW_MBIT_S = {
    4096 * 1024: 942,
    1024 * 1024: 942,
    256 * 1024: 941,
    64 * 1024: 928,
    32 * 1024: 935,
    16 * 1024: 772,
    8 * 1024: 481,
    4 * 1024: 346,
    2 * 1024: 344,
}
STREAM_PEAK_MBIT_S = 942
