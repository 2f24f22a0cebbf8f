"""rlhp: reinforcement learning from human preferences, configured with Hydra."""
