"""rlhp: reinforcement learning from human preferences, configured with Hydra."""

import logging

# Hugging Face datasets says at import, at INFO, which of torch and JAX it found ("JAX version ... available"),
# before it sets its own loggers to WARNING and before a command has set up its logging: with the jax extra
# installed every command's console would open with that line. WARNING is the level datasets then sets itself.
logging.getLogger("datasets").setLevel(logging.WARNING)
