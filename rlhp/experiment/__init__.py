"""An experiment: the command line, the config's checks, building the loop from it, running it with its
callbacks and loggers, checkpoints, stops and the final evaluation."""
