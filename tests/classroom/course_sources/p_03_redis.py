"""Sources of the numbers on page 03_redis."""
import re
import time
from pathlib import Path

from course_numbers import Claim
from course_sources import *   # noqa: F401,F403  (printed, solution, lines, load, fmt, source_of, check_points)
from course_sources import cells, mirrored_lines, solution, source_of


def _points():
    from classroom.check import CHECKS, UNGRADED
    by = {}
    for name, (milestone, points, notebook, _) in CHECKS.items():
        if notebook == "03_redis" and name not in UNGRADED:
            by[milestone] = by.get(milestone, 0) + points
    assert by == {"M3": 5, "extras": 5}, by


TIMELINE = ("One chunk's life when its worker dies (lease 1 s; the master polls every 0.1 s): ``` t = 100.0 master "
            "RPUSH \"0:32\" queued_at[\"0:32\"] = 100.0 t = 100.1 master nothing came; \"0:32\" still waits in "
            "es:jobs: wait t = 100.15 worker BLPOP \"0:32\", HSET lease 100.15 ... and dies: no result, no new heartbeat "
            "t = 100.2 master nothing came; lease 0.05 s old: wait (the same at each poll up to 101.1: 0.95 s) t = 101.2 "
            "master nothing came; \"0:32\" not in es:jobs, queued 1.2 s ago, lease 1.05 s old: its worker is dead. "
            "RPUSH \"0:32\" again, queued_at[\"0:32\"] = 101.2 t = 101.3 another worker takes it, leases it, RPUSH its "
            "result, HDEL its lease t = 101.3 master BLPOP the result: returns[0:32], lengths[0:32]; \"0:32\" is done ```")


def _timeline():
    """The solution's chunks_to_requeue at every poll of the timeline (0.1 s apart from 100.1), and
    the ages it states: nothing to requeue up to 101.1, the chunk at 101.2, nothing after."""
    requeue = solution("03_redis", "chunks_to_requeue")["chunks_to_requeue"]
    lease, queued, leased, poll = 1.0, 100.0, 100.15, 0.1
    assert "(lease 1 s; the master polls every 0.1 s)" in TIMELINE
    assert f"queued_at[\"0:32\"] = {queued}" in TIMELINE and f"HSET lease {leased}" in TIMELINE
    polls = [round(queued + poll * k, 1) for k in range(1, 13)]          # 100.1 .. 101.2
    assert requeue({"0:32": queued}, {"0:32"}, {}, polls[0], lease) == set()           # still in es:jobs
    for now in polls[1:-1]:                                                             # 100.2 .. 101.1
        assert requeue({"0:32": queued}, set(), {"0:32": leased}, now, lease) == set(), now
    assert f"lease {polls[1] - leased:.2f} s old: wait (the same at each poll up to {polls[-2]}: " \
           f"{polls[-2] - leased:.2f} s)" in TIMELINE
    assert requeue({"0:32": queued}, set(), {"0:32": leased}, polls[-1], lease) == {"0:32"}
    assert f"t = {polls[-1]} master nothing came; \"0:32\" not in es:jobs, queued {polls[-1] - queued:.1f} s ago, " \
           f"lease {polls[-1] - leased:.2f} s old: its worker is dead" in TIMELINE
    assert requeue({"0:32": polls[-1]}, set(), {"0:32": leased}, 101.3, lease) == set()    # requeued: young again


LAYOUT = ("a 12-byte header of three uint32 (`generation`, `first`, `count`), then the `count` returns as float64, "
          "then the `count` lengths as uint32 (`struct.pack` for the header, `ndarray.tobytes()` for the arrays): 12 "
          "bytes per member plus the header.")


def _layout():
    encode = solution("03_redis", "encode_result")["encode_result"]
    header = len(encode(7, 32, [], []))
    per_member = len(encode(7, 32, [1.0], [1])) - header
    assert (header, per_member) == (12, 12) and f"a {header}-byte header" in LAYOUT and f"{per_member} bytes per member" in LAYOUT


EXAMPLE = ("`encode_result(7, 32, [1.5, -2.0], [10, 20])` is 12 + 16 + 8 = 36 bytes, and decoding it gives "
           "`{\"generation\": 7, \"first\": 32, \"returns\": array([ 1.5, -2. ]), \"lengths\": array([10, 20], "
           "dtype=uint32)}`.")


def _example():
    ns = solution("03_redis", "encode_result", "decode_result")
    payload = ns["encode_result"](7, 32, [1.5, -2.0], [10, 20])
    assert len(payload) == 12 + 16 + 8 == 36
    out = ns["decode_result"](payload)
    shown = (f"{{\"generation\": {out['generation']}, \"first\": {out['first']}, \"returns\": {out['returns']!r}, "
             f"\"lengths\": {out['lengths']!r}}}")
    assert f"decoding it gives `{shown}`" in " ".join(EXAMPLE.split()), shown


WORKED = ("**Worked example**, `lease_seconds = 1.0`, `now = 105.0`: | chunk | `queued_at` | in `in_queue`? | lease | "
          "requeue? | |---|---|---|---|---| | `\"0:8\"` | 100.0 | yes | none | no: still waiting in the queue | | "
          "`\"8:16\"` | 104.5 | no | none | no: queued 0.5 s ago, its worker may not have written its lease yet | | "
          "`\"16:24\"` | 100.0 | no | 104.6 | no: lease 0.4 s old, its worker is alive | | `\"24:32\"` | 100.0 | no | "
          "103.2 | **yes**: lease 1.8 s old, its worker is dead | | `\"32:40\"` | 100.0 | no | none | **yes**: taken "
          "long ago and never leased, its worker died first | | `\"40:48\"` | 104.0 | no | 104.0 | **yes**: exactly "
          "1.0 s on both counts, at least `lease_seconds` | | `\"48:56\"` | 104.9 | no | 103.5 | no: queued again 0.1 s "
          "ago; the lease 1.5 s old is its dead worker's, the new taker may not have written its own yet | so the "
          "answer is `{\"24:32\", \"32:40\", \"40:48\"}`.")


def _worked():
    """Each row of the table through the solution's chunks_to_requeue, alone and all together."""
    requeue = solution("03_redis", "chunks_to_requeue")["chunks_to_requeue"]
    lease, now = 1.0, 105.0
    rows = re.findall(r'\| `"([\d:]+)"` \| ([\d.]+) \| (yes|no) \| ([\d.]+|none) \| (\*\*yes\*\*|no)([^|]*)\|', WORKED)
    assert len(rows) == 7, rows
    queued_at, in_queue, leases = {}, set(), {}
    for chunk, queued, waiting, leased, decision, why in rows:
        queued_at[chunk] = float(queued)
        if waiting == "yes":
            in_queue.add(chunk)
        if leased != "none":
            leases[chunk] = float(leased)
        alone = requeue({chunk: float(queued)}, in_queue & {chunk}, {k: v for k, v in leases.items() if k == chunk},
                        now, lease)
        assert bool(alone) == (decision == "**yes**"), chunk
        for age in re.findall(r"([\d.]+) s (?:ago|old|on both)", why):     # the ages the reason states
            assert float(age) in {round(now - float(queued), 1), round(now - float(leased), 1)
                                  if leased != "none" else None}, (chunk, age)
    answer = requeue(queued_at, in_queue, leases, now, lease)
    assert f"so the answer is `{{{', '.join(chr(34) + c + chr(34) for c in sorted(answer, key=lambda c: int(c.split(':')[0])))}}}`" in WORKED, answer


def _epoch():
    assert time.gmtime(0).tm_year == 1970


SEEDS_ONLY = ("**The check:** 12 generations of your function in this process (the master) and in 3 worker processes "
              "that get the generation-0 center once and then only each generation's returns (drawn by the check, "
              "chunks of unequal sizes; each worker starts with a global NumPy state of its own). Every worker must end "
              "every generation bit-identical to the master, and the master bit-identical to section 4's `es_update`")


def _seeds_only_check():
    """The numbers the text gives, read from check.seeds_only_update's code."""
    from classroom import check
    src = source_of(check._RAW["seeds_only_update"])
    generations = int(re.search(r"generations = .*, (\d+)\n", src).group(1))
    cuts = int(re.search(r"cuts = np\.sort\(rng\.choice\(.*?\), (\d+), replace=False\)\)", src).group(1))
    assert "seeds_only=len(bounds)" in src and "for a, b in bounds]" in src
    bounds = re.search(r"bounds = \[(.*)\]\n", src).group(1)
    assert bounds.count("), (") + 1 == cuts + 1 == 3, bounds
    assert 'np.any(master != want["right"], axis=1)' in src       # bit for bit
    _answer_key_is_es_update()
    assert f"{generations} generations" in SEEDS_ONLY and f"in {cuts + 1} worker processes" in SEEDS_ONLY


def _answer_key_is_es_update():
    """The check's right answer (classroom.references) is section 4's es_update, bit for bit: the
    function run from the page's own text, over 12 generations of drawn returns."""
    import numpy as np
    from classroom import references
    from classroom.cartpole_workers import pair_noise
    src = next(src for kind, src, _ in cells("03_redis") if kind == "code" and "\ndef es_update(" in src)
    code = re.search(r"^def es_update\(.*?(?=^\S)", src, re.M | re.S).group(0)
    rng = np.random.default_rng(5)
    seed, population, sigma, lr, dim = 17, 22, 0.13, 0.31, 7
    ns = {"np": np, "pair_noise": pair_noise, "SEED": seed, "POPULATION": population, "SIGMA": sigma, "LR": lr}
    exec(code, ns)
    center = (rng.standard_normal(dim) * 0.1).astype(np.float32)
    returns = [[rng.standard_normal(population) * 30 + 5] for _ in range(12)]
    want = references.seeds_only_update(center, seed, returns, sigma, lr)["right"]
    for g, (r,) in enumerate(returns):
        center = ns["es_update"](center, g, r)
        assert center.dtype == np.float32 and np.array_equal(center, want[g]), g


FIGURE = "The paper scales its humanoid runs up to 1,440 CPU cores (Salimans et al. 2017, Figure 1)."


def _figure():
    assert "(Salimans et al. 2017, Figure 1)" in FIGURE
    assert any(kind == "code" and re.search(r"^workers = 1440$", src, re.M) for kind, src, _ in cells("03_redis"))


def _bytes_per_generation():
    """The function of section 6's bytes cell, without the cell's loop (which needs section 4's policy)."""
    src = next(src for kind, src, _ in cells("03_redis") if kind == "code" and src.startswith("def bytes_per_generation"))
    ns = {}
    exec(src.split("\n\nworkers = ")[0], ns)
    return ns["bytes_per_generation"]


QUESTION = ("For this notebook's 10-parameter policy, sending only the returns costs hundreds of times more bytes than "
            "sending the center; for a million parameters, over a hundred times fewer.")


def _question():
    from classroom.cartpole_workers import POLICY
    count = _bytes_per_generation()
    assert f"{POLICY.num_params}-parameter policy" in QUESTION
    only, center = count(1440, 2880, POLICY.num_params)
    assert 100 <= only / center < 1000, only / center                 # hundreds of times more
    only, center = count(1440, 2880, 1_000_000)
    assert center / only > 100, center / only                          # over a hundred times fewer


EQUAL = ("They are equal at `d = 2 P` (5,760 parameters at population 2,880), so the returns win for any network "
         "larger than a few thousand parameters and lose for CartPole's 10.")


def _equal():
    from classroom.cartpole_workers import POLICY
    count = _bytes_per_generation()
    population = 2880
    only, center = count(population // 2, population, 2 * population)
    assert only == center and f"({2 * population:,} parameters at population {population:,})" in EQUAL
    assert f"CartPole's {POLICY.num_params}." in EQUAL


STARTER = ("OpenAI's starter code (linked in notebook 00) builds one large table of Gaussian noise per machine "
           "instead, from a fixed seed, so that every machine holds the same table; a perturbation is then `dim` "
           "consecutive values of it from an offset (`SharedNoiseTable`, lines 50-66 of its "
           "`951f199:es_distributed/es.py`: the table, `get` and `sample_index`). Its workers draw the offsets from an "
           "unseeded `np.random.RandomState()` (line 319; `noise.sample_index(rs, ...)`, line 355) and send them back "
           "with their returns (`noise_inds_n`, line 373).")
STARTER_LINES = {50: "class SharedNoiseTable(object):", 53: "seed = 123", 59: "np.random.RandomState(seed).randn(count)",
                 62: "def get(self, i, dim):", 63: "return self.noise[i:i + dim]",
                 65: "def sample_index(self, stream, dim):", 66: "return stream.randint(0, len(self.noise) - dim + 1)",
                 67: "", 68: "", 69: "def compute_ranks(x):", 319: "rs = np.random.RandomState()",
                 355: "noise_idx = noise.sample_index(rs, policy.num_params)",
                 373: "noise_inds_n=np.array(noise_inds),"}
MIRROR = Path("/work/.mirror/openai+evolution-strategies-starter/repo/.git")


def _starter():
    """The citation is on the page; where a copy of the starter is at hand, each cited line says it."""
    for cited in ("lines 50-66 of its `951f199:es_distributed/es.py`", "(line 319;", "line 355)", "line 373)"):
        assert cited in STARTER, cited
    if MIRROR.is_dir():
        text = mirrored_lines(MIRROR, "951f199", "es_distributed/es.py")
        assert text is not None, f"git cannot show 951f199:es_distributed/es.py in {MIRROR}"
        for number, code in STARTER_LINES.items():
            assert code in text[number - 1] and (code or not text[number - 1].strip()), (number, text[number - 1])


def _extreme_share():
    from es.distributed.verify import EXTREME_SHARE, extreme_members, extremes_per_side
    assert EXTREME_SHARE == 64 and extremes_per_side(256) == 4 and extremes_per_side(65) == 2
    assert sorted(extreme_members(list(range(256)), 4)) == [0, 1, 2, 3, 4, 251, 252, 253, 254, 255]


CLAIMS: list[Claim] = [
    Claim("within ceil(population / 64) ranks", _extreme_share,
          "es.distributed.verify: EXTREME_SHARE and extreme_members, which the master replays before the update"),
    Claim("[+5 points, +5 extras]", _points, "the points of notebook 03's graded checks, by milestone (classroom.check)"),
    Claim(TIMELINE, _timeline, "the solution's chunks_to_requeue at every poll from t = 100.1 to 101.2, and the ages "
          "it compares"),
    Claim(LAYOUT, _layout, "the solution's encode_result: its payload's header and bytes per member"),
    Claim(EXAMPLE, _example, "the solution's encode_result and decode_result on the example"),
    Claim("seconds since 1970", _epoch, "time.time()'s epoch (time.gmtime(0))"),
    Claim(WORKED, _worked, "each row through the solution's chunks_to_requeue, and the whole table"),
    Claim(SEEDS_ONLY, _seeds_only_check, "check.seeds_only_update's code: generations, chunks, bit for bit"),
    Claim(FIGURE, _figure, "Salimans et al. 2017 (arXiv:1703.03864), Figure 1: time to a humanoid score of 6,000 "
          "against CPU cores, up to 1,440 (checked against the paper's figure, as docs/locomotion.md cites it); "
          "the cell's workers = 1440"),
    Claim(QUESTION, _question, "the bytes cell's bytes_per_generation at 1,440 workers; POLICY.num_params"),
    Claim(EQUAL, _equal, "the bytes cell's bytes_per_generation: equal at d = 2P; POLICY.num_params"),
    Claim(STARTER, _starter, "OpenAI's evolution-strategies-starter at 951f199, es_distributed/es.py lines 50-66 "
          "(the class ends there: two blank lines, then compute_ranks), 319, 355, 373 (read in the local mirror, and "
          "again by the claim where the mirror is present)"),
]
