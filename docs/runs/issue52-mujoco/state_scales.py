"""How differently HalfCheetah's state variables vary under random linear policies: the reason
docs/locomotion.md gives for normalizing observations.

    python docs/runs/issue52-mujoco/state_scales.py    # about 2 seconds

8 episodes of 1,000 steps, each under its own linear policy tanh(W s) with W's entries drawn
from N(0, 0.5^2) (seed 0), on raw states; prints each state variable's standard deviation over
all 8,000 states.
"""
import gymnasium as gym
import numpy as np

NAMES = ["rootz (torso height)", "rooty (torso angle)", "bthigh", "bshin", "bfoot", "fthigh", "fshin", "ffoot",
         "rootx velocity", "rootz velocity", "rooty angular velocity", "bthigh velocity", "bshin velocity",
         "bfoot velocity", "fthigh velocity", "fshin velocity", "ffoot velocity"]


def main():
    rng = np.random.default_rng(0)
    env = gym.make("HalfCheetah-v5")
    states = []
    for episode in range(8):
        w = rng.normal(0.0, 0.5, (6, 17))
        s, _ = env.reset(seed=episode)
        done = False
        while not done:
            states.append(s)
            s, _, terminated, truncated, _ = env.step(np.tanh(w @ s))
            done = terminated or truncated
    std = np.std(np.array(states), axis=0)
    for name, v in zip(NAMES, std):
        print(f"{name:24s} {v:7.3f}")
    print(f"{len(states)} states; largest / smallest std: {std.max() / std.min():.0f}")


if __name__ == "__main__":
    main()
