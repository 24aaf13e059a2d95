"""The student's Pong run (notebook 04): trained with the student's own code on the course's
settings and the student's seed, it replays in the grader; tampered, shipped, forged and other
students' runs are rejected, each with its reason. One short real run (2 generations of whole
games, the reference code playing the student's part) serves most tests."""
import json
import shutil
from dataclasses import replace
from pathlib import Path

import nbformat
import numpy as np
import pytest

from classroom.check import CheckFailed
from classroom.check_runner import grader_side
from classroom.grade import grade, student_of

from es.checkpoint import load_checkpoint, save_checkpoint
from es.play import mean_ci95
from pong.replay import REFERENCE, RunRejected, reference_es_step, verify_run
from pong.student import (POLICY, StudentCode, Verdict, beats_random, identity_note, perturbations, student_config,
                          student_seed, train_until_beats_random)

ROOT = Path(__file__).resolve().parents[2]
GENERATIONS = 2


def notebook_code():
    """The four functions as notebook 04's solution writes them (float64 update, batched einsum)."""
    columns = np.array([[max(0, min(160 * (j + 1), 42 * (c + 1)) - max(160 * j, 42 * c)) for j in range(42)]
                        for c in range(160)], dtype=np.float64)

    def downsample(frames):
        rows = np.asarray(frames, dtype=np.uint8).reshape(len(frames), 42, 5, 160).sum(axis=2, dtype=np.int64)
        return np.rint(rows @ columns / 800).astype(np.uint8)
    return StudentCode(downsample, lambda s, f: np.concatenate([s[:, 1:], f[:, None]], axis=1),
                       lambda w, b, x: (np.einsum("pf,pfa->pa", x, w) + b).argmax(axis=1), reference_es_step)


@pytest.fixture(scope="module")
def alice_run(tmp_path_factory):
    """Alice's run, trained the notebook's way: her own functions, 2 workers, whole games."""
    run_dir = tmp_path_factory.mktemp("alice") / "pong-run"
    config = replace(student_config("alice"), generations=GENERATIONS)
    verdict, minutes, gens = train_until_beats_random("alice", run_dir, notebook_code(), config=config, progress=False)
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


def test_the_notebook_says_whom_it_trains_for_and_what_the_grader_checks(tmp_path):
    (tmp_path / "notebooks").mkdir()
    note = identity_note("Alice", tmp_path / "notebooks")
    assert "'alice'" in note and "top-level folder" in note and "--student alice" in note
    assert "runs in 'notebooks'" in note                         # the folder is not named like the id: say what to do
    assert "runs in" not in identity_note("alice", tmp_path / "Alice")


@pytest.mark.slow
def test_the_students_run_replays_and_resumes_bit_for_bit(alice_run, tmp_path):
    rows = [json.loads(x) for x in (alice_run / "metrics.jsonl").read_text().splitlines()]
    assert [len(r["returns"]) for r in rows] == [64] * GENERATIONS
    replay = verify_run(alice_run, "alice", np.random.default_rng(0), episodes=4)
    assert replay.generations == GENERATIONS and replay.chain_max_diff < 1e-4
    assert all(rec == got for _, _, rec, got in replay.episodes) and len(replay.episodes) >= 3
    assert np.array_equal(replay.center, load_checkpoint(alice_run)[0])
    # one generation, stop, one more: the same files as two in one go (a small population and
    # short games: the loop's resume is the same code at any size, at a tenth of the time)
    small = replace(student_config("alice"), population=8, game_cap=300, generations=2)
    whole, half = tmp_path / "whole", tmp_path / "half"
    train_until_beats_random("alice", whole, notebook_code(), config=small, progress=False)
    train_until_beats_random("alice", half, notebook_code(), config=replace(small, generations=1), progress=False)
    assert len(np.load(half / "centers.npy")) == 2          # the start and generation 1's update
    train_until_beats_random("alice", half, notebook_code(), config=small, progress=False)
    assert (half / "centers.npy").read_bytes() == (whole / "centers.npy").read_bytes()
    def fitness(run):
        return [json.loads(x)["returns"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert fitness(half) == fitness(whole) and len(fitness(whole)) == 2
    (c1, _, s1), (c2, _, s2) = load_checkpoint(half), load_checkpoint(whole)
    assert np.array_equal(c1, c2) and all(np.array_equal(np.asarray(s1[k]), np.asarray(s2[k])) for k in s2)


@pytest.mark.slow
def test_another_identifiers_run_is_rejected_with_what_to_do(alice_run, tmp_path):
    rejected(copy_run(alice_run, tmp_path / "run"), "bob", "trained as another student.*rename it, or ask your "
                                                           "instructor to grade with --student")


@pytest.mark.slow
def test_a_tampered_checkpoint_or_center_is_rejected(alice_run, tmp_path):
    run = copy_run(alice_run, tmp_path / "run")
    center, meta, opt = load_checkpoint(run)
    center[7] += 1e-3
    save_checkpoint(run / "checkpoint.npz", center, meta, opt)
    rejected(run, "alice", "not the last entry of centers.npy")
    centers = np.load(run / "centers.npy")
    centers[-1] = center
    np.save(run / "centers.npy", centers)
    rejected(run, "alice", "generation 1: the parameters after it are not the course's ES update")


@pytest.mark.slow
def test_edited_fitness_is_rejected(alice_run, tmp_path):
    run = copy_run(alice_run, tmp_path / "run")
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    r = rows[1]["returns"]
    best = int(np.argmax(r))
    r[best], r[(best + 1) % len(r)] = r[(best + 1) % len(r)] - 1, r[best] + 1   # a better rank for a neighbour
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    rejected(run, "alice", "generation 1: the parameters after it are not the course's ES update")


@pytest.mark.slow
def test_a_forged_chain_towards_a_trained_agent_is_caught_by_replaying_games(alice_run, tmp_path):
    """Fitness invented so that each update moves towards a trained agent with the student's
    policy (an earlier attempt's, docs/runs/pong-dense-s0), and the centers those updates give:
    the chain checks out, but the games do not give that fitness."""
    run = copy_run(alice_run, tmp_path / "run")
    config = student_config("alice")
    target = load_checkpoint(ROOT / "docs" / "runs" / "pong-dense-s0" / "checkpoint.npz")[0].astype(np.float64)
    assert target.size == POLICY.num_params
    centers, state, forged = [POLICY.initial_params(config.seed)], None, []
    for g in range(GENERATIONS):
        noise = perturbations(config.seed, g, config.population, target.size)
        forged.append(np.round(noise.astype(np.float64) @ (target - centers[-1]), 3))
        new, state = reference_es_step(centers[-1].astype(np.float64), noise, forged[-1], state, config.sigma,
                                       config.learning_rate, config.weight_decay)
        centers.append(new.astype(np.float32))
    np.save(run / "centers.npy", np.stack(centers))
    _, meta, opt = load_checkpoint(run)
    save_checkpoint(run / "checkpoint.npz", centers[-1], meta, opt)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    for row, f in zip(rows, forged):
        row["returns"] = f.tolist()
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    rejected(run, "alice", "the fitness was not played by this run's policies")


@pytest.mark.slow
def test_changed_settings_missing_or_broken_files_are_rejected_not_crashed_on(alice_run, tmp_path):
    run = copy_run(alice_run, tmp_path / "run")
    cfg = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**cfg, "sigma": 0.2}))
    rejected(run, "alice", "differ from the course's in sigma")
    (run / "config.json").write_text(json.dumps({**cfg, "init": "pong/agent.npz"}))
    rejected(run, "alice", "not the settings of a course run")
    (run / "config.json").write_text("{not json")
    rejected(run, "alice", "config.json is not JSON")
    (run / "config.json").write_text(json.dumps(cfg))
    rejected(tmp_path / "nothing-here", "alice", "not a folder")
    good = (run / "metrics.jsonl").read_text()
    for text, match in (("[1, 2]\n", "is not generation 0"), ("{oops\n", "is not JSON"),
                        (good.splitlines()[0] + "\n", "they come from different moments")):
        (run / "metrics.jsonl").write_text(text)
        rejected(run, "alice", match)
    (run / "metrics.jsonl").write_text(good)
    (run / "centers.npy").write_bytes(b"\x93NUMPY garbage")
    rejected(run, "alice", "centers.npy")
    shutil.copy(alice_run / "centers.npy", run / "centers.npy")
    (run / "checkpoint.npz").write_bytes(b"PK\x03\x04 truncated")
    rejected(run, "alice", "corrupt")
    (run / "checkpoint.npz").unlink()
    rejected(run, "alice", "no checkpoint.npz")


def test_the_evaluation_rule_needs_disjoint_intervals():
    rand = [-20.0, -21.0] * 10

    def verdict(agent):
        return Verdict(float(np.mean(agent)), tuple(mean_ci95(agent)[2]), float(np.mean(rand)),
                       tuple(mean_ci95(rand)[2]), (0, 19), agent, rand)
    assert verdict([-18.0, -19.0] * 10).beats_random                  # intervals apart
    assert not verdict([-10.0] + [-21.0] * 19).beats_random           # a better mean, overlapping intervals
    played = beats_random(REFERENCE, POLICY.initial_params(0), first_seed=5, games=2)   # real games
    assert played.seeds == (5, 6) and len(played.agent_scores) == len(played.random_scores) == 2


def test_a_passed_record_that_is_not_a_whole_verdict_is_not_trusted_and_does_not_crash(tmp_path):
    """beats_random.json names the checkpoint that passed and its verdict; a record without its
    generation, or one that is not a whole verdict (edited, truncated, an older layout), proves
    nothing, so the run goes on as if it were absent instead of raising."""
    config = replace(student_config("x"), generations=0)          # nothing left to train: returns at once
    for record in ({"agent_mean": 0.0, "beats_random": True},                  # no generation
                   {"generation": 0, "agent_mean": 0.0, "beats_random": True},  # not a whole verdict
                   {"generation": 0, "agent_mean": "high", "agent_ci": 1, "random_mean": 0, "random_ci": 0,
                    "seeds": 0, "agent_scores": 0, "random_scores": 0},          # fields of the wrong type
                   [0]):                                                       # not an object
        (tmp_path / "beats_random.json").write_text(json.dumps(record) + "\n")
        assert train_until_beats_random("x", tmp_path, REFERENCE, config=config, progress=False) == (None, 0.0, 0)
    (tmp_path / "beats_random.json").write_text('{"generation": 0, "agent_mea')   # truncated
    assert train_until_beats_random("x", tmp_path, REFERENCE, config=config, progress=False) == (None, 0.0, 0)


def test_a_run_folder_of_other_settings_is_not_mixed_into(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"seed": 1}))
    with pytest.raises(ValueError, match="holds a run with other settings"):
        train_until_beats_random("x", tmp_path, REFERENCE, progress=False)


@pytest.mark.slow
def test_the_grader_decides_identity_and_reads_its_own_copy_of_a_run_inside_the_submission(alice_run, tmp_path):
    assert student_of(tmp_path / "submitted" / "carol" / "ps4" / "04_pong.ipynb") == "carol"
    assert student_of(tmp_path / "dave" / "04_pong.ipynb") == "dave"
    copy_run(alice_run, tmp_path / "dave" / "pong-run")
    given = {"STUDENT_ID": "dave", "folder": tmp_path / "dave", "root": tmp_path / "dave", "private": tmp_path / "p"}
    assert grader_side("STUDENT_ID", "alice", given) == "dave"     # the notebook cannot claim to be alice
    copied = Path(grader_side("RUN_DIR", "pong-run", given))       # the grader reads its own copy of the run
    assert copied.parent == tmp_path / "p" and sorted(p.name for p in copied.iterdir()) == [
        "centers.npy", "checkpoint.npz", "config.json", "metrics.jsonl"]
    assert (copied / "centers.npy").read_bytes() == (alice_run / "centers.npy").read_bytes()
    with pytest.raises(CheckFailed, match="outside your submission folder"):
        grader_side("RUN_DIR", "../alice/pong-run", given)


@pytest.mark.slow
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
