"""The shared harness: the machine and its load, contenders interleaved over repetitions,
min/median/max, a JSON record of each run."""
