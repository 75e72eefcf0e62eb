"""The training run: its settings (`training_run`, `setting_error`), where its weights start
(`init_source`), its folder, saved settings and lock (`run_folder`), and how a new, started or
resumed run is resolved and checked (`run_plan`)."""
