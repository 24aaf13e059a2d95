"""Pong plugs into the core through ``es.registry`` (entry point ``es.plugins: pong`` in
``pyproject.toml``): the environment name and its defaults, the ``pong`` problem kind with
the allow-list a worker applies to a spec from the network, and the two policy types."""
from __future__ import annotations

from es import registry
from es.envs import MAX_STEPS, int_in, layer_sizes_ok
from es.errors import ESError

from .keypoints import CONVS, HEAD_INPUTS, MAX_MIX, PULL_SCALE, PULLS
from .policy import make_pong_policy
from .problem import PongProblem

# What a worker agrees to build from a spec it did not write, beyond the core's bounds.
MAX_NUM_ENVS, MAX_THREADS, MAX_CHANNELS, MAX_KEYPOINTS = 1024, 64, 256, 8
POLICY_TYPES = ("pong_dense", "pong_conv", "pong_objects", "pong_keypoints")

# Fitness is the game score within a capped episode (max_steps agent steps); evaluation
# plays full games of ALE/Pong-v5. "Solved" = the course's bar (-15).
DEFAULTS = {"hidden": [], "population": 64, "sigma": 0.05, "learning_rate": 0.01, "weight_decay": 0.005,
            "generations": 2000, "max_steps": 1000, "solve_threshold": -15.0, "eval_seed": 0, "eval_episodes": 10,
            # keypoint_conv: how a keypoints policy sums its filters' responses; new runs "taps"
            # (pong.keypoints.frame_keypoints), runs whose config lacks it the per-row BLAS product
            "extra": {"policy": "dense", "num_envs": 32, "keypoint_conv": "taps"}}


def validate_spec(spec: dict) -> None:
    policy = spec.get("policy")
    if not isinstance(policy, dict) or policy.get("type") not in POLICY_TYPES:
        raise ValueError(f"pong policy must be one of {', '.join(POLICY_TYPES)}")
    if policy["type"] == "pong_objects":
        if not layer_sizes_ok(policy.get("hidden", [16])):
            raise ValueError("bad pong_objects hidden sizes")
    elif policy["type"] == "pong_keypoints":
        if not (int_in(policy.get("keypoints", 2), 1, MAX_KEYPOINTS) and layer_sizes_ok(policy.get("hidden", [16]))
                and policy.get("motion", False) in (True, False)
                and isinstance(policy.get("pull_scale", 1.0), float) and 0 < policy.get("pull_scale", 1.0) <= 1
                and policy.get("conv", "blas") in CONVS and policy.get("pull", "linear") in PULLS
                and (policy.get("pull", "linear") == "linear" or policy.get("conv", "blas") == "taps")
                and policy.get("vbn", False) in (True, False)
                and (policy.get("vbn", False) is False or policy.get("conv", "blas") == "taps")
                and int_in(policy.get("mix", 0), 0, MAX_MIX)):
            raise ValueError(f"pong_keypoints needs keypoints in [1, {MAX_KEYPOINTS}], valid hidden sizes, "
                             f"motion true or false, pull_scale a float in (0, 1], conv one of {', '.join(CONVS)} and "
                             f"pull one of {', '.join(PULLS)} (windows with conv taps), vbn true or false "
                             f"(true with conv taps), mix an integer in [0, {MAX_MIX}]")
    elif policy["type"] == "pong_dense":
        if policy.get("band", 6) not in (1, 2, 3, 6, 7, 14, 21, 42) or not layer_sizes_ok(policy.get("hidden", [])):
            raise ValueError("bad pong_dense band or hidden sizes")
    else:
        ch = policy.get("channels", [8, 16])
        if not (isinstance(ch, list) and len(ch) == 2 and all(int_in(c, 1, MAX_CHANNELS) for c in ch)):
            raise ValueError(f"pong_conv channels must be two sizes in [1, {MAX_CHANNELS}]")
    if spec.get("tie_break") not in (None, "length"):
        raise ValueError("tie_break must be 'length' or absent")
    for name, lo, hi, default in (("max_steps", 1, MAX_STEPS, 1000), ("num_envs", 1, MAX_NUM_ENVS, 32),
                                  ("threads", 0, MAX_THREADS, 0)):
        v = spec.get(name, default)
        if not int_in(v, lo, hi):
            raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {v!r:.40}")


def make_problem(config, one_thread: bool):
    policy = config.extra.get("policy", "dense")
    spec = {"conv": {"type": "pong_conv"}, "objects": {"type": "pong_objects", "hidden": list(config.hidden)},
            "keypoints": {"type": "pong_keypoints", "keypoints": config.extra.get("keypoints", 2),
                          "hidden": list(config.hidden), "pull_scale": PULL_SCALE,
                          **({"motion": True} if config.extra.get("inputs") == "frames+motion" else {}),
                          # without the key, the BLAS sums: three committed keypoints runs trained so
                          **({"conv": "taps"} if config.extra.get("keypoint_conv") == "taps" else {}),
                          **({"pull": "windows"} if config.extra.get("pull") == "windows" else {}),
                          **({"vbn": True} if config.extra.get("head_inputs") == "vbn" else {}),
                          **({"mix": config.extra["mix"]} if config.extra.get("mix") else {})}}.get(
        policy, {"type": "pong_dense", "band": 6, "hidden": list(config.hidden)})
    # Every process steps its games on one thread (pong.games), so one_thread changes nothing.
    return PongProblem(spec, max_steps=config.max_steps or 1000, num_envs=config.extra.get("num_envs", 32),
                       tie_break=config.extra.get("tie_break"))


def check_config(config) -> None:
    if config.extra.get("policy", "dense") not in POLICY_FLAGS:
        raise ESError(f"--policy must be one of {', '.join(POLICY_FLAGS)}, got {config.extra.get('policy')!r}")
    if config.extra.get("tie_break") not in (None, "length"):
        raise ESError(f"tie_break must be 'length' or unset, got {config.extra.get('tie_break')!r}")
    k = config.extra.get("keypoints", 2)
    if not int_in(k, 1, MAX_KEYPOINTS):
        raise ESError(f"--keypoints must be an integer in [1, {MAX_KEYPOINTS}], got {k}")
    for key in ("keypoints", "inputs", "pull", "head_inputs", "mix"):
        if key in config.extra and config.extra.get("policy") != "keypoints":
            raise ESError(f"--{key} applies to --policy keypoints only")
    if not int_in(config.extra.get("mix", 0), 0, MAX_MIX):
        raise ESError(f"--mix must be an integer in [0, {MAX_MIX}], got {config.extra.get('mix')!r}")
    if config.extra.get("inputs", "frames") not in INPUTS:
        raise ESError(f"--inputs must be one of {', '.join(INPUTS)}, got {config.extra.get('inputs')!r}")
    for key, flag, choices, needs_taps in TAPS_OPTIONS:
        if config.extra.get(key, choices[0]) not in choices:
            raise ESError(f"{flag} must be one of {', '.join(choices)}, got {config.extra.get(key)!r}")
        if config.extra.get(key) == needs_taps and config.extra.get("keypoint_conv", "blas") != "taps":
            raise ESError(f"{flag} {needs_taps} needs the per-frame sums (keypoint_conv taps), which runs started "
                          "before them lack")
    if config.extra.get("keypoint_conv", "blas") not in CONVS:
        raise ESError(f"keypoint_conv must be one of {', '.join(CONVS)}, got {config.extra.get('keypoint_conv')!r}")
    n = config.extra.get("num_envs", 32)
    if not int_in(n, 1, MAX_NUM_ENVS):
        raise ESError(f"--num-envs must be an integer in [1, {MAX_NUM_ENVS}], got {n}")


# Pong's own train flags (python -m es train pong --policy conv ...), set in config.extra.
POLICY_FLAGS = ("dense", "conv", "objects", "keypoints")
INPUTS = ("frames", "frames+motion")
# --policy keypoints options whose second choice exists only with the per-frame sums:
# (config key, flag, choices with the default first, the choice that needs keypoint_conv taps)
TAPS_OPTIONS = (("pull", "--pull", PULLS, "windows"), ("head_inputs", "--head-inputs", HEAD_INPUTS, "vbn"))
FLAGS = (registry.EnvFlag("--policy", "policy", "dense (band sums, a linear or MLP read-out), conv, objects "
                          "(ball, paddles and their products read off the pixels by fixed code, an MLP read-out) or "
                          "keypoints (learned filters and a spatial soft-argmax find what to track; their positions, "
                          "speeds and products, an MLP read-out) [dense]", choices=POLICY_FLAGS),
         registry.EnvFlag("--keypoints", "keypoints", "with --policy keypoints: how many keypoints [2]", int),
         registry.EnvFlag("--inputs", "inputs", "with --policy keypoints: what each keypoint's filter sees: frames "
                          "(minus the background) or frames+motion (also each frame's change since the previous "
                          "one) [frames]", choices=INPUTS),
         registry.EnvFlag("--pull", "pull", "with --policy keypoints: where each keypoint may look: linear (a "
                          "learned pull along the columns and rows) or windows (a learned window along "
                          "the columns, the windows tiling the field evenly at first, and a pull along the rows) "
                          "[linear]", choices=PULLS),
         registry.EnvFlag("--head-inputs", "head_inputs", "with --policy keypoints: what the head reads: raw (the "
                          "keypoints' features and their products) or vbn (the same, each centred and scaled by "
                          "its mean and spread over a fixed reference batch of 64 observations, computed with "
                          "the member's own parameters: the paper's virtual batch normalization) [raw]",
                          choices=HEAD_INPUTS),
         registry.EnvFlag("--mix", "mix", "with --policy keypoints: 0 (the head reads the keypoints' features and "
                          f"all their pairwise products) or M in [1, {MAX_MIX}] (a learned linear map first mixes the "
                          "features, after vbn, into M numbers; the head reads those and their products) [0]", int),
         registry.EnvFlag("--num-envs", "num_envs", "game slots stepped at once per process [32]", int),
         registry.EnvFlag("--tie-break", "tie_break", "length: equal scores rank by game length (a signal from "
                          "the first generations of a run from scratch) [none]", choices=("length",)))


def register() -> None:
    registry.register_env("pong", make_problem=make_problem, defaults=DEFAULTS, aliases=("ALE/Pong-v5", "Pong"),
                          title="Atari Pong, 42x42x4 pixels", check_config=check_config, flags=FLAGS)
    registry.register_problem("pong", from_spec=PongProblem.from_spec, validate_spec=validate_spec)
    for kind in POLICY_TYPES:
        registry.register_policy(kind, make_pong_policy)
