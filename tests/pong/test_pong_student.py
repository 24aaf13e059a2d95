"""The student's Pong run (notebook 04): trained on the course's configuration with the
student's seed, it replays in the grader; tampered, shipped, forged and other students' runs
are rejected, each with its reason. One short real run (2 generations of whole games) serves
every test."""
import json
import shutil
from pathlib import Path

import nbformat
import numpy as np
import pytest

from es.checkpoint import load_checkpoint, save_checkpoint
from classroom.grade import _grader_side, grade, student_of
from classroom.check import CheckFailed
from es.play import mean_ci95
from pong.replay import RunRejected, strategy_for, verify_run
from pong.student import Verdict, beats_random, interval, student_config, student_problem, student_seed, \
    train_until_beats_random

ROOT = Path(__file__).resolve().parents[2]
GENERATIONS = 2


@pytest.fixture(scope="module")
def alice_run(tmp_path_factory):
    """Alice's run, trained the notebook's way: her batched_policy-style head, 2 workers."""
    run_dir = tmp_path_factory.mktemp("alice") / "pong-run"
    config = student_config("alice", generations=GENERATIONS)
    head = lambda W, b, f: (np.einsum("pf,pfa->pa", f, W) + b).argmax(axis=1)   # noqa: E731
    verdict, seconds, gens = train_until_beats_random(config, run_dir, student_problem(config, head))
    assert gens == GENERATIONS and verdict is None     # a fresh policy is not evaluated yet
    return run_dir


def copy_run(src, dst):
    shutil.copytree(src, dst)
    return dst


def rejected(run_dir, student, match):
    with pytest.raises(RunRejected, match=match):
        verify_run(run_dir, student, np.random.default_rng(1))


def test_seed_comes_from_the_identifier():
    assert student_seed("alice") == student_seed("  Alice ") != student_seed("bob")
    assert student_config("alice").seed == student_seed("alice")
    for placeholder in ("", "your-id-here"):
        with pytest.raises(ValueError, match="STUDENT_ID"):
            student_seed(placeholder)


def test_the_students_run_replays_bit_for_bit(alice_run):
    rows = [json.loads(x) for x in (alice_run / "metrics.jsonl").read_text().splitlines()]
    assert [len(r["returns"]) for r in rows] == [64] * GENERATIONS
    replay = verify_run(alice_run, "alice", np.random.default_rng(0), episodes=4)
    assert replay.generations == GENERATIONS and replay.chain_max_diff == 0.0
    assert all(rec == got for _, _, rec, got in replay.episodes) and len(replay.episodes) >= 3
    assert np.array_equal(replay.center, load_checkpoint(alice_run)[0])


def test_another_identifiers_run_is_rejected(alice_run, tmp_path):
    rejected(copy_run(alice_run, tmp_path / "run"), "bob", "not bob's")


def test_a_tampered_checkpoint_is_rejected(alice_run, tmp_path):
    run = copy_run(alice_run, tmp_path / "run")
    center, meta, opt = load_checkpoint(run)
    center[7] += 1e-3
    save_checkpoint(run / "checkpoint.npz", center, meta, opt)
    rejected(run, "alice", "not what the recorded returns lead to")


def test_edited_returns_are_rejected(alice_run, tmp_path):
    run = copy_run(alice_run, tmp_path / "run")
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    r = rows[1]["returns"]
    best = int(np.argmax(r))
    r[best], r[(best + 1) % len(r)] = r[(best + 1) % len(r)] - 1, r[best] + 1   # a better rank for a neighbour
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    rejected(run, "alice", "not what the recorded returns lead to")


def test_the_shipped_agent_is_rejected(alice_run, tmp_path):
    run = copy_run(alice_run, tmp_path / "run")
    _, meta, opt = load_checkpoint(run)
    save_checkpoint(run / "checkpoint.npz", load_checkpoint(ROOT / "pong" / "agent.npz")[0], meta, opt)
    rejected(run, "alice", "not what the recorded returns lead to")
    rejected(ROOT / "pong" / "run-dense-s0", "alice", "not alice's")           # its own run: seed 0


def test_a_forged_chain_towards_the_shipped_agent_is_caught_by_replaying_games(alice_run, tmp_path):
    """Returns invented so that each update moves towards the shipped agent: the chain replays,
    but the games do not give those scores."""
    run = copy_run(alice_run, tmp_path / "run")
    config = student_config("alice", generations=GENERATIONS)
    target = load_checkpoint(ROOT / "pong" / "agent.npz")[0].astype(np.float64)
    strategy, optimizer, _ = strategy_for(config)
    forged = []
    for _ in range(GENERATIONS):
        task = strategy.ask()
        eps = task.member_params(np.arange(config.population)).astype(np.float64) - task.center
        forged.append(np.round(eps @ (target - task.center), 3))
        strategy.tell(forged[-1])
    center, opt = strategy.center, optimizer.state_dict()
    meta = load_checkpoint(run)[1]
    save_checkpoint(run / "checkpoint.npz", center, meta, opt)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    for row, r in zip(rows, forged):
        row["returns"] = r.tolist()
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    rejected(run, "alice", "returns were not played by this run's policies")


def test_a_changed_configuration_or_missing_run_is_rejected(alice_run, tmp_path):
    run = copy_run(alice_run, tmp_path / "run")
    cfg = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**cfg, "init": "pong/agent.npz"}))
    rejected(run, "alice", "--init")
    (run / "config.json").write_text(json.dumps({**cfg, "sigma": 0.2}))
    rejected(run, "alice", "differs from the course's in sigma")
    rejected(tmp_path / "nothing-here", "alice", "not a folder")
    (run / "config.json").write_text("{not json")
    rejected(run, "alice", "config.json is not a run configuration")


def test_the_grader_decides_identity_and_keeps_run_dirs_inside_the_submission(alice_run, tmp_path):
    assert student_of(tmp_path / "submitted" / "carol" / "ps4" / "04_pong.ipynb") == "carol"
    assert student_of(tmp_path / "dave" / "04_pong.ipynb") == "dave"
    copy_run(alice_run, tmp_path / "dave" / "pong-run")
    given = {"STUDENT_ID": "dave", "folder": tmp_path / "dave", "root": tmp_path / "dave", "private": tmp_path / "p"}
    assert _grader_side("STUDENT_ID", "alice", given) == "dave"     # the notebook cannot claim to be alice
    copied = Path(_grader_side("RUN_DIR", "pong-run", given))       # the grader reads its own copy of the run
    assert copied.parent == tmp_path / "p" and sorted(p.name for p in copied.iterdir()) == [
        "checkpoint.npz", "config.json", "metrics.jsonl"]
    assert (copied / "checkpoint.npz").read_bytes() == (alice_run / "checkpoint.npz").read_bytes()
    with pytest.raises(CheckFailed, match="outside your submission folder"):
        _grader_side("RUN_DIR", "../alice/pong-run", given)


def test_the_evaluation_rule_needs_disjoint_intervals():
    lo, hi = interval([-20, -21, -20, -21])
    assert lo < -20.5 < hi and (lo, hi) == tuple(mean_ci95([-20, -21, -20, -21])[2])   # es eval's interval
    rand = [-20.0, -21.0] * 10

    def verdict(agent):
        return Verdict(float(np.mean(agent)), interval(agent), float(np.mean(rand)), interval(rand), (0, 19),
                       agent, rand)
    assert verdict([-18.0, -19.0] * 10).beats_random                  # intervals apart
    assert not verdict([-10.0] + [-21.0] * 19).beats_random           # a better mean, overlapping intervals
    played = beats_random(student_problem(student_config("x")).initial_params(0), first_seed=5, games=2)   # real games
    assert played.seeds == (5, 6) and len(played.agent_scores) == len(played.random_scores) == 2


def test_graded_submission_replays_and_is_judged_on_unseen_games(alice_run, tmp_path):
    """The whole path through the grader: alice's notebook and run verify (her 2-generation agent
    does not beat random yet), with what was replayed and played in the result; the same files
    submitted by bob earn nothing, and the message tells him why and what to do."""
    nb = nbformat.read(str(ROOT / "solutions" / "04_pong.ipynb"), 4)
    for who in ("alice", "bob"):
        folder = tmp_path / who
        folder.mkdir()
        nbformat.write(nb, str(folder / "04_pong.ipynb"))
        copy_run(alice_run, folder / "pong-run")
    results = {who: grade(tmp_path / who / "04_pong.ipynb", only={"pong_agent"}) for who in ("alice", "bob")}
    rows = {who: next(r for r in res["checks"] if r["name"] == "pong_agent") for who, res in results.items()}
    msg = {who: r["message"] for who, r in rows.items()}
    assert "your run replays, but its agent does not beat random yet" in msg["alice"], msg["alice"]
    pong = rows["alice"]["pong"]
    assert pong["replay"] == "replays" and pong["generations"] == GENERATIONS and pong["games"] == 20
    assert pong["agent_ci"][0] <= pong["agent_mean"] <= pong["agent_ci"][1] and pong["beats_random"] is False
    assert results["bob"]["total"] == 0 and results["bob"]["student"] == "bob", msg["bob"]
    assert "graded as 'bob'" in msg["bob"] and "is not the seed of 'bob'" in msg["bob"], msg["bob"]
    assert "--student" in msg["bob"] and "rename the submission folder" in msg["bob"], msg["bob"]


def test_broken_run_files_are_rejected_not_crashed_on(alice_run, tmp_path):
    run = copy_run(alice_run, tmp_path / "run")
    good = (run / "metrics.jsonl").read_text()
    for text, match in (("[1, 2]\n", "is not generation 0"), ("{oops\n", "is not JSON"),
                        (good.splitlines()[0] + "\n", "records 1 generations")):
        (run / "metrics.jsonl").write_text(text)
        rejected(run, "alice", match)
    (run / "metrics.jsonl").write_text(good)
    (run / "checkpoint.npz").write_bytes(b"PK\x03\x04 truncated")
    rejected(run, "alice", "corrupt")
    (run / "checkpoint.npz").unlink()
    rejected(run, "alice", "no checkpoint.npz")


def test_a_passed_record_that_is_not_a_whole_verdict_is_not_trusted_and_does_not_crash(tmp_path):
    """beats_random.json names the checkpoint that passed and its verdict; a record without its
    generation, or one that is not a whole verdict (edited, truncated, an older layout), proves
    nothing, so the run goes on as if it were absent instead of raising."""
    config = student_config("x")
    config.generations = 0                      # nothing left to train: returns at once
    for record in ({"agent_mean": 0.0, "beats_random": True},                  # no generation
                   {"generation": 0, "agent_mean": 0.0, "beats_random": True},  # not a whole verdict
                   {"generation": 0, "agent_mean": "high", "agent_ci": 1, "random_mean": 0, "random_ci": 0,
                    "seeds": 0, "agent_scores": 0, "random_scores": 0},          # fields of the wrong type
                   [0]):                                                       # not an object
        (tmp_path / "beats_random.json").write_text(json.dumps(record) + "\n")
        assert train_until_beats_random(config, tmp_path) == (None, 0.0, 0), record
    (tmp_path / "beats_random.json").write_text('{"generation": 0, "agent_mea')   # truncated
    assert train_until_beats_random(config, tmp_path) == (None, 0.0, 0)
    assert config.generations == 0
