"""The training run: its settings (`training_run`, their checks `setting_checks`,
`setting_error`), its saved record (`run_record`), where its weights start (`init_source`), its
folder and lock (`run_folder`), and how a new, started or resumed run is resolved and checked
(`run_plan`)."""
