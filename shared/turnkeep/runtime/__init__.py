"""What one process runs on, local or Lambda: its settings from the environment (`settings`),
a bad value as one line (`config_errors`), and the harness deps wired from them (`build`)."""
