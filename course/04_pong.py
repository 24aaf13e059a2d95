# %% [markdown]
# # 04 · Atari Pong from pixels [+10 points]
#
# Observations are 42x42 grayscale frames, the last 4 stacked. You write the preprocessing
# and a policy that evaluates a whole population in one batched call; then you show an agent
# that beats a random player. Training one takes hours on 2 cores
# (`python -m es train pong`), so the solution loads the agent shipped in `pong/agent.npz`;
# replace it with yours.

# %%
import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import es
from es.course import check
from pong import make_pong

FAST = os.environ.get("ES_COURSE_FAST") == "1"
ROOT = Path(es.__file__).resolve().parents[1]

# %% [markdown]
# ## 1. Downsampling 210x160 to 42x42
#
# Average the input pixels each output pixel covers (area averaging, what OpenCV's
# `INTER_AREA` and ale-py's vector env do): rows shrink by exactly 5, columns by 160/42.
# Return float32 in [0, 1]. Hint: a `(42, 210)` and a `(160, 42)` weight matrix make it two
# matmuls.

# %%
def downsample(frame):
    ### BEGIN SOLUTION
    def weights(n_in, n_out):
        scale, w = n_in / n_out, np.zeros((n_out, n_in))
        for i in range(n_out):
            lo, hi = i * scale, (i + 1) * scale
            for j in range(int(np.floor(lo)), int(np.ceil(hi))):
                w[i, j] = max(0.0, min(hi, j + 1) - max(lo, j))
        return w / scale
    return (np.rint(weights(210, 42) @ frame.astype(np.float64) @ weights(160, 42).T) / 255).astype(np.float32)
    ### END SOLUTION


# %%
check.downsample(downsample)

# %% [markdown]
# ## 2. Frame stacking
#
# Keep the last 4 frames, **oldest first** (the newest at index 3), as ale-py's vector env
# does. (The course's original wrapper put the newest first; either works if training and
# evaluation agree.)

# %%
def stack_frames(stack, frame):
    ### BEGIN SOLUTION
    return np.concatenate([stack[1:], frame[None]], axis=0)
    ### END SOLUTION


# %%
check.stack_frames(stack_frames)

# %%
env = make_pong(seed=0)
obs, _ = env.reset()
for _ in range(40):
    obs, *_ = env.step(1)
fig, axes = plt.subplots(1, 4, figsize=(10, 3))
for i, ax in enumerate(axes):
    ax.imshow(obs[i], cmap="gray", vmin=0, vmax=1)
    ax.set_title(f"frame t-{3 - i}")
    ax.axis("off")
plt.show()

# %% [markdown]
# ## 3. A policy for the whole population at once
#
# Member `p` has its own weights `W[p]` `(features, 3)` and biases `b[p]` `(3,)`; `features[p]` is
# what member `p` sees. Return each member's action (argmax of its logits) with one batched
# operation, no Python loop over members.

# %%
def batched_policy(W, b, features):
    ### BEGIN SOLUTION
    return (np.einsum("pf,pfa->pa", features, W) + b).argmax(axis=1)
    ### END SOLUTION


# %%
check.batched_policy(batched_policy)

# %% [markdown]
# ## 4. An agent that beats random
#
# `agent_params` must be the parameters of the dense policy in `pong/policy.py` (what
# `python -m es train pong` trains). The grader plays 3 full games of `ALE/Pong-v5` on seeds
# 0-2 with it and with a random policy.

# %%
### BEGIN SOLUTION
agent_params = es.checkpoint.load_checkpoint(ROOT / "pong" / "agent.npz")[0]
### END SOLUTION

# %%
check.agent_beats_random(agent_params)   # plays 3 full games with it and 3 with a random player (minutes)

# %%
from pong.problem import PongProblem

problem = PongProblem()
scores, lengths = problem.play(agent_params, [0], max_steps=500 if FAST else None)
print(f"agent: score {scores[0]:+.0f} in {lengths[0]} steps (a random player loses 21:0 in ~900)")
frames = problem.frames(agent_params, 0, max_frames=60 if FAST else 400)
plt.imshow(frames[-1])
plt.axis("off")
plt.show()

# %% [markdown]
# A few generations of training, to see the loop run (the real thing: `python -m es train pong`):

# %%
config = es.config_for("pong", population=8 if FAST else 32, generations=2 if FAST else 5,
                       max_steps=150 if FAST else 1000, eval_episodes=1)
run = es.train(config, final_eval=False)
print([round(m["pop_mean"], 2) for m in run.metrics])
