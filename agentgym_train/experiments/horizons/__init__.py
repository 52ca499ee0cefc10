"""`agentgym experiment horizons`: the same RL budget under several max-turn rules, on several seeds.

The paper's Figure 7 in miniature: fixed short, fixed long, ScalingInter stages and the adaptive
scheduler train from the same start with the same steps, episodes per step, learning rate and KL; only
the rule that sets the max turns of training episodes differs. The task mix puts levels that need few
turns beside levels that need many. Per seed, one shared stage builds the model, warms it up on expert
episodes (SFT) and evaluates it; every rule then starts from that model. Every run (rule x seed) ends
with a held-out evaluation under the same max turns for all rules (the longest horizon).

Layout under the output directory (no model weights there: those and checkpoints go to `work_dir`):

    seed-0/              the shared start: config.yaml, results.json (before-RL evaluation), done
    <rule>/seed-0/       one run: config.yaml, train.log, log_history.json, results.json, done
    summary.json, summary.md, reward.png, turns.png

Rerunning skips finished runs (a `done` file) and resumes unfinished ones from their last checkpoint
in `work_dir`; `--summary-only` re-reads finished runs and writes the table and figures.

The package: `config` (rules, the experiment, each run's settings), `runs` (the shared starts and the RL
runs), `summary` (table and figures).
"""

from __future__ import annotations

from agentgym_train.experiments.horizons.config import DEFAULT_CONFIG, Experiment, Rule, check_settings, load_experiment
from agentgym_train.experiments.horizons.runs import run_experiment
from agentgym_train.experiments.horizons.summary import summarize

__all__ = ["DEFAULT_CONFIG", "Experiment", "Rule", "check_settings", "load_experiment", "run_experiment", "summarize"]
