"""How live coordinator instances divide the internal topics' partitions among themselves.

`divide_partitions` is pure: given the current owners and the live coordinator ids, it returns an
owner for every partition such that each live coordinator owns ⌊n/k⌋ or ⌈n/k⌉ of the n
partitions, and as few partitions as possible change owner: a live owner keeps what it has up to
its share, and only partitions of dead owners, new partitions and a surplus move. Those that move
go, in partition order, to the coordinators with room, lowest id first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from services.common.topic_partition import TopicPartition


def divide_partitions(partitions: Iterable[TopicPartition], current_owners: Mapping[TopicPartition, int],
                      live_ids: Iterable[int]) -> dict[TopicPartition, int]:
    ordered = sorted(set(partitions))
    live = sorted(set(live_ids))
    if not live:
        return {}
    base, extra = divmod(len(ordered), len(live))
    kept: dict[int, list[TopicPartition]] = {c: [] for c in live}
    for tp in ordered:
        owner = current_owners.get(tp)
        if owner in kept:
            kept[owner].append(tp)
    # the coordinators already holding the most keep the larger shares, so fewer partitions move
    by_holding = sorted(live, key=lambda c: (-len(kept[c]), c))
    share = {c: base + (1 if rank < extra else 0) for rank, c in enumerate(by_holding)}
    owners: dict[TopicPartition, int] = {}
    for c in live:
        for tp in kept[c][:share[c]]:
            owners[tp] = c
    room = {c: share[c] - min(len(kept[c]), share[c]) for c in live}
    for tp in ordered:
        if tp in owners:
            continue
        target = next(c for c in live if room[c] > 0)
        owners[tp] = target
        room[target] -= 1
    return owners
