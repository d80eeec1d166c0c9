"""What every kind of model's training shares: the run skeleton (`run.run_task`), the `Task`
each kind implements, the config, loss, schedule, clock, `Trainer`, checkpoints, run
directories and torchrun sessions (see README, Layout)."""
