"""`tcpadvise bench --plot DIR`: one PNG per suite, drawn like the seeds'
figures: latency by message size, throughput by message size and by buffer,
with the seed's own figures where they compare."""

from pathlib import Path

# Figures without pyplot: no backend to choose, no display, no global state.
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from ..errors import BenchError
from . import seeds

_DPI = 120
_MEDIAN, _MINIMUM, _P99, _SEED = "tab:blue", "tab:green", "tab:red", "0.45"


def write_plots(results: dict, directory: Path) -> list[Path]:
    """Draw every suite in `results` into DIRECTORY/<suite>.png (bench.prepare_plot_directory
    made it); return the files written."""
    written = []
    for name, figure in suite_figures(results):
        path = directory / f"{name}.png"
        try:
            figure.savefig(path, dpi=_DPI, bbox_inches="tight")
        except OSError as error:
            raise BenchError(f"{path}: cannot write the chart ({error.strerror})") from None
        written.append(path)
    return written


def suite_figures(results: dict) -> list[tuple[str, Figure]]:
    """One figure per suite in `results`, with the suite's name (also the HTML page's charts)."""
    drawers = {"pingpong": _pingpong, "nagle": _nagle, "stream": _stream, "rpc": _rpc, "servers": _servers}
    return [(name, drawers[name](result, results["path"]["description"])) for name, result in results["suites"].items()]


def _plain_numbers(axis) -> None:
    """Log-scale ticks as 1, 10, 1,000 rather than powers of ten."""
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}" if value >= 1 else f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def _byte_ticks(axis, sizes: list[int]) -> None:
    """Ticks at `sizes`, labelled 1, 128, 4K, 64K, 1M."""

    def label(size: float) -> str:
        for unit, factor in (("M", 1 << 20), ("K", 1 << 10)):
            if size >= factor:
                return f"{size / factor:g}{unit}"
        return f"{size:g}"

    axis.set_ticks(sizes, [label(size) for size in sizes])
    axis.set_minor_formatter(NullFormatter())


def _errors(summaries: list[dict]) -> list[list[float]]:
    """matplotlib's asymmetric error bars from the summaries' confidence intervals."""
    return [[s["median"] - s["ci_low"] for s in summaries], [s["ci_high"] - s["median"] for s in summaries]]


def _pingpong(result: dict, path: str):
    figure = Figure(figsize=(12, 4.6))
    sweep_axes, boundary_axes = figure.subplots(1, 2, width_ratios=[3, 2])
    figure.suptitle(f"Ping-pong round trip by message size (seed 000) - {path}")
    sweep = [point for point in result["points"] if "mss" not in point["label"]]
    sizes = [point["request_bytes"] for point in sweep]
    trips = [point["round_trip_us"] for point in sweep]
    sweep_axes.fill_between(
        sizes,
        [t["ci_low"] for t in trips],
        [t["ci_high"] for t in trips],
        color=_MEDIAN,
        alpha=0.2,
        linewidth=0,
        label="median, 95% CI",
    )
    sweep_axes.plot(sizes, [t["median"] for t in trips], color=_MEDIAN, label="median")
    sweep_axes.plot(sizes, [t["minimum"] for t in trips], color=_MINIMUM, label="minimum")
    sweep_axes.plot(sizes, [t["p99"] for t in trips], color=_P99, linestyle="--", linewidth=0.8, label="p99")
    for segments in range(1, max(sizes) // result["mss"] + 1):
        sweep_axes.axvline(segments * result["mss"], color=_SEED, linestyle=":", linewidth=0.8)
        sweep_axes.text(
            segments * result["mss"],
            0.98,
            f"{segments + 1} segments ",
            color=_SEED,
            fontsize=7,
            rotation=90,
            ha="right",
            va="top",
            transform=sweep_axes.get_xaxis_transform(),
        )
    sweep_axes.set_yscale("log")
    _plain_numbers(sweep_axes.yaxis)
    sweep_axes.set_xlabel("message size (bytes)")
    sweep_axes.set_ylabel("round trip (µs)")
    sweep_axes.set_title(f"the seed's sweep (MSS {result['mss']} B)", fontsize=10)
    sweep_axes.legend(fontsize=8)
    sweep_axes.grid(True, which="both", alpha=0.3)

    boundary = [point for point in result["points"] if point["label"] == "1" or "mss" in point["label"]]
    labels = [f"{point['request_bytes']} B\n{point['segments_per_round']:.0f} seg." for point in boundary]
    summaries = [point["round_trip_us"] for point in boundary]
    positions = range(len(boundary))
    boundary_axes.bar(
        positions,
        [s["median"] for s in summaries],
        yerr=_errors(summaries),
        color=_MEDIAN,
        alpha=0.7,
        capsize=4,
        label="median, 95% CI",
    )
    boundary_axes.scatter(
        positions, [s["minimum"] for s in summaries], color=_MINIMUM, zorder=3, label="minimum"
    )
    boundary_axes.set_xticks(list(positions), labels, fontsize=8)
    boundary_axes.set_ylabel("round trip (µs)")
    boundary_axes.set_title("at the segment boundaries", fontsize=10)
    boundary_axes.legend(fontsize=8)
    boundary_axes.grid(True, axis="y", alpha=0.3)
    return figure


def _nagle(result: dict, path: str):
    figure = Figure(figsize=(9, 4.2))
    axes = figure.subplots()
    keys = list(result["arms"])
    summaries = [result["arms"][key]["round_trip_us"] for key in keys]
    positions = range(len(keys))
    axes.barh(
        positions,
        [s["median"] for s in summaries],
        xerr=_errors(summaries),
        color=_MEDIAN,
        alpha=0.7,
        capsize=3,
        label="median, 95% CI",
    )
    seeded = [
        (index, seeds.NAGLE_ROUND_US[key]) for index, key in enumerate(keys) if key in seeds.NAGLE_ROUND_US
    ]
    axes.scatter(
        [value for _, value in seeded],
        [index for index, _ in seeded],
        marker="x",
        color="black",
        zorder=3,
        label="seed 004 (loopback)",
    )
    axes.set_yticks(list(positions), keys)
    axes.invert_yaxis()
    axes.set_xscale("log")
    _plain_numbers(axes.xaxis)
    axes.set_xlabel("round trip (µs, log scale)")
    axes.set_title(f"15 two-byte writes, then a 2-byte reply (seed 004) - {path}")
    axes.legend(fontsize=8)
    axes.grid(True, axis="x", which="both", alpha=0.3)
    return figure


def _stream(result: dict, path: str):
    figure = Figure(figsize=(12, 4.6))
    size_axes, buffer_axes = figure.subplots(1, 2)
    figure.suptitle(f"Stream throughput, measured by the receiver (seed 003) - {path}")
    sizes = [row["write_bytes"] for row in result["by_size"]]
    for arm, color, label in (("nagle", _MEDIAN, "Nagle on"), ("nodelay", _P99, "Nagle off (TCP_NODELAY)")):
        summaries = [row[arm]["throughput_mbit_s"] for row in result["by_size"]]
        size_axes.errorbar(
            sizes,
            [s["median"] for s in summaries],
            yerr=_errors(summaries),
            color=color,
            marker="o",
            capsize=3,
            label=label,
        )
    seed_sizes = sorted(seeds.STREAM_BY_SIZE_MBIT_S)
    for index, style in ((0, "--"), (1, ":")):
        size_axes.plot(
            seed_sizes,
            [seeds.STREAM_BY_SIZE_MBIT_S[size][index] for size in seed_sizes],
            color=_SEED,
            linestyle=style,
            label=f"seed, Nagle {'on' if index == 0 else 'off'} (1 Gbit/s)",
        )
    size_axes.set_xscale("log", base=2)
    size_axes.set_yscale("log")
    _byte_ticks(size_axes.xaxis, [1, 16, 128, 1 << 10, 8 << 10, 64 << 10, 1 << 20, 4 << 20])
    _plain_numbers(size_axes.yaxis)
    size_axes.set_xlabel("write size (bytes)")
    size_axes.set_ylabel("Mbit/s")
    size_axes.set_title("by write size", fontsize=10)
    size_axes.legend(fontsize=8)
    size_axes.grid(True, which="both", alpha=0.3)

    limited = [row for row in result["by_sndbuf"] if row["sndbuf_set"]]
    summaries = [row["throughput_mbit_s"] for row in limited]
    buffers = [row["sndbuf_set"] for row in limited]
    buffer_axes.errorbar(
        buffers,
        [s["median"] for s in summaries],
        yerr=_errors(summaries),
        color=_MEDIAN,
        marker="o",
        capsize=3,
        label="SO_SNDBUF set",
    )
    autotuned = result["by_sndbuf"][-1]["throughput_mbit_s"]["median"]
    buffer_axes.axhline(autotuned, color=_MINIMUM, linestyle="--", label="autotuned")
    windows = sorted(seeds.STREAM_BY_WINDOW_MBIT_S)
    buffer_axes.plot(
        windows,
        [seeds.STREAM_BY_WINDOW_MBIT_S[w] for w in windows],
        color=_SEED,
        linestyle="--",
        label="seed, by TCP window (1 Gbit/s)",
    )
    buffer_axes.set_xscale("log", base=2)
    buffer_axes.set_yscale("log")
    _byte_ticks(buffer_axes.xaxis, [2 << 10, 8 << 10, 32 << 10, 128 << 10, 512 << 10, 2 << 20, 4 << 20])
    _plain_numbers(buffer_axes.yaxis)
    buffer_axes.set_xlabel("SO_SNDBUF / window (bytes)")
    buffer_axes.set_ylabel("Mbit/s")
    buffer_axes.set_title("bulk stream (64 KiB writes) by buffer", fontsize=10)
    buffer_axes.legend(fontsize=8)
    buffer_axes.grid(True, which="both", alpha=0.3)
    return figure


def _rpc(result: dict, path: str):
    figure = Figure(figsize=(9, 4.4))
    axes = figure.subplots()
    sizes = [row["request_bytes"] for row in result["sizes"]]
    for arm, color, label in (
        ("one_write", _MEDIAN, "one write"),
        ("split", _P99, f"large write + {result['tail_bytes']}-byte tail"),
    ):
        summaries = [row[arm]["round_trip_us"] for row in result["sizes"]]
        axes.errorbar(
            sizes,
            [s["median"] for s in summaries],
            yerr=_errors(summaries),
            color=color,
            marker="o",
            capsize=3,
            label=label,
        )
    for low, high in ((4045, 4952), (8090, 8960)):
        axes.axvspan(low, high, color=_SEED, alpha=0.15)
    axes.plot([], [], color=_SEED, alpha=0.4, linewidth=8, label="sizes slow in seed 002 (SunOS 4.0.1)")
    axes.set_yscale("log")
    _plain_numbers(axes.yaxis)
    axes.set_xlabel("request size (bytes)")
    axes.set_ylabel("round trip (µs, log scale)")
    axes.set_title(f"Requests around 4 and 8 KiB, Nagle on (seed 002) - {path}")
    axes.legend(fontsize=8)
    axes.grid(True, which="both", alpha=0.3)
    return figure


def _grouped_bars(axes, groups: dict[str, dict[str, dict | None]], scale: dict[str, float]) -> None:
    """One cluster of bars per group, a bar per arm: each arm's median and 95% CI over scale[group]."""
    arms = list(next(iter(groups.values())))
    width = 0.8 / len(arms)
    for index, arm in enumerate(arms):
        positions, medians, errors = [], [], [[], []]
        for position, (group, by_arm) in enumerate(groups.items()):
            summary = by_arm[arm]
            if summary is None or not scale[group]:
                continue
            positions.append(position + (index - (len(arms) - 1) / 2) * width)
            medians.append(summary["median"] / scale[group])
            errors[0].append((summary["median"] - summary["ci_low"]) / scale[group])
            errors[1].append((summary["ci_high"] - summary["median"]) / scale[group])
        axes.bar(positions, medians, width, yerr=errors, capsize=2, label=arm)
    axes.set_xticks(range(len(groups)), list(groups))
    axes.grid(True, axis="y", which="both", alpha=0.3)


def _servers(result: dict, path: str):
    cpu = result.get("cpu_source") is not None and bool(result["servers"])
    figure = Figure(figsize=(20 if cpu else 13, 4.6))
    if cpu:
        server_axes, cpu_axes, client_axes = figure.subplots(1, 3, width_ratios=(3, 3, 2))
    else:
        server_axes, client_axes = figure.subplots(1, 2, width_ratios=(3, 2))
    if result["servers"]:
        _against_baseline(server_axes, result, "vs_baseline_paired", "requests/s", higher_is_better=True)
    server_axes.set_title(f"real servers' requests/s, the server under each policy - {path}", fontsize=10)
    if cpu:
        _against_baseline(cpu_axes, result, "cpu_vs_baseline_paired", "CPU time per request",
                          higher_is_better=False)
        cpu_axes.set_title("the server's CPU time per request (its whole process tree, from its cgroup)",
                           fontsize=10)
    trips = {
        name: {policy: arm["round_trip_us"] for policy, arm in client["arms"].items()}
        for name, client in result["clients"].items()
    }
    _grouped_bars(client_axes, trips, {name: 1 for name in trips})
    client_axes.set_yscale("log")
    _plain_numbers(client_axes.yaxis)
    client_axes.set_ylabel("round trip (µs, log scale)")
    client_axes.set_title("multi-write clients under each policy, and as one writev", fontsize=10)
    client_axes.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    return figure


def _against_baseline(axes, result: dict, field: str, label: str, higher_is_better: bool) -> None:
    """Each server's arms' paired ratio `field` (each run against the baseline's run of its round: median and 95%
    interval, as the goal lines read it) as a %, with the goal's line for the adaptive policies (below it for a
    rate, above it for a cost)."""
    values = {
        name: {policy: arm.get(field) for policy, arm in server["arms"].items()}
        for name, server in result["servers"].items()
    }
    _grouped_bars(axes, values, {name: 0.01 for name in values})
    within = result["goals"]["server_within"]
    axes.axhline(100 * (1 - within if higher_is_better else 1 + within), color="black", linewidth=0.8,
                 linestyle="--", label="goal for adaptive")
    axes.set_ylabel(f"{label}, % of the baseline's run of the same round")
    shares = [100 * paired["median"] for by_policy in values.values() for paired in by_policy.values() if paired]
    if higher_is_better:
        axes.set_ylim(min(90, min(shares, default=90) - 5), None)
    else:
        axes.set_ylim(min(95, min(shares, default=95) - 2), max(110, max(shares, default=110) + 5))
    axes.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
