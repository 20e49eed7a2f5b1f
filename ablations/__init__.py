"""What to run and how: studies, presets, the Optuna sweep runner, tracking and the `ablate` command line."""
