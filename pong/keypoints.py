"""A Pong policy that learns from the pixels where to look: learned filters, a spatial
soft-argmax (keypoints), products of the keypoints' learned coordinates, an MLP.

Every number between the 42x42x4 observation and the action comes from parameters that ES
learns. The fixed steps are those any Atari agent takes: the frames are stacked and
downsampled by the environment, the static picture (``background.npy``: field, walls, 0:0
score) is subtracted and the result scaled by 1/255. Nothing here knows where the ball or
the paddles are: no crops, columns, thresholds or masks written for them.

Per keypoint ``k`` (``keypoints`` of them; each member has its own parameters):

1. **A learned 3x3 filter** ``w_k`` (shared by the 4 frames, zero padding) and **a learned
   pull** ``(a_k, c_k)`` along the columns and rows: the logit of pixel ``p`` is
   ``SHARPNESS * (conv(x, w_k)(p) + a_k col(p) + c_k row(p))``, with ``col, row`` in [-1, 1].
   The filter says *what* to look for (a small bright dot, a tall bar), the pull *where*
   (the right side of the field, for our paddle): CoordConv's two channels folded into the
   logits.
2. **A spatial soft-argmax** per frame (Levine et al. 2016's keypoint layer): the softmax of
   the logits over the 1764 pixels, and the expected column and row under it.
3. **What the head reads** of each keypoint: its newest column and row, its velocity (the
   least-squares slope over the 4 frames, pixels per agent step) and its presence (the share
   of attention on pixels where something differs from the background: 0 when the frame is
   empty, about 1 when an object outshines the empty field).
4. **The head**: these ``5 K`` numbers and all their pairwise products, an MLP (16 tanh
   units by default) to 3 logits, argmax. The products make "where will the ball cross my
   column" (height + vertical speed x distance) a linear function of the features, as in
   ``PongObjectsPolicy``, which reads the same kind of numbers off the pixels by fixed code.

**Why it is fast** (the issue: a generation at least 0.8 of the bare games' speed). After
subtracting the background, a frame is exactly zero except for some 25 pixels (ball, paddles,
changed score digits). Where a pixel's 3x3 neighbourhood is all zero its logit is the pull
alone, which is separable: ``sum_p exp(S (a col + c row)) = (sum_col exp(S a col)) x
(sum_row exp(S c row))``. So the softmax's sums are the separable sums over the whole frame
plus, for the few pixels near something, ``exp(logit) - exp(pull)``: the same softmax as the
dense computation (``dense_keypoints``) at a few hundred exponentials per frame instead of
1764. Sums run in float64 per (row, frame), in pixel order, so a member's action does not
depend on which other members share its batch.

**Faster still, for new runs** (``conv="taps"``, ``frame_keypoints``): the filter's response
is summed source pixel by source pixel in a fixed order, not as a product of each row's
windows by its filters. A frame's keypoints depend on that frame alone, and a game's next
observation shares 3 of its 4 frames with the last one: ``KeypointMemo`` reuses them (2 with
``motion``: the oldest frame's change is 0), checked byte for byte: faster, no result changes.

**Windows and normalized inputs.** ``pull="windows"``: each keypoint looks through a
learned window along the columns (``window_tables``), the ``k`` windows tiling the field evenly
at first, so that a window holds the ball alone while the ball crosses its stretch. ``vbn``:
the head's inputs are centred and scaled by their mean and spread over a fixed reference batch
of observations (``normalize``), the paper's virtual batch normalization; without it the
members of a generation scored alike in the course's runs. ``mix``: a learned
linear map mixes the ``5 K`` features into a few numbers, and the head reads those and their
products, so that the head has a few hundred weights, not thousands.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from es import exact
from es.interfaces import Policy
from es.policies import MLPPolicy
from es.seeding import INIT, rng_for

from .keypoint_memo import FRAMES, SIZE, KeypointMemo
from .pixels import BACKGROUND_INT as _BACKGROUND_INT
from .pixels import N_ACTIONS
from .pixels import check_obs as _check

TAPS = 9
SHARPNESS = 40.0          # logit units per unit of filter response: the ball (~0.23 after /255)
                          # outshines the 1764 empty pixels (ln 1764 = 7.5) at filter weight ~1
FEATURES_PER_KEYPOINT = 5  # column, row, column speed, row speed, presence
_COORD = np.linspace(-1.0, 1.0, SIZE)                       # col(p), row(p)
_STEPS = np.array([-1.5, -0.5, 0.5, 1.5])                   # frame times, centred: slope = sum(t v) / 5
_OFFSETS = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
_DY = np.array([dy for dy, _ in _OFFSETS])
_DX = np.array([dx for _, dx in _OFFSETS])
_PADDED_OFFSETS = _DY * (SIZE + 2) + _DX                      # frame_keypoints' (44, 44) planes
_PIXELS = SIZE * SIZE
_PLANE = (SIZE + 2) ** 2
_PADDED_AT = (np.arange(SIZE)[:, None] * (SIZE + 2) + np.arange(SIZE) + SIZE + 3).ravel()   # pixel -> padded
_INTERIOR = np.isin(np.arange(_PLANE), _PADDED_AT)         # a padded plane's pixels, not its ring
_UNPADDED = np.cumsum(_INTERIOR) - 1                          # padded -> pixel (meaningless on the ring)
_EXP_ZERO = -750.0        # exact.exp is exactly 0 below -745.13
PULL_SCALE = 0.25         # what new runs multiply the pull parameters by (PongKeypointsPolicy)
CONVS = ("blas", "taps")  # how the filters' responses are summed (PongKeypointsPolicy's conv; "blas" is
                          # the name specs carry: the product is einsum's, whose bits do not depend on the CPU)
PULLS = ("linear", "windows")  # where each keypoint may look (PongKeypointsPolicy's pull)
WINDOW_DEPTH = 0.1        # windows: the column logit falls by SHARPNESS x 0.1 x d**4 / 2 at d half-widths from
                          # the window's centre: 0.1 at 0.5, 2 at 1 (its edge), 10 at 1.5, 32 at 2; the ball
                          # stands 10 above the empty field, a paddle 8: flat inside, steep outside
MAX_LOGIT = 600.0         # exp(600) ~ 1e260: float64 sums never overflow
VBN_FLOOR = 0.1           # vbn: an input that barely varies over the reference batch is divided by this
VBN_CLIP = 5.0            # ... and every normalized input is clipped to +-5 (as evolution-strategies-starter
                          # clips its normalized observations): one rare in the batch cannot saturate the head
HEAD_INPUTS = ("raw", "vbn")   # what the head reads (PongKeypointsPolicy's vbn)
MAX_MIX = 16                   # PongKeypointsPolicy's mix: at most this many learned mixtures
_REFERENCE = None              # pong/reference.npz, loaded on first use


def reference_batch() -> np.ndarray:
    """The 64 observations of virtual batch normalization (``reference.npz``: uint8
    ``(64, 4, 42, 42)``, seeded random play in four of ALE/Pong-v5's games, chosen once before
    training and never changed)."""
    global _REFERENCE
    if _REFERENCE is None:
        with np.load(Path(__file__).with_name("reference.npz")) as z:
            _REFERENCE = z["obs"]
    return _REFERENCE


def _frames(obs, motion: bool = False) -> np.ndarray:
    """uint8 ``(rows, 4, 42, 42)`` -> int16 ``(rows, 4, channels, 42, 42)`` (x 1/255 where it is
    used): ``frame - background``, and with ``motion`` also its change since the previous frame
    (0 for the oldest frame)."""
    obs = _check(obs)
    diff = _diffs(obs)
    if not motion:
        return diff[:, :, None]
    change = np.zeros_like(diff)
    change[:, 1:] = diff[:, 1:] - diff[:, :-1]
    return np.stack([diff, change], axis=2)


def _diffs(frames: np.ndarray) -> np.ndarray:
    diff = frames.astype(np.int16) - _BACKGROUND_INT
    diff[~frames.any(axis=(-2, -1))] = 0   # the 3 empty frames after a reset: an empty field, not a black one
    return diff


def _frames_at(obs: np.ndarray, ri: np.ndarray, fi: np.ndarray, motion: bool) -> np.ndarray:
    """``_frames(obs, motion)[ri, fi]``, computing those frames only."""
    images = np.zeros((len(ri), 2 if motion else 1, SIZE, SIZE), dtype=np.int16)
    images[:, 0] = _diffs(obs[ri, fi])
    if motion:
        later = np.flatnonzero(fi)
        images[later, 1] = images[later, 0] - _diffs(obs[ri[later], fi[later] - 1])
    return images


def _unpack(front: np.ndarray, k: int, channels: int = 1, pull_params: int = 2):
    """``(rows, k * (9 channels + pull_params))`` -> filters ``(rows, k, 9 channels)`` (channel
    after channel), pulls ``(rows, k, pull_params)`` (linear: column, row; windows: centre,
    log-width, row)."""
    taps = TAPS * channels
    front = front.reshape(len(front), k, taps + pull_params).astype(np.float64)
    return front[:, :, :taps], front[:, :, taps:]


def dense_keypoints(x: np.ndarray, filters: np.ndarray, pulls: np.ndarray):
    """The reference: the softmax over every pixel. ``x (rows, 4, channels, 42, 42)`` (``_frames``:
    integers), ``filters (rows, k, 9 channels)``, ``pulls (rows, k, 2)`` (or a windows policy's
    ``window_tables``, ``(rows, k, 2, 42)``) -> (column, row,
    presence), each ``(rows, k, 4)``; column and row in pixels."""
    r, c = len(x), x.shape[2]
    x = np.asarray(x, dtype=np.float64) / 255
    padded = np.pad(x, ((0, 0), (0, 0), (0, 0), (1, 1), (1, 1)))
    shifts = np.stack([padded[..., 1 + dy:1 + dy + SIZE, 1 + dx:1 + dx + SIZE] for dy, dx in _OFFSETS], axis=-1)
    shifts = shifts.transpose(0, 1, 3, 4, 2, 5).reshape(r, FRAMES, SIZE, SIZE, c * TAPS)
    conv = np.einsum("rfyxj,rkj->rkfyx", shifts, filters)
    if pulls.ndim == 4:                                      # windows: column and row logit tables
        pull = pulls[:, :, 0, None, :] + pulls[:, :, 1, :, None]
    else:
        pull = (pulls[:, :, 0, None, None] * _COORD[None, None, None, :]
                + pulls[:, :, 1, None, None] * _COORD[None, None, :, None])
    logits = np.minimum(SHARPNESS * (conv + pull[:, :, None]), MAX_LOGIT)
    e = exact.exp(logits).reshape(r, -1, FRAMES, SIZE * SIZE)
    z = e.sum(axis=-1)
    cols, rows = np.tile(np.arange(SIZE), SIZE), np.repeat(np.arange(SIZE), SIZE)
    busy = (x != 0).any(axis=2).reshape(r, 1, FRAMES, SIZE * SIZE)
    presence = (e * busy).sum(axis=-1) / z
    return (e * cols).sum(axis=-1) / z, (e * rows).sum(axis=-1) / z, presence


def _near_exponentials(conv, pulls, at, xi, yi):
    """``exp(logit)`` at the pixels near something, and its excess over the empty field's
    ``exp(pull)`` there: ``conv (n, k)``, the pulls of each pixel's row or image ``pulls[at]``:
    linear ``(rows, k, 2)`` or tables of column and row logits ``(rows, k, 2, 42)``."""
    if pulls.ndim == 4:
        pull_here = pulls[at, :, 0, xi] + pulls[at, :, 1, yi]
    else:
        pull_here = pulls[at, :, 0] * _COORD[xi, None] + pulls[at, :, 1] * _COORD[yi, None]
    e_near = exact.exp(np.minimum(SHARPNESS * (conv + pull_here), MAX_LOGIT))
    return e_near, e_near - exact.exp(np.minimum(SHARPNESS * pull_here, MAX_LOGIT))


def _empty_field(pulls):
    """The softmax's sums over an empty field, separable: per (row, keypoint) the normaliser and
    the column- and row-weighted sums, ``(rows, k)`` each."""
    if pulls.ndim == 4:                                                              # windows: tables
        ec = exact.exp(np.minimum(SHARPNESS * pulls[:, :, 0], MAX_LOGIT))
        er = exact.exp(np.minimum(SHARPNESS * pulls[:, :, 1], MAX_LOGIT))
    else:
        ec = exact.exp(np.minimum(SHARPNESS * pulls[:, :, 0, None] * _COORD, MAX_LOGIT))   # (rows, k, 42)
        er = exact.exp(np.minimum(SHARPNESS * pulls[:, :, 1, None] * _COORD, MAX_LOGIT))
    sc, sr = ec.sum(axis=-1), er.sum(axis=-1)
    return sc * sr, (ec * np.arange(SIZE)).sum(axis=-1) * sr, sc * (er * np.arange(SIZE)).sum(axis=-1)


def sparse_keypoints(x: np.ndarray, filters: np.ndarray, pulls: np.ndarray):
    """The same as ``dense_keypoints``, computed from the separable sums over the empty field
    plus corrections at the pixels whose 3x3 neighbourhood holds something (see the module's
    docstring). Flat indices into zero-padded ``(rows, 4, [channels,] 44, 44)`` copies."""
    r, c, k = len(x), x.shape[2], filters.shape[1]
    side = SIZE + 2
    plane = side * side
    padded = np.zeros((r, FRAMES, c, side, side), dtype=np.int16)
    padded[..., 1:-1, 1:-1] = x
    flat = padded.reshape(-1)
    busy_px = (padded != 0).any(axis=2).reshape(-1) if c > 1 else flat != 0   # per (row, frame, pixel)
    offsets = np.array([dy * side + dx for dy, dx in _OFFSETS])
    busy_at = np.flatnonzero(busy_px)                                 # pixels that differ from the field
    near_mask = np.zeros(busy_px.size, dtype=bool)
    near_mask[(busy_at[:, None] - offsets).ravel()] = True           # ... and every pixel whose 3x3 window holds one
    near_mask = near_mask.reshape(r, FRAMES, side, side)
    near_mask[:, :, [0, -1], :] = False                               # the padding ring is no pixel
    near_mask[:, :, :, [0, -1]] = False
    near = np.flatnonzero(near_mask)                                  # per (row, frame), in pixel order
    per_row = FRAMES * plane
    ri, rest = np.divmod(near, per_row)
    fi, yx = np.divmod(rest, plane)
    yi, xi = np.divmod(yx, side)
    yi, xi = yi - 1, xi - 1
    if c == 1:
        patch = flat[near[:, None] + offsets] * (1 / 255)             # (n, 9)
    else:                                                             # (n, 9 c): channel after channel
        at = (near - yx) * c + yx                                     # channel 0 of each pixel in (rows, 4, c, 44, 44)
        patch = np.concatenate([flat[(at + j * plane)[:, None] + offsets] for j in range(c)], axis=1) * (1 / 255)
    conv = np.empty((len(near), k))
    bounds = np.searchsorted(ri, np.arange(r + 1))                   # near pixels are grouped by row
    for i in range(r):                                                # one (n_i, 9 c) x (9 c, k) product per row
        conv[bounds[i]:bounds[i + 1]] = np.einsum("nj,jk->nk", patch[bounds[i]:bounds[i + 1]], filters[i].T)
    e_near, e_extra = _near_exponentials(conv, pulls, ri, xi, yi)
    busy = busy_px[near][:, None]
    base_z, base_col, base_row = _empty_field(pulls)

    bins = ((ri * FRAMES + fi) * k)[:, None] + np.arange(k)           # (row, frame, keypoint) of each value
    size = r * FRAMES * k

    def total(weights):
        return np.bincount(bins.ravel(), weights.ravel(), minlength=size).reshape(r, FRAMES, k).transpose(0, 2, 1)

    z = base_z[:, :, None] + total(e_extra)
    z = np.maximum(z, np.finfo(np.float64).tiny)
    col = (base_col[:, :, None] + total(e_extra * xi[:, None])) / z
    row = (base_row[:, :, None] + total(e_extra * yi[:, None])) / z
    return col, row, total(e_near * busy) / z


def frame_keypoints(images: np.ndarray, filters: np.ndarray, pulls: np.ndarray | None, field=None):
    """The keypoints of single frames, each from its own pixels only (``conv="taps"``):
    ``images (m, channels, 42, 42)`` (``_frames``' integers, one frame of one row each),
    ``filters (m, k, 9 channels)``, ``pulls (m, k, 2)`` -> (column, row, presence), each ``(m, k)``.
    ``field``: instead of ``pulls``, ``(table, at)``: a windows policy's ``window_field`` per
    member and the member of each image (``at (m,)``); the same numbers, looked up.

    The same softmax as ``sparse_keypoints``, but the filter's response is summed source pixel by
    source pixel: every pixel that differs from the field adds ``value x tap`` to the 9 pixels
    whose window holds it (``bincount``, in a fixed order), where ``sparse_keypoints`` multiplies
    a row's windows by its filters. So a frame's keypoints depend on that frame and its
    member's parameters alone, and a frame seen at the previous step need not be computed again
    (``KeypointMemo``): 3 of 4 frames are reused with ``frames``, 2 of 4 with ``frames+motion``
    (the oldest frame's change is 0 there)."""
    m, c = images.shape[:2]
    k = filters.shape[1]
    flat = images.reshape(-1)
    sources = np.flatnonzero(flat != 0)                              # per image and channel, in pixel order
    value = flat[sources] * (1 / 255)
    image_channel, yx = np.divmod(sources, _PIXELS)
    centre = (image_channel // c) * _PLANE + _PADDED_AT[yx]          # flat index into zero-padded (m, 44, 44)
    # the 9 pixels whose window holds each source: those on the padding ring are no pixel, and
    # their sums go to a bin left out
    target = centre[:, None] - _PADDED_OFFSETS
    near_mask = np.zeros((m, _PLANE), dtype=bool)
    near_mask.reshape(-1)[target.ravel()] = True
    near_mask &= _INTERIOR
    near = np.flatnonzero(near_mask)                                 # per image, in pixel order
    slot = np.empty(m * _PLANE, dtype=np.int64)
    slot[target.ravel()] = len(near)
    slot[near] = np.arange(len(near))
    n = len(near)
    # one keypoint at a time, sources and taps in order: NumPy's loops run over the sources, not
    # over 6 keypoints at a time
    taps = filters.reshape(m, k, c, TAPS).transpose(1, 0, 2, 3).reshape(k, m * c, TAPS)
    weights = np.take(taps, image_channel, axis=1).reshape(k, -1)
    weights *= np.repeat(value, TAPS)
    bins = slot[target].ravel()
    conv = np.empty((n + 1, k))
    for j in range(k):
        conv[:, j] = np.bincount(bins, weights[j], minlength=n + 1)
    conv = conv[:-1]
    ni, padded_at = np.divmod(near, _PLANE)
    at_pixel = _UNPADDED[padded_at]
    yi, xi = np.divmod(at_pixel, SIZE)
    busy_mask = np.zeros(m * _PLANE, dtype=bool)                     # pixels that differ from the field
    busy_mask[centre] = True
    busy = busy_mask[near]
    if field is None:
        e_near, e_extra = _near_exponentials(conv, pulls, ni, xi, yi)
        base_z, base_col, base_row = _empty_field(pulls)
        bins = (ni * k)[:, None] + np.arange(k)
        xi, yi, busy = xi[:, None], yi[:, None], busy[:, None]
    else:
        table, at = field
        flat_table = table.reshape(-1, k)                      # one index per lookup: np.take is fast
        here = at[ni] * table.shape[1] + at_pixel
        logit = np.take(flat_table, here, axis=0)
        logit += conv
        logit *= SHARPNESS
        np.minimum(logit, MAX_LOGIT, out=logit)
        field_e = np.take(flat_table, here + _PIXELS, axis=0)
        # far outside a window both exponentials are exactly 0 and add nothing to the sums
        live = np.flatnonzero(~((logit < _EXP_ZERO) & (field_e == 0)))
        at_near = live // k
        e_near = exact.exp(logit.reshape(-1)[live])
        e_extra = e_near - field_e.reshape(-1)[live]
        base_z, base_col, base_row = table[at, 2 * _PIXELS:].transpose(1, 0, 2)
        bins = live + ((ni - np.arange(n)) * k)[at_near]
        xi, yi, busy = xi[at_near], yi[at_near], busy[at_near]

    def total(w):
        return np.bincount(bins.ravel(), w.ravel(), minlength=m * k).reshape(m, k)

    z = np.maximum(base_z + total(e_extra), np.finfo(np.float64).tiny)
    col = (base_col + total(e_extra * xi)) / z
    row = (base_row + total(e_extra * yi)) / z
    return col, row, total(e_near * busy) / z


def window_tables(pulls: np.ndarray, scale: float) -> np.ndarray:
    """A windows policy's pull parameters ``(rows, k, 3)`` -> its column and row logits (before
    ``SHARPNESS``), ``(rows, k, 2, 42)``. Keypoint ``i`` of ``k`` looks through a window
    along the columns, centred at ``scale x p0`` (in [-1, 1]) with half-width
    ``exp(scale x p1) / k``, and pulls along the rows by ``scale x p2``, as a linear policy does.
    The window is flat inside and steep outside (a 4th power, not a Gaussian's square: with a
    square, a keypoint whose filter responds strongly saw a ball two half-widths away as well as
    one at its centre). Still separable in column and row, so the empty field's sums stay cheap."""
    centre, width = _window_centre_width(pulls[..., None], scale)
    columns = -0.5 * WINDOW_DEPTH * exact.fourth_power((_COORD - centre) / width)
    rows = scale * pulls[:, :, 2, None] * _COORD
    return np.stack([columns, rows], axis=2)


def _window_centre_width(pulls: np.ndarray, scale: float):
    """Each window's centre and half-width in [-1, 1] column units, from pull parameters
    ``(rows, k, 3, ...)``."""
    return scale * pulls[:, :, 0], exact.exp(scale * pulls[:, :, 1]) / pulls.shape[1]


def window_columns(pulls: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """A windows policy's pull parameters ``(rows, k, 3)`` -> each window's centre and half-width
    in pixel columns (0 to 41), ``(rows, k)`` each: the window ``window_tables`` draws, as the
    figure and the course's pages report it."""
    centre, width = _window_centre_width(pulls, scale)
    return (centre + 1) * (SIZE - 1) / 2, width * (SIZE - 1) / 2


def window_field(tables: np.ndarray) -> np.ndarray:
    """What a windows policy's softmax needs of its pulls alone, for every pixel, to look up
    rather than compute at each step (``frame_keypoints``' ``field``): ``window_tables``
    ``(rows, k, 2, 42)`` -> ``(rows, 2 x 1764 + 3, k)``: per pixel (row-major) the pull's logit
    (column logit + row logit) and ``exp(SHARPNESS x logit)``, then the empty field's three sums
    (``_empty_field``). The very operations ``_near_exponentials`` and ``_empty_field`` do, so
    the same bits; 10,584 exponentials per member and episode, where each step took one per
    keypoint at every pixel near something, and 504 for the empty field."""
    rows, k = tables.shape[:2]
    logit = (tables[:, :, 0, None, :] + tables[:, :, 1, :, None]).transpose(0, 2, 3, 1).reshape(rows, _PIXELS, k)
    empty = np.stack(_empty_field(tables), axis=1)
    return np.concatenate([logit, exact.exp(np.minimum(SHARPNESS * logit, MAX_LOGIT)), empty], axis=1)


def keypoint_features(col: np.ndarray, row: np.ndarray, presence: np.ndarray) -> np.ndarray:
    """``(rows, k, 4)`` each -> ``(rows, 5 k)``: newest column and row (in 10-pixel units from
    the centre), their slopes over the 4 frames (pixels per step / 2) and the newest presence."""
    pos_c = (col[..., 3] - (SIZE - 1) / 2) / 10
    pos_r = (row[..., 3] - (SIZE - 1) / 2) / 10
    slope_c = (col * _STEPS).sum(axis=-1) / 5 / 2
    slope_r = (row * _STEPS).sum(axis=-1) / 5 / 2
    f = np.stack([pos_c, pos_r, slope_c, slope_r, presence[..., 3]], axis=-1)
    return f.reshape(len(f), -1)


def _quadratic(f: np.ndarray) -> np.ndarray:
    i, j = _pairs(f.shape[1])
    out = np.empty((len(f), f.shape[1] + len(i)), dtype=f.dtype)
    out[:, :f.shape[1]] = f
    np.multiply(np.take(f, i, axis=1), np.take(f, j, axis=1), out=out[:, f.shape[1]:])
    return out


@functools.cache
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n)


class PongKeypointsPolicy(Policy):
    """Learned filters and pulls -> spatial soft-argmax keypoints -> their positions, speeds,
    presences and pairwise products -> an MLP -> 3 logits. See the module docstring."""

    def __init__(self, keypoints: int = 2, hidden=(16,), motion: bool = False, pull_scale: float = 1.0,
                 conv: str = "blas", pull: str = "linear", vbn: bool = False, mix: int = 0):
        """``pull_scale`` multiplies the pull parameters: at 1, Adam's steps (about ``lr`` per
        parameter whatever the gradient) random-walk the pulls until they outweigh what the
        filters see, and a keypoint settles on the score; the course's runs use ``PULL_SCALE``
        (0.25). ``conv``: how the filters' responses are summed: ``"blas"`` (``sparse_keypoints``,
        the default, as some committed runs trained) or ``"taps"`` (``frame_keypoints``, the
        course's choice: the same softmax, rounded per frame, so frames seen at the previous step
        are reused: ``KeypointMemo``). ``pull``: ``"linear"`` (a learned pull along the columns and the rows)
        or ``"windows"`` (each keypoint a learned window along the columns, the ``k``
        windows tiling the field evenly at first, and a linear pull along the rows:
        ``window_tables``; ``conv="taps"`` only). ``vbn``: virtual batch normalization of the
        head's inputs, as the paper's Atari networks (``normalize``; ``conv="taps"`` only).
        ``mix``: 0 (the default), the head reads the keypoints' ``5 k`` features and all their
        pairwise products; ``m`` in [1, ``MAX_MIX``], a learned linear map first mixes the
        features (after vbn, with ``vbn``) into ``m`` numbers, and the head reads those and their
        pairwise products: with six keypoints and ``m = 6``, 27 inputs instead of 495."""
        if pull not in PULLS:
            raise ValueError(f"pull must be one of {', '.join(PULLS)}, got {pull!r}")
        if pull == "windows" and conv != "taps":
            raise ValueError('pull="windows" needs conv="taps"')
        self.pull = pull
        if vbn and conv != "taps":
            raise ValueError('vbn needs conv="taps"')
        self.vbn = bool(vbn)
        self.pull_params = 3 if pull == "windows" else 2
        self.keypoints, self.hidden, self.motion = int(keypoints), tuple(int(h) for h in hidden), bool(motion)
        self.pull_scale = float(pull_scale)
        if not 0 < self.pull_scale <= 1:
            raise ValueError(f"pull_scale must be in (0, 1], got {pull_scale}")
        if conv not in CONVS:
            raise ValueError(f"conv must be one of {', '.join(CONVS)}, got {conv!r}")
        self.conv = conv
        self.channels = 2 if self.motion else 1
        if not 1 <= self.keypoints <= 8:
            raise ValueError(f"keypoints must be in [1, 8], got {keypoints}")
        self.mix = int(mix)
        if not 0 <= self.mix <= MAX_MIX:
            raise ValueError(f"mix must be in [0, {MAX_MIX}], got {mix}")
        f = FEATURES_PER_KEYPOINT * self.keypoints
        self.num_normalized = f if self.mix else f + f * (f + 1) // 2    # what vbn centres and scales
        m = self.mix or f
        self.num_features = m + m * (m + 1) // 2                          # what the head reads
        self.num_front = self.keypoints * (TAPS * self.channels + self.pull_params)
        self.num_mix = f * self.mix + self.mix                            # the mixer's weights and biases
        self.head = MLPPolicy(self.num_features, N_ACTIONS, self.hidden)
        self.num_params = self.num_front + self.num_mix + self.head.num_params
        self.discrete = True

    def spec(self) -> dict:
        spec = {"type": "pong_keypoints", "keypoints": self.keypoints, "hidden": list(self.hidden)}
        if self.motion:
            spec["motion"] = True
        if self.pull_scale != 1.0:
            spec["pull_scale"] = self.pull_scale
        if self.conv != "blas":
            spec["conv"] = self.conv
        if self.pull != "linear":
            spec["pull"] = self.pull
        if self.vbn:
            spec["vbn"] = True
        if self.mix:
            spec["mix"] = self.mix
        return spec

    def initial_params(self, seed: int) -> np.ndarray:
        """Filters: N(0, 0.3) per tap plus the identity (centre tap 1) on one channel: "look at
        whatever differs most from the empty field", or with ``motion``, keypoint ``i`` on
        channel ``i mod 2`` ("... from the previous frame" for odd ``i``); pulls N(0, 0.05); the
        head as ``MLPPolicy`` (its last layer x 0.01: the first policy is nearly indifferent).
        With ``pull="windows"``: the identity filters alone and windows tiling the columns evenly
        (``window_tables``), the same for every seed; only the head is random.
        One generator from ``seed``, front first; the head's own (``MLPPolicy``). With ``mix``,
        the mixer's weights from a third, ``rng_for(seed, INIT, 1)``: normalized columns (each
        mixture a unit-length blend of features that vbn gave unit spread), biases zero."""
        rng = rng_for(seed, INIT)
        filters = rng.standard_normal((self.keypoints, TAPS * self.channels)) * 0.3
        filters[np.arange(self.keypoints), (np.arange(self.keypoints) % self.channels) * TAPS + TAPS // 2] += 1.0
        pulls = rng.standard_normal((self.keypoints, 2)) * 0.05
        if self.pull == "windows":   # centres tiling [-1, 1] evenly, half-width 1/k, no row pull; and the
            # identity filter alone: random taps made some windows blind and others see far past their edge
            filters = np.eye(TAPS * self.channels)[(np.arange(self.keypoints) % self.channels) * TAPS + TAPS // 2]
            centres = -1 + (2 * np.arange(self.keypoints) + 1) / self.keypoints
            pulls = np.stack([centres / self.pull_scale, np.zeros(self.keypoints), np.zeros(self.keypoints)], axis=1)
        front = np.concatenate([filters, pulls], axis=1).ravel()
        mixer = []
        if self.mix:
            w = rng_for(seed, INIT, 1).standard_normal((FEATURES_PER_KEYPOINT * self.keypoints, self.mix))
            mixer = [(w / np.sqrt(np.square(w).sum(axis=0, keepdims=True))).ravel(), np.zeros(self.mix)]
        return np.concatenate([front, *mixer, self.head.initial_params(seed)]).astype(np.float32)

    def unflatten(self, params):
        params = np.asarray(params, dtype=np.float32)
        if params.ndim != 2 or params.shape[1] != self.num_params:
            raise ValueError(f"expected parameters of shape (rows, {self.num_params}), got {params.shape}")
        front, rest = params[:, :self.num_front], params[:, self.num_front:]
        mixer = []
        if self.mix:
            f = FEATURES_PER_KEYPOINT * self.keypoints
            w, b = rest[:, :f * self.mix], rest[:, f * self.mix:self.num_mix]
            mixer, rest = [(w.reshape(len(w), f, self.mix), b[:, None, :])], rest[:, self.num_mix:]
        return [(front,)] + mixer + self.head.unflatten(rest)

    def new_memo(self) -> KeypointMemo | None:
        """A memo for one ``PongGames.play`` (``forward``'s ``memo``); None where frames cannot be
        reused (``conv="blas"`` computes each stack whole)."""
        return KeypointMemo(self.keypoints) if self.conv == "taps" else None

    def keypoints_of(self, front: np.ndarray, obs, memo: KeypointMemo | None = None,
                     keys=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(column, row, presence), each ``(rows, keypoints, 4)``: where each keypoint looks.
        ``memo`` and ``keys`` (each row's episode number): reuse the frames row ``i`` saw at its
        episode's previous step (``conv="taps"`` only)."""
        filters, pulls = _unpack(np.asarray(front), self.keypoints, self.channels, self.pull_params)
        field = None
        if self.pull == "windows" and memo is not None:    # the pulls' part of the softmax, once per episode
            field = memo.derived("window_field", keys, pulls,
                                 lambda p: window_field(window_tables(p, self.pull_scale)), gather=False)
        elif self.pull == "windows":
            pulls = window_tables(pulls, self.pull_scale)
        elif self.pull_scale != 1.0:
            pulls = pulls * self.pull_scale
        obs = _check(obs)
        if self.conv == "blas":
            return sparse_keypoints(_frames(obs, self.motion), filters, pulls)
        rows = len(obs)
        values = np.empty((rows, 3, self.keypoints, FRAMES))
        need = np.ones((rows, FRAMES), dtype=bool)
        if memo is not None:
            keys = np.asarray(keys, dtype=np.int64)
            memo._grow(int(keys.max()) + 1 if rows else 0)
            seen = memo.valid[keys] & (memo.obs[keys, 1:] == obs[:, :FRAMES - 1]).all(axis=(1, 2, 3))
            older = np.arange(2 if self.motion else 1, FRAMES)           # the previous step's frames still valid
            hit = np.flatnonzero(seen)
            values[hit[:, None], :, :, older - 1] = memo.values[keys[hit]][:, :, :, older].transpose(0, 3, 1, 2)
            need[hit[:, None], older - 1] = False
        ri, fi = np.nonzero(need)
        if field is None:
            col, row, presence = frame_keypoints(_frames_at(obs, ri, fi, self.motion), filters[ri], pulls[ri])
        else:
            col, row, presence = frame_keypoints(_frames_at(obs, ri, fi, self.motion), filters[ri], None,
                                                 (field[0], field[1][ri]))
        values[ri, :, :, fi] = np.stack([col, row, presence], axis=1)
        if memo is not None:
            memo.obs[keys] = obs
            memo.values[keys] = values
            memo.valid[keys] = True
        return values[:, 0], values[:, 1], values[:, 2]

    def features(self, front: np.ndarray, obs, memo: KeypointMemo | None = None, keys=None,
                 mixer=None) -> np.ndarray:
        """What the head reads, ``(rows, num_features)``. ``mixer``: the ``(weights, biases)``
        layer of ``unflatten`` (policies with ``mix`` only)."""
        f = keypoint_features(*self.keypoints_of(front, obs, memo, keys))
        if not self.mix:
            q = _quadratic(f)
            return (self.normalize(front, q, memo, keys) if self.vbn else q).astype(np.float32)
        if mixer is None:
            raise ValueError("a policy with mix needs its mixer: features(..., mixer=layers[1])")
        if self.vbn:
            f = self.normalize(front, f, memo, keys)
        w, b = mixer
        return _quadratic(np.einsum("ri,rio->ro", f.astype(np.float32), w) + b[:, 0, :]).astype(np.float32)

    def normalize(self, front: np.ndarray, q: np.ndarray, memo: KeypointMemo | None = None,
                  keys=None) -> np.ndarray:
        """Virtual batch normalization (Salimans et al. 2017, after 2016) of the head's inputs:
        each row's ``q`` (the head's inputs; with ``mix``, the features before the mixer) minus
        their mean over the reference batch (``reference_batch``: 64
        observations chosen once), divided by their spread there (at least ``VBN_FLOOR``), both
        computed with that row's own front end, and clipped to ``+-VBN_CLIP``. Why: the raw
        inputs carry large offsets that do not depend on the picture (a window's column where it
        is empty, its square, their products), so a perturbed head mostly shifts which action it
        prefers everywhere, and every member of a generation loses alike; centred and scaled, a
        perturbation changes how the member responds to the picture. Computed once per member
        and episode (``memo.derived``; without a memo, once per distinct row); each member
        alone, so its values do not depend on the others in the batch."""
        front = np.asarray(front)
        if memo is None:                      # rows with the same parameters share their statistics
            memo, keys = KeypointMemo(self.keypoints), np.unique(front, axis=0, return_inverse=True)[1].reshape(-1)
        stats = memo.derived("reference_stats", keys, front, self._reference_stats)
        return np.clip((q - stats[:, 0]) / stats[:, 1], -VBN_CLIP, VBN_CLIP)

    def _reference_stats(self, front: np.ndarray) -> np.ndarray:
        """``(rows, 2, features)``: each row's mean and spread (floored) over the reference batch,
        member by member."""
        ref = reference_batch()
        out = []
        for i in range(len(front)):
            r = keypoint_features(*self.keypoints_of(np.repeat(front[i:i + 1], len(ref), axis=0), ref))
            r = r if self.mix else _quadratic(r)
            out.append((r.mean(axis=0), np.maximum(r.std(axis=0), VBN_FLOOR)))
        return np.array(out).reshape(len(front), 2, self.num_normalized)

    def forward(self, layers, obs, memo: KeypointMemo | None = None, keys=None) -> np.ndarray:
        (front,), *head = layers
        mixer = head.pop(0) if self.mix else None
        return self.head.forward(head, self.features(front, obs, memo, keys, mixer))
