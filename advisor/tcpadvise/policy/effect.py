"""policy_effects: what the adaptive cork and coalesce (the default forms) would do on each socket group.

An adaptive policy acts only on bursts of more than one write (docs/policy-config.md,
Adaptive): a group whose bursts are all single writes passes straight through, with
no holding and no extra system call, so the expected effect there is none. A group
that writes in pieces has those bursts sent as one; with Nagle on and turns at the
delayed-ACK scale, that is the stall gone.
"""

from ..model import hist
from ..model.metrics import Scope, subjects_of
from ..model.report import Report
from ..units import format_duration_us, ns_to_us

# DELAYED_ACK_US: a turn this slow with Nagle on and multi-write bursts is the delayed-ACK stall.
DELAYED_ACK_US = 30_000


def policy_effects(report: Report) -> list[dict]:
    """One entry per socket group that writes: its bursts, how many have several writes, the effect."""
    return [effect for scope in subjects_of(report) if isinstance(scope, Scope)
            if (effect := policy_effect(scope, any(nagle_on(report.sockets[index]) for index in scope.sockets)))
            is not None]


def nagle_on(item: dict) -> bool:
    """Whether a socket item ran with Nagle's algorithm (TCP_NODELAY off or unknown)."""
    return not item["options"].get("nodelay")


def policy_effect(scope: Scope, nagle: bool) -> dict | None:
    """The expected effect on one socket group; nagle: whether any of its sockets ran with Nagle on."""
    bursts = scope.merged["bursts"]
    if not bursts["count"]:
        return None
    multi_write = sum(count for low, _, count in hist.ranges(bursts["writes"]) if low >= 2)
    turn_p50_us = ns_to_us(hist.percentile(scope.merged["turns"]["ns"], 0.5))
    if multi_write == 0:
        effect, text = "none", "no effect: every burst is a single write (passed straight through, no extra call)"
    else:
        effect = "holds"
        share = f"{multi_write} of {bursts['count']} bursts have several writes"
        if nagle and turn_p50_us is not None and turn_p50_us >= DELAYED_ACK_US:
            text = (f"{share}: each would leave as one send, without the delayed-ACK wait "
                    f"(turn p50 now {format_duration_us(turn_p50_us)})")
        else:
            text = f"{share}: each would leave as one send (fewer segments and calls)"
    return {
        "program": scope.program,
        "role": scope.role,
        "local_port": scope.local_port,
        "peer": scope.peer,
        "peer_port": scope.peer_port,
        "connections": scope.merged["connections"],
        "bursts": bursts["count"],
        "multi_write_bursts": multi_write,
        "effect": effect,
        "text": text,
    }
