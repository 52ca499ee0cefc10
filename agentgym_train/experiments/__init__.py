"""The paper's experiments in miniature (`agentgym experiment NAME`), each a resumable set of runs.

`horizons` (`agentgym_train.experiments.horizons`) trains the same budget under several max-turn rules
(fixed short, fixed long, ScalingInter stages, the adaptive scheduler) on several seeds and compares them.
Importing this package is light: torch and TRL are imported only when an experiment runs.
"""
