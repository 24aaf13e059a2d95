"""``KeypointMemo``: what a ``conv="taps"`` keypoints policy (``pong.keypoints``) keeps from one
step of a game to the next. A module of its own to keep ``pong/keypoints.py`` short."""
from __future__ import annotations

import numpy as np

FRAMES, SIZE = 4, 42      # an observation: 4 stacked frames of 42 x 42 pixels (pong.pixels.check_obs)


def _padded(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` with zero rows appended up to ``n`` rows."""
    return np.concatenate([a, np.zeros((n - len(a), *a.shape[1:]), a.dtype)])


class KeypointMemo:
    """What a ``conv="taps"`` policy saw at the previous step of each episode of one
    ``PongGames.play``: the observation and its frames' keypoints, by episode number. A frame is
    reused only where the new observation's older frames are the previous one's newer frames,
    byte for byte, so the memo changes no result, only the time. What depends
    on a member's parameters alone (a windows policy's pull logits and their exponentials at
    every pixel, ``window_field``, which a step would otherwise compute at the pixels near
    something and over the empty field; vbn's statistics, 256 frames) is kept too, per episode with
    the parameters it came from, and reused where those are the same bytes (``derived``)."""

    def __init__(self, keypoints: int):
        self.obs = np.zeros((0, FRAMES, SIZE, SIZE), dtype=np.uint8)
        self.values = np.zeros((0, 3, keypoints, FRAMES))            # column, row, presence
        self.valid = np.zeros(0, dtype=bool)
        self._derived: dict = {}   # name -> {"params", "values", "valid"}, each indexed by episode

    def _grow(self, n: int) -> None:
        if n > len(self.valid):
            n = max(n, 2 * len(self.valid))
            self.obs, self.values, self.valid = (_padded(a, n) for a in (self.obs, self.values, self.valid))

    def derived(self, name: str, keys, params: np.ndarray, compute, gather: bool = True):
        """``compute(params)`` (row by row: each row's values from that row alone), computed only
        for the episodes (``keys``) whose ``params`` differ, byte for byte, from those it was last
        computed from; the rest are the kept values. ``gather=False``: ``(kept, keys)``, all
        kept values and where each row's are, for values too large to copy at every step."""
        keys = np.asarray(keys, dtype=np.int64)
        kept = self._derived.setdefault(name, {"params": np.zeros((0, *params.shape[1:]), params.dtype),
                                               "valid": np.zeros(0, dtype=bool)})
        need = int(keys.max(initial=-1)) + 1
        if need > len(kept["valid"]):
            size = max(need, 2 * len(kept["valid"]))
            for field, a in kept.items():
                kept[field] = _padded(a, size)
        same = kept["valid"][keys] & (kept["params"][keys] == params).reshape(len(keys), -1).all(axis=1)
        new = np.flatnonzero(~same)
        if len(new):
            fresh = compute(params[new])
            if "values" not in kept:                                 # their shape, from the first
                kept["values"] = np.zeros((len(kept["valid"]), *fresh.shape[1:]))
            kept["params"][keys[new]], kept["values"][keys[new]], kept["valid"][keys[new]] = params[new], fresh, True
        return kept["values"][keys] if gather else (kept["values"], keys)
